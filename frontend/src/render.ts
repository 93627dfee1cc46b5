/**
 * Drawing one pane on a canvas. A frame queries the scene for the visible rectangle only, batches
 * boxes by (fill, shape, dash) into a few paths, and draws labels only when they are legible
 * (level of detail from `lodFor`). Label truncation is measured once per (label, width) in graph
 * units, so zooming never re-measures.
 */
import { darken, SOURCE_RED, textOn } from './colors';
import { BAR_HEIGHT, lodFor, visibleRect, type Box, type Scene, type View } from './scene';
import { NodeKind } from './types';

export interface Theme {
  background: string;
  text: string;
  containerFill: string;
  selected: string;
  highlight: string;
}

export const LIGHT: Theme = {
  background: '#ffffff',
  text: '#1f1f1f',
  containerFill: 'rgba(0,0,0,0.015)',
  selected: 'rgb(128,150,247)',
  highlight: 'rgb(243,183,101)',
};
export const DARK: Theme = {
  background: '#1a1a1a',
  text: '#e8e8e8',
  containerFill: 'rgba(255,255,255,0.03)',
  selected: 'rgb(128,150,247)',
  highlight: 'rgb(243,183,101)',
};

const FONT_FAMILY = 'Arial, Helvetica, sans-serif';
export function fontSizeFor(kind: number): number {
  return kind === NodeKind.LEAF ? 6 : 8;
}

export function dashFor(kind: number): number[] {
  if (kind === NodeKind.API_LIST) return [4, 2];
  if (kind === NodeKind.MULTI_COLLECTION) return [1.5, 1.5];
  return [];
}

const truncCache = new Map<string, string>();
const strokeCache = new Map<string, string>();
const textCache = new Map<string, string>();
function strokeOf(fill: string): string {
  let c = strokeCache.get(fill);
  if (c === undefined) strokeCache.set(fill, (c = darken(fill)));
  return c;
}
function textColorOf(fill: string): string {
  let c = textCache.get(fill);
  if (c === undefined) textCache.set(fill, (c = textOn(fill)));
  return c;
}
let measureCtx: CanvasRenderingContext2D | null = null;

/** The label cut with "…" to fit `width` graph units at the kind's font size. */
export function truncate(label: string, width: number, size: number, measure: (s: string) => number): string {
  const room = width - 4;
  if (measure(label) <= room) return label;
  let lo = 0, hi = label.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure(label.slice(0, mid) + '…') <= room) lo = mid;
    else hi = mid - 1;
  }
  void size;
  return lo > 0 ? label.slice(0, lo) + '…' : '';
}

function fitLabel(label: string, width: number, size: number): string {
  const key = `${size}|${width}|${label}`;
  let s = truncCache.get(key);
  if (s !== undefined) return s;
  if (!measureCtx) measureCtx = document.createElement('canvas').getContext('2d');
  const ctx = measureCtx;
  if (!ctx) return label;
  ctx.font = `${size}px ${FONT_FAMILY}`;
  s = truncate(label, width, size, (t) => ctx.measureText(t).width);
  if (truncCache.size > 200_000) truncCache.clear();
  truncCache.set(key, s);
  return s;
}

function shapePath(p: Path2D, b: Box, barOnly: boolean, rounded: boolean): void {
  const h = barOnly ? BAR_HEIGHT : b.h;
  if (b.node.nodeType === NodeKind.LEAF && !b.container && rounded) {
    p.moveTo(b.x + b.w, b.y + h / 2);
    p.ellipse(b.x + b.w / 2, b.y + h / 2, b.w / 2, h / 2, 0, 0, Math.PI * 2);
  } else if (rounded) {
    p.roundRect(b.x, b.y, b.w, h, Math.min(5, h / 2));
  } else {
    p.rect(b.x, b.y, b.w, h);
  }
}

export interface FrameInput {
  scene: Scene | null;
  view: View;
  width: number;
  height: number;
  dpr: number;
  theme: Theme;
  selected?: string;
  highlighted?: Set<string>;
  overflowMode: boolean;
  /** Filled with the keys of the marked boxes drawn (modules holding sources: `Box.mark`). */
  marked?: string[];
}

/** A mark's badge: the count of sources inside, "99+" beyond. */
export function badgeText(count: number): string {
  return count > 99 ? '99+' : String(count);
}

