/**
 * One graph pane: a canvas sized to its element (device-pixel exact), a view transform, the user's
 * gestures (click select, double-click expand, drag pan, wheel scroll, Ctrl+wheel / W S zoom,
 * A D pan, right-click menu; the page gives the keys to the pane under the pointer) and a
 * minimap with the viewport (click or drag to move).
 * Frames are drawn on demand, at most one per animation frame.
 */
import { t } from './i18n';
import { wholePng, wholeSvg, type PictureHeader, type PictureInput } from './picture';
import { drawFrame, drawMinimap, frameSvg, minimapMapping, minimapRect, type FrameInput, type MiniMapping, type Theme } from './render';
import {
  centerOn,
  clampScale,
  fitView,
  visibleRect,
  zoomAt,
  type Box,
  type Scene,
  type View,
} from './scene';

export interface PaneEvents {
  select(key: string): void;
  toggle(key: string): void;
  context(key: string, clientX: number, clientY: number): void;
  /** The minimap's own collapse button was pressed. */
  hideMinimap?(): void;
}

/**
 * The minimap's widest width, its tallest height, and its gap to the pane's edges (CSS px). It
 * scales with the pane: at most `MINI_SHARE` of its width (at least `MINI_MIN_W`) and
 * `MINI_H_SHARE` of its height, so that a narrow pane (a side panel open) keeps its graph.
 */
const MINI_MAX_W = 96;
const MINI_MIN_W = 48;
const MINI_SHARE = 0.14;
const MINI_H = 260;
const MINI_H_SHARE = 0.45;
const MINI_GAP = 8;

export class GraphPane {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private ctx: CanvasRenderingContext2D;
  private mini: HTMLCanvasElement;
  private miniCtx: CanvasRenderingContext2D;
  private miniBase: HTMLCanvasElement | null = null;
  private miniMap: MiniMapping = { sx: 1, sy: 1, ox: 0, oy: 0 };
  /** The minimap's height now (fits the graph) and the most the pane allows. */
  private miniH = MINI_H;
  private miniMaxH = MINI_H;
  /** The minimap's width now (scaled with the pane). */
  private miniW = MINI_MAX_W;
  /** The minimap's collapse button. */
  private readonly miniHide: HTMLButtonElement;
  private miniShown = true;
  scene: Scene | null = null;
  view: View = { tx: 20, ty: 20, scale: 1.5 };
  /**
   * The view is still an automatic fit (nobody panned, zoomed or revealed since), `top` (a file
   * opened: the top of the graph, readable) or `whole` (the Fit button): a resize fits again.
   */
  private fitted: 'top' | 'whole' | false = false;
  selected: string | undefined;
  highlighted = new Set<string>();
  overflowMode = false;
  private width = 1;
  private height = 1;
  private dpr = 1;
  private pending = 0;
  private hovering = false;
  lastFrameMs = 0;
  lastDrawn = 0;
  /** The keys of the marked boxes (modules holding sources) the last frame drew. */
  readonly lastMarked: string[] = [];
  frames = 0;

  constructor(
    host: HTMLElement,
    readonly side: 'NPU' | 'Bench' | 'Single',
    private events: PaneEvents,
    private theme: () => Theme,
  ) {
    this.el = host;
    host.classList.add('pane');
    this.canvas = document.createElement('canvas');
    this.canvas.className = 'pane-canvas';
    this.canvas.tabIndex = 0;
    this.canvas.dataset.testid = `${side === 'Bench' ? 'bench' : 'debug'}Canvas`;
    host.appendChild(this.canvas);
    this.mini = document.createElement('canvas');
    this.mini.className = 'minimap';
    this.mini.dataset.testid = `${side === 'Bench' ? 'bench' : 'debug'}Minimap`;
    host.appendChild(this.mini);
    this.miniHide = document.createElement('button');
    this.miniHide.className = 'minimap-hide';
    this.miniHide.dataset.testid = `${side === 'Bench' ? 'bench' : 'debug'}MinimapHide`;
    this.miniHide.textContent = '×';
    this.miniHide.addEventListener('click', () => this.events.hideMinimap?.());
    host.appendChild(this.miniHide);
    const ctx = this.canvas.getContext('2d');
    const mctx = this.mini.getContext('2d');
    if (!ctx || !mctx) throw new Error('canvas 2D is not available in this browser');
    this.ctx = ctx;
    this.miniCtx = mctx;
    new ResizeObserver(() => this.resize()).observe(host);
    this.bind();
    this.resize();
  }

