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

export const FONT_FAMILY = 'Arial, Helvetica, sans-serif';
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

/** A canvas to measure text with (none outside a browser). */
function measurer(): CanvasRenderingContext2D | null {
  if (!measureCtx && typeof document !== 'undefined') measureCtx = document.createElement('canvas').getContext('2d');
  return measureCtx;
}

/**
 * How wide a text is in `font` (CSS px), as the canvas measures it; without a canvas (outside a
 * browser), an estimate of 0.6 em a character.
 */
export function textWidth(text: string, font: string): number {
  const ctx = measurer();
  if (!ctx) return 0.6 * Number(/([\d.]+)px/.exec(font)?.[1] ?? 8) * [...text].length;
  ctx.font = font;
  return ctx.measureText(text).width;
}

function fitLabel(label: string, width: number, size: number): string {
  const key = `${size}|${width}|${label}`;
  let s = truncCache.get(key);
  if (s !== undefined) return s;
  const ctx = measurer();
  if (!ctx) return label;
  ctx.font = `${size}px ${FONT_FAMILY}`;
  s = truncate(label, width, size, (t) => ctx.measureText(t).width);
  if (truncCache.size > 200_000) truncCache.clear();
  truncCache.set(key, s);
  return s;
}

/** What a shape is drawn into: a canvas Path2D, or an SVG path ([`SvgPath`]). */
export interface PathSink {
  moveTo(x: number, y: number): void;
  ellipse(cx: number, cy: number, rx: number, ry: number, rotation: number, start: number, end: number): void;
  roundRect(x: number, y: number, w: number, h: number, r: number): void;
  rect(x: number, y: number, w: number, h: number): void;
}

