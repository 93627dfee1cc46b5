/**
 * A picture of a whole pane: every box of its scene as laid out now (what is expanded, the parts
 * outside the view too), under a title block (the file, where it is, the colour mode, in words) and
 * the colour legend of the mode. One layout serves the SVG and the PNG; the boxes are painted by
 * the pane's own drawing code (`paintBoxes`), the title and the legend by the same painter.
 *
 * The SVG is drawn at one picture pixel per graph unit (the pane at zoom 1): as large as the
 * scene. The PNG is drawn at two pixels per graph unit, scaled down when that would pass what a
 * browser can hold in one canvas (`PNG_MAX_SIDE` a side, `PNG_MAX_AREA` in all); the title then
 * says so.
 */
import { darken, SOURCE_RED } from './colors';
import { CanvasPainter, FONT_FAMILY, paintBoxes, SvgPainter, textWidth, type Painter, type PathSink, type Theme } from './render';
import type { Rect, Scene, View } from './scene';

/** One entry of a colour legend: a swatch and its words (the toolbar's legend and the picture's). */
export interface LegendEntry {
  color: string;
  label: string;
  /** The longer explanation (the toolbar's tooltip). */
  tip?: string;
  testid?: string;
  /** The swatch's outline when it is not its fill darkened (a module holding sources). */
  border?: string;
  /** A badge on the swatch (a module holding sources: how many). */
  badge?: string;
  /** A shape's entry (the shape legend): drawn as that shape, outlined, not as a colour. */
  shape?: ShapeKind;
}

/** The shapes of boxes: a module's rounded box, an unexpandable node's ellipse, an API list's dashed box, fused operators' dotted box. */
export type ShapeKind = 'module' | 'leaf' | 'apilist' | 'fused';

/** The words above the graph: a title, lines under it, and the legend. */
export interface PictureHeader {
  title: string;
  lines: string[];
  legend: LegendEntry[];
  /** What the boxes' shapes mean, after the colours (entries with `shape`). */
  shapes?: LegendEntry[];
}

/** What a whole-graph picture shows: the pane's scene and marks, in its theme. */
export interface PictureInput {
  scene: Scene;
  theme: Theme;
  selected?: string;
  highlighted?: Set<string>;
  overflowMode: boolean;
  header: PictureHeader;
}

/** The widest and tallest PNG (px), and its largest area: what Chromium, Firefox and Safari all draw. */
export const PNG_MAX_SIDE = 16_384;
export const PNG_MAX_AREA = 100_000_000;
/** PNG pixels per graph unit when nothing caps it (the pane at zoom 1 on a 2× screen). */
export const PNG_SCALE = 2;
/** SVG pixels per graph unit. */
export const SVG_SCALE = 1;

const MARGIN = 16;
const MIN_WIDTH = 480;
const TITLE_FONT = `bold 16px ${FONT_FAMILY}`;
const LINE_FONT = `12px ${FONT_FAMILY}`;
const LEGEND_FONT = `12px ${FONT_FAMILY}`;
const BADGE_FONT = `bold 8px ${FONT_FAMILY}`;
const TITLE_HEIGHT = 22;
const LINE_HEIGHT = 18;
const SWATCH_W = 18;
const SWATCH_H = 12;
const SWATCH_GAP = 5;
const ITEM_GAP = 16;
const HEADER_GAP = 12;
/** The shape legend's fill and outline (the toolbar's `.legend-shape`). */
const SHAPE_FILL = '#e6e6e6';
const SHAPE_BORDER = '#8c8c8c';

/** Where each thing of a picture goes (picture px), and the graph's transform. */
export interface PictureLayout {
  width: number;
  height: number;
  /** Picture px per graph unit. */
  scale: number;
  /** The graph's transform: picture = graph × scale + (tx, ty). */
  view: View;
  title: { text: string; x: number; y: number };
  lines: { text: string; x: number; y: number }[];
  legend: { entry: LegendEntry; x: number; y: number }[];
  /** The scale was lowered to stay within the PNG's limits. */
  capped: boolean;
}

/** The layout at a given scale: the header's rows wrap the legend at the picture's width. */
export function layoutAt(bounds: Rect, header: PictureHeader, scale: number, maxWidth = Infinity): PictureLayout {
  const gw = Math.max(0, bounds.x1 - bounds.x0) * scale;
  const gh = Math.max(0, bounds.y1 - bounds.y0) * scale;
  const itemWidth = (e: LegendEntry) => SWATCH_W + SWATCH_GAP + textWidth(e.label, LEGEND_FONT);
  const entries = [...header.legend, ...(header.shapes ?? [])];
  const widest = Math.max(
    textWidth(header.title, TITLE_FONT),
    ...header.lines.map((l) => textWidth(l, LINE_FONT)),
    ...entries.map(itemWidth),
  );
  // A long title is cut at `maxWidth`; the graph is never cut (its scale is what keeps it in bounds).
  const width = Math.ceil(Math.max(MIN_WIDTH, gw + 2 * MARGIN, Math.min(maxWidth, widest + 2 * MARGIN)));
  let y = MARGIN + TITLE_HEIGHT / 2;
  const title = { text: header.title, x: MARGIN, y };
  y += TITLE_HEIGHT / 2;
  const lines = header.lines.map((text) => {
    y += LINE_HEIGHT / 2;
    const at = { text, x: MARGIN, y };
    y += LINE_HEIGHT / 2;
    return at;
  });
  const legend: PictureLayout['legend'] = [];
  let x = MARGIN;
  if (entries.length) y += 4 + LINE_HEIGHT / 2;
  for (const entry of entries) {
    const w = itemWidth(entry);
    if (x > MARGIN && x + w > width - MARGIN) {
      x = MARGIN;
      y += LINE_HEIGHT;
    }
    legend.push({ entry, x, y });
    x += w + ITEM_GAP;
  }
  if (entries.length) y += LINE_HEIGHT / 2;
  const top = Math.ceil(y + HEADER_GAP);
  const height = Math.ceil(top + gh + MARGIN);
  const view = { scale, tx: (width - gw) / 2 - bounds.x0 * scale, ty: top - bounds.y0 * scale };
  return { width, height, scale, view, title, lines, legend, capped: false };
}