  setMinimap(show: boolean): void {
    if (show !== this.miniShown) {
      this.miniShown = show;
      this.refit();
    }
    this.mini.style.display = show ? '' : 'none';
    this.miniHide.style.display = show ? '' : 'none';
    this.invalidate();
  }

  setScene(scene: Scene | null, how: 'fit' | 'keep' = 'keep'): void {
    this.scene = scene;
    this.miniBase = null;
    if (how === 'fit') this.fit();
    this.invalidate();
  }

  /** The view a file opens with: the top of the graph, readable (its width fitted; boxes are narrow and tall), left of the minimap. */
  fit(): void {
    if (!this.scene) return;
    const b = this.scene.bounds;
    const width = this.graphWidth();
    const v = fitView(b, width, this.height, 16, 2);
    const wScale = clampScale(Math.min(2, (width - 32) / Math.max(1, b.x1 - b.x0)));
    this.view = wScale > v.scale ? { scale: wScale, tx: (width - (b.x1 - b.x0) * wScale) / 2 - b.x0 * wScale, ty: 16 - b.y0 * wScale } : v;
    this.fitted = 'top';
    this.invalidate();
  }

  /** The whole graph in view, left of the minimap (the Fit button, key F). */
  fitWhole(): void {
    if (!this.scene) return;
    this.view = fitView(this.scene.bounds, this.graphWidth(), this.height, 16, 2);
    this.fitted = 'whole';
    this.invalidate();
  }

  /** Redo the automatic fit the view still is, if any. */
  private refit(): void {
    if (this.fitted === 'top') this.fit();
    else if (this.fitted === 'whole') this.fitWhole();
  }

  /**
   * Bring a box into view (centred) without changing the zoom unless it is unreadable, clear of
   * the minimap: a box wider than the room left of it starts at the left edge instead.
   */
  reveal(key: string): void {
    const b = this.scene?.byKey.get(key);
    if (!b) return;
    const scale = clampScale(Math.max(this.view.scale, 0.8));
    const room = this.graphWidth();
    const v = centerOn(b.x + b.w / 2, b.y + 7.5, scale, room / 2, this.height / 3);
    const x0 = b.x * scale + v.tx;
    const x1 = (b.x + b.w) * scale + v.tx;
    if (x1 > room - MINI_GAP || x0 < MINI_GAP) v.tx = MINI_GAP - b.x * scale;
    this.view = v;
    this.fitted = false;
    this.invalidate();
  }

  /** Where a box is on the pane (CSS px), and the minimap's rectangle, for the tests. */
  clearance(key: string): { box: { x0: number; y0: number; x1: number; y1: number }; minimap: { x0: number; y0: number; x1: number; y1: number } | null } | null {
    const b = this.scene?.byKey.get(key);
    if (!b) return null;
    const { scale, tx, ty } = this.view;
    const box = { x0: b.x * scale + tx, y0: b.y * scale + ty, x1: (b.x + b.w) * scale + tx, y1: (b.y + 15) * scale + ty };
    const minimap = this.miniShown ? { x0: this.width - MINI_GAP - this.miniW, y0: MINI_GAP, x1: this.width - MINI_GAP, y1: MINI_GAP + this.miniH } : null;
    return { box, minimap };
  }

  isVisible(key: string): boolean {
    const b = this.scene?.byKey.get(key);
    if (!b) return false;
    const r = visibleRect(this.view, this.width, this.height);
    return b.x >= r.x0 && b.x + b.w <= r.x1 && b.y >= r.y0 && b.y + 15 <= r.y1;
  }

