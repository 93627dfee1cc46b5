/**
 * The Map panel: the divergence map of the open compare file (the `divergenceMap` route), the whole
 * run on one screen. Rows are the modules at the chosen depth in forward / backward / update bands,
 * columns the steps × ranks (or micro-batches): as many columns as the panel's width holds times
 * the zoom are asked for, the sidecar merging the rest to the worst rank. Drawn on a canvas, only
 * what is in view: the cells are made once per map as pixels (one a cell, by chunks of lines) and a
 * frame copies each line in view scaled up with one drawImage, so a frame's cost follows the lines
 * in view, not the cells (a thousand ranks × ten steps scroll as fast as two). A cell's colour is its
 * output error over its tolerance on a log scale; a dark bar marks a cell holding a source, a pale
 * top half a cell whose error came from a peer rank; blank where a rank lacks the module. Hover
 * gives the numbers; a click on a cell (or "First source") opens that step and rank at that
 * module, expanded and selected; a click on a row's name opens it to the next depth. While the
 * sidecar reads the file's graphs (msprobe's files: on first use), the panel shows graphs read of
 * total and draws the steps judged so far. Pure logic: divergenceMap.ts.
 */
import { get, tidyError } from '../api';
import type { PageCtx } from '../ctx';
import { fileKey } from '../diagnosis';
import {
  cellCenter,
  cellLines,
  cellTarget,
  keepColumns,
  rankTicks,
  sourceColumns,
  stepLabel,
  cellWidth,
  fitColumns,
  contentSize,
  hitAt,
  lineOf,
  MAP_GEOMETRY,
  mapLines,
  MAX_MAP_COLUMNS,
  MAX_ZOOM,
  heldCells,
  NON_FINITE,
  RASTER_ROWS,
  rasterLines,
  scaleColor,
  stepSpans,
  UNCOMPARED,
  visibleRange,
  type DivergenceMapData,
  type DivergenceMapProgress,
  type LineRaster,
  type MapLine,
  type MapView,
  type Rgb,
} from '../divergenceMap';
import { h, option } from '../dom';
import { t, type Key } from '../i18n';

/** How often the panel asks how far a map's computation is. */
const POLL_MS = 400;
/** How long the zoom waits for another click before it asks for its map. */
const ZOOM_SETTLE_MS = 350;
/** Depths offered besides the repeated blocks. */
const DEPTHS = [1, 2, 3, 4, 5, 6];
/** Lines whose cells' pixels are made together (when the first of them comes into view). */
const CHUNK_LINES = 64;
/** The most cell pixels kept (4 bytes each); past it, chunks out of view are let go and made again when back. */
const RASTER_BUDGET_PX = 1 << 25;

/** One asked-for map: its answer, or the progress and the steps judged so far. */
interface Loaded {
  data: DivergenceMapData | null;
  partial: DivergenceMapData | null;
  progress: DivergenceMapProgress | null;
  /** Why its request failed ('' when it did not). */
  error: string;
}

interface Colors {
  bg: string;
  text: string;
  muted: string;
  band: string;
  grid: string;
  /** A source's bar. */
  mark: Rgb;
}

/** What a map's drawing keeps between frames: its lines, step spans and (by chunk) cell pixels' key. */
interface Layout {
  data: DivergenceMapData;
  /** MapPanel.version when made. */
  version: number;
  mark: Rgb;
  lines: MapLine[];
  spans: [number, number, number][];
  columns: number;
}

/** The pixels of CHUNK_LINES lines' cells (`rasterLines`), uploaded to a canvas to copy from. */
type Chunk = Omit<LineRaster, 'rgba'> & { canvas: HTMLCanvasElement };

const LIGHT: Colors = { bg: '#ffffff', text: '#1f1f1f', muted: '#6b6b6b', band: '#f0f0f0', grid: 'rgba(0,0,0,0.35)', mark: [17, 17, 17] };
const DARK: Colors = { bg: '#141414', text: '#e6e6e6', muted: '#9a9a9a', band: '#262626', grid: 'rgba(255,255,255,0.35)', mark: [255, 255, 255] };

