/**
 * One graph pane: a canvas sized to its element (device-pixel exact), a view transform, the user's
 * gestures (click select, double-click expand, drag pan, wheel scroll, Ctrl+wheel / W S zoom,
 * A D pan, right-click menu) and a minimap with the viewport (click or drag to move).
 * Frames are drawn on demand, at most one per animation frame.
 */
import { drawFrame, drawMinimap, minimapMapping, minimapRect, type MiniMapping, type Theme } from './render';
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
}

/** The minimap's width, its tallest height, and its gap to the pane's edges (CSS px). */
const MINI_W = 96;
const MINI_H = 260;
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
  private miniShown = true;
  scene: Scene | null = null;
  view: View = { tx: 20, ty: 20, scale: 1.5 };
  /** The view is still the automatic fit (nobody panned, zoomed or revealed since): a resize fits again. */
  private fitted = false;
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
      if (this.fitted) this.fit();
    }
    this.mini.style.display = show ? '' : 'none';
    this.invalidate();
  }

  setScene(scene: Scene | null, how: 'fit' | 'keep' = 'keep'): void {
    this.scene = scene;
    this.miniBase = null;
    if (how === 'fit') this.fit();
    this.invalidate();
  }

  fit(): void {
    if (!this.scene) return;
    const b = this.scene.bounds;
    // Fit the width (boxes are narrow and tall): show the top of the graph, readable, left of the minimap.
    const width = this.graphWidth();
    const v = fitView(b, width, this.height, 16, 2);
    const wScale = clampScale(Math.min(2, (width - 32) / Math.max(1, b.x1 - b.x0)));
    this.view = wScale > v.scale ? { scale: wScale, tx: (width - (b.x1 - b.x0) * wScale) / 2 - b.x0 * wScale, ty: 16 - b.y0 * wScale } : v;
    this.fitted = true;
    this.invalidate();
  }

  /** Bring a box into view (centred) without changing the zoom unless it is unreadable. */
  reveal(key: string): void {
    const b = this.scene?.byKey.get(key);
    if (!b) return;
    const scale = Math.max(this.view.scale, 0.8);
    this.view = centerOn(b.x + b.w / 2, b.y + 7.5, clampScale(scale), this.graphWidth() / 2, this.height / 3);
    this.fitted = false;
    this.invalidate();
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

  /** Draw now (benchmarks call this directly). */
  draw(): void {
    const t0 = performance.now();
    this.lastDrawn = drawFrame(this.ctx, {
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
    });
    this.mini.style.visibility = this.scene ? '' : 'hidden';
    if (this.scene && this.mini.style.display !== 'none') this.drawMini();
    this.lastFrameMs = performance.now() - t0;
    this.frames++;
    this.canvas.dataset.drawn = String(this.lastDrawn);
    this.canvas.dataset.marked = String(this.lastMarked.length);
  }

  /** The width the graph is fitted and centred in: the pane less the minimap's column. */
  private graphWidth(): number {
    return this.miniShown ? Math.max(120, this.width - MINI_W - 2 * MINI_GAP) : this.width;
  }

  private drawMini(): void {
    const dpr = this.dpr;
    if (!this.miniBase) {
      // As tall as the graph at the minimap's width, within [40, miniMaxH]: no empty frame below a short graph.
      const b = this.scene?.bounds;
      const natural = b ? Math.ceil(((b.y1 - b.y0) * MINI_W) / Math.max(1, b.x1 - b.x0)) : this.miniMaxH;
      this.miniH = Math.max(Math.min(40, this.miniMaxH), Math.min(this.miniMaxH, natural));
      this.mini.width = MINI_W * dpr;
      this.mini.height = this.miniH * dpr;
      this.mini.style.width = `${MINI_W}px`;
      this.mini.style.height = `${this.miniH}px`;
      this.miniBase = document.createElement('canvas');
      this.miniBase.width = MINI_W * dpr;
      this.miniBase.height = this.miniH * dpr;
      const c = this.miniBase.getContext('2d');
      if (c) this.miniMap = drawMinimap(c, this.scene, MINI_W, this.miniH, dpr, this.theme());
    }
    const m = this.miniCtx;
    m.setTransform(1, 0, 0, 1, 0, 0);
    m.drawImage(this.miniBase, 0, 0);
    const r = minimapRect(this.miniMap, visibleRect(this.view, this.width, this.height), MINI_W, this.miniH);
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
    const mm = minimapMapping(b, MINI_W, this.miniH);
    return {
      opacity: Number(getComputedStyle(this.mini).opacity),
      frame: { w: MINI_W, h: this.miniH },
      graph: minimapRect(mm, b, MINI_W, this.miniH),
      viewport: minimapRect(mm, visibleRect(this.view, this.width, this.height), MINI_W, this.miniH),
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
    // A side panel opening or the golden pane appearing must not push the graph out of sight:
    // an automatic fit is redone, a view the user chose keeps its centre column in the middle.
    if (this.scene && this.width > 1 && this.width !== oldWidth) {
      if (this.fitted) this.fit();
      else if (oldWidth > 1) this.view = { ...this.view, tx: this.view.tx + (this.width - oldWidth) / 2 };
    }
    this.dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * this.dpr);
    this.canvas.height = Math.round(this.height * this.dpr);
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.height}px`;
    // No taller than the pane allows (a short pane after the details panel grows keeps a whole minimap).
    this.miniMaxH = Math.max(60, Math.min(MINI_H, Math.floor(this.height - 2 * MINI_GAP)));
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
        this.fit();
        return true;
      default:
        return false;
    }
  }

  isHovered(): boolean {
    return this.hovering;
  }

  private bind(): void {
    const c = this.canvas;
    let drag: { x: number; y: number; moved: boolean } | null = null;
    c.addEventListener('mouseenter', () => (this.hovering = true));
    c.addEventListener('mouseleave', () => (this.hovering = false));
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
    c.addEventListener('keydown', (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (this.key(e)) e.preventDefault();
    });
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
