import { describe, expect, it } from 'vitest';
import { minimapMapping, minimapRect } from '../src/render';

describe('minimap mapping', () => {
  it('fills the width and, for a tall graph, the height (not a 1-px line)', () => {
    const b = { x0: 0, y0: 0, x1: 400, y1: 20000 };
    const m = minimapMapping(b, 96, 260);
    const g = minimapRect(m, b, 96, 260);
    expect(g).toEqual({ x0: 0, y0: 0, x1: 96, y1: 260 });
  });
  it('keeps one scale for a graph shorter than the minimap', () => {
    const m = minimapMapping({ x0: 10, y0: 5, x1: 210, y1: 105 }, 100, 260);
    expect(m.sx).toBeCloseTo(0.5);
    expect(m.sy).toBeCloseTo(0.5);
    expect(m.ox).toBeCloseTo(-5);
  });
  it('clips the viewport box to the frame and keeps it visible', () => {
    const m = minimapMapping({ x0: 0, y0: 0, x1: 100, y1: 1000 }, 100, 200);
    expect(minimapRect(m, { x0: -500, y0: -50, x1: 900, y1: 300 }, 100, 200)).toEqual({ x0: 0, y0: 0, x1: 100, y1: 60 });
    const far = minimapRect(m, { x0: 5000, y0: 5000, x1: 6000, y1: 6000 }, 100, 200);
    expect(far.x1 - far.x0).toBe(2);
    expect(far.x1).toBe(100);
  });
});