  themeChanged(): void {
    this.miniBase = null;
    this.invalidate();
  }

  invalidate(): void {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.draw();
    });
  }

  /** What a frame draws now: the scene, the view, the theme, the selection and marks. */
  private frame(): FrameInput {
    return {
      scene: this.scene,
      view: this.view,
      width: this.width,
      height: this.height,
      dpr: this.dpr,
      theme: this.theme(),
      selected: this.selected,
      highlighted: this.highlighted,
      overflowMode: this.overflowMode,
      marked: this.lastMarked,
    };
  }

  /** Draw now (benchmarks call this directly). */
  draw(): void {
    const t0 = performance.now();
    this.lastDrawn = drawFrame(this.ctx, this.frame());
    this.mini.style.visibility = this.scene ? '' : 'hidden';
    this.miniHide.style.visibility = this.mini.style.visibility;
    this.miniHide.style.right = `${MINI_GAP + this.miniW - 16}px`;
    this.miniHide.title = t('minimap.hide');
    this.miniHide.setAttribute('aria-label', t('minimap.hide'));
    if (this.scene && this.mini.style.display !== 'none') this.drawMini();
    this.lastFrameMs = performance.now() - t0;
    this.frames++;
    this.canvas.dataset.drawn = String(this.lastDrawn);
    this.canvas.dataset.marked = String(this.lastMarked.length);
  }

  /** The view as the pane shows it, as an SVG document (the same drawing, the current theme). */
  svg(): string {
    return frameSvg(this.frame());
  }

  /** What a whole-graph picture of the pane shows: its scene as expanded now, its marks, its theme. */
  private picture(header: PictureHeader): PictureInput {
    if (!this.scene) throw new Error(t('picture.empty'));
    return { scene: this.scene, theme: this.theme(), selected: this.selected, highlighted: this.highlighted, overflowMode: this.overflowMode, header };
  }

  /** The whole graph as expanded now (every box, not only the view's), under `header`, as an SVG document. */
  wholeSvg(header: PictureHeader): string {
    return wholeSvg(this.picture(header));
  }

  /** The whole graph as expanded now, under `header`, as a PNG within a browser's limits (`note` says how far it was scaled down). */
  wholePng(header: PictureHeader, note: (percent: number) => string): Promise<Blob> {
    try {
      return wholePng(this.picture(header), note);
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** The view as the pane shows it, as a PNG (the canvas, in device pixels), drawn afresh. */
  png(): Promise<Blob> {
    this.draw();
    return new Promise((resolve, reject) =>
      this.canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('the browser made no PNG of the pane'))), 'image/png'));
  }

  /** The width the graph is fitted and centred in: the pane less the minimap's column. */
  private graphWidth(): number {
    return this.miniShown ? Math.max(120, this.width - this.miniW - 2 * MINI_GAP) : this.width;
  }

  private drawMini(): void {
    const dpr = this.dpr;
    if (!this.miniBase) {
      // As tall as the graph at the minimap's width, within [40, miniMaxH]: no empty frame below a short graph.
      const b = this.scene?.bounds;
      const natural = b ? Math.ceil(((b.y1 - b.y0) * this.miniW) / Math.max(1, b.x1 - b.x0)) : this.miniMaxH;
      this.miniH = Math.max(Math.min(40, this.miniMaxH), Math.min(this.miniMaxH, natural));
      this.mini.width = this.miniW * dpr;
      this.mini.height = this.miniH * dpr;
      this.mini.style.width = `${this.miniW}px`;
      this.mini.style.height = `${this.miniH}px`;
      this.miniBase = document.createElement('canvas');
      this.miniBase.width = this.miniW * dpr;
      this.miniBase.height = this.miniH * dpr;
      const c = this.miniBase.getContext('2d');
      if (c) this.miniMap = drawMinimap(c, this.scene, this.miniW, this.miniH, dpr, this.theme());
    }
    const m = this.miniCtx;
    m.setTransform(1, 0, 0, 1, 0, 0);
    m.drawImage(this.miniBase, 0, 0);
    const r = minimapRect(this.miniMap, visibleRect(this.view, this.width, this.height), this.miniW, this.miniH);
    m.setTransform(dpr, 0, 0, dpr, 0, 0);
    m.fillStyle = 'rgba(38,143,50,0.24)';
    m.strokeStyle = 'rgba(38,143,50,0.9)';
    m.fillRect(r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
    m.lineWidth = 1;
    m.strokeRect(r.x0 + 0.5, r.y0 + 0.5, Math.max(1, r.x1 - r.x0 - 1), Math.max(1, r.y1 - r.y0 - 1));
  }

  /**
   * Where the minimap and the graph are, for the tests: the minimap's frame, the graph and the
   * viewport box inside it (minimap px), the graph's aspect (height / width), and the graph's and
   * the minimap's horizontal extent in the pane (CSS px).
   */
  minimapReport() {
    if (!this.scene) return null;
    const b = this.scene.bounds;
    const mm = minimapMapping(b, this.miniW, this.miniH);
    return {
      opacity: Number(getComputedStyle(this.mini).opacity),
      frame: { w: this.miniW, h: this.miniH },
      graph: minimapRect(mm, b, this.miniW, this.miniH),
      viewport: minimapRect(mm, visibleRect(this.view, this.width, this.height), this.miniW, this.miniH),
      graphAspect: (b.y1 - b.y0) / Math.max(1, b.x1 - b.x0),
      graphOnScreen: { x0: b.x0 * this.view.scale + this.view.tx, x1: b.x1 * this.view.scale + this.view.tx },
      minimapOnScreen: { x0: this.mini.offsetLeft, x1: this.mini.offsetLeft + this.mini.offsetWidth },
    };
  }


  private resize(): void {
    const rect = this.el.getBoundingClientRect();
    const oldWidth = this.width;
    this.width = Math.max(1, Math.floor(rect.width));
    this.height = Math.max(1, Math.floor(rect.height));
    // The minimap scales with the pane: no taller than its share of the height (a short pane after
    // the details panel grows keeps a whole minimap), no wider than its share of the width.
    this.miniMaxH = Math.max(40, Math.min(MINI_H, Math.floor(this.height * MINI_H_SHARE)));
    this.miniW = Math.round(Math.max(MINI_MIN_W, Math.min(MINI_MAX_W, this.width * MINI_SHARE)));
    // A side panel opening or the golden pane appearing must not push the graph out of sight:
    // an automatic fit is redone, a view the user chose keeps its centre column in the middle.
    if (this.scene && this.width > 1 && this.width !== oldWidth) {
      if (this.fitted) this.refit();
      else if (oldWidth > 1) this.view = { ...this.view, tx: this.view.tx + (this.width - oldWidth) / 2 };
    }
    this.dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.height}px`;
    this.miniBase = null;
    this.invalidate();
  }

  size(): { width: number; height: number } {
    return { width: this.width, height: this.height };
  }

  private local(e: MouseEvent): { x: number; y: number } {
    const r = this.canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  boxAt(sx: number, sy: number): Box | undefined {
    if (!this.scene) return undefined;
    return this.scene.hit((sx - this.view.tx) / this.view.scale, (sy - this.view.ty) / this.view.scale);
  }

  /** Screen position (relative to the canvas) of a box's label bar centre. */
  screenOf(key: string): { x: number; y: number } | undefined {
    const b = this.scene?.byKey.get(key);
    if (!b) return undefined;
    return { x: (b.x + b.w / 2) * this.view.scale + this.view.tx, y: (b.y + 7.5) * this.view.scale + this.view.ty };
  }

  pan(dx: number, dy: number): void {
    this.view = { ...this.view, tx: this.view.tx + dx, ty: this.view.ty + dy };
    this.fitted = false;
    this.invalidate();
  }

  zoom(factor: number, sx = this.width / 2, sy = this.height / 2): void {
    this.view = zoomAt(this.view, factor, sx, sy);
    this.fitted = false;
    this.invalidate();
  }

  /** Keyboard shortcuts; true when handled. */
  key(e: KeyboardEvent): boolean {
    switch (e.key.toLowerCase()) {
      case 'w':
        this.zoom(1.2);
        return true;
      case 's':
        this.zoom(1 / 1.2);
        return true;
      case 'a':
        this.pan(40, 0);
        return true;
      case 'd':
        this.pan(-40, 0);
        return true;
      case 'arrowup':
        this.pan(0, 40);
        return true;
      case 'arrowdown':
        this.pan(0, -40);
        return true;
      case 'f':
        this.fitWhole();
        return true;
      default:
        return false;
    }
  }

  /** The pointer is over this pane (its graph or its minimap): the keys go to it. */
  isHovered(): boolean {
    return this.hovering;
  }

  /** The pane's canvas has the keyboard focus (the last pane clicked). */
  isFocused(): boolean {
    return document.activeElement === this.canvas;
  }

  private bind(): void {
    const c = this.canvas;
    let drag: { x: number; y: number; moved: boolean } | null = null;
    this.el.addEventListener('mouseenter', () => (this.hovering = true));
    this.el.addEventListener('mouseleave', () => (this.hovering = false));
    c.addEventListener('mousedown', (e) => {
      if (e.button !== 0) return;
      c.focus({ preventScroll: true });
      drag = { x: e.clientX, y: e.clientY, moved: false };
    });
    // The full name of the box under the pointer, as a tooltip (labels are truncated to fit).
    let hoverKey = '';
    c.addEventListener('mousemove', (e) => {
      if (drag?.moved) return;
      const p = this.local(e);
      const b = this.boxAt(p.x, p.y);
      const k = b ? b.key : '';
      if (k !== hoverKey) {
        hoverKey = k;
        c.title = b ? b.key : '';
        c.style.cursor = b ? 'pointer' : '';
      }
    });
    window.addEventListener('mousemove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 3) return;
      drag.moved = true;
      drag.x = e.clientX;
      drag.y = e.clientY;
      c.style.cursor = 'grabbing';
      this.pan(dx, dy);
    });
    window.addEventListener('mouseup', () => {
      c.style.cursor = '';
      setTimeout(() => (drag = null), 0);
    });
    c.addEventListener('click', (e) => {
      if (drag?.moved) return;
      const p = this.local(e);
      const b = this.boxAt(p.x, p.y);
      if (b) this.events.select(b.key);
    });
    c.addEventListener('dblclick', (e) => {
      const p = this.local(e);
      const b = this.boxAt(p.x, p.y);
      if (b) this.events.toggle(b.key);
    });
    c.addEventListener('contextmenu', (e) => {
      e.preventDefault();
      const p = this.local(e);
      const b = this.boxAt(p.x, p.y);
      if (b) this.events.context(b.key, e.clientX, e.clientY);
    });
    c.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const p = this.local(e);
        if (e.ctrlKey || e.metaKey) this.zoom(Math.exp(-e.deltaY * 0.002), p.x, p.y);
        else if (e.shiftKey) this.pan(-e.deltaY, 0);
        else this.pan(-e.deltaX, -e.deltaY);
      },
      { passive: false },
    );
    // Minimap: click or drag centres the view on that point.
    let miniDrag = false;
    const moveTo = (e: MouseEvent) => {
      const r = this.mini.getBoundingClientRect();
      const { sx, sy, ox, oy } = this.miniMap;
      const gx = (e.clientX - r.left - ox) / sx;
      const gy = (e.clientY - r.top - oy) / sy;
      this.view = centerOn(gx, gy, this.view.scale, this.width / 2, this.height / 2);
      this.fitted = false;
      this.invalidate();
    };
    this.mini.addEventListener('mousedown', (e) => {
      e.preventDefault();
      miniDrag = true;
      moveTo(e);
    });
    window.addEventListener('mousemove', (e) => miniDrag && moveTo(e));
    window.addEventListener('mouseup', () => (miniDrag = false));
    this.mini.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        this.pan(0, -e.deltaY);
      },
      { passive: false },
    );
  }
}