const BADGE_HEIGHT = 11;
const BADGE_FONT = 8;

/** The badge's width in graph units, room for its digits. */
export function badgeWidth(text: string): number {
  return Math.max(BADGE_HEIGHT, 5 + 5 * text.length);
}

const scratch: Box[] = [];

/** Draws one frame; returns how many boxes it drew. */
export function drawFrame(ctx: CanvasRenderingContext2D, f: FrameInput): number {
  const { view, dpr, theme } = f;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = theme.background;
  ctx.fillRect(0, 0, f.width, f.height);
  if (!f.scene) return 0;
  const boxes = f.scene.query(visibleRect(view, f.width, f.height), scratch);
  const lod = lodFor(view.scale);
  ctx.setTransform(dpr * view.scale, 0, 0, dpr * view.scale, dpr * view.tx, dpr * view.ty);

  // Fills: containers get a faint body and a coloured label bar; others are one bar.
  const fills = new Map<string, Path2D>();
  const bodies = new Path2D();
  for (const b of boxes) {
    if (b.container) shapePath(bodies, b, false, lod.shapes);
    let p = fills.get(b.fill);
    if (!p) fills.set(b.fill, (p = new Path2D()));
    shapePath(p, b, true, lod.shapes);
  }
  ctx.fillStyle = theme.containerFill;
  ctx.fill(bodies);
  for (const [fill, p] of fills) {
    ctx.fillStyle = fill;
    ctx.fill(p);
  }

  // Outlines: batched by stroke colour and dash pattern.
  if (lod.strokes) {
    const strokes = new Map<string, { p: Path2D; dash: number[]; color: string }>();
    for (const b of boxes) {
      const dash = dashFor(b.node.nodeType);
      const color = strokeOf(b.fill);
      const k = `${color}|${dash.join(',')}`;
      let s = strokes.get(k);
      if (!s) strokes.set(k, (s = { p: new Path2D(), dash, color }));
      shapePath(s.p, b, false, lod.shapes);
    }
    ctx.lineWidth = 1 / Math.max(1, view.scale);
    for (const s of strokes.values()) {
      ctx.setLineDash(s.dash);
      ctx.strokeStyle = s.color;
      ctx.stroke(s.p);
    }
    ctx.setLineDash([]);
  }

  // Modules holding sources (the mode "where the error is introduced"), even when their own
  // output agrees: a thick outline, and a badge with the count at the right of the label bar.
  if (f.marked) f.marked.length = 0;
  const marks = new Path2D();
  const badges = new Path2D();
  let anyMark = false;
  for (const b of boxes) {
    if (b.mark <= 0) continue;
    anyMark = true;
    f.marked?.push(b.key);
    shapePath(marks, b, false, lod.shapes);
    const w = badgeWidth(badgeText(b.mark));
    badges.roundRect(b.x + b.w - w - 2, b.y + (BAR_HEIGHT - BADGE_HEIGHT) / 2, w, BADGE_HEIGHT, BADGE_HEIGHT / 2);
  }
  if (anyMark) {
    ctx.lineWidth = Math.max(1.5, 2 / view.scale);
    ctx.strokeStyle = SOURCE_RED;
    ctx.stroke(marks);
    ctx.fillStyle = SOURCE_RED;
    ctx.fill(badges);
  }

  // Highlights (search/filter hits), then the selection on top.
  if (f.highlighted && f.highlighted.size) {
    const p = new Path2D();
    for (const b of boxes) if (f.highlighted.has(b.key)) shapePath(p, b, !b.container, lod.shapes);
    ctx.lineWidth = 2 / view.scale;
    ctx.strokeStyle = theme.highlight;
    ctx.stroke(p);
  }
  if (f.selected) {
    const b = f.scene.byKey.get(f.selected);
    if (b) {
      const p = new Path2D();
      shapePath(p, b, false, true);
      ctx.lineWidth = Math.max(1.5, 2.5 / view.scale);
      ctx.strokeStyle = f.overflowMode ? theme.highlight : theme.selected;
      ctx.stroke(p);
    }
  }

  if (lod.labels) {
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    let font = '';
    let color = '';
    for (const b of boxes) {
      // A label narrower than a few characters on screen is noise: skip it.
      if (b.w * view.scale < 24) continue;
      const size = fontSizeFor(b.node.nodeType);
      if (size * view.scale < 4.5) continue;
      const f2 = `${size}px ${FONT_FAMILY}`;
      if (f2 !== font) ctx.font = font = f2;
      // A badge sits at the right end: the centred label keeps clear of it on both sides.
      const room = b.mark > 0 ? b.w - 2 * (badgeWidth(badgeText(b.mark)) + 2) : b.w;
      const text = fitLabel(b.node.label, room, size);
      if (!text) continue;
      const c = textColorOf(b.fill);
      if (c !== color) ctx.fillStyle = color = c;
      ctx.fillText(text, b.x + b.w / 2, b.y + BAR_HEIGHT / 2 + 0.5);
    }
    if (anyMark) {
      ctx.font = `bold ${BADGE_FONT}px ${FONT_FAMILY}`;
      ctx.fillStyle = '#ffffff';
      for (const b of boxes) {
        if (b.mark <= 0) continue;
        const text = badgeText(b.mark);
        const w = badgeWidth(text);
        ctx.fillText(text, b.x + b.w - w / 2 - 2, b.y + BAR_HEIGHT / 2 + 0.5);
      }
    }
  }
  return boxes.length;
}

