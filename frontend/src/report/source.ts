/**
 * The static data source of a self-contained report (`graph-ascend report`, docs/report.md): it
 * answers the page's requests from the data embedded in the report's HTML, so the same viewer code
 * runs with no server. The data are the sidecar's own answers worked out in advance: the
 * configuration, the diagnosis, each node's details, and the views laid out in advance (the root
 * view, each top-level module opened, every path to a source), each named by the modules it has
 * open. An expansion is answered with the view it leads to when that view was laid out, else with
 * the view of the nearest laid-out path (the node's ancestors open, and the node itself when it is
 * opened), else with an error saying it is left out of the report.
 */
import type { RenderNode } from '../types';

/** A box: [node (position in the pane's `keys`), x, y, width, height, open (0/1)]. */
export type ReportBox = [number, number, number, number, number, number];

/**
 * One laid-out view: the modules open (sorted) and its boxes, each a box or a run of the pane's
 * first view's boxes (the root view, all boxes) moved by one offset: [first, count, dx, dy].
 */
export interface ReportView {
  open: string[];
  boxes: (ReportBox | [number, number, number, number])[];
}

/** One pane's data: its nodes' fixed fields (by position in `keys`), its views, its details. */
export interface ReportPane {
  keys: string[];
  nodes: Omit<RenderNode, 'x' | 'y' | 'width' | 'height' | 'expand'>[];
  views: ReportView[];
  details: Record<string, unknown>;
}

export interface ReportProvenance {
  file: string;
  steps: number[];
  ranks: number[];
  step: number;
  rank: number;
  /** The steps and ranks the report holds (format 2), and those of the file it does not, by name. */
  held?: { step: number; rank: number }[];
  notHeld?: string;
  tool: string;
  created: string;
  noPaths: boolean;
}

/** One step and rank a report holds: its verdicts (the diagnosis's `states`) and its panes. */
export interface ReportPoint {
  step: number;
  rank: number;
  states: unknown;
  panes: Record<string, ReportPane>;
}

/**
 * The data a report embeds (written by `graph_ascend_service::handlers::report_data`). Format 2
 * holds several steps and ranks (`points`, the first the one it opens on, `start`); format 1 held
 * one (`panes`, and the diagnosis with its states).
 */
export interface ReportData {
  format: number;
  provenance: ReportProvenance;
  meta: { run: string; tag: string; step: number; rank: number };
  /** Where the report opens: a step, a rank and the first source there ('' none). */
  start?: { step: number; rank: number; node: string };
  catalog: unknown;
  config: unknown;
  diagnosis: unknown;
  points?: ReportPoint[];
  panes?: Record<string, ReportPane>;
  leftOut: string[];
}

/** A report's points, whichever its format. */
export function reportPoints(d: ReportData): ReportPoint[] {
  if (d.points) return d.points;
  const states = (d.diagnosis as { states?: unknown } | null)?.states ?? null;
  return [{ step: d.meta.step, rank: d.meta.rank, states, panes: d.panes ?? {} }];
}

/** The id of the `<script type="application/json">` element that holds the data. */
export const REPORT_DATA_ID = 'graph-ascend-report';

/** What a request gets: an HTTP status and a JSON body. */
export interface StaticAnswer {
  status: number;
  body: unknown;
}

const NOT_HERE = 'not in this report (a report holds the top levels and the paths to sources; open the file in TensorBoard for the rest)';
/** The answer to a step and rank the report does not hold (the page says so in place). */
export const POINT_NOT_HERE = 'this step and rank are not in this report';

interface PaneIndex {
  pane: ReportPane;
  byKey: Map<string, number>;
  byOpen: Map<string, number>;
  root: number;
  current: number;
}

function openKey(names: Iterable<string>): string {
  return [...new Set(names)].sort().join('\n');
}

function num(v: unknown, dflt: number): number {
  return v === undefined || v === null || v === '' ? dflt : Number(v);
}

/** Answers the page's routes from a report's data; keeps each pane's shown view, as the sidecar does. */
export class ReportSource {
  /** Each point's panes, by `step|rank`. */
  private readonly points = new Map<string, { point: ReportPoint; panes: Map<string, PaneIndex> }>();
  /** The step and rank the page shows (its last `loadGraphData`). */
  private at: { step: number; rank: number };