export class MapPanel {
  /** The chosen depth (0: the repeated blocks), axis and zoom. */
  private depth = 0;
  private axis: 'ranks' | 'micro_batches' = 'ranks';
  private zoom = 1;
  /** Only the columns (steps and ranks) that hold a source ("sources only"). */
  private sourcesOnly = false;
  /** The filtered maps, by the map they filter (and the filtered ones themselves). */
  private filtered = new WeakMap<DivergenceMapData, DivergenceMapData>();
  private readonly filteredMaps = new WeakSet<DivergenceMapData>();
  /** The columns kept by "sources only", from the map of the chosen depth. */
  private keep: number[] | null = null;
  /** Opened rows (`direction|module`). */
  private readonly open = new Set<string>();
  /** Maps by request (file, depth, axis, columns). */
  private readonly loaded = new Map<string, Loaded>();
  private file = '';
  /** After a zoom: where the middle of the view was, as a fraction of the content's width. */
  private pendingScroll: number | null = null;
  private hover: { line: number; column: number } | null = null;
  private flash: { line: number; column: number } | null = null;
  private frame = 0;
  /**
   * Bumped whenever the lines drawn may change with the same map shown (a map or the steps judged
   * so far arrive, a row is opened or closed, another depth, axis, zoom or width): the layout is made again.
   */
  private version = 0;
  private layout: Layout | null = null;
  private readonly chunks = new Map<number, Chunk>();
  private chunkPixels = 0;
  /** The map area's size (measured when it changes, not at each frame) and the spacer's. */
  private areaW = 0;
  private areaH = 0;
  private spacerW = -1;
  private spacerH = -1;
  /** Last drawn: lines, view, the map drawn (for the tests and the benchmark). */
  lines: MapLine[] = [];
  view: MapView = { cw: MAP_GEOMETRY.minCell, columns: 0, lines: 0, scrollX: 0, scrollY: 0 };
  drawn: DivergenceMapData | null = null;
  /** Frames drawn and the last one's drawing time in ms (the benchmark counts them while scrolling). */
  frames = 0;
  lastDrawMs = 0;

  private readonly root: HTMLElement;
  private readonly controls: HTMLElement;
  private readonly status: HTMLElement;
  private readonly area: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly scroller: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly tip: HTMLElement;

  constructor(private ctx: PageCtx) {
    this.controls = h('div.map-controls');
    this.status = h('div.map-status', { testid: 'mapStatus' });
    this.canvas = h('canvas.map-canvas', { testid: 'mapCanvas' });
    this.spacer = h('div.map-spacer');
    this.scroller = h('div.map-scroll', { testid: 'mapScroll' }, this.spacer);
    this.tip = h('div.map-tip', { testid: 'mapTip', style: { display: 'none' } });
    this.area = h('div.map-area', null, this.canvas, this.scroller, this.tip);
    this.root = h('div.panel-section.map-panel', { testid: 'mapPanel' });
    this.scroller.addEventListener('scroll', () => this.schedule());
    this.scroller.addEventListener('mousemove', (e) => this.moved(e));
    this.scroller.addEventListener('mouseleave', () => {
      this.hover = null;
      this.tip.style.display = 'none';
      this.schedule();
    });
    this.scroller.addEventListener('click', (e) => void this.clicked(e));
    new ResizeObserver(() => {
      this.measure();
      this.schedule();
      this.ensure();
    }).observe(this.area);
  }

  /** The panel (the same element each time: the canvas and its scroll survive redraws of the side panel). */
  render(): HTMLElement {
    const s = this.ctx.store;
    const title = h('h3', null, t('sider.map'));
    this.root.replaceChildren(title);
    if (s.single) {
      this.root.append(h('p.muted', null, t('map.notCompare')));
      return this.root;
    }
    this.renderControls();
    this.root.append(this.controls, this.status, this.legend(), this.area);
    this.renderStatus();
    queueMicrotask(() => this.ensure());
    return this.root;
  }

  // ------------------------------------------------------------------ requests

  /** The map area's width, as last measured while it was on screen (the side panel redraws detach it). */
  private width(): number {
    const w = this.area.isConnected ? this.area.clientWidth : 0;
    if (w > 0) this.lastWidth = w;
    return this.lastWidth;
  }

  private lastWidth = 600;

