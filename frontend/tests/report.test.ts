import { describe, expect, it } from 'vitest';
import { reportAddress } from '../src/report/download';
import { ReportSource, routeOf, type ReportData } from '../src/report/source';

const node = (name: string, parentNode: string, nodeType = 0, isRoot = false) => ({
  name: `N___${name}`, label: name, parentNode, nodeType, isRoot, matchedNodeLink: [name], precisionIndex: null, overflowLevel: null, matchedDistributed: {},
});

/** root > A > a1 (API); root > B: the root view, A opened (a run for B, moved down). */
function data(): ReportData {
  return {
    format: 1,
    provenance: { file: 'x.vis.db', steps: [0], ranks: [0], step: 0, rank: 0, tool: 'graph-ascend 0', created: '', noPaths: false },
    meta: { run: 'r', tag: 'x', step: 0, rank: 0 },
    catalog: { data: { r: { type: 'db', tags: ['x'] } }, error: [] },
    config: { success: true, data: { isSingleGraph: false } },
    diagnosis: { success: true, data: {} },
    panes: {
      NPU: {
        keys: ['root', 'A', 'B', 'a1'],
        nodes: [node('root', '', 0, true), node('A', 'root'), node('B', 'root'), node('a1', 'A', 1)],
        views: [
          { open: [], boxes: [[0, 0, 0, 100, 60, 1], [1, 10, 10, 80, 15, 0], [2, 10, 30, 80, 15, 0]] },
          { open: ['A'], boxes: [[0, 0, 0, 100, 90, 1], [1, 10, 10, 80, 45, 1], [3, 20, 30, 60, 10, 0], [2, 1, 0, 30]] },
        ],
        details: { a1: { id: 'a1' }, A: { id: 'A' } },
      },
      Bench: { keys: ['root'], nodes: [node('root', '', 0, true)], views: [{ open: [], boxes: [[0, 0, 0, 10, 10, 1]] }], details: { a1: { id: 'golden a1' } } },
    },
    leftOut: [],
  };
}

const expand = (s: ReportSource, nodeName: string) =>
  s.answer('changeNodeExpandState', { nodeInfo: { nodeName, nodeType: 'NPU' }, metaData: { step: 0, rank: 0, microStep: -1 } }).body as { success: boolean; data?: Record<string, { y: number; expand: boolean }>; error?: string };

describe('report data source', () => {
  it('answers the views laid out in advance, runs of the root view unrolled', () => {
    const s = new ReportSource(data());
    expect(Object.keys(expand(s, 'root').data ?? {})).toEqual(['root', 'A', 'B']);
    const opened = expand(s, 'A');
    expect(Object.keys(opened.data ?? {})).toEqual(['root', 'A', 'a1', 'B']);
    expect(opened.data?.B.y).toBe(60);
    expect(opened.data?.A.expand).toBe(true);
    // Collapsed again: the root view.
    expect(Object.keys(expand(s, 'A').data ?? {})).toEqual(['root', 'A', 'B']);
    // Revealing a node not shown opens its path.
    expect(Object.keys(expand(s, 'a1').data ?? {})).toContain('a1');
  });

  it('says what is left out', () => {
    const s = new ReportSource(data());
    expand(s, 'root');
    const b = expand(s, 'B');
    expect(b.success).toBe(false);
    expect(b.error).toMatch(/not in this report/);
    expect((s.answer('getNodeInfo', { nodeInfo: { nodeName: 'B', nodeType: 'NPU' } }).body as { success: boolean }).success).toBe(false);
    // Another step and rank: it loads, but the report holds none of its views (the page says so in place).
    expect(s.holds(1, 0)).toBe(false);
    expect((s.answer('loadGraphData', { step: '1', rank: '0' }).body as { success: boolean }).success).toBe(true);
    const other = s.answer('changeNodeExpandState', { nodeInfo: { nodeName: 'root', nodeType: 'NPU' }, metaData: { step: 1, rank: 0 } }).body as { success: boolean; error: string };
    expect(other.success).toBe(false);
    expect(other.error).toMatch(/not in this report/);
    expect((s.answer('addMatchNodes', {}).body as { success: boolean }).success).toBe(false);
    expect(s.answer('watchMetaDir', {}).status).toBe(404);
  });

  it('holds several steps and ranks (format 2): each its own views and verdicts, opened on the first', () => {
    const one = data();
    const panes = one.panes ?? {};
    const two: ReportData = {
      ...one,
      format: 2,
      panes: undefined,
      meta: { ...one.meta, step: 2, rank: 1 },
      start: { step: 2, rank: 1, node: 'a1' },
      points: [
        { step: 2, rank: 1, states: { step: 2, rank: 1, source: ['a1'], inherited: [], sources_inside: { A: 1 } }, panes },
        { step: 2, rank: 0, states: { step: 2, rank: 0, source: [], inherited: ['A'], sources_inside: {} }, panes: { NPU: { ...panes.NPU, details: {} } } },
      ],
    };
    const s = new ReportSource(two);
    expect(s.held()).toEqual([{ step: 2, rank: 1 }, { step: 2, rank: 0 }]);
    expect(s.holds(2, 0)).toBe(true);
    expect(s.holds(0, 0)).toBe(false);
    // Requests without a step and rank are of the point it opens on.
    const at = (step: number, rank: number, name: string) =>
      s.answer('getNodeInfo', { nodeInfo: { nodeName: name, nodeType: 'NPU' }, metaData: { step, rank } }).body as { success: boolean };
    expect(at(2, 1, 'a1').success).toBe(true);
    expect(at(2, 0, 'a1').success).toBe(false);
    const states = (step: number, rank: number) => (s.answer('diagnosis', { step: String(step), rank: String(rank), states: 'true' }).body as { states?: { source: string[] } }).states;
    expect(states(2, 1)?.source).toEqual(['a1']);
    expect(states(2, 0)?.source).toEqual([]);
    expect(states(0, 0)).toBeUndefined();
  });

  it('gives a node its details and its match\'s', () => {
    const s = new ReportSource(data());
    const r = s.answer('getNodeInfo', { nodeInfo: { nodeName: 'a1', nodeType: 'NPU' } }).body as { data: unknown };
    expect(r.data).toEqual({ npu: { id: 'a1' }, bench: { id: 'golden a1' } });
  });

  it('reads the route and query of a relative address', () => {
    expect(routeOf('loadGraphData?run=r&step=0')).toEqual({ route: 'loadGraphData', query: { run: 'r', step: '0' } });
    expect(routeOf('file:///tmp/x/getNodeInfo').route).toBe('getNodeInfo');
  });
});

describe('report download address', () => {
  const meta = { run: 'converted/s1', tag: 'compare_1', lang: 'en' as const, step: 0, rank: 2 };
  it('asks for the shown step and rank, and for no stacks or paths only when chosen', () => {
    const whole = new URLSearchParams(reportAddress(meta).split('?')[1]);
    expect(reportAddress(meta).startsWith('exportReport?')).toBe(true);
    expect(Object.fromEntries(whole)).toEqual({ run: 'converted/s1', tag: 'compare_1', lang: 'en', step: '0', rank: '2' });
    const bare = new URLSearchParams(reportAddress(meta, true).split('?')[1]);
    expect(bare.get('no_paths')).toBe('true');
    expect(bare.get('run')).toBe('converted/s1');
  });
});