function shapePath(p: PathSink, b: Box, barOnly: boolean, rounded: boolean): void {
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

/**
 * Where a frame is painted: the pane's canvas ([`CanvasPainter`]) or an SVG picture of it
 * ([`SvgPainter`]). One drawing code ([`paintFrame`]) serves both, so a picture is what is drawn.
 */
export interface Painter<P extends PathSink> {
  path(): P;
  /** The whole frame in one colour (screen units). */
  background(color: string, width: number, height: number): void;
  /** From now on, graph units: screen = graph × scale + (tx, ty). */
  view(scale: number, tx: number, ty: number): void;
  fill(p: P, color: string): void;
  stroke(p: P, color: string, width: number, dash: number[]): void;
  /** Text centred on (x, y), or starting at x (`start`), vertically centred on y, in `font` (CSS shorthand). */
  text(text: string, x: number, y: number, font: string, color: string, align?: TextAlign): void;
}

/** Where a text sits against its x: centred on it, or starting at it. */
export type TextAlign = 'center' | 'start';

/** Painting onto a canvas (device pixels: `dpr` per CSS pixel). */
export class CanvasPainter implements Painter<Path2D> {
  private font = '';
  private textColor = '';
  private align: TextAlign = 'center';
  constructor(
    private readonly ctx: CanvasRenderingContext2D,
    private readonly dpr: number,
  ) {}
  path(): Path2D {
    return new Path2D();
  }
  background(color: string, width: number, height: number): void {
    const c = this.ctx;
    c.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    c.fillStyle = color;
    c.fillRect(0, 0, width, height);
  }
  view(scale: number, tx: number, ty: number): void {
    const d = this.dpr;
    this.ctx.setTransform(d * scale, 0, 0, d * scale, d * tx, d * ty);
    this.ctx.textAlign = this.align = 'center';
    this.ctx.textBaseline = 'middle';
    this.font = this.textColor = '';
  }
  fill(p: Path2D, color: string): void {
    this.ctx.fillStyle = color;
    // The fill style is also the text's colour: the next text sets its own again.
    this.textColor = '';
    this.ctx.fill(p);
  }
  stroke(p: Path2D, color: string, width: number, dash: number[]): void {
    const c = this.ctx;
    c.setLineDash(dash);
    c.lineWidth = width;
    c.strokeStyle = color;
    c.stroke(p);
    if (dash.length) c.setLineDash([]);
  }
  text(text: string, x: number, y: number, font: string, color: string, align: TextAlign = 'center'): void {
    const c = this.ctx;
    if (align !== this.align) {
      c.textAlign = align === 'start' ? 'left' : 'center';
      this.align = align;
    }
    if (font !== this.font) c.font = this.font = font;
    if (color !== this.textColor) c.fillStyle = this.textColor = color;
    c.fillText(text, x, y);
  }
}

const num = (v: number) => String(Math.round(v * 100) / 100);
/** Scales and line widths: finer (a zoomed-out view's scale is 0.02). */
const fine = (v: number) => String(Math.round(v * 1e4) / 1e4);

/** An SVG path's `d`, built by the same calls as a Path2D. */
export class SvgPath implements PathSink {
  d = '';
  moveTo(x: number, y: number): void {
    this.d += `M${num(x)} ${num(y)}`;
  }
  ellipse(cx: number, cy: number, rx: number, ry: number): void {
    // A whole ellipse (the only kind drawn): two half arcs from its right end.
    const [r, s] = [num(rx), num(ry)];
    this.d += `M${num(cx + rx)} ${num(cy)}A${r} ${s} 0 1 0 ${num(cx - rx)} ${num(cy)}A${r} ${s} 0 1 0 ${num(cx + rx)} ${num(cy)}Z`;
  }
  roundRect(x: number, y: number, w: number, h: number, radius: number): void {
    const r = Math.max(0, Math.min(radius, w / 2, h / 2));
    const a = (dx: number, dy: number) => `a${num(r)} ${num(r)} 0 0 1 ${num(dx)} ${num(dy)}`;
    this.d += `M${num(x + r)} ${num(y)}h${num(w - 2 * r)}${a(r, r)}v${num(h - 2 * r)}${a(-r, r)}h${num(-(w - 2 * r))}${a(-r, -r)}v${num(-(h - 2 * r))}${a(r, -r)}Z`;
  }
  rect(x: number, y: number, w: number, h: number): void {
    this.d += `M${num(x)} ${num(y)}h${num(w)}v${num(h)}h${num(-w)}Z`;
  }
}

/**
 * Characters XML 1.0 has no place for (its `Char` production: C0 controls but tab, LF and CR; lone
 * surrogates; U+FFFE, U+FFFF), which no escape can write either: a name holding one would make the SVG
 * a file no editor opens.
 */
const XML_FORBIDDEN = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

/**
 * Text as SVG character data or an attribute value (a node's name is data: `<`, `&`, quotes escaped;
 * what XML forbids shown as U+FFFD, the replacement character). Every SVG the page writes goes through it.
 */
export function xmlText(s: string): string {
  return s.replace(XML_FORBIDDEN, '\uFFFD').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const baselineCache = new Map<string, number>();
/**
 * How far the alphabetic baseline (SVG's) sits below the canvas's `middle` baseline, which the
 * labels are drawn at (graph units): the same text lands on the same pixels in both. Measured
 * once per font; about 0.35 em without a canvas.
 */
function baselineBelowMiddle(font: string, size: number): number {
  let v = baselineCache.get(font);
  if (v === undefined) {
    const ctx = measurer();
    v = 0.35 * size;
    if (ctx) {
      // Measured where the labels are drawn: "M" has no descender, so its box ends on the baseline.
      ctx.font = font;
      ctx.textBaseline = 'middle';
      const below = ctx.measureText('M').actualBoundingBoxDescent;
      if (Number.isFinite(below)) v = below;
    }
    baselineCache.set(font, v);
  }
  return v;
}

/** Painting into an SVG document of the frame's size (CSS pixels), as [`CanvasPainter`] paints. */
export class SvgPainter implements Painter<SvgPath> {
  private readonly parts: string[] = [];
  private group = false;
  private width = 1;
  private height = 1;
  path(): SvgPath {
    return new SvgPath();
  }
  background(color: string, width: number, height: number): void {
    this.width = width;
    this.height = height;
    this.parts.push(`<rect width="${num(width)}" height="${num(height)}" fill="${xmlText(color)}"/>`);
  }
  view(scale: number, tx: number, ty: number): void {
    if (this.group) this.parts.push('</g>');
    this.parts.push(`<g transform="matrix(${fine(scale)} 0 0 ${fine(scale)} ${num(tx)} ${num(ty)})">`);
    this.group = true;
  }
  fill(p: SvgPath, color: string): void {
    if (p.d) this.parts.push(`<path d="${p.d}" fill="${xmlText(color)}"/>`);
  }
  stroke(p: SvgPath, color: string, width: number, dash: number[]): void {
    if (!p.d) return;
    const dashes = dash.length ? ` stroke-dasharray="${dash.join(' ')}"` : '';
    this.parts.push(`<path d="${p.d}" fill="none" stroke="${xmlText(color)}" stroke-width="${fine(width)}"${dashes}/>`);
  }
  text(text: string, x: number, y: number, font: string, color: string, align: TextAlign = 'center'): void {
    const [, weight, size, family] = /^(bold )?([\d.]+)px (.*)$/.exec(font) ?? [];
    const style = `font-family="${xmlText(family ?? FONT_FAMILY)}" font-size="${size ?? 8}"${weight ? ' font-weight="bold"' : ''}`;
    const baseline = y + baselineBelowMiddle(font, Number(size ?? 8));
    this.parts.push(`<text x="${num(x)}" y="${num(baseline)}" ${style} fill="${xmlText(color)}" text-anchor="${align === 'start' ? 'start' : 'middle'}">${xmlText(text)}</text>`);
  }
  /** The document. */
  svg(): string {
    const end = this.group ? '</g>' : '';
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${num(this.width)}" height="${num(this.height)}" viewBox="0 0 ${num(this.width)} ${num(this.height)}">${this.parts.join('')}${end}</svg>`;
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

/** Draws one frame onto a canvas; returns how many boxes it drew. */
export function drawFrame(ctx: CanvasRenderingContext2D, f: FrameInput): number {
  return paintFrame(new CanvasPainter(ctx, f.dpr), f);
}

/** One frame as an SVG document (what [`drawFrame`] draws, in the same colours). */
export function frameSvg(f: FrameInput): string {
  const painter = new SvgPainter();
  paintFrame(painter, { ...f, marked: undefined });
  return painter.svg();
}

/** Paints one frame; returns how many boxes it drew. */
export function paintFrame<P extends PathSink>(out: Painter<P>, f: FrameInput): number {
  out.background(f.theme.background, f.width, f.height);
  return paintBoxes(out, f);
}

/**
 * Paints the boxes of the frame's view that its rectangle shows (on what is already painted);
 * returns how many boxes it drew.
 */
export function paintBoxes<P extends PathSink>(out: Painter<P>, f: FrameInput): number {
  const { view, theme } = f;
  if (!f.scene) return 0;
  const boxes = f.scene.query(visibleRect(view, f.width, f.height), scratch);
  const lod = lodFor(view.scale);
  out.view(view.scale, view.tx, view.ty);

  // Fills: containers get a faint body and a coloured label bar; others are one bar.
  const fills = new Map<string, P>();
  const bodies = out.path();
  for (const b of boxes) {
    if (b.container) shapePath(bodies, b, false, lod.shapes);
    let p = fills.get(b.fill);
    if (!p) fills.set(b.fill, (p = out.path()));
    shapePath(p, b, true, lod.shapes);
  }
  out.fill(bodies, theme.containerFill);
  for (const [fill, p] of fills) out.fill(p, fill);

  // Outlines: batched by stroke colour and dash pattern.
  if (lod.strokes) {
    const strokes = new Map<string, { p: P; dash: number[]; color: string }>();
    for (const b of boxes) {
      const dash = dashFor(b.node.nodeType);
      const color = strokeOf(b.fill);
      const k = `${color}|${dash.join(',')}`;
      let s = strokes.get(k);
      if (!s) strokes.set(k, (s = { p: out.path(), dash, color }));
      shapePath(s.p, b, false, lod.shapes);
    }
    const width = 1 / Math.max(1, view.scale);
    for (const s of strokes.values()) out.stroke(s.p, s.color, width, s.dash);
  }

  // Modules holding sources (the mode "where the error is introduced"), even when their own
  // output agrees: a thick outline, and a badge with the count at the right of the label bar.
  if (f.marked) f.marked.length = 0;
  const marks = out.path();
  const badges = out.path();
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
    out.stroke(marks, SOURCE_RED, Math.max(1.5, 2 / view.scale), []);
    out.fill(badges, SOURCE_RED);
  }

  // Highlights (search/filter hits), then the selection on top.
  if (f.highlighted && f.highlighted.size) {
    const p = out.path();
    for (const b of boxes) if (f.highlighted.has(b.key)) shapePath(p, b, !b.container, lod.shapes);
    out.stroke(p, theme.highlight, 2 / view.scale, []);
  }
  if (f.selected) {
    const b = f.scene.byKey.get(f.selected);
    if (b) {
      const p = out.path();
      shapePath(p, b, false, true);
      out.stroke(p, f.overflowMode ? theme.highlight : theme.selected, Math.max(1.5, 2.5 / view.scale), []);
    }
  }

  if (lod.labels) {
    for (const b of boxes) {
      // A label narrower than a few characters on screen is noise: skip it.
      if (b.w * view.scale < 24) continue;
      const size = fontSizeFor(b.node.nodeType);
      if (size * view.scale < 4.5) continue;
      // A badge sits at the right end: the centred label keeps clear of it on both sides.
      const room = b.mark > 0 ? b.w - 2 * (badgeWidth(badgeText(b.mark)) + 2) : b.w;
      const text = fitLabel(b.node.label, room, size);
      if (!text) continue;
      out.text(text, b.x + b.w / 2, b.y + BAR_HEIGHT / 2 + 0.5, `${size}px ${FONT_FAMILY}`, textColorOf(b.fill));
    }
    if (anyMark) {
      for (const b of boxes) {
        if (b.mark <= 0) continue;
        const text = badgeText(b.mark);
        const w = badgeWidth(text);
        out.text(text, b.x + b.w - w / 2 - 2, b.y + BAR_HEIGHT / 2 + 0.5, `bold ${BADGE_FONT}px ${FONT_FAMILY}`, '#ffffff');
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

/**
 * Every box into the minimap once (label bars at least 1 px tall, expanded modules outlined).
 * Each bar is outlined in its fill darkened, as the graph draws it: a white box (every box of a
 * build file, the golden side) shows on the white background, as in msprobe's minimap.
 */
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
  // Half a CSS pixel (one device pixel on a 2x screen): an outline, not a second fill.
  ctx.lineWidth = 0.5;
  for (const [fill, p] of fills) {
    ctx.fillStyle = fill;
    ctx.fill(p);
    ctx.strokeStyle = strokeOf(fill);
    ctx.stroke(p);
  }
  ctx.lineWidth = 1;
  ctx.strokeStyle = '#999999';
  ctx.stroke(outline);
  // Sources (and modules holding them, in the mode "where the error is introduced"): a red mark
  // big enough to see at the minimap's scale, drawn last so nothing covers it.
  const marks = new Path2D();
  for (const b of scene.boxes) {
    if (b.fill !== SOURCE_RED && !(b.mark > 0)) continue;
    const x = b.x * m.sx + m.ox, y = b.y * m.sy + m.oy;
    marks.rect(Math.round(x) - 1, Math.round(y) - 1, Math.max(4, b.w * m.sx) + 2, Math.max(3, bar) + 2);
  }
  ctx.lineWidth = 1.5;
  ctx.strokeStyle = SOURCE_RED;
  ctx.stroke(marks);
  return m;
}
