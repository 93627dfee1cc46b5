/**
 * The node-details table: inputs and outputs of both sides, paired row by row (inputs, then
 * outputs; a slot pairs with the other side's slot of the same name, else by position), every
 * statistic and metric as a column, and the worst cell of each metric column marked.
 */
import type { DetailColumn, NodeDetail, TensorSlot } from './types';

export interface DetailRow {
  side: 'debug' | 'bench';
  name: string;
  matched: boolean;
  cells: Record<string, string>;
}

const HIDDEN = new Set(['data_name', 'isBench', 'isMatched', 'value']);

function slots(node: NodeDetail | null | undefined, kind: 'input_data' | 'output_data'): [string, TensorSlot][] {
  const data = node?.[kind];
  if (!data || typeof data !== 'object') return [];
  const prefix = node?.node_name ? `${node.node_name}.` : '';
  return Object.entries(data).map(([k, v]) => [prefix && k.startsWith(prefix) ? k.slice(prefix.length) : k, v ?? {}]);
}

function cellsOf(slot: TensorSlot): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(slot)) {
    if (HIDDEN.has(k)) continue;
    out[k] = v === null || v === undefined ? '-' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  return out;
}

export function pairRows(npu: NodeDetail | null | undefined, bench: NodeDetail | null | undefined): DetailRow[] {
  const rows: DetailRow[] = [];
  const tailN: DetailRow[] = [];
  const tailB: DetailRow[] = [];
  for (const kind of ['input_data', 'output_data'] as const) {
    const a = slots(npu, kind);
    const b = slots(bench, kind);
    const bIndex = new Map(b.map(([n], i) => [n, i]));
    const aNames = new Set(a.map(([n]) => n));
    const usedB = new Set<number>();
    const pairs: [[string, TensorSlot], [string, TensorSlot] | undefined][] = [];
    for (const [i, [n, s]] of a.entries()) {
      let j = bIndex.get(n);
      // Names differ (e.g. renamed args across frameworks): fall back to the same position.
      if (j === undefined && i < b.length && !aNames.has(b[i][0])) j = i;
      if (j !== undefined && !usedB.has(j)) {
        usedB.add(j);
        pairs.push([[n, s], b[j]]);
      } else pairs.push([[n, s], undefined]);
    }
    for (const [[n, s], other] of pairs) {
      if (other) {
        rows.push({ side: 'debug', name: n, matched: true, cells: cellsOf(s) });
        rows.push({ side: 'bench', name: other[0], matched: true, cells: cellsOf(other[1]) });
      } else tailN.push({ side: 'debug', name: n, matched: !bench, cells: cellsOf(s) });
    }
    for (const [i, [n, s]] of b.entries()) if (!usedB.has(i)) tailB.push({ side: 'bench', name: n, matched: false, cells: cellsOf(s) });
  }
  return [...rows, ...tailN, ...tailB];
}

/**
 * The known columns in the order the table shows them, each metric with its rule: served with
 * the file's config (`detailColumns`), from the one table of metric rules the converter and the
 * diagnosis use (graph_ascend_dump::METRIC_RULES). The page keeps no copy of its own.
 */
export type Rules = readonly DetailColumn[];

/** The columns the rows have: the known ones in their fixed order, then any others (user-defined metrics) in the order they first appear. */
export function columnsOf(rows: DetailRow[], rules: Rules): string[] {
  const rank = new Map(rules.map((c, i) => [c.name, i]));
  const known: string[] = [];
  const others: string[] = [];
  const seen = new Set<string>();
  for (const r of rows)
    for (const k of Object.keys(r.cells))
      if (!seen.has(k)) {
        seen.add(k);
        (rank.has(k) ? known : others).push(k);
      }
  known.sort((a, b) => (rank.get(a) ?? 0) - (rank.get(b) ?? 0));
  return [...known, ...others];
}