  /** The area's size, read when it may have changed (resized, attached again). */
  private measure(): void {
    this.areaW = this.width();
    this.areaH = this.area.isConnected ? this.area.clientHeight : 0;
    // A width that asks for other columns asks for other deeper maps under opened rows (a drag that
    // does not keeps the cells' pixels).
    const columns = this.columns();
    if (columns !== this.measuredColumns) {
      this.measuredColumns = columns;
      this.version++;
    }
  }

  private measuredColumns = 0;
  /** The columns the width holds at zoom 1, as last asked for (0: not yet). */
  private fit = 0;

  /**
   * The columns to ask for. Each other count is another map for the sidecar to compute (on
   * msprobe's files, from every graph again), so the count follows the width only when it changes
   * by half or more; in between, the cells widen or the map scrolls sideways.
   */
  private columns(): number {
    const now = fitColumns(this.width());
    if (!this.fit || now >= this.fit * 1.5 || now <= this.fit / 1.5) this.fit = now;
    return Math.min(MAX_MAP_COLUMNS, this.fit * this.zoom);
  }

  private keyOf(depth: number): string {
    return `${this.file}|${depth}|${this.axis}|${this.columns()}`;
  }

  private request(depth: number) {
    const m = this.ctx.store.meta;
    return { run: m.run, tag: m.tag, type: m.type, lang: m.lang, depth, micro_batches: this.axis === 'micro_batches', max_columns: this.columns() };
  }

  /** The map shown (the chosen depth), loaded or loading. */
  private current(): Loaded | undefined {
    return this.loaded.get(this.keyOf(this.depth));
  }

  /** Fetch the shown map (and the deeper maps of opened rows) unless here or under way. */
  ensure(): void {
    const s = this.ctx.store;
    if (s.tab !== 'map' || !s.meta.run || s.single) return;
    const file = fileKey(s.meta);
    if (file !== this.file) {
      this.file = file;
      this.loaded.clear();
      this.open.clear();
      this.drawn = null;
      this.scroller.scrollTo(0, 0);
    }
    void this.load(this.depth);
    const shown = this.current()?.data;
    if (shown) for (const l of this.lines) if (l.kind === 'row' && l.open) void this.load(l.row.depth + 1);
  }

  private async load(depth: number): Promise<void> {
    const key = this.keyOf(depth);
    if (this.loaded.has(key)) return;
    const entry: Loaded = { data: null, partial: null, progress: null, error: '' };
    this.loaded.set(key, entry);
    this.renderStatus();
    const req = this.request(depth);
    let done = false;
    const poll = async () => {
      while (!done) {
        await new Promise((r) => setTimeout(r, POLL_MS));
        if (done) return;
        const p = await get('divergenceMap', { ...req, progress: true });
        if (done || !p.success) continue;
        entry.progress = p.progress ?? entry.progress;
        if (p.data) {
          entry.partial = p.data;
          this.version++;
        }
        if (this.loaded.get(key) === entry) {
          this.renderStatus();
          this.schedule();
        }
      }
    };
    void poll();
    const r = await get('divergenceMap', req);
    done = true;
    if (this.loaded.get(key) !== entry) return;
    if (!r.success || !r.data) {
      // Said, and kept: asked again when the file is opened again (not at every redraw).
      entry.error = tidyError(`divergenceMap: ${r.success ? 'no data' : r.error}`);
      entry.partial = null;
      this.ctx.toast(entry.error, 'error');
    } else {
      entry.data = r.data;
      entry.partial = null;
    }
    this.version++;
    this.renderControls();
    this.renderStatus();
    this.schedule();
  }

  // ------------------------------------------------------------------ controls

