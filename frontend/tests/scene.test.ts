import { describe, expect, it } from 'vitest';
import { centerOn, fitView, lodFor, Scene, visibleRect, zoomAt, MAX_SCALE } from '../src/scene';
import { truncate } from '../src/render';
import type { RenderNode } from '../src/types';

function n(name: string, x: number, y: number, w: number, h: number, parent: string, expand = false, nodeType = 1): RenderNode {
  return { x, y, width: w, height: h, expand, isRoot: !parent, parentNode: parent, label: name, name, nodeType, matchedNodeLink: [], precisionIndex: null, overflowLevel: null, matchedDistributed: {} };
}

// A root with a module expanded inside it holding two leaves, and a collapsed module below.
const data = {
  root: n('root', 0, 0, 300, 200, '', true, 0),
  mod: n('mod', 10, 25, 280, 50, 'root', true, 0),
  a: n('a', 20, 50, 50, 15, 'mod'),
  b: n('b', 75, 50, 50, 15, 'mod'),
  c: n('c', 10, 100, 120, 15, 'root', false, 0),
};

describe('scene index', () => {
  const s = new Scene(data, () => '#fff');
  it('splits containers from one-bar boxes and computes bounds', () => {
    expect(s.containers.map((b) => b.key)).toEqual(['root', 'mod']);
    expect(s.small.map((b) => b.key)).toEqual(['a', 'b', 'c']);
    expect(s.bounds).toEqual({ x0: 0, y0: 0, x1: 300, y1: 200 });
    expect(s.byKey.get('a')?.depth).toBe(2);
  });
  it('returns only what intersects the rectangle', () => {
    expect(s.query({ x0: 0, y0: 95, x1: 300, y1: 120 }).map((b) => b.key)).toEqual(['root', 'c']);
    expect(s.query({ x0: 70.5, y0: 0, x1: 74, y1: 300 }).map((b) => b.key)).toEqual(['root', 'mod', 'c']);
    expect(s.query({ x0: 135, y0: 0, x1: 140, y1: 300 }).map((b) => b.key)).toEqual(['root', 'mod']);
  });
  it('hits the innermost box', () => {
    expect(s.hit(30, 55)?.key).toBe('a');
    expect(s.hit(72, 55)?.key).toBe('mod');
    expect(s.hit(200, 150)?.key).toBe('root');
    expect(s.hit(400, 150)).toBeUndefined();
  });
  it('handles a large flat graph quickly enough to query per frame', () => {
    const big: Record<string, RenderNode> = { root: n('root', 0, 0, 300, 25 * 20000 + 30, '', true, 0) };
    for (let i = 0; i < 100000; i++) big[`n${i}`] = n(`n${i}`, 5 + (i % 5) * 55, 25 + Math.floor(i / 5) * 25, 50, 15, 'root');
    const sc = new Scene(big, () => '#fff');
    const hits = sc.query({ x0: 0, y0: 1000, x1: 300, y1: 1500 });
    expect(hits.length).toBe(1 + 5 * 21);
  });
});

describe('view maths', () => {
  it('zooms around the cursor and clamps', () => {
    const v = zoomAt({ tx: 0, ty: 0, scale: 1 }, 2, 100, 100);
    expect(v).toEqual({ scale: 2, tx: -100, ty: -100 });
    expect(zoomAt(v, 1e9, 0, 0).scale).toBe(MAX_SCALE);
  });
  it('fits and centres', () => {
    const v = fitView({ x0: 0, y0: 0, x1: 100, y1: 100 }, 232, 232, 16, 5);
    expect(v.scale).toBe(2);
    expect(visibleRect(v, 232, 232).x0).toBeCloseTo(-8);
    const c = centerOn(50, 50, 2, 100, 100);
    expect(c).toEqual({ scale: 2, tx: 0, ty: 0 });
  });
  it('drops labels, then outlines, as boxes get small', () => {
    expect(lodFor(1)).toEqual({ labels: true, strokes: true, shapes: true });
    expect(lodFor(0.5).labels).toBe(false);
    expect(lodFor(0.7).labels).toBe(true);
    expect(lodFor(0.3).labels).toBe(false);
    expect(lodFor(0.3).strokes).toBe(true);
    expect(lodFor(0.1).strokes).toBe(false);
  });
  it('truncates labels with an ellipsis to the box width', () => {
    const m = (s: string) => s.length * 5;
    expect(truncate('short', 100, 8, m)).toBe('short');
    const cut = truncate('Module.layers.0.Block.forward.0', 60, 8, m);
    expect(cut.endsWith('…')).toBe(true);
    expect(m(cut)).toBeLessThanOrEqual(56);
    expect(truncate('abc', 3, 8, m)).toBe('');
  });
});
