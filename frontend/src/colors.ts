/**
 * Box colours. Precision colours come from the file's own `colors` table (tb_config.node_colors),
 * with msprobe's bucket rule: `lo <= v < hi`, plus `v == 1` in a bucket ending at 1 and `v == 0` in
 * one starting at 0. Unmatched nodes take the entry whose value is a marker string or `[]`;
 * bench-side boxes and NaN are white; overflow mode colours by level instead.
 */
import type { ColorEntry, RenderNode } from './types';

export const WHITE = '#ffffff';
export const UNMATCHED_FALLBACK = 'rgb(199,199,199)';
/** A source of error in the mode "where the error is introduced": its fill, and the outline and badge of a module holding one. */
export const SOURCE_RED = 'rgb(229,72,77)';
export const OVERFLOW_COLORS: Record<string, string> = {
  medium: 'rgb(230,243,254)',
  high: 'rgb(141,197,248)',
  critical: 'rgb(22,104,220)',
};
export const PRECISION_LEVELS = ['pass', 'warning', 'error'] as const;
export const LEVEL_COLORS: Record<string, string> = {
  pass: 'rgb(250,242,223)',
  warning: 'rgb(248,207,141)',
  error: 'rgb(243,115,112)',
  unmatched: '#E6E6E6',
};

/** A number out of the server's precisionIndex (numbers, "NaN" strings, null). */
export function toNumber(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim() !== '') {
    const n = Number(v);
    return Number.isNaN(n) ? NaN : n;
  }
  return NaN;
}

export interface ColorTable {
  buckets: { color: string; lo: number; hi: number; level?: string; description?: string }[];
  unmatched: string;
  unmatchedDescription?: string;
}

export function buildColorTable(colors: Record<string, ColorEntry> | undefined | null): ColorTable {
  const buckets: ColorTable['buckets'] = [];
  let unmatched = UNMATCHED_FALLBACK;
  let unmatchedDescription: string | undefined;
  for (const [color, entry] of Object.entries(colors ?? {})) {
    const v = entry?.value;
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === 'number' && typeof v[1] === 'number') {
      buckets.push({ color, lo: v[0], hi: v[1], level: entry.accuracy_level, description: entry.description });
    } else {
      unmatched = color;
      unmatchedDescription = entry?.description;
    }
  }
  buckets.sort((a, b) => a.lo - b.lo);
  return { buckets, unmatched, unmatchedDescription };
}

export function precisionColor(table: ColorTable, value: unknown): string {
  const v = toNumber(value);
  if (Number.isNaN(v)) return WHITE;
  for (const b of table.buckets) {
    if ((v >= b.lo && v < b.hi) || (b.hi === 1 && v === 1) || (b.lo === 0 && v === 0)) return b.color;
  }
  return WHITE;
}

/** `diagnosis`: where the error is introduced (src/diagnosis.ts colours those boxes). */
export type ColorMode = 'precision' | 'overflow' | 'diagnosis';

export function nodeFill(
  node: Pick<RenderNode, 'matchedNodeLink' | 'precisionIndex' | 'overflowLevel'>,
  side: 'NPU' | 'Bench' | 'Single',
  mode: ColorMode,
  table: ColorTable,
  single: boolean,
): string {
  if (mode === 'overflow') return (node.overflowLevel && OVERFLOW_COLORS[node.overflowLevel]) || WHITE;
  if (single) return WHITE;
  if (!node.matchedNodeLink || node.matchedNodeLink.length === 0) return table.unmatched;
  if (side === 'Bench') return WHITE;
  return precisionColor(table, node.precisionIndex);
}

/** Parse `#rgb`, `#rrggbb(aa)` or `rgb(a)(...)` into [r, g, b]. */
export function parseColor(c: string): [number, number, number] {
  const s = c.trim();
  if (s.startsWith('#')) {
    let h = s.slice(1);
    if (h.length === 3 || h.length === 4) h = h.split('').map((x) => x + x).join('');
    const n = parseInt(h.slice(0, 6), 16);
    if (!Number.isNaN(n)) return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }
  const m = /rgba?\(([^)]+)\)/.exec(s);
  if (m) {
    const p = m[1].split(',').map((x) => parseFloat(x));
    return [p[0] || 0, p[1] || 0, p[2] || 0];
  }
  return [255, 255, 255];
}

/** The outline colour: each channel 40 darker, as msprobe draws it. */
export function darken(c: string, by = 40): string {
  const [r, g, b] = parseColor(c);
  const f = (x: number) => Math.max(0, Math.round(x) - by);
  return `rgb(${f(r)},${f(g)},${f(b)})`;
}

/** Black or white text, whichever reads better on the fill. */
export function textOn(fill: string): string {
  const [r, g, b] = parseColor(fill);
  return 0.299 * r + 0.587 * g + 0.114 * b > 140 ? '#1f1f1f' : '#ffffff';
}

/** Status of a precision value, for lists: pass/warning/error/unmatched. */
export function precisionLevel(table: ColorTable, value: unknown, matched: boolean): string {
  if (!matched) return 'unmatched';
  const color = precisionColor(table, value);
  const b = table.buckets.find((x) => x.color === color);
  return b?.level ?? '';
}
