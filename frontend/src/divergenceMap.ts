/**
 * The divergence map as the page reads it (the `divergenceMap` route, docs/diagnosis.md §12): the
 * pure logic of the Map panel, no DOM. Rows are the modules at one depth in forward / backward /
 * update bands (a row opened shows the next depth's rows under it); columns are the steps × ranks
 * (or micro-batches), as many as the panel's width holds times the zoom (beyond, the sidecar
 * aggregates ranks to the worst). A cell's colour is its output error over its jump tolerance on a
 * log scale; where each line and column lands on the canvas, what a point hits, what hover says.
 */
import type { DivergenceMapCell, DivergenceMapColumn, DivergenceMapData, DivergenceMapRow } from './generated/proto';
import { t } from './i18n';

export type { DivergenceMapCell, DivergenceMapColumn, DivergenceMapData, DivergenceMapProgress, DivergenceMapRow } from './generated/proto';

/** The canvas's geometry, in CSS pixels. */
export const MAP_GEOMETRY = {
  /** Row labels on the left. */
  label: 150,
  /** Step headers on top, and the rank ticks under them. */
  header: 32,
  row: 16,
  /** The narrowest cell drawn at zoom 1 (the columns asked for follow from it). */
  minCell: 3,
  /** The widest cell (few columns spread no wider). */
  maxCell: 28,
} as const;

/** The most columns the route takes. */
export const MAX_MAP_COLUMNS = 16_384;
/** Zoom steps (each doubles the columns). */
export const MAX_ZOOM = 64;

/** A ratio as the route writes it (`"Infinity"`, `"NaN"` for non-finite; null: nothing compares). */
export function ratioValue(v: number | string | null | undefined): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return v;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  return NaN;
}

/** How many columns to ask for: what the width holds at the narrowest cell, times the zoom. */
export function columnsFor(widthPx: number, zoom: number): number {
  const fit = Math.max(1, Math.floor((widthPx - MAP_GEOMETRY.label) / MAP_GEOMETRY.minCell));
  return Math.max(1, Math.min(MAX_MAP_COLUMNS, fit * Math.max(1, zoom)));
}

/** The columns a width holds at zoom 1, rounded down to a multiple of 8 (at least 8). */
export function fitColumns(widthPx: number): number {
  const fit = columnsFor(widthPx, 1);
  return Math.max(8, fit - (fit % 8));
}

/** A cell's width: the columns spread over the width (times the zoom), never narrower than the narrowest cell. */
export function cellWidth(widthPx: number, columns: number, zoom = 1): number {
  const avail = Math.max(1, widthPx - MAP_GEOMETRY.label) * Math.max(1, zoom);
  const w = Math.floor(avail / Math.max(1, columns));
  return Math.max(MAP_GEOMETRY.minCell, Math.min(MAP_GEOMETRY.maxCell, w));
}