  constructor(readonly data: ReportData) {
    for (const point of reportPoints(data)) {
      const panes = new Map<string, PaneIndex>();
      for (const [side, pane] of Object.entries(point.panes)) {
        const byKey = new Map(pane.keys.map((k, i) => [k, i] as const));
        const byOpen = new Map<string, number>();
        pane.views.forEach((v, i) => {
          const k = openKey(v.open);
          if (!byOpen.has(k)) byOpen.set(k, i);
        });
        const root = byOpen.get('') ?? 0;
        panes.set(side, { pane, byKey, byOpen, root, current: root });
      }
      this.points.set(`${point.step}|${point.rank}`, { point, panes });
    }
    const start = data.start ?? data.meta;
    this.at = { step: start.step, rank: start.rank };
  }

  /** Whether the report holds this step and rank. */
  holds(step: number, rank: number): boolean {
    return this.points.has(`${step}|${rank}`);
  }

  /** The steps and ranks the report holds, in its order (the one it opens on first). */
  held(): { step: number; rank: number }[] {
    return [...this.points.values()].map(({ point }) => ({ step: point.step, rank: point.rank }));
  }

  /** The point a request names (its step and rank; the shown one when it names none). */
  private pointOf(request: Record<string, unknown>) {
    const meta = (request.metaData as Record<string, unknown> | undefined) ?? request;
    if (num(meta.microStep, -1) !== -1) return undefined;
    return this.points.get(`${num(meta.step, this.at.step)}|${num(meta.rank, this.at.rank)}`);
  }

  private panesOf(request: Record<string, unknown>): Map<string, PaneIndex> | undefined {
    return this.pointOf(request)?.panes;
  }

  /** The answer to `route` (its last path segment) with a POST body or GET query. */
  answer(route: string, request: Record<string, unknown>): StaticAnswer {
    const ok = (body: unknown): StaticAnswer => ({ status: 200, body });
    const fail = (error: string): StaticAnswer => ok({ success: false, error: `${route}: ${error}` });
    const d = this.data;
    switch (route) {
      case 'load_meta_dir':
        return ok(d.catalog);
      case 'loadGraphData': {
        // Any step and rank of the file loads; one the report does not hold answers its views
        // and details with POINT_NOT_HERE (the page says so in place: `holds`).
        const p = this.pointOf(request);
        if (p) this.at = { step: p.point.step, rank: p.point.rank };
        return ok({ success: true });
      }
      case 'loadGraphConfigInfo':
        return ok(d.config);
      case 'diagnosis': {
        if (!d.diagnosis) return fail(NOT_HERE);
        const p = this.pointOf(request);
        const states = p ? p.point.states : null;
        const asked = request.states === true || request.states === 'true';
        return ok({ ...(d.diagnosis as Record<string, unknown>), states: asked && states ? states : undefined });
      }
      case 'loadGraphAllNodeList': {
        const panes = this.panesOf(request) ?? new Map<string, PaneIndex>();
        const list = (side: string) => panes.get(side)?.pane.keys ?? [];
        const single = panes.has('Single');
        return ok({ success: true, data: single ? { npuNodeList: list('Single') } : { npuNodeList: list('NPU'), benchNodeList: list('Bench') } });
      }
      case 'changeNodeExpandState':
        return this.expand(request, fail);
      case 'getNodeInfo':
        return this.details(request, fail);
      case 'watchMetaDir':
        return { status: 404, body: { success: false, error: 'no server' } };
      default:
        return fail('not available in a report (it is read-only and has no server)');
    }
  }

  private nodeRef(request: Record<string, unknown>): { name: string; side: string } {
    const info = (request.nodeInfo as Record<string, unknown> | undefined) ?? {};
    return { name: String(info.nodeName ?? ''), side: String(info.nodeType ?? '') };
  }

  /** A node's ancestors below the root, outermost first. */
  private ancestors(p: PaneIndex, name: string): string[] {
    const out: string[] = [];
    let at = p.byKey.get(name);
    const seen = new Set<string>();
    while (at !== undefined) {
      const parent = p.pane.nodes[at].parentNode;
      if (!parent || seen.has(parent)) break;
      seen.add(parent);
      const pi = p.byKey.get(parent);
      if (pi === undefined || p.pane.nodes[pi].isRoot) break;
      out.unshift(parent);
      at = pi;
    }
    return out;
  }

  /** A view's boxes, its runs of the root view's boxes unrolled. */
  private boxes(p: PaneIndex, index: number): ReportBox[] {
    const base = p.pane.views[0]?.boxes ?? [];
    const out: ReportBox[] = [];
    for (const row of p.pane.views[index].boxes) {
      if (row.length === 6) {
        out.push(row);
        continue;
      }
      const [first, count, dx, dy] = row;
      for (let k = 0; k < count; k++) {
        const b = base[first + k];
        if (b?.length === 6) out.push([b[0], b[1] + dx, b[2] + dy, b[3], b[4], b[5]]);
      }
    }
    return out;
  }

