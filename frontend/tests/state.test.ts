import { describe, expect, it } from 'vitest';
import { matchedOf, naturalCompare, readUrlState, searchNames, unprefixed, visibleOnly, writeUrlState } from '../src/state';
import type { RenderNode } from '../src/types';

const node = (parentNode: string, expand: boolean, link: string[] = [], isRoot = false) =>
  ({ parentNode, expand, matchedNodeLink: link, isRoot }) as unknown as RenderNode;

describe('hierarchy helpers', () => {
  it('keeps only nodes reachable through expanded parents', () => {
    const data = { root: node('', true, [], true), a: node('root', false), b: node('a', false), c: node('root', true), d: node('c', false), e: node('zz', false) };
    expect(Object.keys(visibleOnly(data))).toEqual(['root', 'a', 'c', 'd']);
  });
  it('finds the matched node through the nearest matched ancestor', () => {
    const data = { root: node('', true, ['R'], true), a: node('root', true, []), b: node('a', false, ['X', 'Y']) };
    expect(matchedOf(data, 'b')).toBe('Y');
    expect(matchedOf(data, 'a')).toBe('R');
    expect(matchedOf({ q: node('', true) }, 'q')).toBeUndefined();
  });
  it('strips side prefixes', () => {
    expect(unprefixed('N___Module.a')).toBe('Module.a');
    expect(unprefixed('B___x')).toBe('x');
    expect(unprefixed('plain')).toBe('plain');
  });
});

describe('search', () => {
  it('is a case-insensitive substring match with a total', () => {
    const names = ['Module.Linear.0', 'Torch.add.1', 'Functional.linear.10.forward'];
    const lower = names.map((n) => n.toLowerCase());
    expect(searchNames(names, lower, 'LINEAR')).toEqual({ hits: [0, 2], total: 2 });
    expect(searchNames(names, lower, 'linear', 1)).toEqual({ hits: [0], total: 2 });
    expect(searchNames(names, lower, '  ').total).toBe(0);
  });
});

describe('URL state', () => {
  it('round-trips the selection and keeps unrelated parameters', () => {
    const q = writeUrlState('?name=graph_ascend', { run: 'r 1', tag: 't', step: 2, rank: 0, micro: -1, node: 'Module.a', side: 'NPU' });
    expect(q).toContain('name=graph_ascend');
    expect(readUrlState(q)).toEqual({ run: 'r 1', tag: 't', step: 2, rank: 0, micro: -1, node: 'Module.a', side: 'NPU' });
    expect(readUrlState('?step=x').step).toBeUndefined();
  });
  it('sorts runs naturally', () => {
    expect(['run_10', 'run_2', 'run_1'].sort(naturalCompare)).toEqual(['run_1', 'run_2', 'run_10']);
  });
});