  private renderControls(): void {
    const data = this.current()?.data ?? null;
    const depthSel = h('select', { testid: 'mapDepth', on: { change: () => this.setDepth(Number(depthSel.value)) } },
      option('0', t('map.depthAuto'), this.depth === 0), ...DEPTHS.map((d) => option(String(d), t('map.depthN', { depth: d }), this.depth === d)));
    const axisBtn = (axis: MapPanel['axis'], label: Key, testid: string) =>
      h('button', { testid, class: this.axis === axis ? 'on' : '', on: { click: () => this.setAxis(axis) } }, t(label));
    const zoomOut = h('button', { testid: 'mapZoomOut', title: t('map.zoomOut'), 'aria-label': t('map.zoomOut'), disabled: this.zoom <= 1, on: { click: () => this.setZoom(this.zoom / 2) } }, '−');
    const zoomIn = h('button', { testid: 'mapZoomIn', title: t('map.zoomIn'), 'aria-label': t('map.zoomIn'), disabled: this.zoom >= MAX_ZOOM, on: { click: () => this.setZoom(this.zoom * 2) } }, '+');
    const first = h('button.map-first', { testid: 'mapFirstSource', title: t('map.firstSourceTip'), disabled: !data?.first_source, on: { click: () => void this.openFirstSource() } }, t('map.firstSource'));
    const only = h('label.map-field.map-only', { title: t('map.sourcesOnlyTip') },
      h('input', { type: 'checkbox', testid: 'mapSourcesOnly', checked: this.sourcesOnly, on: { change: (e: Event) => this.setSourcesOnly((e.target as HTMLInputElement).checked) } }),
      h('span', null, t('map.sourcesOnly')));
    this.controls.replaceChildren(
      h('label.map-field', null, h('span.muted', null, t('map.depth')), depthSel),
      h('div.map-field', null, h('span.muted', null, t('map.axis')), h('div.segmented', { testid: 'mapAxis' }, axisBtn('ranks', 'map.axisRanks', 'mapAxisRanks'), axisBtn('micro_batches', 'map.axisMicro', 'mapAxisMicro'))),
      h('div.map-field', null, zoomOut, h('span.map-zoom', { testid: 'mapZoom' }, `×${this.zoom}`), zoomIn),
      first,
      only,
    );
  }

  private setSourcesOnly(on: boolean): void {
    if (this.sourcesOnly === on) return;
    this.sourcesOnly = on;
    this.filtered = new WeakMap();
    this.keep = null;
    this.drawn = null;
    this.version++;
    this.hover = null;
    this.flash = null;
    this.scroller.scrollTo(0, 0);
    this.renderControls();
    this.schedule();
  }

  /** A map as drawn: with "sources only", its columns holding a source (those of the chosen depth's map). */
  private filter(d: DivergenceMapData | null | undefined, top = false): DivergenceMapData | null {
    if (!d) return null;
    if (!this.sourcesOnly || this.filteredMaps.has(d)) return d;
    const kept = this.filtered.get(d);
    if (kept) return kept;
    if (top || !this.keep) this.keep = sourceColumns(d);
    const out = keepColumns(d, this.keep);
    this.filtered.set(d, out);
    this.filteredMaps.add(out);
    return out;
  }

  private renderStatus(): void {
    const cur = this.current();
    const data = cur?.data;
    let text = '';
    let bar: HTMLElement | null = null;
    if (cur?.error) {
      this.status.replaceChildren(h('p.error', { testid: 'mapError' }, cur.error));
      return;
    }
    if (cur && !data) {
      const p = cur.progress;
      text = p && p.graphs_total > 0 ? t('map.progress', { read: p.graphs_read, total: p.graphs_total }) : t('map.starting');
      const frac = p && p.graphs_total > 0 ? p.graphs_read / p.graphs_total : 0;
      bar = h('div.map-progress', { testid: 'mapProgress', role: 'progressbar', 'aria-valuenow': String(Math.round(frac * 100)), 'aria-valuemin': '0', 'aria-valuemax': '100' },
        h('div.map-progress-fill', { style: { width: `${(frac * 100).toFixed(1)}%` } }));
    } else if (data) {
      const rule = t(`map.rule.${data.depth_rule}` as Key);
      text = t('map.summary', { depth: data.depth, rule, steps: data.steps.length, ranks: data.ranks.length, columns: data.columns.length });
      const widest = data.columns.reduce((w, c) => Math.max(w, c.rank_last - c.rank_first + 1), 1);
      if (widest > 1) text += ` · ${t('map.merged', { width: widest })}`;
      if (!data.first_source) text += ` · ${t('map.noSource')}`;
    }
    this.status.replaceChildren(...[h('span', { testid: data ? 'mapSummary' : 'mapLoading' }, text), bar].filter((e): e is HTMLElement => e !== null));
  }