  private view(p: PaneIndex, index: number): StaticAnswer {
    p.current = index;
    const data: Record<string, RenderNode> = {};
    for (const [i, x, y, width, height, open] of this.boxes(p, index)) {
      data[p.pane.keys[i]] = { ...p.pane.nodes[i], x, y, width, height, expand: open === 1 } as RenderNode;
    }
    return { status: 200, body: { success: true, data } };
  }

  private expand(request: Record<string, unknown>, fail: (e: string) => StaticAnswer): StaticAnswer {
    const { name, side } = this.nodeRef(request);
    const panes = this.panesOf(request);
    if (!panes) return fail(POINT_NOT_HERE);
    const p = panes.get(side);
    if (!p) return { status: 200, body: { success: true, data: {} } };
    if (name === 'root') return this.view(p, p.root);
    const at = p.byKey.get(name);
    if (at === undefined) return fail(`${name} is ${NOT_HERE}`);
    const shown = p.pane.views[p.current];
    const visible = new Set(this.boxes(p, p.current).map((b) => p.pane.keys[b[0]]));
    const open = new Set(shown.open);
    const up = this.ancestors(p, name);
    const tries: string[][] = [];
    if (visible.has(name)) {
      if (p.pane.nodes[at].nodeType === 1 || p.pane.nodes[at].isRoot) return this.view(p, p.current);
      if (open.has(name)) {
        // Collapsed: it and what was open inside it close.
        const inside = (k: string) => k === name || this.ancestors(p, k).includes(name);
        tries.push([...open].filter((k) => !inside(k)), up);
      } else tries.push([...open, name], [...up, name]);
    } else tries.push([...open, ...up], up);
    for (const t of tries) {
      const found = p.byOpen.get(openKey(t));
      if (found !== undefined) return this.view(p, found);
    }
    return fail(`this view (${name}) is ${NOT_HERE}`);
  }

  private details(request: Record<string, unknown>, fail: (e: string) => StaticAnswer): StaticAnswer {
    const { name, side } = this.nodeRef(request);
    const panes = this.panesOf(request);
    const p = panes?.get(side);
    const own = p?.pane.details[name];
    if (!p || own === undefined) return fail(`the details of ${name} are ${NOT_HERE}`);
    if (side === 'Single') return { status: 200, body: { success: true, data: { npu: own } } };
    const at = p.byKey.get(name);
    const link = at === undefined ? [] : (p.pane.nodes[at].matchedNodeLink ?? []);
    const other = side === 'NPU' ? 'Bench' : 'NPU';
    const matchedName = link.length ? link[link.length - 1] : undefined;
    const matched = matchedName === undefined ? null : (panes?.get(other)?.pane.details[matchedName] ?? null);
    const data = side === 'NPU' ? { npu: own, bench: matched } : { npu: matched, bench: own };
    return { status: 200, body: { success: true, data } };
  }
}

/** The report's data in this document, if it is a report. */
export function embeddedReport(doc: Document): ReportData | null {
  const el = doc.getElementById(REPORT_DATA_ID);
  if (!el?.textContent) return null;
  try {
    return JSON.parse(el.textContent) as ReportData;
  } catch {
    return null;
  }
}

/** The route a page request names: the last segment of its relative URL, and its query. */
export function routeOf(url: string): { route: string; query: Record<string, string> } {
  const [path, search = ''] = url.split('?', 2);
  const route = path.slice(path.lastIndexOf('/') + 1);
  return { route, query: Object.fromEntries(new URLSearchParams(search)) };
}

/**
 * Answers every request of the page from the report: `fetch` is replaced (the page's routes, its
 * event stream and its downloads all go through it), so nothing reaches the network.
 */
export function installReportSource(source: ReportSource): void {
  const answer = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const { route, query } = routeOf(url);
    let request: Record<string, unknown> = query;
    if (typeof init?.body === 'string') {
      try {
        request = { ...query, ...(JSON.parse(init.body) as Record<string, unknown>) };
      } catch {
        /* not JSON: the query alone */
      }
    }
    const a = source.answer(route, request);
    // Changes are refused: the report is read-only (the page disables what would change things).
    return new Response(JSON.stringify(a.body), { status: a.status, headers: { 'Content-Type': 'application/json', 'X-Graph-Ascend-Writes': 'refused' } });
  };
  globalThis.fetch = answer as typeof fetch;
}