/** A metric value as a number: "12.5%" -> 0.125 (percent strings are fractions, as the rules' thresholds), "N/A"/"-" -> NaN, "nan"/"inf" -> Infinity. */
export function metricValue(s: string | undefined): number {
  if (s === undefined) return NaN;
  const raw = s.trim();
  const percent = raw.endsWith('%');
  const t = percent ? raw.slice(0, -1) : raw;
  if (t === '' || t === '-' || /^n\/a$/i.test(t)) return NaN;
  if (/^[+-]?(nan|inf|infinity)$/i.test(t)) return Infinity;
  const n = Number(t);
  if (Number.isNaN(n)) return NaN;
  return percent ? n / 100 : n;
}

/** How far a cell is from perfect under its column's rule (Infinity for inf/NaN results), NaN when it is not a number. */
export function distance(rule: DetailColumn, cell: string | undefined): number {
  const v = metricValue(cell);
  if (Number.isNaN(v) || v === Infinity) return v;
  return rule.worse === 'lower' ? 1 - v : Math.abs(v);
}

/** The relative-error columns the diagnosis replaces by a scale-relative error, and the statistic each is of. */
const SCALE_RELATIVE: Record<string, string> = { MaxRelativeErr: 'Max', MinRelativeErr: 'Min', MeanRelativeErr: 'Mean' };

/** How the diagnosis measures a relative-error cell (docs/diagnosis.md §1). */
export interface ScaleRelative {
  /** The statistic (Max, Min, Mean). */
  stat: string;
  /** |target − golden| of the statistic over the tensor's scale. */
  err: number;
  /** The scale: max(|Max|, |Min|) over both sides. */
  scale: number;
}

/**
 * The diagnosis's error of a relative-error cell (`MeanRelativeErr` …) of a target row paired
 * with its golden row (the next one): the statistic's difference over the tensor's scale
 * max(|Max|, |Min|) of both sides, not over the golden statistic, which may be near zero (a
 * mean of 1e-9 makes any rounding a 100 % "error"). Undefined where the row is not such a
 * pair or a statistic is missing: the cell is then measured by its own value.
 */
export function scaleRelative(rows: DetailRow[], i: number, col: string): ScaleRelative | undefined {
  const stat = SCALE_RELATIVE[col];
  const r = rows[i], g = rows[i + 1];
  if (!stat || !r || !g || r.side !== 'debug' || g.side !== 'bench' || !r.matched || !g.matched) return undefined;
  const num = (row: DetailRow, k: string) => metricValue(row.cells[k]);
  const values = [num(r, stat), num(g, stat), num(r, 'Max'), num(r, 'Min'), num(g, 'Max'), num(g, 'Min')];
  if (values.some((v) => !Number.isFinite(v))) return undefined;
  const [a, b, ...range] = values;
  const scale = Math.max(...range.map(Math.abs));
  const diff = Math.abs(a - b);
  return { stat, err: diff === 0 ? 0 : scale > 0 ? diff / scale : Infinity, scale };
}

/**
 * For each metric column with a rule, the index of the worst row, if it is further from perfect
 * than the rule's threshold. Columns without a rule (users' own metrics) are never painted.
 * Relative errors of a statistic are measured as the diagnosis measures them ([`scaleRelative`]).
 */
export function worstCells(rows: DetailRow[], cols: string[], rules: Rules): Map<string, number> {
  const byName = new Map(rules.map((c) => [c.name, c]));
  const worst = new Map<string, number>();
  for (const col of cols) {
    const rule = byName.get(col);
    if (!rule || (rule.worse !== 'higher' && rule.worse !== 'lower')) continue;
    let at = -1;
    let far = Number(rule.threshold);
    rows.forEach((r, i) => {
      const d = scaleRelative(rows, i, col)?.err ?? distance(rule, r.cells[col]);
      if (d > far) {
        far = d;
        at = i;
      }
    });
    if (at >= 0) worst.set(col, at);
  }
  return worst;
}

/** A row's Result / status cell says something is wrong. */
export function badResult(v: string | undefined): boolean {
  if (!v) return false;
  const s = v.toLowerCase();
  return s === 'error' || s === 'warning' || s === 'fail' || s === 'failed';
}
