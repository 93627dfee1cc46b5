import { describe, expect, it } from 'vitest';
import { matchedOf, NameIndex, naturalCompare, paneLayout, readUrlState, unprefixed, visibleOnly, writeUrlState } from '../src/state';
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
  it('is a case-insensitive substring match, one hit per name, in list order', () => {
    const idx = new NameIndex(['Module.Linear.0', 'Torch.add.1', 'Functional.linear.10.forward', 'linearlinear']);
    expect(idx.search('LINEAR')).toEqual([0, 2, 3]);
    expect(idx.search('add')).toEqual([1]);
    expect(idx.search('  ')).toEqual([]);
    expect(idx.search('nothing')).toEqual([]);
  });
  it('never matches across two names', () => {
    const idx = new NameIndex(['ab', 'cd']);
    expect(idx.search('bc')).toEqual([]);
    expect(idx.search('b\nc')).toEqual([]);
    expect(idx.search('d')).toEqual([1]);
  });
  it('agrees with a plain filter on many names', () => {
    const names = Array.from({ length: 5000 }, (_, i) => `Module.layers.${i % 37}.block${i}.Linear.forward.${i % 7}`);
    const idx = new NameIndex(names);
    for (const q of ['block1', 'LAYERS.3', 'forward.6', 'r.f', 'x']) {
      const want = names.flatMap((n, i) => (n.toLowerCase().includes(q.toLowerCase()) ? [i] : []));
      expect(idx.search(q)).toEqual(want);
    }
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

describe('panel layout', () => {
  const base = { page: 'dashboard' as const, tab: null, single: false, benchCollapsed: false, detailsCollapsed: false };
  it('shows both panes for compare files and one for single files', () => {
    expect(paneLayout(base)).toMatchObject({ benchPane: true, paneSplitter: true, panel: false, details: true, dashboard: true, convert: false });
    expect(paneLayout({ ...base, single: true })).toMatchObject({ benchPane: false, paneSplitter: false });
  });
  it('collapses the golden pane, the details and the control panel on demand', () => {
    expect(paneLayout({ ...base, benchCollapsed: true }).benchPane).toBe(false);
    expect(paneLayout({ ...base, detailsCollapsed: true }).details).toBe(false);
    expect(paneLayout({ ...base, tab: 'search' }).panel).toBe(true);
  });
  it('hides the dashboard and its panel on the conversion page', () => {
    expect(paneLayout({ ...base, page: 'convert', tab: 'search' })).toMatchObject({ panel: false, dashboard: false, convert: true });
  });
});
