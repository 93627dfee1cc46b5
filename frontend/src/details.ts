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

/**
 * For each metric column with a rule, the index of the worst row, if it is further from perfect
 * than the rule's threshold. Columns without a rule (users' own metrics) are never painted.
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
      const d = distance(rule, r.cells[col]);
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
