import { describe, expect, it } from 'vitest';
import { columnsOf, metricValue, pairRows, worstCells } from '../src/details';
import type { DetailColumn, NodeDetail } from '../src/types';

/** The rules as the sidecar serves them (a subset of its detailColumns, same shape and order). */
const rules: DetailColumn[] = [
  ...['type', 'dtype', 'shape', 'Max', 'Min', 'Mean', 'Norm', 'requires_grad'].map((name) => ({ name, worse: '', threshold: 0 })),
  { name: 'Max diff', worse: 'higher', threshold: 1e-6 },
  { name: 'Mean diff', worse: 'higher', threshold: 1e-6 },
  { name: 'MaxRelativeErr', worse: 'higher', threshold: 1e-3 },
  { name: 'Cosine', worse: 'lower', threshold: 1e-6 },
  { name: 'One Thousandth Err Ratio', worse: 'lower', threshold: 0 },
  { name: 'Result', worse: '', threshold: 0 },
];

const npu: NodeDetail = {
  node_name: 'Functional.linear.10.forward',
  input_data: {
    'Functional.linear.10.forward.input.0': { dtype: 'f32', Max: '1', MaxRelativeErr: '0.5%', data_name: '-1' },
    'Functional.linear.10.forward.input.1': { dtype: 'f32', Max: '2', MaxRelativeErr: '71.2%' },
    'Functional.linear.10.forward.input.2': { dtype: 'f32', Max: '3', MaxRelativeErr: 'N/A' },
  },
  output_data: { 'Functional.linear.10.forward.output.0': { dtype: 'f32', Max: '4', MaxRelativeErr: '12%' } },
};
const bench: NodeDetail = {
  node_name: 'Functional.linear.10.forward',
  input_data: {
    'Functional.linear.10.forward.input.0': { dtype: 'f32', Max: '1' },
    'Functional.linear.10.forward.input.1': { dtype: 'f32', Max: '2' },
  },
  output_data: { 'Functional.linear.10.forward.output.0': { dtype: 'f32', Max: '4' } },
};

describe('details table', () => {
  it('interleaves paired rows, then unmatched ones, with the node prefix stripped', () => {
    const rows = pairRows(npu, bench);
    expect(rows.map((r) => `${r.side}:${r.name}:${r.matched}`)).toEqual([
      'debug:input.0:true',
      'bench:input.0:true',
      'debug:input.1:true',
      'bench:input.1:true',
      'debug:output.0:true',
      'bench:output.0:true',
      'debug:input.2:false',
    ]);
  });
  it('drops hidden keys and keeps the union of columns in order', () => {
    const rows = pairRows(npu, bench);
    expect(columnsOf(rows, rules)).toEqual(['dtype', 'Max', 'MaxRelativeErr']);
  });
  it('keeps the known columns in one order whatever the first row holds, then the others as they come', () => {
    const scalar: NodeDetail = { node_name: 'n', input_data: { 'n.input.0': { type: 'int', value: '16', requires_grad: 'null', Max: '16', MyMetric: '1', dtype: 'int', shape: '[]', 'Max diff': '0' } } };
    const tensor: NodeDetail = { node_name: 'n', input_data: { 'n.input.0': { type: 'torch.Tensor', dtype: 'f32', shape: '[2]', Max: '1', requires_grad: 'True', 'Max diff': '0', Other: 'x', MyMetric: '2' } } };
    expect(columnsOf(pairRows(scalar, null), rules)).toEqual(['type', 'dtype', 'shape', 'Max', 'requires_grad', 'Max diff', 'MyMetric']);
    expect(columnsOf(pairRows(tensor, null), rules)).toEqual(['type', 'dtype', 'shape', 'Max', 'requires_grad', 'Max diff', 'Other', 'MyMetric']);
  });
  it('pairs by position when names differ', () => {
    const b2: NodeDetail = { node_name: 'x', input_data: { 'x.input.a': { Max: '1' } } };
    const n2: NodeDetail = { node_name: 'y', input_data: { 'y.input.b': { Max: '1' } } };
    expect(pairRows(n2, b2).map((r) => r.name)).toEqual(['input.b', 'input.a']);
  });
  it('marks the worst cell of each metric column', () => {
    const rows = pairRows(npu, bench);
    const worst = worstCells(rows, columnsOf(rows, rules), rules);
    expect(worst.get('MaxRelativeErr')).toBe(2);
    expect(worst.has('Max')).toBe(false);
    expect(metricValue('12.5%')).toBe(0.125);
    expect(metricValue('N/A')).toBeNaN();
    expect(metricValue('inf')).toBe(Infinity);
  });
  it('paints by the served direction: the ‰ ratios and Cosine are perfect at 1.0', () => {
    const t: NodeDetail = {
      node_name: 'n',
      input_data: { 'n.input.0': { Cosine: '1.0', 'One Thousandth Err Ratio': '1.0' } },
      output_data: { 'n.output.0': { Cosine: '0.731938667026', 'One Thousandth Err Ratio': '0.0' } },
    };
    const rows = pairRows(t, null);
    const worst = worstCells(rows, columnsOf(rows, rules), rules);
    expect(worst.get('Cosine')).toBe(1);
    expect(worst.get('One Thousandth Err Ratio')).toBe(1);
  });
  it('leaves differences within the threshold, perfect columns, and unknown metrics unpainted', () => {
    const t: NodeDetail = {
      node_name: 'n',
      input_data: { 'n.input.0': { 'Mean diff': '-6.4e-09', Cosine: '1.0', 'One Thousandth Err Ratio': '1.0', MyErr: '99' } },
      output_data: { 'n.output.0': { 'Mean diff': '3e-9', Cosine: '0.9999999999', 'One Thousandth Err Ratio': '1.0', MyErr: '1e9' } },
    };
    const rows = pairRows(t, null);
    const cols = columnsOf(rows, rules);
    expect(cols.at(-1)).toBe('MyErr');
    expect([...worstCells(rows, cols, rules).keys()]).toEqual([]);
    expect(worstCells(rows, cols, []).size).toBe(0);
  });
  it('lists one side alone for single graphs', () => {
    expect(pairRows(npu, null).every((r) => r.side === 'debug' && r.matched)).toBe(true);
  });
});