  private legend(): HTMLElement {
    const stops = Array.from({ length: 7 }, (_, k) => `${scaleColor(k / 6)} ${((k / 6) * 100).toFixed(0)}%`).join(', ');
    const sw = (cls: string, label: Key, style: Record<string, string> = {}) => h('span.map-key', null, h(`span.map-swatch.${cls}`, { style }), t(label));
    return h('div.map-legend', { testid: 'mapLegend' },
      h('div.map-scale', null, h('span', null, `≤1e-3 ${t('map.legendLow')}`), h('span.map-gradient', { style: { background: `linear-gradient(to right, ${stops})` } }), h('span', null, `≥1e3 ${t('map.legendHigh')}`)),
      h('div.map-scale-mid', null, `1 = ${t('map.legendTol')}`),
      h('div.map-keys', null,
        sw('source', 'map.legendSource'),
        sw('peer', 'map.legendPeer'),
        sw('blank', 'map.legendBlank'),
        sw('uncompared', 'map.legendUncompared', { background: UNCOMPARED }),
        sw('nonfinite', 'map.legendNonFinite', { background: NON_FINITE })),
      h('div.muted.map-hint', null, t('map.openRow')));
  }

  private setDepth(depth: number): void {
    this.depth = depth;
    this.open.clear();
    this.changed();
  }

  private setAxis(axis: MapPanel['axis']): void {
    if (this.axis === axis) return;
    this.axis = axis;
    this.changed();
  }

  private setZoom(zoom: number): void {
    const z = Math.max(1, Math.min(MAX_ZOOM, Math.round(zoom)));
    if (z === this.zoom) return;
    // Keep the middle of the view where it was.
    const size = contentSize(this.view);
    const frac = size.width > 0 ? (this.scroller.scrollLeft + this.scroller.clientWidth / 2) / size.width : 0;
    this.zoom = z;
    this.version++;
    this.pendingScroll = frac;
    // Each zoom is another map for the sidecar: clicks in a row ask for the last one only (the map
    // shown meanwhile is the previous one, stretched).
    clearTimeout(this.zoomTimer);
    this.renderControls();
    this.schedule();
    this.zoomTimer = setTimeout(() => this.changed(), ZOOM_SETTLE_MS);
  }

  private zoomTimer: ReturnType<typeof setTimeout> | undefined;

  private changed(): void {
    this.version++;
    this.hover = null;
    this.ensure();
    this.renderControls();
    this.renderStatus();
    this.schedule();
  }

  // ------------------------------------------------------------------ drawing

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  private colors(): Colors {
    return this.ctx.store.dark ? DARK : LIGHT;
  }

  /** The map drawn now: the chosen one, or the steps judged so far, or (until either comes) the one drawn before. */
  private shown(): DivergenceMapData | null {
    const cur = this.current();
    return this.filter(cur?.data ?? cur?.partial, true) ?? this.drawn;
  }

  /** Draw what is in view (timed for the benchmark). */
  draw(): void {
    const t0 = performance.now();
    this.paint();
    this.lastDrawMs = performance.now() - t0;
  }

