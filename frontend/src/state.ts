/**
 * Pure helpers over the selection and the hierarchy, kept out of the DOM code so they can be tested.
 */
import type { MetaData, RenderNode } from './types';

/** Keep only what the server's layout shows: the root and the children of expanded, shown nodes. */
export function visibleOnly(data: Record<string, RenderNode>): Record<string, RenderNode> {
  const out: Record<string, RenderNode> = {};
  const entries = Object.entries(data);
  const shown = (key: string, seen = new Set<string>()): boolean => {
    const n = data[key];
    if (!n) return false;
    if (n.isRoot || !n.parentNode) return true;
    if (seen.has(key)) return false;
    seen.add(key);
    const p = data[n.parentNode];
    return Boolean(p && p.expand && shown(n.parentNode, seen));
  };
  for (const [k, n] of entries) if (shown(k)) out[k] = n;
  return out;
}

/** The other side's node for a node: walk up until an ancestor has a match, take its last link. */
export function matchedOf(data: Record<string, RenderNode>, key: string): string | undefined {
  let cur: string | undefined = key;
  const seen = new Set<string>();
  while (cur && data[cur] && !seen.has(cur)) {
    seen.add(cur);
    const link = data[cur].matchedNodeLink;
    if (Array.isArray(link) && link.length) return link[link.length - 1];
    cur = data[cur].parentNode || undefined;
  }
  return undefined;
}

/** Strip the N___ / B___ prefix of a prefixed name. */
export function unprefixed(name: string): string {
  return name.startsWith('N___') || name.startsWith('B___') ? name.slice(4) : name;
}

/**
 * Case-insensitive substring search over many names. The lowered names are joined into one string
 * with '\n' between them, so a query is a run of native `indexOf` calls (no per-name call) and each
 * hit maps back to its name by binary search over the start offsets; after a hit the scan resumes
 * at the next name, so a name counts once.
 */
export class NameIndex {
  private readonly text: string;
  private readonly starts: Int32Array;

  constructor(readonly names: string[]) {
    const lower = names.map((n) => n.toLowerCase());
    this.starts = new Int32Array(names.length + 1);
    let at = 0;
    for (let i = 0; i < lower.length; i++) {
      this.starts[i] = at;
      at += lower[i].length + 1;
    }
    this.starts[names.length] = at;
    this.text = lower.join('\n');
  }

  get length(): number {
    return this.names.length;
  }

  /** Indices of the names containing query, in list order. */
  search(query: string): number[] {
    const q = query.trim().toLowerCase();
    const hits: number[] = [];
    if (!q || q.includes('\n')) return hits;
    const { text, starts } = this;
    let pos = 0;
    let lo = 0;
    for (;;) {
      pos = text.indexOf(q, pos);
      if (pos < 0) break;
      // The name whose range holds pos: the last start <= pos, searched from the previous hit on.
      let hi = starts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= pos) lo = mid;
        else hi = mid - 1;
      }
      hits.push(lo);
      pos = starts[lo + 1];
      lo++;
    }
    return hits;
  }
}

/**
 * The view a link or a reload brings back: file, step, rank, micro step, selected node, the
 * expanded modules of each side (`open`: debug / single pane, `openBench`: bench pane), the
 * colour mode (`colors`, left out for the default, msprobe's output error) and the open panel
 * (`panel`, by its link name: [`LINK_PANELS`]).
 */
export interface UrlState {
  run?: string;
  tag?: string;
  step?: number;
  rank?: number;
  micro?: number;
  node?: string;
  side?: string;
  open?: string[];
  openBench?: string[];
  colors?: LinkColors;
  panel?: LinkPanel;
}

/** The colour modes a link can name (the page's ColorMode). */
export const LINK_COLORS = ['precision', 'overflow', 'diagnosis'] as const;
export type LinkColors = (typeof LINK_COLORS)[number];

/** The panels a link can name: its name in the address → the page's tab (`filter`: the precision filter). */
export const LINK_PANELS = { diagnosis: 'diagnosis', search: 'search', filter: 'precision', map: 'map', match: 'match', data: 'data' } as const;
export type LinkPanel = keyof typeof LINK_PANELS;

/** The link name of an open tab (undefined: none, or a tab a link does not name). */
export function panelOfTab(tab: string | null): LinkPanel | undefined {
  return (Object.keys(LINK_PANELS) as LinkPanel[]).find((p) => LINK_PANELS[p] === tab);
}

const URL_KEYS = ['run', 'tag', 'step', 'rank', 'micro', 'node', 'side', 'open', 'openBench', 'colors', 'panel'] as const;

/** The state as (key, text) pairs, in one order; lists are JSON arrays (a name may hold any character). */
function statePairs(s: UrlState): [string, string][] {
  const out: [string, string][] = [];
  for (const k of URL_KEYS) {
    const v = s[k];
    if (v === undefined || v === '' || (Array.isArray(v) && !v.length)) continue;
    out.push([k, Array.isArray(v) ? JSON.stringify(v) : String(v)]);
  }
  return out;
}