/**
 * How a minimap maps graph units to its pixels: the graph's width always fills the minimap's
 * width; its height fills the minimap's height when the graph is taller than that (a 48-layer
 * model stays a readable column, not a 1-px line), else it keeps the same scale as the width.
 */
export interface MiniMapping {
  sx: number;
  sy: number;
  ox: number;
  oy: number;
}

export function minimapMapping(bounds: { x0: number; y0: number; x1: number; y1: number }, w: number, h: number): MiniMapping {
  const bw = Math.max(1, bounds.x1 - bounds.x0);
  const bh = Math.max(1, bounds.y1 - bounds.y0);
  const sx = w / bw;
  const sy = Math.min(sx, h / bh);
  return { sx, sy, ox: -bounds.x0 * sx, oy: -bounds.y0 * sy };
}

/** A graph-unit rectangle in minimap pixels, clipped to the minimap (at least 2 px each way). */
export function minimapRect(m: MiniMapping, r: { x0: number; y0: number; x1: number; y1: number }, w: number, h: number): { x0: number; y0: number; x1: number; y1: number } {
  const clip = (v: number, hi: number) => Math.max(0, Math.min(hi, v));
  let x0 = clip(r.x0 * m.sx + m.ox, w), x1 = clip(r.x1 * m.sx + m.ox, w);
  let y0 = clip(r.y0 * m.sy + m.oy, h), y1 = clip(r.y1 * m.sy + m.oy, h);
  if (x1 - x0 < 2) [x0, x1] = x0 + 2 > w ? [w - 2, w] : [x0, x0 + 2];
  if (y1 - y0 < 2) [y0, y1] = y0 + 2 > h ? [h - 2, h] : [y0, y0 + 2];
  return { x0, y0, x1, y1 };
}

/** Every box into the minimap once (label bars at least 1 px tall, expanded modules outlined). */
export function drawMinimap(ctx: CanvasRenderingContext2D, scene: Scene | null, w: number, h: number, dpr: number, theme: Theme): MiniMapping {
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = theme.background;
  ctx.fillRect(0, 0, w, h);
  if (!scene) return { sx: 1, sy: 1, ox: 0, oy: 0 };
  const m = minimapMapping(scene.bounds, w, h);
  const fills = new Map<string, Path2D>();
  const outline = new Path2D();
  const bar = Math.max(1, BAR_HEIGHT * m.sy);
  for (const b of scene.boxes) {
    const x = b.x * m.sx + m.ox, y = b.y * m.sy + m.oy, bw = Math.max(1, b.w * m.sx);
    if (b.container) outline.rect(Math.round(x) + 0.5, Math.round(y) + 0.5, Math.max(1, Math.round(bw) - 1), Math.max(1, Math.round(b.h * m.sy) - 1));
    let p = fills.get(b.fill);
    if (!p) fills.set(b.fill, (p = new Path2D()));
    p.rect(x, y, bw, bar);
  }
  for (const [fill, p] of fills) {
    ctx.fillStyle = fill;
    ctx.fill(p);
  }
  ctx.lineWidth = 1;
  ctx.strokeStyle = '#999999';
  ctx.stroke(outline);
  return m;
}
