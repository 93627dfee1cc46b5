/**
 * The laid-out boxes of one pane and a spatial index over them, so a frame touches only what is on
 * screen. The server sends positions (msprobe's layout); this module never moves a box.
 *
 * Index: expanded boxes (containers, few, tall) are kept in DFS order and always tested; every other
 * box is one label-bar high (15) and sits in an array sorted by y, found by binary search. Drawing
 * order is containers (parents before children) and then the small boxes on top of them.
 */
import type { RenderNode } from './types';

export const BAR_HEIGHT = 15;

/** No box marked (every mode but "where the error is introduced"). */
const noMark = (): number => 0;

export interface Box {
  key: string;
  node: RenderNode;
  x: number;
  y: number;
  w: number;
  h: number;
  depth: number;
  container: boolean;
  fill: string;
  /** Sources of error inside this module (the mode "where the error is introduced"): outlined and badged when above 0. */
  mark: number;
}

export interface Rect {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

export class Scene {
  readonly boxes: Box[] = [];
  readonly byKey = new Map<string, Box>();
  readonly byName = new Map<string, Box>();
  containers: Box[] = [];
  small: Box[] = [];
  bounds: Rect = { x0: 0, y0: 0, x1: 1, y1: 1 };
  root: Box | undefined;

  constructor(data: Record<string, RenderNode>, fill: (n: RenderNode) => string, mark: (n: RenderNode) => number = noMark) {
    const depthOf = new Map<string, number>();
    for (const [key, node] of Object.entries(data)) {
      const parentDepth = node.parentNode ? depthOf.get(node.parentNode) : undefined;
      const depth = parentDepth === undefined ? 0 : parentDepth + 1;
      depthOf.set(key, depth);
      const b: Box = {
        key,
        node,
        x: node.x,
        y: node.y,
        w: node.width,
        h: node.height,
        depth,
        container: Boolean(node.expand) && node.height > BAR_HEIGHT,
        fill: fill(node),
        mark: mark(node),
      };
      this.boxes.push(b);
      this.byKey.set(key, b);
      this.byName.set(node.name, b);
      if (node.isRoot && !this.root) this.root = b;
    }
    this.reindex();
  }

  reindex(): void {
    this.containers = this.boxes.filter((b) => b.container);
    this.small = this.boxes.filter((b) => !b.container).sort((a, b) => a.y - b.y);
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const b of this.boxes) {
      x0 = Math.min(x0, b.x);
      y0 = Math.min(y0, b.y);
      x1 = Math.max(x1, b.x + b.w);
      y1 = Math.max(y1, b.y + b.h);
    }
    this.bounds = this.boxes.length ? { x0, y0, x1, y1 } : { x0: 0, y0: 0, x1: 1, y1: 1 };
  }

  recolor(fill: (n: RenderNode) => string, mark: (n: RenderNode) => number = noMark): void {
    for (const b of this.boxes) {
      b.fill = fill(b.node);
      b.mark = mark(b.node);
    }
  }

  /** Boxes that intersect r, containers first (DFS order), then small boxes by y. */
  query(r: Rect, out: Box[] = []): Box[] {
    out.length = 0;
    for (const b of this.containers) if (intersects(b, r)) out.push(b);
    const s = this.small;
    // First small box whose bottom may reach r.y0: every small box has h <= BAR_HEIGHT.
    let lo = 0, hi = s.length;
    const yMin = r.y0 - BAR_HEIGHT;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s[mid].y < yMin) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < s.length && s[i].y <= r.y1; i++) if (intersects(s[i], r)) out.push(s[i]);
    return out;
  }

  /** The innermost box under a graph-space point. */
  hit(x: number, y: number): Box | undefined {
    const found = this.query({ x0: x, y0: y, x1: x, y1: y });
    let best: Box | undefined;
    for (const b of found) {
      if (!b.container) return b; // small boxes never overlap each other and sit inside containers
      if (!best || b.depth > best.depth) best = b;
    }
    return best;
  }
}

export function intersects(b: { x: number; y: number; w: number; h: number }, r: Rect): boolean {
  return b.x <= r.x1 && b.x + b.w >= r.x0 && b.y <= r.y1 && b.y + b.h >= r.y0;
}

/** View transform: screen = graph * scale + (tx, ty). */
export interface View {
  tx: number;
  ty: number;
  scale: number;
}

export const MIN_SCALE = 0.02;
export const MAX_SCALE = 8;

export function clampScale(s: number): number {
  return Math.min(MAX_SCALE, Math.max(MIN_SCALE, s));
}

export function visibleRect(v: View, width: number, height: number): Rect {
  return { x0: -v.tx / v.scale, y0: -v.ty / v.scale, x1: (width - v.tx) / v.scale, y1: (height - v.ty) / v.scale };
}

/** Zoom by factor keeping the screen point (sx, sy) fixed. */
export function zoomAt(v: View, factor: number, sx: number, sy: number): View {
  const scale = clampScale(v.scale * factor);
  const k = scale / v.scale;
  return { scale, tx: sx - (sx - v.tx) * k, ty: sy - (sy - v.ty) * k };
}

/** A view showing the whole rect, centred, with a margin, capped at a readable zoom. */
export function fitView(r: Rect, width: number, height: number, margin = 16, maxScale = 2): View {
  const w = Math.max(1, r.x1 - r.x0);
  const h = Math.max(1, r.y1 - r.y0);
  const scale = clampScale(Math.min((width - 2 * margin) / w, (height - 2 * margin) / h, maxScale));
  return { scale, tx: (width - w * scale) / 2 - r.x0 * scale, ty: Math.max(margin, (height - h * scale) / 2) - r.y0 * scale };
}

/** A view at the given scale with the graph point (gx, gy) at the screen point (sx, sy). */
export function centerOn(gx: number, gy: number, scale: number, sx: number, sy: number): View {
  return { scale, tx: sx - gx * scale, ty: sy - gy * scale };
}

/** Level of detail, from how tall one label bar is on screen. */
export interface Lod {
  labels: boolean;
  strokes: boolean;
  shapes: boolean;
}

export function lodFor(scale: number): Lod {
  const bar = BAR_HEIGHT * scale;
  // Labels are 8 graph units (6 for leaves): below ~5 px on screen they cannot be read.
  return { labels: bar >= 10, strokes: bar >= 3, shapes: bar >= 5 };
}