/** The state from a lookup of its keys' texts; anything malformed is left out. */
function stateFrom(get: (k: string) => string | null | undefined): UrlState {
  const num = (k: string) => {
    const v = get(k);
    if (v === null || v === undefined || v === '') return undefined;
    const n = Number(v);
    return Number.isInteger(n) ? n : undefined;
  };
  const list = (k: string) => {
    const v = get(k);
    if (!v) return undefined;
    try {
      const a: unknown = JSON.parse(v);
      return Array.isArray(a) && a.every((x) => typeof x === 'string') ? (a as string[]) : undefined;
    } catch {
      return undefined;
    }
  };
  const str = (k: string) => get(k) ?? undefined;
  const oneOf = <T extends string>(k: string, allowed: readonly T[]): T | undefined => {
    const v = get(k);
    return allowed.find((a) => a === v);
  };
  return {
    run: str('run'),
    tag: str('tag'),
    step: num('step'),
    rank: num('rank'),
    micro: num('micro'),
    node: str('node'),
    side: str('side'),
    open: list('open'),
    openBench: list('openBench'),
    colors: oneOf('colors', LINK_COLORS),
    panel: oneOf('panel', Object.keys(LINK_PANELS) as LinkPanel[]),
  };
}

export function readUrlState(search: string): UrlState {
  const q = new URLSearchParams(search);
  return stateFrom((k) => q.get(k));
}

export function writeUrlState(base: string, s: UrlState): string {
  const q = new URLSearchParams(base);
  for (const k of URL_KEYS) q.delete(k);
  for (const [k, v] of statePairs(s)) q.set(k, v);
  const str = q.toString();
  return str ? `?${str}` : '';
}

/**
 * TensorBoard's address keeps its state in the hash as `#<plugin>&key=value&…` (its tf_storage:
 * the one component without `=` names the dashboard, keys and values are `encodeURIComponent`ed).
 * The page's keys there carry the `ga_` prefix, so they never mix with another dashboard's.
 */
export const HASH_PREFIX = 'ga_';
export const PLUGIN = 'graph_ascend';

function hashComponents(hash: string): { tab: string; pairs: [string, string][] } {
  let tab = '';
  const pairs: [string, string][] = [];
  for (const part of hash.replace(/^#/, '').split('&')) {
    if (!part) continue;
    const kv = part.split('=');
    try {
      if (kv.length === 1) tab = decodeURIComponent(kv[0]);
      else if (kv.length === 2) pairs.push([decodeURIComponent(kv[0]), decodeURIComponent(kv[1])]);
    } catch {
      /* a malformed escape: TensorBoard would not read it either */
    }
  }
  return { tab, pairs };
}

/** The page's state in TensorBoard's hash; empty when the hash shows another dashboard. */
export function readHashState(hash: string): UrlState {
  const { tab, pairs } = hashComponents(hash);
  if (tab !== PLUGIN) return {};
  const map = new Map(pairs);
  return stateFrom((k) => map.get(HASH_PREFIX + k));
}

/** TensorBoard's hash with the page's state in it (other dashboards' keys kept, in their order). */
export function writeHashState(hash: string, s: UrlState): string {
  const { pairs } = hashComponents(hash);
  const kept = pairs.filter(([k]) => !k.startsWith(HASH_PREFIX));
  const ours = statePairs(s).map(([k, v]): [string, string] => [HASH_PREFIX + k, v]);
  const enc = [...kept, ...ours].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return `#${[PLUGIN, ...enc].join('&')}`;
}

/** Whether a hash shows this plugin's dashboard (or no dashboard yet: TensorBoard's first one). */
export function hashShowsPlugin(hash: string): boolean {
  const { tab } = hashComponents(hash);
  return tab === PLUGIN || tab === '';
}

/** Natural order for runs and tags, as msprobe sorts them (digits compared as numbers). */
export function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true, sensitivity: 'base' });
}

export function metaKey(m: MetaData): string {
  return `${m.run}|${m.tag}|${m.step}|${m.rank}|${m.microStep}`;
}

export interface LayoutInput {
  page: 'dashboard' | 'convert';
  tab: string | null;
  single: boolean;
  benchCollapsed: boolean;
  detailsCollapsed: boolean;
}

export interface LayoutOutput {
  panel: boolean;
  benchPane: boolean;
  paneSplitter: boolean;
  details: boolean;
  dashboard: boolean;
  convert: boolean;
}

/** Which parts of the page are shown: the control panel only with a tab open on the dashboard, the
 *  golden pane (and the splitter before it) only for compare files and when not collapsed. */
export function paneLayout(s: LayoutInput): LayoutOutput {
  const dashboard = s.page === 'dashboard';
  const bench = !s.single && !s.benchCollapsed;
  return { panel: dashboard && s.tab !== null, benchPane: bench, paneSplitter: bench, details: !s.detailsCollapsed, dashboard, convert: !dashboard };
}