/** The log scale: a ratio of `LOW` or less is the scale's green end, `HIGH` or more its red end; 1 (the jump tolerance) is its middle. */
export const RATIO_LOW = 1e-3;
export const RATIO_HIGH = 1e3;
/** A colour's red, green and blue, 0–255. */
export type Rgb = readonly [number, number, number];
const STOPS: [number, Rgb][] = [
  [0, [226, 241, 226]],
  [0.35, [196, 226, 160]],
  [0.5, [250, 214, 160]],
  [0.75, [240, 140, 90]],
  [1, [229, 72, 77]],
];
/** A colour as CSS writes it. */
export function cssRgb(c: Rgb): string {
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
const UNCOMPARED_RGB: Rgb = [205, 205, 205];
const NON_FINITE_RGB: Rgb = [110, 20, 70];
/** Not matched, or no output that compares. */
export const UNCOMPARED = cssRgb(UNCOMPARED_RGB);
/** inf or NaN against a finite golden. */
export const NON_FINITE = cssRgb(NON_FINITE_RGB);
/** Colour buckets of the scale (cells are painted by bucket, one fill style per bucket). */
export const BUCKETS = 48;

/** Where a ratio sits on the scale, 0 (green) to 1 (red); null when it is not a number on it. */
export function scalePosition(ratio: number | null): number | null {
  if (ratio === null || Number.isNaN(ratio) || ratio === Infinity) return null;
  if (ratio <= RATIO_LOW) return 0;
  const p = (Math.log10(ratio) - Math.log10(RATIO_LOW)) / (Math.log10(RATIO_HIGH) - Math.log10(RATIO_LOW));
  return Math.min(1, Math.max(0, p));
}

/** The colour at a position of the scale, as red, green and blue. */
export function scaleRgb(p: number): Rgb {
  for (let i = 1; i < STOPS.length; i++) {
    const [b, cb] = STOPS[i];
    if (p <= b || i === STOPS.length - 1) {
      const [a, ca] = STOPS[i - 1];
      const f = b === a ? 0 : Math.min(1, Math.max(0, (p - a) / (b - a)));
      const mix = (k: number) => Math.round(ca[k] + (cb[k] - ca[k]) * f);
      return [mix(0), mix(1), mix(2)];
    }
  }
  return UNCOMPARED_RGB;
}

/** The colour at a position of the scale. */
export function scaleColor(p: number): string {
  return cssRgb(scaleRgb(p));
}

/** The palette as red, green and blue: bucket k's colour; then UNCOMPARED and NON_FINITE. */
export const PALETTE_RGB: readonly Rgb[] = [...Array.from({ length: BUCKETS }, (_, k) => scaleRgb(k / (BUCKETS - 1))), UNCOMPARED_RGB, NON_FINITE_RGB];
/** The palette as CSS colours. */
export const PALETTE: readonly string[] = PALETTE_RGB.map(cssRgb);
export const UNCOMPARED_BUCKET = BUCKETS;
export const NON_FINITE_BUCKET = BUCKETS + 1;

/** A ratio's bucket in the palette. */
export function ratioBucket(ratio: number | null): number {
  if (ratio === null) return UNCOMPARED_BUCKET;
  if (Number.isNaN(ratio) || ratio === Infinity) return NON_FINITE_BUCKET;
  return Math.round((scalePosition(ratio) ?? 0) * (BUCKETS - 1));
}

/** The colour of a cell (held cells only). */
export function cellColor(cell: Pick<DivergenceMapCell, 'ratio'>): string {
  return PALETTE[ratioBucket(ratioValue(cell.ratio))];
}

/** A row's identity across maps of different depths. */
export function rowKey(direction: string, row: Pick<DivergenceMapRow, 'module'>): string {
  return `${direction}|${row.module}`;
}

/** One line of the map: a band's title, or a module's row (at some depth under an opened row). */
export type MapLine =
  | { kind: 'band'; direction: string }
  | { kind: 'row'; direction: string; row: DivergenceMapRow; key: string; indent: number; open: boolean };

/** Is `child` (a row of a deeper map) inside `parent`? By their paths as people write them. */
export function isInside(parent: Pick<DivergenceMapRow, 'label'>, child: Pick<DivergenceMapRow, 'label'>): boolean {
  return child.label.startsWith(`${parent.label}.`);
}

/**
 * The map's lines: each band's title then its rows; under an opened row, the rows of the map one
 * depth deeper (`deeper(depth)`, when it is here and has the same columns) that lie inside it,
 * themselves openable.
 */
export function mapLines(data: DivergenceMapData, open: ReadonlySet<string>, deeper: (depth: number) => DivergenceMapData | undefined): MapLine[] {
  const lines: MapLine[] = [];
  const rowsUnder = (direction: string, parent: DivergenceMapRow, indent: number) => {
    const d = deeper(parent.depth + 1);
    if (!d || d.columns.length !== data.columns.length) return;
    const band = d.bands.find((b) => b.direction === direction);
    for (const row of band?.rows ?? []) if (row.depth > parent.depth && isInside(parent, row)) addRow(direction, row, indent);
  };
  const addRow = (direction: string, row: DivergenceMapRow, indent: number) => {
    const key = rowKey(direction, row);
    const isOpen = open.has(key);
    lines.push({ kind: 'row', direction, row, key, indent, open: isOpen });
    if (isOpen) rowsUnder(direction, row, indent + 1);
  };
  for (const band of data.bands) {
    lines.push({ kind: 'band', direction: band.direction });
    for (const row of band.rows) addRow(band.direction, row, 0);
  }
  return lines;
}

/** Where things are: cell width, the content's size, the visible window's scroll offsets. */
export interface MapView {
  cw: number;
  columns: number;
  lines: number;
  scrollX: number;
  scrollY: number;
}

/** The content's size (the scroller's spacer). */
export function contentSize(v: Pick<MapView, 'cw' | 'columns' | 'lines'>): { width: number; height: number } {
  return { width: MAP_GEOMETRY.label + v.cw * v.columns, height: MAP_GEOMETRY.header + MAP_GEOMETRY.row * v.lines };
}

/** The line and column under a point of the canvas (the canvas stays in view; labels and header are sticky). */
export function hitAt(v: MapView, x: number, y: number): { line: number; column: number | null } | null {
  if (y < MAP_GEOMETRY.header) return null;
  const line = Math.floor((y - MAP_GEOMETRY.header + v.scrollY) / MAP_GEOMETRY.row);
  if (line < 0 || line >= v.lines) return null;
  if (x < MAP_GEOMETRY.label) return { line, column: null };
  const column = Math.floor((x - MAP_GEOMETRY.label + v.scrollX) / v.cw);
  return { line, column: column >= 0 && column < v.columns ? column : null };
}

/** The canvas point at the centre of a cell (for the tests and the first-source control's scroll). */
export function cellCenter(v: MapView, line: number, column: number): { x: number; y: number } {
  return {
    x: MAP_GEOMETRY.label + column * v.cw - v.scrollX + v.cw / 2,
    y: MAP_GEOMETRY.header + line * MAP_GEOMETRY.row - v.scrollY + MAP_GEOMETRY.row / 2,
  };
}

/** The range of lines and columns in view (inclusive first, exclusive end). */
export function visibleRange(v: MapView, width: number, height: number): { line0: number; line1: number; col0: number; col1: number } {
  const line0 = Math.max(0, Math.floor(v.scrollY / MAP_GEOMETRY.row));
  const line1 = Math.min(v.lines, Math.ceil((v.scrollY + height - MAP_GEOMETRY.header) / MAP_GEOMETRY.row));
  const col0 = Math.max(0, Math.floor(v.scrollX / v.cw));
  const col1 = Math.min(v.columns, Math.ceil((v.scrollX + width - MAP_GEOMETRY.label) / v.cw));
  return { line0, line1, col0, col1 };
}

/** Each step's run of columns: [step, first column, end column]. */
export function stepSpans(columns: Pick<DivergenceMapColumn, 'step'>[]): [number, number, number][] {
  const out: [number, number, number][] = [];
  columns.forEach((c, i) => {
    const last = out[out.length - 1];
    if (last && last[0] === c.step) last[2] = i + 1;
    else out.push([c.step, i, i + 1]);
  });
  return out;
}

/** Ranks as written: "7", "0–127". */
function span(a: number, b: number): string {
  return a === b ? String(a) : `${a}–${b}`;
}

/** A column as people read it: "step 3 · rank 5", "step 3 · ranks 0–127", micro-batches too. */
export function columnText(c: DivergenceMapColumn): string {
  const ranks = c.rank_first === c.rank_last ? t('map.rank', { rank: c.rank_first }) : t('map.ranks', { ranks: span(c.rank_first, c.rank_last) });
  const micro = c.micro_first !== undefined && c.micro_last !== undefined && c.rank_first === c.rank_last ? ` · ${t('map.micro', { micro: span(c.micro_first, c.micro_last) })}` : '';
  return `${t('map.step', { step: c.step })} · ${ranks}${micro}`;
}

/** A number as the page writes an error: 3 significant digits, "inf", "NaN", "—". */
export function numberText(v: number | string | null | undefined): string {
  const x = ratioValue(v);
  if (x === null) return '—';
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return '0';
  return Math.abs(x) >= 1e-2 && Math.abs(x) < 1e4 ? String(Number(x.toPrecision(3))) : x.toExponential(2).replace('e+', 'e');
}

/** What hovering a cell says, one line each. */
export function cellLines(row: Pick<DivergenceMapRow, 'label'>, direction: string, column: DivergenceMapColumn, cell: DivergenceMapCell): string[] {
  const out = [`${row.label} · ${t(`map.band.${direction}` as 'map.band.forward')}`, columnText(column)];
  if (!cell.held) {
    out.push(t('map.notHeld'));
    return out;
  }
  if (column.rank_first !== column.rank_last) out.push(t('map.worstRank', { rank: cell.rank }));
  const ratio = ratioValue(cell.ratio);
  out.push(ratio === null ? t('map.uncompared') : t('map.numbers', { err: numberText(cell.err), tolerance: numberText(cell.tolerance), ratio: numberText(cell.ratio) }));
  if (cell.sources > 0) out.push(t('map.sources', { count: cell.sources, node: cell.source, rank: cell.source_rank ?? cell.rank }));
  if (cell.from_rank !== undefined && cell.from_rank !== null) out.push(t('map.fromRank', { rank: cell.from_rank }));
  out.push(cell.node);
  return out;
}

/**
 * Where a click on a cell goes: its step and rank (the worst of an aggregated column), at its
 * module; the micro-batch of a cell of the micro-batch axis.
 */
export function cellTarget(cell: DivergenceMapCell, axis: string): { step: number; rank: number; node: string; microStep?: number; source: boolean } | null {
  if (!cell.held || !cell.node) return null;
  const micro = axis === 'micro_batches' ? { microStep: cell.micro_step } : {};
  // A cell holding sources opens its first source (on its own rank), not the module around it.
  if (cell.sources > 0 && cell.source) return { step: cell.step, rank: cell.source_rank ?? cell.rank, node: cell.source, ...micro, source: true };
  return { step: cell.step, rank: cell.rank, node: cell.node, ...micro, source: false };
}

/** A column's tick: its rank, or its ranks' range ("r5", "0–127"). */
export function rankTick(c: Pick<DivergenceMapColumn, 'rank_first' | 'rank_last'>): string {
  return c.rank_first === c.rank_last ? `r${c.rank_first}` : span(c.rank_first, c.rank_last);
}

/**
 * Which columns' ticks are drawn: from `col0` to `col1`, one where the last drawn one's text (of
 * `width(text)` pixels) ends at least `gap` pixels before it, so that ticks never overlap at any
 * zoom. Returns [column, text] pairs.
 */
export function rankTicks(columns: Pick<DivergenceMapColumn, 'rank_first' | 'rank_last'>[], col0: number, col1: number, cw: number, width: (text: string) => number, gap = 4): [number, string][] {
  const out: [number, string][] = [];
  let free = -Infinity;
  for (let k = col0; k < col1; k++) {
    const c = columns[k];
    if (!c) continue;
    const x = k * cw;
    if (x < free) continue;
    const text = rankTick(c);
    out.push([k, text]);
    free = x + width(text) + gap;
  }
  return out;
}

/** The step header's text for a span `room` pixels wide: "step 3", else "3", else nothing. */
export function stepLabel(step: number, room: number, width: (text: string) => number): string {
  const full = t('map.step', { step });
  if (width(full) + 6 <= room) return full;
  const short = String(step);
  return width(short) + 4 <= room ? short : '';
}

/**
 * The columns holding a source in any row (the filter "sources only"), ascending; all columns
 * when none does.
 */
export function sourceColumns(data: Pick<DivergenceMapData, 'bands' | 'columns'>): number[] {
  const keep = new Set<number>();
  for (const b of data.bands) for (const r of b.rows) r.cells.forEach((c, k) => {
    if (c.sources > 0) keep.add(k);
  });
  return keep.size ? [...keep].sort((x, y) => x - y) : data.columns.map((_, k) => k);
}

/** The map with only the columns `keep` (their cells in every row; the first source's column renumbered). */
export function keepColumns(data: DivergenceMapData, keep: number[]): DivergenceMapData {
  const at = new Map(keep.map((k, i) => [k, i] as const));
  const first = data.first_source;
  const firstColumn = first ? at.get(first.column) : undefined;
  return {
    ...data,
    columns: keep.map((k) => data.columns[k]),
    bands: data.bands.map((b) => ({ ...b, rows: b.rows.map((r) => ({ ...r, cells: keep.map((k) => r.cells[k]) })) })),
    first_source: first && firstColumn !== undefined ? { ...first, column: firstColumn } : undefined,
  };
}

/** The line of the map that shows band `band`'s row `row` at the top level (first-source control). */
export function lineOf(lines: MapLine[], data: DivergenceMapData, band: number, row: number): number {
  const b = data.bands[band];
  const r = b?.rows[row];
  if (!r) return -1;
  const key = rowKey(b.direction, r);
  return lines.findIndex((l) => l.kind === 'row' && l.key === key);
}

/**
 * The cells as pixels, for a canvas to scale up (the panel draws a line's cells with one image
 * copy instead of a rectangle per cell). A line takes `RASTER_ROWS` rows of pixels, one pixel a
 * column: its cells' colours; the pale top half of a cell whose error came from a peer rank
 * (white at `PEER_ALPHA`); the dark bar of a cell holding a source (`mark`). Band titles, blanks
 * and cells not held are transparent.
 */
export const RASTER_ROWS = 3;
/** The peer's pale overlay: white at 60 %. */
export const PEER_ALPHA = 153;

export interface LineRaster {
  /** Columns (pixels a row) and lines (`RASTER_ROWS` rows of pixels each). */
  columns: number;
  lines: number;
  /** RGBA, row by row (ImageData's layout). */
  rgba: Uint8ClampedArray<ArrayBuffer>;
  /** Per line, 1 where a cell is held (a blank is 0): the cells in view are counted from it. */
  held: Uint8Array;
  /** Per line: does it hold a peer's error, a source? (Lines without draw no overlay.) */
  peers: Uint8Array;
  sources: Uint8Array;
}

/** The raster of lines `from` to `to` (exclusive) of `lines`, `columns` wide. */
export function rasterLines(lines: readonly MapLine[], columns: number, from: number, to: number, mark: Rgb): LineRaster {
  const n = Math.max(0, Math.min(to, lines.length) - from);
  const stride = columns * 4;
  const rgba = new Uint8ClampedArray(stride * RASTER_ROWS * n);
  const held = new Uint8Array(columns * n);
  const peers = new Uint8Array(n);
  const sources = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const line = lines[from + i];
    if (line.kind !== 'row') continue;
    const cells = line.row.cells;
    const base = i * RASTER_ROWS * stride;
    const end = Math.min(columns, cells.length);
    for (let k = 0; k < end; k++) {
      const cell = cells[k];
      if (!cell || !cell.held) continue;
      held[i * columns + k] = 1;
      const c = PALETTE_RGB[ratioBucket(ratioValue(cell.ratio))];
      let o = base + k * 4;
      rgba[o] = c[0];
      rgba[o + 1] = c[1];
      rgba[o + 2] = c[2];
      rgba[o + 3] = 255;
      if (cell.from_rank !== undefined && cell.from_rank !== null) {
        o = base + stride + k * 4;
        rgba[o] = rgba[o + 1] = rgba[o + 2] = 255;
        rgba[o + 3] = PEER_ALPHA;
        peers[i] = 1;
      }
      if (cell.sources > 0) {
        o = base + 2 * stride + k * 4;
        rgba[o] = mark[0];
        rgba[o + 1] = mark[1];
        rgba[o + 2] = mark[2];
        rgba[o + 3] = 255;
        sources[i] = 1;
      }
    }
  }
  return { columns, lines: n, rgba, held, peers, sources };
}

/** Held cells of a raster's lines `line0`–`line1` (exclusive, the raster's own numbering) in columns `col0`–`col1`. */
export function heldCells(r: Pick<LineRaster, 'columns' | 'lines' | 'held'>, line0: number, line1: number, col0: number, col1: number): number {
  let n = 0;
  const a = Math.max(0, col0);
  const b = Math.min(r.columns, col1);
  for (let i = Math.max(0, line0); i < Math.min(r.lines, line1); i++) {
    const o = i * r.columns;
    for (let k = a; k < b; k++) n += r.held[o + k];
  }
  return n;
}
