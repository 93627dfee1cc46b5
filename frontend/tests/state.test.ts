import { describe, expect, it } from 'vitest';
import { hashShowsPlugin, matchedOf, NameIndex, naturalCompare, paneLayout, readHashState, readUrlState, unprefixed, visibleOnly, writeHashState, writeUrlState } from '../src/state';
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
  it('round-trips expanded modules, whatever their names hold', () => {
    const open = ['Module.a', 'Module.a.b,c', 'x&y=z #1 %2F'];
    const st = { run: 'r', tag: 't', open, openBench: ['B'] };
    expect(readUrlState(writeUrlState('', st))).toMatchObject(st);
    expect(readUrlState('?open=notjson').open).toBeUndefined();
    expect(readUrlState('?open=[1,2]').open).toBeUndefined();
  });
  it("writes the view into TensorBoard's hash as its tf_storage does, keeping other keys", () => {
    const st = { run: 'run a', tag: 't=1', step: 3, node: 'Module.x&y', open: ['Module.a', 'Module.a.b'] };
    const hash = writeHashState('#graph_ascend&smoothing=0.6&ga_node=old', st);
    expect(hash.startsWith('#graph_ascend&smoothing=0.6&ga_run=run%20a&ga_tag=t%3D1&ga_step=3&ga_node=Module.x%26y&ga_open=')).toBe(true);
    // tf_storage's parser: split on '&' then '=', decodeURIComponent each side.
    const parsed = Object.fromEntries(hash.slice(1).split('&').slice(1).map((c) => c.split('=').map(decodeURIComponent)));
    expect(parsed.smoothing).toBe('0.6');
    expect(JSON.parse(parsed.ga_open)).toEqual(st.open);
    expect(readHashState(hash)).toMatchObject(st);
  });
  it("reads the view only from this plugin's hash", () => {
    expect(readHashState('#scalars&ga_run=r')).toEqual({});
    expect(readHashState('#graph_ascend&ga_run=r').run).toBe('r');
    expect(readHashState('#graph_ascend&ga_run=%E0%A4%A').run).toBeUndefined();
    expect(hashShowsPlugin('')).toBe(true);
    expect(hashShowsPlugin('#graph_ascend&x=1')).toBe(true);
    expect(hashShowsPlugin('#scalars')).toBe(false);
    expect(writeHashState('', { run: 'r' })).toBe('#graph_ascend&ga_run=r');
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
