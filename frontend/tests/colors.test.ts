import { describe, expect, it } from 'vitest';
import { buildColorTable, darken, nodeFill, precisionColor, precisionLevel, toNumber, UNMATCHED_FALLBACK, WHITE } from '../src/colors';

// The default table msprobe writes into tb_config.node_colors.
const COLORS = {
  '#FFFCF3': { value: [0, 0.3] as [number, number], accuracy_level: 'pass' },
  '#FFDC7F': { value: [0.3, 0.6] as [number, number], accuracy_level: 'warning' },
  '#FF704D': { value: [0.6, 1] as [number, number], accuracy_level: 'error' },
  '#C7C7C7': { value: [] as [], accuracy_level: 'unmatched node' },
};
const table = buildColorTable(COLORS);
const node = (precisionIndex: unknown, matched = true) => ({
  matchedNodeLink: matched ? ['a'] : [],
  precisionIndex: precisionIndex as number,
  overflowLevel: null as string | null,
});

describe('precision colours', () => {
  it('uses half-open buckets with the 0 and 1 edges closed', () => {
    expect(precisionColor(table, 0)).toBe('#FFFCF3');
    expect(precisionColor(table, 0.29)).toBe('#FFFCF3');
    expect(precisionColor(table, 0.3)).toBe('#FFDC7F');
    expect(precisionColor(table, 0.6)).toBe('#FF704D');
    expect(precisionColor(table, 1)).toBe('#FF704D');
    expect(precisionColor(table, 1.5)).toBe(WHITE);
  });
  it('treats NaN strings and null as white', () => {
    expect(precisionColor(table, 'NaN')).toBe(WHITE);
    expect(precisionColor(table, null)).toBe(WHITE);
    expect(toNumber('0.5')).toBe(0.5);
  });
  it('colours unmatched, bench, single and overflow nodes by their own rules', () => {
    expect(nodeFill(node(0.9, false), 'NPU', 'precision', table, false)).toBe('#C7C7C7');
    expect(nodeFill(node(0.9), 'Bench', 'precision', table, false)).toBe(WHITE);
    expect(nodeFill(node(0.9), 'NPU', 'precision', table, false)).toBe('#FF704D');
    expect(nodeFill(node(0.9), 'Single', 'precision', table, true)).toBe(WHITE);
    expect(nodeFill({ ...node(0), overflowLevel: 'critical' }, 'NPU', 'overflow', table, false)).toBe('rgb(22,104,220)');
    expect(nodeFill(node(0), 'NPU', 'overflow', table, false)).toBe(WHITE);
  });
  it('falls back to grey when the file has no unmatched entry', () => {
    const t2 = buildColorTable({ '#FFFCF3': { value: [0, 1] } });
    expect(nodeFill(node(0, false), 'NPU', 'precision', t2, false)).toBe(UNMATCHED_FALLBACK);
  });
  it('names levels and darkens outlines by 40 per channel', () => {
    expect(precisionLevel(table, 0.45, true)).toBe('warning');
    expect(precisionLevel(table, 0.45, false)).toBe('unmatched');
    expect(darken('#FFDC7F')).toBe('rgb(215,180,87)');
    expect(darken('rgb(10,50,250)')).toBe('rgb(0,10,210)');
  });
});