  private paint(): void {
    const data = this.shown();
    if (!this.area.isConnected) return;
    if (!this.areaW || !this.areaH) this.measure();
    const width = this.areaW;
    const height = this.areaH;
    const dpr = window.devicePixelRatio || 1;
    if (this.canvas.width !== Math.round(width * dpr) || this.canvas.height !== Math.round(height * dpr)) {
      this.canvas.width = Math.round(width * dpr);
      this.canvas.height = Math.round(height * dpr);
      this.canvas.style.width = `${width}px`;
      this.canvas.style.height = `${height}px`;
    }
    const g = this.canvas.getContext('2d');
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const c = this.colors();
    g.fillStyle = c.bg;
    g.fillRect(0, 0, width, height);
    this.drawn = data;
    if (!data) {
      this.lines = [];
      this.setData('cells', 0);
      return;
    }
    const layout = this.layoutOf(data, c.mark);
    const lines = layout.lines;
    const cw = cellWidth(width, data.columns.length, this.zoom);
    const size = contentSize({ cw, columns: data.columns.length, lines: lines.length });
    if (this.spacerW !== size.width || this.spacerH !== size.height) {
      this.spacerW = size.width;
      this.spacerH = size.height;
      this.spacer.style.width = `${size.width}px`;
      this.spacer.style.height = `${size.height}px`;
    }
    if (this.pendingScroll !== null && this.current()?.data) {
      this.scroller.scrollLeft = Math.max(0, this.pendingScroll * size.width - this.scroller.clientWidth / 2);
      this.pendingScroll = null;
    }
    // Offsets on whole device pixels: the cells' copies stay sharp, and hit-testing reads the same offsets.
    const snap = (x: number) => Math.round(x * dpr) / dpr;
    const v: MapView = { cw, columns: data.columns.length, lines: lines.length, scrollX: snap(this.scroller.scrollLeft), scrollY: snap(this.scroller.scrollTop) };
    this.lines = lines;
    this.view = v;
    const { line0, line1, col0, col1 } = visibleRange(v, width, height);
    const L = MAP_GEOMETRY.label;
    const H = MAP_GEOMETRY.header;
    const R = MAP_GEOMETRY.row;
    const x0 = L - v.scrollX;
    g.save();
    g.beginPath();
    g.rect(L, H, width - L, height - H);
    g.clip();
    // Cells: each line's row of pixels (one a cell) scaled to the cells' size in one copy, then the
    // peers' pale top halves and the sources' dark bars the same way (drawImage, not a rectangle a cell).
    const n = col1 - col0;
    const dx = x0 + col0 * cw;
    const hh = R - 2;
    let cells = 0;
    g.imageSmoothingEnabled = false;
    for (let i = line0; i < line1 && n > 0; i++) {
      if (lines[i].kind !== 'row') continue;
      const chunk = this.chunk(layout, Math.floor(i / CHUNK_LINES), line0, line1);
      const at = i % CHUNK_LINES;
      const sy = at * RASTER_ROWS;
      const y = H + i * R - v.scrollY;
      g.drawImage(chunk.canvas, col0, sy, n, 1, dx, y + 1, n * cw, hh);
      if (chunk.peers[at]) g.drawImage(chunk.canvas, col0, sy + 1, n, 1, dx, y + 1, n * cw, hh / 2);
      if (chunk.sources[at]) g.drawImage(chunk.canvas, col0, sy + 2, n, 1, dx, y + 1, n * cw, 4);
      cells += heldCells(chunk, at, at + 1, col0, col1);
    }
    // Wide cells stand apart: a 1-pixel gap on each one's right, all in one path.
    if (cw >= 5 && n > 0) {
      g.fillStyle = c.bg;
      g.beginPath();
      for (let k = col0; k < col1; k++) g.rect(x0 + (k + 1) * cw - 1, H, 1, height - H);
      g.fill();
    }
    g.fillStyle = c.band;
    for (let i = line0; i < line1; i++) if (lines[i].kind === 'band') g.fillRect(L, H + i * R - v.scrollY, width - L, R);
    // Steps apart.
    const spans = layout.spans;
    g.strokeStyle = c.grid;
    g.lineWidth = 1;
    g.beginPath();
    for (const [, a] of spans) {
      if (a === 0) continue;
      const x = Math.round(x0 + a * v.cw) - 0.5;
      if (x < L || x > width) continue;
      g.moveTo(x, H);
      g.lineTo(x, height);
    }
    g.stroke();
    for (const mark of [this.flash, this.hover]) {
      if (!mark) continue;
      g.strokeStyle = mark === this.flash ? 'rgb(22,119,255)' : c.text;
      g.lineWidth = 2;
      g.strokeRect(x0 + mark.column * v.cw - 1, H + mark.line * R - v.scrollY, v.cw + 2, R);
    }
    g.restore();
    // Step headers (sticky on top).
    g.fillStyle = c.bg;
    g.fillRect(0, 0, width, H);
    g.font = '11px sans-serif';
    g.textBaseline = 'middle';
    g.fillStyle = c.text;
    const measure = (text: string) => g.measureText(text).width;
    const stepRow = H * 0.3;
    for (const [step, a, b] of spans) {
      const xa = Math.max(L, x0 + a * v.cw);
      const xb = Math.min(width, x0 + b * v.cw);
      if (xb <= xa) continue;
      // "step 3" where it fits, else "3" (a one-column step), else nothing (hover says it).
      const label = stepLabel(step, xb - xa, measure);
      if (!label) continue;
      g.save();
      g.beginPath();
      g.rect(xa, 0, xb - xa, H);
      g.clip();
      g.fillText(label, xa + 3, stepRow);
      g.restore();
    }
    // Rank ticks under the steps, at every zoom: as many as fit without overlapping.
    g.font = '10px sans-serif';
    g.fillStyle = c.muted;
    g.save();
    g.beginPath();
    g.rect(L, 0, width - L, H);
    g.clip();
    for (const [k, text] of rankTicks(data.columns, col0, col1, v.cw, measure)) g.fillText(text, x0 + k * v.cw + 1, H * 0.75);
    g.restore();
    // Row labels (sticky on the left), only the lines in view.
    g.fillStyle = c.bg;
    g.fillRect(0, H, L, height - H);
    g.save();
    g.beginPath();
    g.rect(0, H, L, height - H);
    g.clip();
    for (let i = line0; i < line1; i++) {
      const line = lines[i];
      const y = H + i * R - v.scrollY + R / 2;
      if (line.kind === 'band') {
        g.fillStyle = c.band;
        g.fillRect(0, y - R / 2, L, R);
        g.fillStyle = c.muted;
        g.font = 'bold 11px sans-serif';
        g.fillText(t(`map.band.${line.direction}` as Key), 4, y);
        continue;
      }
      g.font = '11px sans-serif';
      g.fillStyle = c.text;
      const indent = 4 + line.indent * 10;
      g.fillText(`${line.open ? '▾' : '▸'} ${line.row.label}`, indent, y, L - indent - 4);
    }
    g.restore();
    this.frames++;
    this.setData('cells', cells);
    this.setData('lines', lines.length);
    this.setData('columns', data.columns.length);
  }

