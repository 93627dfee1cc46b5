/**
 * The node-details table: inputs and outputs of both sides, paired row by row (inputs, then
 * outputs; a slot pairs with the other side's slot of the same name, else by position), every
 * statistic and metric as a column, and the worst cell of each metric column marked.
 */
import type { NodeDetail, TensorSlot } from './types';

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
 * The columns msprobe's dumps and compare results use, in the order the table shows them (the
 * converter's field order: statistics, then distributed fields, then compare metrics). A table
 * keeps this order whatever its first row holds, so columns do not move between nodes.
 */
export const KNOWN_COLUMNS = [
  'type', 'dtype', 'shape', 'Max', 'Min', 'Mean', 'Norm', 'requires_grad', 'md5',
  'group_ranks', 'group_id', 'state', 'full_op_name', 'op', 'peer', 'tag',
  'Max diff', 'Min diff', 'Mean diff', 'L2norm diff', 'MaxRelativeErr', 'MinRelativeErr', 'MeanRelativeErr', 'NormRelativeErr',
  'Cosine', 'EucDist', 'MaxAbsErr', 'One Thousandth Err Ratio', 'Five Thousandths Err Ratio',
  'Requires_grad Consistent', 'Result', 'Err_message', 'Accuracy Reached or Not', 'src', 'dst',
];
const KNOWN_RANK = new Map(KNOWN_COLUMNS.map((c, i) => [c, i]));

/** The columns the rows have: the known ones in their fixed order, then any others (user-defined metrics) in the order they first appear. */
export function columnsOf(rows: DetailRow[]): string[] {
  const known: string[] = [];
  const others: string[] = [];
  const seen = new Set<string>();
  for (const r of rows)
    for (const k of Object.keys(r.cells))
      if (!seen.has(k)) {
        seen.add(k);
        (KNOWN_RANK.has(k) ? known : others).push(k);
      }
  known.sort((a, b) => (KNOWN_RANK.get(a) ?? 0) - (KNOWN_RANK.get(b) ?? 0));
  return [...known, ...others];
}

/** A metric value as a number: "12.5%" -> 12.5, "N/A"/"-" -> NaN. */
export function metricValue(s: string | undefined): number {
  if (s === undefined) return NaN;
  const t = s.trim().replace(/%$/, '');
  if (t === '' || t === '-' || /^n\/a$/i.test(t)) return NaN;
  if (/^(nan|inf|-inf|infinity|-infinity)$/i.test(t)) return Infinity;
  const n = Number(t);
  return Number.isNaN(n) ? NaN : n;
}

/** Columns where a larger |value| is worse (diffs and errors), or a smaller one (cosine). */
export function metricDirection(col: string): 'high' | 'low' | null {
  const c = col.toLowerCase();
  if (c.includes('cosine')) return 'low';
  if (c.includes('diff') || c.includes('err') || c.includes('relative') || c.includes('euc') || c.includes('rmse')) {
    if (c.includes('err_message')) return null;
    return 'high';
  }
  return null;
}

/** For each metric column, the index of the worst row (if any row has a number and it is not a perfect score). */
export function worstCells(rows: DetailRow[], cols: string[]): Map<string, number> {
  const worst = new Map<string, number>();
  for (const col of cols) {
    const dir = metricDirection(col);
    if (!dir) continue;
    let best = -1;
    let bestV = dir === 'high' ? 0 : Infinity;
    rows.forEach((r, i) => {
      const v = metricValue(r.cells[col]);
      if (Number.isNaN(v)) return;
      const a = dir === 'high' ? Math.abs(v) : v;
      if (dir === 'high' ? a > bestV : a < bestV) {
        bestV = a;
        best = i;
      }
    });
    if (best >= 0 && !(dir === 'low' && bestV >= 0.99999)) worst.set(col, best);
  }
  return worst;
}

/** A row's Result / status cell says something is wrong. */
export function badResult(v: string | undefined): boolean {
  if (!v) return false;
  const s = v.toLowerCase();
  return s === 'error' || s === 'warning' || s === 'fail' || s === 'failed';
}