const fitsPng = (l: PictureLayout) => l.width <= PNG_MAX_SIDE && l.height <= PNG_MAX_SIDE && l.width * l.height <= PNG_MAX_AREA;

/**
 * The PNG's layout: at `PNG_SCALE` when it fits the limits, else at the largest scale that does,
 * with `capped` set and `note(percent)` (the scale kept, in % of `PNG_SCALE`) as a last line.
 */
export function pngLayout(bounds: Rect, header: PictureHeader, note: (percent: number) => string): PictureLayout {
  const full = layoutAt(bounds, header, PNG_SCALE, PNG_MAX_SIDE);
  if (fitsPng(full)) return full;
  const noted = (scale: number) => ({ ...header, lines: [...header.lines, note(Math.max(0.1, Math.floor((scale / PNG_SCALE) * 1000) / 10))] });
  let lo = 0;
  let hi = PNG_SCALE;
  for (let i = 0; i < 40; i++) {
    const mid = (lo + hi) / 2;
    if (fitsPng(layoutAt(bounds, noted(mid), mid, PNG_MAX_SIDE))) lo = mid;
    else hi = mid;
  }
  return { ...layoutAt(bounds, noted(lo), lo, PNG_MAX_SIDE), capped: true };
}

/** Paints the title, the lines and the legend (picture px), then every box of the scene. */
function paintPicture<P extends PathSink>(out: Painter<P>, l: PictureLayout, p: PictureInput): void {
  const theme = p.theme;
  out.background(theme.background, l.width, l.height);
  out.view(1, 0, 0);
  out.text(l.title.text, l.title.x, l.title.y, TITLE_FONT, theme.text, 'start');
  for (const line of l.lines) out.text(line.text, line.x, line.y, LINE_FONT, theme.text, 'start');
  for (const { entry, x, y } of l.legend) {
    if (entry.shape) {
      // As the toolbar's `.legend-shape` draws them: grey-filled module and ellipse, white-filled dashed and dotted boxes.
      const outline = out.path();
      if (entry.shape === 'leaf') {
        outline.moveTo(x + SWATCH_W, y);
        outline.ellipse(x + SWATCH_W / 2, y, SWATCH_W / 2, SWATCH_H / 2, 0, 0, Math.PI * 2);
      } else {
        outline.roundRect(x, y - SWATCH_H / 2, SWATCH_W, SWATCH_H, 4);
      }
      const open = entry.shape === 'apilist' || entry.shape === 'fused';
      out.fill(outline, open ? '#ffffff' : SHAPE_FILL);
      out.stroke(outline, SHAPE_BORDER, 1, entry.shape === 'apilist' ? [4, 2] : entry.shape === 'fused' ? [1, 2] : []);
      out.text(entry.label, x + SWATCH_W + SWATCH_GAP, y, LEGEND_FONT, theme.text, 'start');
      continue;
    }
    const swatch = out.path();
    swatch.rect(x, y - SWATCH_H / 2, SWATCH_W, SWATCH_H);
    out.fill(swatch, entry.color);
    out.stroke(swatch, entry.border ?? darken(entry.color), entry.border ? 2 : 1, []);
    if (entry.badge) {
      const badge = out.path();
      badge.roundRect(x + SWATCH_W - 10, y - 5, 10, 10, 5);
      out.fill(badge, SOURCE_RED);
      out.text(entry.badge, x + SWATCH_W - 5, y, BADGE_FONT, '#ffffff');
    }
    out.text(entry.label, x + SWATCH_W + SWATCH_GAP, y, LEGEND_FONT, theme.text, 'start');
  }
  paintBoxes(out, {
    scene: p.scene,
    view: l.view,
    width: l.width,
    height: l.height,
    dpr: 1,
    theme,
    selected: p.selected,
    highlighted: p.highlighted,
    overflowMode: p.overflowMode,
  });
}

/** The whole graph as an SVG document, at `SVG_SCALE`. */
export function wholeSvg(p: PictureInput): string {
  const painter = new SvgPainter();
  paintPicture(painter, layoutAt(p.scene.bounds, p.header, SVG_SCALE), p);
  return painter.svg();
}

/** The whole graph as a PNG (within the browser's limits: `pngLayout`). */
export function wholePng(p: PictureInput, note: (percent: number) => string): Promise<Blob> {
  const l = pngLayout(p.scene.bounds, p.header, note);
  const canvas = document.createElement('canvas');
  canvas.width = l.width;
  canvas.height = l.height;
  const ctx = canvas.getContext('2d');
  if (!ctx) return Promise.reject(new Error(`the browser gave no canvas of ${l.width}×${l.height} px`));
  paintPicture(new CanvasPainter(ctx, 1), l, p);
  return new Promise((resolve, reject) =>
    canvas.toBlob((b) => (b ? resolve(b) : reject(new Error(`the browser made no PNG of ${l.width}×${l.height} px`))), 'image/png'));
}