  /** A data attribute of the canvas (for the tests and the benchmark), written only when it changes. */
  private setData(name: 'cells' | 'lines' | 'columns', value: number): void {
    if (this.dataShown[name] === value) return;
    this.dataShown[name] = value;
    this.canvas.dataset[name] = String(value);
  }

  private readonly dataShown: Record<'cells' | 'lines' | 'columns', number | undefined> = { cells: undefined, lines: undefined, columns: undefined };

  /**
   * The map's lines, step spans and cell pixels, made again only when the map drawn, its opened
   * rows, the deeper maps or the mark colour change (not at each frame of a scroll).
   */
  private layoutOf(data: DivergenceMapData, mark: Rgb): Layout {
    const l = this.layout;
    if (l && l.data === data && l.version === this.version && l.mark === mark) return l;
    this.chunks.clear();
    this.chunkPixels = 0;
    const lines = mapLines(data, this.open, (d) => this.filter(this.loaded.get(this.keyOf(d))?.data) ?? undefined);
    this.layout = { data, version: this.version, mark, lines, spans: stepSpans(data.columns), columns: data.columns.length };
    return this.layout;
  }

  /**
   * The pixels of chunk `index` of the layout's lines (CHUNK_LINES lines), made when first in view.
   * Past RASTER_BUDGET_PX the chunks made first are let go, save those in view (lines `line0`–`line1`).
   */
  private chunk(layout: Layout, index: number, line0: number, line1: number): Chunk {
    const kept = this.chunks.get(index);
    if (kept) return kept;
    const from = index * CHUNK_LINES;
    const r = rasterLines(layout.lines, layout.columns, from, from + CHUNK_LINES, layout.mark);
    const canvas = document.createElement('canvas');
    canvas.width = Math.max(1, r.columns);
    canvas.height = Math.max(1, r.lines * RASTER_ROWS);
    if (r.columns > 0 && r.lines > 0) canvas.getContext('2d')?.putImageData(new ImageData(r.rgba, r.columns, r.lines * RASTER_ROWS), 0, 0);
    const chunk: Chunk = { canvas, columns: r.columns, lines: r.lines, held: r.held, peers: r.peers, sources: r.sources };
    this.chunks.set(index, chunk);
    this.chunkPixels += canvas.width * canvas.height;
    const first = Math.floor(line0 / CHUNK_LINES);
    const last = Math.floor(Math.max(line0, line1 - 1) / CHUNK_LINES);
    for (const [k, old] of this.chunks) {
      if (this.chunkPixels <= RASTER_BUDGET_PX) break;
      if (k >= first && k <= last) continue;
      this.chunks.delete(k);
      this.chunkPixels -= old.canvas.width * old.canvas.height;
    }
    return chunk;
  }

  // ------------------------------------------------------------------ gestures

  private point(e: MouseEvent): { x: number; y: number } {
    const r = this.scroller.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  private moved(e: MouseEvent): void {
    const data = this.shown();
    if (!data) return;
    const { x, y } = this.point(e);
    const hit = hitAt(this.view, x, y);
    const line = hit ? this.lines[hit.line] : undefined;
    if (!hit || hit.column === null || !line || line.kind !== 'row') {
      if (this.hover) {
        this.hover = null;
        this.schedule();
      }
      this.tip.style.display = 'none';
      return;
    }
    const cell = line.row.cells[hit.column];
    const column = data.columns[hit.column];
    if (!cell || !column) return;
    this.hover = { line: hit.line, column: hit.column };
    this.tip.replaceChildren(...cellLines(line.row, line.direction, column, cell).map((s, i) => h(i === 0 ? 'strong' : 'div', null, s)));
    this.tip.style.display = '';
    const areaW = this.area.clientWidth;
    this.tip.style.left = `${Math.min(x + 14, Math.max(0, areaW - 280))}px`;
    this.tip.style.top = `${y + 14}px`;
    this.schedule();
  }

  private async clicked(e: MouseEvent): Promise<void> {
    const data = this.shown();
    if (!data) return;
    const { x, y } = this.point(e);
    const hit = hitAt(this.view, x, y);
    const line = hit ? this.lines[hit.line] : undefined;
    if (!hit || !line || line.kind !== 'row') return;
    if (hit.column === null) {
      this.version++;
      if (this.open.has(line.key)) this.open.delete(line.key);
      else {
        this.open.add(line.key);
        void this.load(line.row.depth + 1).then(() => this.schedule());
      }
      this.schedule();
      return;
    }
    const cell = line.row.cells[hit.column];
    const target = cell ? cellTarget(cell, data.axis) : null;
    if (!target) return;
    this.flash = { line: hit.line, column: hit.column };
    this.hover = null;
    this.tip.style.display = 'none';
    this.schedule();
    // At the first source inside the module (in the colours that show it), else at the module.
    if (target.source && this.ctx.store.mode !== 'diagnosis') this.ctx.setColorMode('diagnosis');
    await this.ctx.openNodeAt(target);
  }

  /** The diagnosis's first source: its cell shown and flashed, its node opened. */
  private async openFirstSource(): Promise<void> {
    const data = this.filter(this.current()?.data, true);
    const f = data?.first_source;
    if (!data || !f) return;
    const line = lineOf(this.lines, data, f.band, f.row);
    if (line >= 0) {
      this.flash = { line, column: f.column };
      const p = cellCenter({ ...this.view, scrollX: 0, scrollY: 0 }, line, f.column);
      this.scroller.scrollLeft = Math.max(0, p.x - this.scroller.clientWidth / 2);
      this.scroller.scrollTop = Math.max(0, p.y - this.scroller.clientHeight / 2);
      this.schedule();
    }
    if (this.ctx.store.mode !== 'diagnosis') this.ctx.setColorMode('diagnosis');
    await this.ctx.openNodeAt({ step: f.step, rank: f.rank, node: f.node });
  }

  /**
   * Where a cell is on screen (client coordinates), scrolled into view first: for the end-to-end
   * tests, which click it as a user would.
   */
  cellPoint(band: number, row: number, column: number): { x: number; y: number } | null {
    const data = this.current()?.data;
    if (!data) return null;
    const line = lineOf(this.lines, data, band, row);
    if (line < 0) return null;
    const abs = cellCenter({ ...this.view, scrollX: 0, scrollY: 0 }, line, column);
    this.scroller.scrollLeft = Math.max(0, abs.x - this.scroller.clientWidth / 2);
    this.scroller.scrollTop = Math.max(0, abs.y - this.scroller.clientHeight / 2);
    this.draw();
    const p = cellCenter(this.view, line, column);
    const r = this.scroller.getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y };
  }

  /** Whether the map of the chosen depth, axis and zoom is here (not loading, not the one before). */
  get ready(): boolean {
    return Boolean(this.current()?.data);
  }

  /** The scroller, for the benchmark's scrolling. */
  get scrollElement(): HTMLElement {
    return this.scroller;
  }
}
