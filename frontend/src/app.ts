/**
 * The GRAPH_ASCEND page: selection (run, file, step, rank, micro step), the graph pane(s), node
 * details, and the side panels (precision/overflow filter, search, matching), plus the conversion
 * page. State lives here; drawing is in pane.ts/render.ts, table logic in details.ts.
 */
import { followSse, get, metaQuery, parseLooseJson, post, tidyError } from './api';
import { buildColorTable, LEVEL_COLORS, nodeFill, OVERFLOW_COLORS, precisionColor, type ColorMode, type ColorTable } from './colors';
import { detailTableView, isNode, nodeInfoView } from './detailsView';
import { clear, h, option } from './dom';
import { initialLang, lang, setLang, t, type Key } from './i18n';
import { GraphPane } from './pane';
import { DARK, LIGHT } from './render';
import { Scene } from './scene';
import { matchedOf, metaKey, NameIndex, naturalCompare, paneLayout, readUrlState, unprefixed, visibleOnly, writeUrlState } from './state';
import type {
  Catalog,
  CatalogError,
  ConfigInfo,
  FilterHit,
  MatchedDistributed,
  MatchedRelations,
  MetaData,
  NodeInfo,
  RenderNode,
  Side,
} from './types';
import { hitList } from './hitlist';
import { ConvertPage } from './convert';

type Tab = 'data' | 'precision' | 'match' | 'search' | null;
type PaneSide = 'NPU' | 'Bench';

export class App {
  readonly root: HTMLElement;
  private dark = false;
  private userTheme: 'light' | 'dark' | null = null;
  catalog: Catalog = {};
  catalogErrors: CatalogError[] = [];
  meta: MetaData = { run: '', tag: '', type: 'db', lang: 'en', microStep: -1, step: 0, rank: 0 };
  config: ConfigInfo | null = null;
  colors: ColorTable = buildColorTable(null);
  mode: ColorMode = 'precision';
  hier: Record<PaneSide, Record<string, RenderNode>> = { NPU: {}, Bench: {} };
  panes!: Record<PaneSide, GraphPane>;
  selected: { side: PaneSide; key: string } | null = null;
  syncExpand = true;
  showMini: Record<PaneSide, boolean> = { NPU: true, Bench: true };
  private tab: Tab = null;
  private page: 'dashboard' | 'convert' = 'dashboard';
  private els!: {
    sider: HTMLElement;
    panel: HTMLElement;
    panelBody: HTMLElement;
    content: HTMLElement;
    header: HTMLElement;
    graphs: HTMLElement;
    benchWrap: HTMLElement;
    npuWrap: HTMLElement;
    details: HTMLElement;
    detailsBody: HTMLElement;
    status: HTMLElement;
    toasts: HTMLElement;
    convert: HTMLElement;
    dashboard: HTMLElement;
  };
  private nodeList: { key: string; NPU: NameIndex; Bench: NameIndex } | null = null;
  private relations: { key: string; data: MatchedRelations } | null = null;
  private filterHits: FilterHit[] = [];
  private filterValues = new Set<string>();
  private detailTab: 'table' | 'info' = 'table';
  private lastInfo: NodeInfo | null = null;
  private detailError = '';
  private convertPage: ConvertPage;
  private loadSeq = 0;
  private benchCollapsed = false;
  private detailsCollapsed = false;

  constructor(host: HTMLElement) {
    setLang(initialLang());
    this.meta.lang = lang();
    this.root = host;
    this.convertPage = new ConvertPage(this);
    this.build();
    this.followTensorBoardTheme();
    window.addEventListener('keydown', (e) => this.globalKey(e));
    (window as unknown as { __graphAscend: App }).__graphAscend = this;
  }

  // ------------------------------------------------------------------ shell

  private build(): void {
    clear(this.root);
    const sider = h('nav.sider', { testid: 'sider' });
    const panelBody = h('div.panel-body');
    const panel = h('aside.panel', { testid: 'controlPanel' }, panelBody);
    const header = h('header.board-header', { testid: 'boardHeader' });
    const npuWrap = h('div.pane-wrap', { testid: 'debugGraph' });
    const benchWrap = h('div.pane-wrap', { testid: 'benchGraph' });
    const graphs = h('div.graphs', null, npuWrap, h('div.splitter.vertical', { testid: 'paneSplitter' }), benchWrap);
    const detailsBody = h('div.details-body');
    const details = h('section.details', { testid: 'nodeDetails' }, detailsBody);
    const status = h('div.status', { testid: 'status' });
    const dashboard = h('main.content', null, header, status, graphs, h('div.splitter.horizontal', { testid: 'detailsSplitter' }), details);
    const convert = h('main.content.convert-page', { testid: 'conversionPage', style: { display: 'none' } });
    const content = h('div.main', null, dashboard, convert);
    const toasts = h('div.toasts', { testid: 'toasts' });
    this.root.append(h('div.app', null, sider, panel, h('div.splitter.vertical.panel-splitter', { testid: 'panelSplitter' }), content), toasts);
    this.els = { sider, panel, panelBody, content, header, graphs, benchWrap, npuWrap, details, detailsBody, status, toasts, convert, dashboard };
    this.panes = {
      NPU: new GraphPane(npuWrap, 'NPU', this.paneEvents('NPU'), () => (this.dark ? DARK : LIGHT)),
      Bench: new GraphPane(benchWrap, 'Bench', this.paneEvents('Bench'), () => (this.dark ? DARK : LIGHT)),
    };
    this.bindSplitters();
    this.renderChrome();
  }

  /** Everything that depends on language or theme. */
  renderChrome(): void {
    document.documentElement.lang = lang() === 'zh' ? 'zh-CN' : 'en';
    document.documentElement.classList.toggle('dark', this.dark);
    this.renderSider();
    this.renderHeader();
    this.renderPanel();
    this.renderDetails();
    this.applyPaneLayout();
    if (this.page === 'convert') this.convertPage.render(this.els.convert);
    for (const p of Object.values(this.panes)) p.themeChanged();
  }

  private renderSider(): void {
    const s = this.els.sider;
    clear(s);
    const hasRuns = Object.keys(this.catalog).length > 0;
    const btn = (testid: string, icon: string, title: Key, onClick: () => void, active = false) =>
      h('button.sider-btn', { testid, title: t(title), 'aria-label': t(title), class: active ? 'active' : '', on: { click: onClick } }, icon);
    const tabBtn = (tab: Exclude<Tab, null>, testid: string, icon: string, title: Key) =>
      btn(testid, icon, title, () => this.openTab(this.tab === tab && this.page === 'dashboard' ? null : tab), this.tab === tab && this.page === 'dashboard');
    s.append(tabBtn('data', 'dataSiderButton', '▤', 'sider.dataSelection'));
    if (hasRuns) {
      s.append(tabBtn('precision', 'precisionSiderButton', '◐', 'sider.precisionFiltering'));
      if (this.config && !this.config.isSingleGraph) s.append(tabBtn('match', 'matchSiderButton', '⇄', 'sider.nodeMatching'));
      s.append(tabBtn('search', 'searchSiderButton', '⌕', 'sider.nodeSearch'));
    }
    s.append(btn('conversionSiderButton', '⚙', 'sider.dumpVisualization', () => this.showPage(this.page === 'convert' ? 'dashboard' : 'convert'), this.page === 'convert'));
    s.append(h('div.sider-spacer'));
    s.append(
      btn('themeSiderButton', this.dark ? '☀' : '☾', 'sider.switchTheme', () => {
        this.userTheme = this.dark ? 'light' : 'dark';
        this.dark = !this.dark;
        this.renderChrome();
      }),
    );
    s.append(
      btn('languageSiderButton', lang() === 'zh' ? 'EN' : '中', 'sider.switchLanguage', () => {
        setLang(lang() === 'zh' ? 'en' : 'zh');
        this.meta.lang = lang();
        this.renderChrome();
      }),
    );
  }

  openTab(tab: Tab): void {
    if (this.page !== 'dashboard') this.showPage('dashboard');
    this.tab = tab;
    this.renderSider();
    this.renderPanel();
    if (tab === 'search') void this.ensureNodeList();
    if (tab === 'match') void this.ensureRelations();
  }

  showPage(page: 'dashboard' | 'convert'): void {
    this.page = page;
    this.applyPaneLayout();
    if (page === 'convert') this.convertPage.open(this.els.convert);
    this.renderSider();
  }

  /** Every error shown to the user this session (newest last), for support and for the e2e tests. */
  readonly errors: string[] = [];

  toast(message: string, kind: 'info' | 'error' | 'success' = 'info'): void {
    const text = tidyError(message);
    if (kind === 'error') this.errors.push(text);
    const el = h(`div.toast.${kind}`, { testid: kind === 'error' ? 'errorToast' : 'toast', role: kind === 'error' ? 'alert' : 'status' },
      h('span.toast-text', null, text),
      h('button.toast-close', { 'aria-label': t('close'), on: { click: () => el.remove() } }, '×'));
    this.els.toasts.append(el);
    setTimeout(() => el.remove(), kind === 'error' ? 12000 : 4000);
  }

  private modal(title: string, body: Node, testid = 'modal'): void {
    const close = () => overlay.remove();
    const overlay = h('div.modal-overlay', { testid },
      h('div.modal', { role: 'dialog' }, h('h3', null, title), body, h('div.modal-actions', null, h('button.primary', { on: { click: close } }, t('ok')))));
    document.body.append(overlay);
  }

  private followTensorBoardTheme(): void {
    const read = () => {
      try {
        const body = window.parent !== window ? window.parent.document.body : null;
        return body ? body.classList.contains('dark-mode') : null;
      } catch {
        return null;
      }
    };
    const apply = () => {
      if (this.userTheme) return;
      const tb = read();
      const dark = tb ?? window.matchMedia?.('(prefers-color-scheme: dark)').matches ?? false;
      if (dark !== this.dark) {
        this.dark = dark;
        this.renderChrome();
      }
    };
    apply();
    try {
      if (window.parent !== window) new MutationObserver(apply).observe(window.parent.document.body, { attributes: true, attributeFilter: ['class'] });
    } catch {
      /* cross-origin parent: keep our own theme */
    }
  }

  private bindSplitters(): void {
    const drag = (el: Element, onMove: (dx: number, dy: number) => void) => {
      el.addEventListener('mousedown', (e0) => {
        const e = e0 as MouseEvent;
        e.preventDefault();
        let x = e.clientX, y = e.clientY;
        const move = (m: MouseEvent) => {
          onMove(m.clientX - x, m.clientY - y);
          x = m.clientX;
          y = m.clientY;
        };
        const up = () => {
          window.removeEventListener('mousemove', move);
          window.removeEventListener('mouseup', up);
        };
        window.addEventListener('mousemove', move);
        window.addEventListener('mouseup', up);
      });
    };
    const panelSplit = this.root.querySelector('.panel-splitter');
    if (panelSplit)
      drag(panelSplit, (dx) => {
        const w = this.els.panel.getBoundingClientRect().width + dx;
        this.els.panel.style.width = `${Math.max(180, Math.min(window.innerWidth * 0.5, w))}px`;
      });
    const paneSplit = this.els.graphs.querySelector('.splitter');
    if (paneSplit)
      drag(paneSplit, (dx) => {
        const total = this.els.graphs.getBoundingClientRect().width;
        const w = this.els.npuWrap.getBoundingClientRect().width + dx;
        const frac = Math.max(0.15, Math.min(0.85, w / total));
        this.els.npuWrap.style.flex = `0 0 ${frac * 100}%`;
      });
    const detSplit = this.els.dashboard.querySelector('.splitter.horizontal');
    if (detSplit)
      drag(detSplit, (_dx, dy) => {
        const hgt = this.els.details.getBoundingClientRect().height - dy;
        this.detailsCollapsed = false;
        this.els.details.style.height = `${Math.max(60, Math.min(window.innerHeight * 0.8, hgt))}px`;
        this.applyPaneLayout();
      });
  }

  private applyPaneLayout(): void {
    const single = !this.config || this.config.isSingleGraph;
    const l = paneLayout({ page: this.page, tab: this.tab, single, benchCollapsed: this.benchCollapsed, detailsCollapsed: this.detailsCollapsed });
    this.els.benchWrap.style.display = l.benchPane ? '' : 'none';
    const split = this.els.graphs.querySelector('.splitter') as HTMLElement | null;
    if (split) split.style.display = l.paneSplitter ? '' : 'none';
    if (!l.benchPane) this.els.npuWrap.style.flex = '1 1 auto';
    else if (this.els.npuWrap.style.flex.startsWith('1 1')) this.els.npuWrap.style.flex = '';
    this.els.details.classList.toggle('collapsed', !l.details);
    this.els.panel.style.display = l.panel ? '' : 'none';
    this.els.dashboard.style.display = l.dashboard ? '' : 'none';
    this.els.convert.style.display = l.convert ? '' : 'none';
    this.panes.NPU.setMinimap(this.showMini.NPU);
    this.panes.Bench.setMinimap(this.showMini.Bench);
  }

  // ------------------------------------------------------------------ header

  private renderHeader(): void {
    const hd = this.els.header;
    clear(hd);
    const single = !this.config || this.config.isSingleGraph;
    const legendItem = (cls: string, label: Key, tip?: Key) =>
      h('span.legend-item', { title: tip ? t(tip) : '' }, h(`span.legend-shape.${cls}`), t(label));
    const legend = h('div.legend', { testid: 'legend' },
      legendItem('module', 'legend.module'),
      legendItem('leaf', 'legend.leaf', 'tooltip.leaf'),
      legendItem('apilist', 'legend.apiList', 'tooltip.apiList'),
      legendItem('fused', 'legend.fused', 'tooltip.fused'));
    const colors = h('div.legend.colors', { testid: 'colorLegend' });
    if (this.mode === 'overflow') {
      for (const lvl of ['medium', 'high', 'critical'] as const)
        colors.append(h('span.legend-item', null, h('span.swatch', { style: { background: OVERFLOW_COLORS[lvl] } }), t(lvl)));
    } else if (!single) {
      for (const b of this.colors.buckets)
        colors.append(h('span.legend-item', { title: b.description ?? '' }, h('span.swatch', { style: { background: b.color } }), `${b.level ? t((b.level in LEVEL_COLORS ? b.level : 'pass') as Key) : ''} [${b.lo}, ${b.hi})`));
      colors.append(h('span.legend-item', { title: this.colors.unmatchedDescription ?? '' }, h('span.swatch', { style: { background: this.colors.unmatched } }), t('unmatched')));
    }
    const toggle = (testid: string, label: string, title: Key, on: boolean, click: () => void) =>
      h('button.toggle', { testid, title: t(title), 'aria-pressed': String(on), class: on ? 'on' : '', on: { click } }, label);
    const tools = h('div.tools', null,
      toggle('npuMiniMapToggle', '▣', 'header.debugMap', this.showMini.NPU, () => {
        this.showMini.NPU = !this.showMini.NPU;
        this.renderHeader();
        this.applyPaneLayout();
      }),
      single ? null : toggle('benchMiniMapToggle', '▣', 'header.benchMap', this.showMini.Bench, () => {
        this.showMini.Bench = !this.showMini.Bench;
        this.renderHeader();
        this.applyPaneLayout();
      }),
      single ? null : toggle('syncExpandToggle', '⇆', 'header.syncExpand', this.syncExpand, () => {
        this.syncExpand = !this.syncExpand;
        this.renderHeader();
      }),
      single ? null : toggle('benchCollapseToggle', this.benchCollapsed ? '◧' : '◨', 'bench', !this.benchCollapsed, () => {
        this.benchCollapsed = !this.benchCollapsed;
        this.renderHeader();
        this.applyPaneLayout();
      }),
      toggle('detailsToggle', this.detailsCollapsed ? '▴' : '▾', 'nodeInfo', !this.detailsCollapsed, () => {
        this.detailsCollapsed = !this.detailsCollapsed;
        this.renderHeader();
        this.applyPaneLayout();
      }),
      this.shortcutsButton(),
      toggle('fitScreenButton', '⤢', 'header.fit', false, () => {
        this.panes.NPU.fit();
        this.panes.Bench.fit();
      }));
    hd.append(legend, colors, tools);
  }

  private shortcutsButton(): HTMLElement {
    const rows: [string, Key][] = [
      ['W', 'shortcut.zoomIn'],
      ['S', 'shortcut.zoomOut'],
      ['A', 'shortcut.left'],
      ['D', 'shortcut.right'],
      ['↑ ↓', 'shortcut.upDown'],
      ['F', 'shortcut.fit'],
      [t('key.wheel'), 'shortcut.wheel'],
      [t('key.drag'), 'shortcut.drag'],
      [t('key.dbl'), 'shortcut.dbl'],
      ['/', 'shortcut.search'],
    ];
    const pop = h('div.popover.shortcuts', { testid: 'shortcutsList' },
      h('table', null, ...rows.map(([k, d]) => h('tr', null, h('td', null, h('kbd', null, k)), h('td', null, t(d))))));
    pop.style.display = 'none';
    const b = h('button.toggle', { testid: 'shortcutsButton', title: t('header.shortcuts'), on: { click: () => (pop.style.display = pop.style.display === 'none' ? '' : 'none') } }, '⌨');
    return h('span.popover-anchor', null, b, pop);
  }

  private globalKey(e: KeyboardEvent): void {
    const target = e.target as HTMLElement | null;
    if (target && (target.tagName === 'INPUT' || target.tagName === 'SELECT' || target.tagName === 'TEXTAREA')) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === '/') {
      e.preventDefault();
      this.openTab('search');
      setTimeout(() => (this.els.panelBody.querySelector('input') as HTMLInputElement | null)?.focus(), 0);
      return;
    }
    if (e.key === 'Escape') {
      document.querySelectorAll('.ctxmenu').forEach((m) => m.remove());
      return;
    }
    // W/S/A/D act on the pane under the mouse (or the debug pane), even without focus.
    if (document.activeElement && (document.activeElement as HTMLElement).classList.contains('pane-canvas')) return;
    const pane = this.panes.Bench.isHovered() ? this.panes.Bench : this.panes.NPU;
    if (pane.key(e)) e.preventDefault();
  }

  // ------------------------------------------------------------------ data selection

  private watching = false;
  private starting = false;

  async start(): Promise<void> {
    if (!this.watching) {
      this.watching = true;
      this.watchCatalog();
    }
    this.starting = true;
    try {
      await this.startOnce();
    } finally {
      this.starting = !this.meta.run ? false : true;
    }
  }

  private async startOnce(): Promise<void> {
    const url = readUrlState(location.search);
    let saved: ReturnType<typeof readUrlState>;
    try {
      saved = JSON.parse(sessionStorage.getItem('graph-ascend-selection') || '{}');
    } catch {
      saved = {};
    }
    const want = url.run ? url : saved;
    const listed = await this.loadCatalog();
    const runs = Object.keys(this.catalog);
    if (!listed) {
      this.openTab('data');
      return;
    }
    if (!runs.length) {
      this.setStatus(t('noFiles'));
      this.showPage('convert');
      return;
    }
    const run = want.run && this.catalog[want.run] ? want.run : runs[0];
    const tags = this.catalog[run].tags;
    const tag = want.tag && tags.includes(want.tag) ? want.tag : tags[0];
    await this.selectFile(run, tag, want);
  }

  /** Lists runs and files; false when the server could not (the error is shown). */
  async loadCatalog(): Promise<boolean> {
    const r = await post<Catalog>('load_meta_dir');
    if (!r.success || !r.data) {
      this.catalog = {};
      const msg = `load_meta_dir: ${r.error ?? 'failed'}`;
      this.catalogFailure = tidyError(msg);
      this.setStatus(msg, true);
      this.toast(msg, 'error');
      return false;
    }
    this.catalogFailure = '';
    this.applyCatalog(r.data, (r as unknown as { error?: unknown }).error);
    return true;
  }

  private catalogErrorKey = '';
  private catalogFailure = '';

  private applyCatalog(data: Catalog, errs: unknown): void {
    const sorted: Catalog = {};
    for (const k of Object.keys(data).sort(naturalCompare)) sorted[k] = { ...data[k], tags: [...(data[k].tags ?? [])].sort(naturalCompare) };
    this.catalog = sorted;
    this.catalogErrors = Array.isArray(errs) ? (errs as CatalogError[]) : [];
    const key = JSON.stringify(this.catalogErrors);
    // Each new set of problems is announced once; the data panel keeps listing them.
    if (this.catalogErrors.length && key !== this.catalogErrorKey) {
      const list = h('ul.catalog-errors', { testid: 'catalogErrors' }, ...this.catalogErrors.map((e) => h('li', null, h('b', null, `${e.run}/${e.tag}`), ': ', e.info)));
      this.modal(t('risk_warning'), list, 'catalogErrorModal');
    }
    this.catalogErrorKey = key;
    this.renderSider();
    if (this.tab === 'data') this.renderPanel();
  }

  /** Keep the file list live (the server pushes a new listing when files appear, change or go). */
  private watchCatalog(): void {
    const ctrl = new AbortController();
    let failures = 0;
    const loop = async () => {
      for (;;) {
        const err = await followSse('watchMetaDir', (data) => {
          failures = 0;
          let msg: { data?: Catalog; error?: unknown };
          try {
            msg = parseLooseJson(data) as typeof msg;
          } catch {
            return;
          }
          if (!msg || typeof msg !== 'object' || !msg.data) return;
          const before = JSON.stringify(this.catalog);
          this.applyCatalog(msg.data, msg.error);
          if (JSON.stringify(this.catalog) !== before && this.meta.run && !this.catalog[this.meta.run]?.tags.includes(this.meta.tag))
            this.setStatus(t('fileGone', { file: `${this.meta.run}/${this.meta.tag}` }), true);
          // Files appeared in an empty logdir: open the first one (once; start() may be running already).
          if (before === '{}' && Object.keys(this.catalog).length && !this.meta.run && !this.starting) void this.start();
        }, ctrl.signal);
        // An older server without the route answers 404: stop. Otherwise retry, slower each time.
        if (err && /HTTP 40[45]/.test(err)) return;
        failures++;
        if (failures > 20) return;
        await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** Math.min(failures, 5))));
      }
    };
    void loop();
  }

  /** How many file loads are under way (tests wait for 0 before they click on boxes). */
  fileLoads = 0;

  async selectFile(run: string, tag: string, want: { step?: number; rank?: number; micro?: number; node?: string; side?: string } = {}): Promise<void> {
    this.fileLoads++;
    try {
      await this.loadFile(run, tag, want);
    } finally {
      this.fileLoads--;
    }
  }

  private async loadFile(run: string, tag: string, want: { step?: number; rank?: number; micro?: number; node?: string; side?: string }): Promise<void> {
    const seq = ++this.loadSeq;
    this.meta = { ...this.meta, run, tag, lang: lang(), microStep: -1, step: 0, rank: 0 };
    this.config = null;
    this.selected = null;
    this.lastInfo = null;
    this.nodeList = null;
    this.relations = null;
    this.filterHits = [];
    this.setStatus(t('loading'));
    const ld = await get('loadGraphData', metaQuery(this.meta));
    if (seq !== this.loadSeq) return;
    if (!ld.success) {
      this.failGraph(`loadGraphData (${run}/${tag}): ${ld.error}`);
      return;
    }
    const cf = await post<ConfigInfo>('loadGraphConfigInfo', { metaData: this.meta });
    if (seq !== this.loadSeq) return;
    if (!cf.success || !cf.data) {
      this.failGraph(`loadGraphConfigInfo (${run}/${tag}): ${cf.error ?? 'no data'}`);
      return;
    }
    this.config = cf.data;
    this.colors = buildColorTable(cf.data.colors);
    if (this.mode === 'overflow' && !cf.data.overflowCheck) this.mode = 'precision';
    const steps = cf.data.steps?.length ? cf.data.steps : [0];
    const ranks = cf.data.ranks?.length ? cf.data.ranks : [0];
    this.meta.step = want.step !== undefined && steps.includes(want.step) ? want.step : steps[0];
    this.meta.rank = want.rank !== undefined && ranks.includes(want.rank) ? want.rank : ranks[0];
    this.meta.microStep = want.micro !== undefined && want.micro >= -1 && want.micro < (cf.data.microSteps || 0) ? want.micro : -1;
    if (this.meta.step !== steps[0] || this.meta.rank !== ranks[0]) {
      const again = await get('loadGraphData', metaQuery(this.meta));
      if (!again.success) this.toast(`loadGraphData: ${again.error}`, 'error');
    }
    this.renderChrome();
    await this.loadRoots();
    if (seq !== this.loadSeq) return;
    if (want.node) {
      const side: PaneSide = want.side === 'Bench' ? 'Bench' : 'NPU';
      await this.jumpTo(side, want.node);
    }
  }

  /** Step, rank or micro step changed: the same file, another graph. */
  async changeView(patch: Partial<Pick<MetaData, 'step' | 'rank' | 'microStep'>>): Promise<void> {
    Object.assign(this.meta, patch);
    this.selected = null;
    this.lastInfo = null;
    this.nodeList = null;
    this.relations = null;
    this.filterHits = [];
    if (patch.step !== undefined || patch.rank !== undefined) {
      const ld = await get('loadGraphData', metaQuery(this.meta));
      if (!ld.success) {
        this.failGraph(`loadGraphData: ${ld.error}`);
        return;
      }
    }
    await this.loadRoots();
    this.renderPanel();
    this.renderDetails();
  }

  private sideName(side: PaneSide): Side {
    return this.config?.isSingleGraph ? 'Single' : side;
  }

  private async loadRoots(): Promise<void> {
    const sides: PaneSide[] = this.config?.isSingleGraph ? ['NPU'] : ['NPU', 'Bench'];
    this.hier = { NPU: {}, Bench: {} };
    this.panes.NPU.setScene(null);
    this.panes.Bench.setScene(null);
    const answers = await Promise.all(
      sides.map((s) => post<Record<string, RenderNode>>('changeNodeExpandState', { nodeInfo: { nodeName: 'root', nodeType: this.sideName(s) }, metaData: this.meta })),
    );
    let ok = true;
    answers.forEach((r, i) => {
      const s = sides[i];
      if (!r.success || !r.data) {
        ok = false;
        this.failGraph(`changeNodeExpandState (${s}, root): ${r.error ?? 'no data'}`);
        return;
      }
      this.setHierarchy(s, r.data, 'fit');
    });
    if (ok) this.setStatus('');
    this.saveSelection();
    this.renderDetails();
    if (this.tab === 'precision' && this.filterValues.size) void this.runFilter();
  }

  private failGraph(msg: string): void {
    this.setStatus(msg, true);
    this.toast(msg, 'error');
  }

  private setStatus(message: string, error = false): void {
    const msg = tidyError(message);
    this.els.status.textContent = msg;
    this.els.status.classList.toggle('error', error);
    this.els.status.style.display = msg ? '' : 'none';
    this.els.status.dataset.testid = error ? 'graphError' : 'status';
  }

  private fillFor(side: PaneSide): (n: RenderNode) => string {
    const single = Boolean(this.config?.isSingleGraph);
    return (n) => nodeFill(n, single ? 'Single' : side, this.mode, this.colors, single);
  }

  setHierarchy(side: PaneSide, data: Record<string, RenderNode>, how: 'fit' | 'keep' = 'keep'): void {
    this.hier[side] = visibleOnly(data);
    const scene = new Scene(this.hier[side], this.fillFor(side));
    this.panes[side].setScene(scene, how);
    this.panes[side].selected = this.selected?.side === side ? this.selected.key : this.panes[side].selected;
    this.panes[side].el.dataset.nodes = String(scene.boxes.length);
  }

  private recolor(): void {
    for (const s of ['NPU', 'Bench'] as const) {
      const sc = this.panes[s].scene;
      if (sc) {
        sc.recolor(this.fillFor(s));
        this.panes[s].overflowMode = this.mode === 'overflow';
        this.panes[s].setScene(sc);
      }
    }
  }

  private saveSelection(): void {
    const st = {
      run: this.meta.run,
      tag: this.meta.tag,
      step: this.meta.step,
      rank: this.meta.rank,
      micro: this.meta.microStep,
      node: this.selected?.key,
      side: this.selected?.side,
    };
    try {
      history.replaceState(null, '', `${location.pathname}${writeUrlState(location.search, st)}${location.hash}`);
      sessionStorage.setItem('graph-ascend-selection', JSON.stringify(st));
    } catch {
      /* sandboxed: the selection is simply not kept */
    }
  }

  // ------------------------------------------------------------------ graph interactions

  private paneEvents(side: PaneSide) {
    return {
      select: (key: string) => void this.selectNode(side, key),
      toggle: (key: string) => void this.toggleNode(side, key),
      context: (key: string, x: number, y: number) => this.contextMenu(side, key, x, y),
    };
  }

  async selectNode(side: PaneSide, key: string, reveal = false): Promise<void> {
    // The answer below is stale once anything else is selected, even the same name on the other side.
    const selection = { side, key };
    this.selected = selection;
    this.detailError = '';
    this.lastInfo = null;
    this.renderDetails(); // never show the previous node's numbers under the new selection
    this.panes[side].selected = key;
    this.panes[side].invalidate();
    const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
    const match = this.config?.isSingleGraph ? undefined : matchedOf(this.hier[side], key);
    const exact = this.hier[side][key]?.matchedNodeLink?.length ? match : undefined;
    this.panes[other].selected = exact && this.hier[other][exact] ? exact : undefined;
    this.panes[other].invalidate();
    if (reveal) this.panes[side].reveal(key);
    this.saveSelection();
    this.renderPanelSelection();
    const r = await post<NodeInfo>('getNodeInfo', { nodeInfo: { nodeName: key, nodeType: this.sideName(side) }, metaData: this.meta });
    if (this.selected !== selection) return;
    if (!r.success) {
      this.lastInfo = null;
      this.detailError = tidyError(`getNodeInfo (${key}): ${r.error}`);
      this.toast(this.detailError, 'error');
    } else {
      this.lastInfo = r.data ?? null;
      this.detailError = '';
    }
    this.renderDetails();
  }

  async toggleNode(side: PaneSide, key: string, sync = true): Promise<void> {
    const node = this.hier[side][key];
    if (!node || node.nodeType === 1 || node.isRoot) return;
    const wantExpanded = !node.expand;
    const r = await post<Record<string, RenderNode>>('changeNodeExpandState', { nodeInfo: { nodeName: key, nodeType: this.sideName(side) }, metaData: this.meta });
    if (!r.success || !r.data) {
      this.toast(`changeNodeExpandState (${key}): ${r.error ?? 'no data'}`, 'error');
      return;
    }
    this.setHierarchy(side, r.data);
    if (sync && this.syncExpand && !this.config?.isSingleGraph) {
      const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
      const m = matchedOf(this.hier[side], key);
      if (m) await this.setExpanded(other, m, wantExpanded);
    }
  }

  /** Make `key` on `side` expanded (or collapsed), locating it first if it is not shown. */
  private async setExpanded(side: PaneSide, key: string, expanded: boolean): Promise<void> {
    const send = async () => {
      const r = await post<Record<string, RenderNode>>('changeNodeExpandState', { nodeInfo: { nodeName: key, nodeType: this.sideName(side) }, metaData: this.meta });
      if (r.success && r.data) this.setHierarchy(side, r.data);
      else this.toast(`changeNodeExpandState (${side} ${key}): ${r.error ?? 'no data'}`, 'error');
      return r.success;
    };
    if (!this.hier[side][key]) {
      if (!expanded) return;
      if (!(await send())) return;
    }
    const n = this.hier[side][key];
    if (n && n.nodeType !== 1 && !n.isRoot && Boolean(n.expand) !== expanded) await send();
  }

  /** Select a node by name, expanding its ancestors on the server when it is not shown. */
  async jumpTo(side: PaneSide, name: string): Promise<void> {
    const key = unprefixed(name);
    if (!this.hier[side][key]) {
      const r = await post<Record<string, RenderNode>>('changeNodeExpandState', { nodeInfo: { nodeName: key, nodeType: this.sideName(side) }, metaData: this.meta });
      if (!r.success || !r.data) {
        this.toast(`changeNodeExpandState (${key}): ${r.error ?? 'no data'}`, 'error');
        return;
      }
      this.setHierarchy(side, r.data);
    }
    if (!this.hier[side][key]) {
      this.toast(t('nodeNotFound', { node: key }), 'error');
      return;
    }
    const done = this.selectNode(side, key, true);
    if (this.syncExpand && !this.config?.isSingleGraph) await this.revealMatched(side, key);
    await done;
  }

  /** Show the node's own match in the other pane (expanding its ancestors there), outlined and centred. */
  private async revealMatched(side: PaneSide, key: string): Promise<void> {
    const link = this.hier[side][key]?.matchedNodeLink;
    const m = link && link.length ? link[link.length - 1] : undefined;
    if (!m) return;
    const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
    if (!this.hier[other][m]) {
      const r = await post<Record<string, RenderNode>>('changeNodeExpandState', { nodeInfo: { nodeName: m, nodeType: this.sideName(other) }, metaData: this.meta });
      if (!r.success || !r.data) return;
      this.setHierarchy(other, r.data);
    }
    if (this.selected?.side !== side || this.selected.key !== key || !this.hier[other][m]) return;
    this.panes[other].selected = m;
    this.panes[other].reveal(m);
  }

  private contextMenu(side: PaneSide, key: string, x: number, y: number): void {
    document.querySelectorAll('.ctxmenu').forEach((m) => m.remove());
    const node = this.hier[side][key];
    if (!node) return;
    const items: HTMLElement[] = [];
    const close = () => menu.remove();
    if (!this.config?.isSingleGraph) {
      const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
      const m = matchedOf(this.hier[side], key);
      items.push(h('button.ctx-item', { testid: 'locateMatchedNode', disabled: !m, on: { click: () => { close(); if (m) void this.jumpTo(other, m); } } }, t('positionMatchNode')));
    }
    const md = node.matchedDistributed as MatchedDistributed | null;
    if (md && md.nodes_info && Object.keys(md.nodes_info).length) {
      const title = (`dataCommunication.${md.communications_type ?? 'send_receive'}` as Key);
      items.push(h('div.ctx-title', null, t(title in { 'dataCommunication.send': 1, 'dataCommunication.receive': 1, 'dataCommunication.send_receive': 1 } ? title : 'dataCommunication.send_receive')));
      for (const [rank, info] of Object.entries(md.nodes_info)) {
        const color = precisionColor(this.colors, info[0]);
        items.push(
          h('button.ctx-item', { testid: `peerRank${rank}`, on: { click: () => { close(); void this.gotoPeer(Number(rank), String(info[1])); } } },
            h('span.swatch', { style: { background: color } }), `rank${rank}  ${info[1]}`),
        );
      }
    }
    if (!items.length) return;
    const menu = h('div.ctxmenu', { testid: 'contextMenu', 'data-side': side, 'data-node': key, style: { left: `${x}px`, top: `${y}px` } }, ...items);
    document.body.append(menu);
    setTimeout(() => window.addEventListener('click', close, { once: true }), 0);
  }

  private async gotoPeer(rank: number, node: string): Promise<void> {
    if (this.config && !this.config.ranks.includes(rank)) {
      this.toast(t('rankMissing', { rank }), 'error');
      return;
    }
    await this.changeView({ rank });
    await this.jumpTo('NPU', node);
  }

  // ------------------------------------------------------------------ side panels

  renderPanel(): void {
    const body = this.els.panelBody;
    clear(body);
    this.els.panel.style.display = this.page === 'dashboard' && this.tab ? '' : 'none';
    if (this.tab === 'data') body.append(this.dataPanel());
    else if (this.tab === 'precision') body.append(this.precisionPanel());
    else if (this.tab === 'search') body.append(this.searchPanel());
    else if (this.tab === 'match') body.append(this.matchPanel());
  }

  /** What the result lists need from the page: jump to a node, say something. */
  private readonly hitHost = {
    jump: (side: PaneSide, name: string) => void this.jumpTo(side, name),
    toast: (text: string) => this.toast(text),
  };

  private renderPanelSelection(): void {
    if (this.tab === 'match') this.prefillMatch();
  }

  private field(label: string, control: HTMLElement): HTMLElement {
    return h('label.field', null, h('span.field-label', null, label), control);
  }

  private dataPanel(): HTMLElement {
    const runs = Object.keys(this.catalog);
    const runSel = h('select', { testid: 'runSelect', on: { change: () => { const r = runSel.value; void this.selectFile(r, this.catalog[r].tags[0]); } } },
      ...runs.map((r) => option(r, r, r === this.meta.run)));
    const tags = this.catalog[this.meta.run]?.tags ?? [];
    const tagSel = h('select', { testid: 'tagSelect', on: { change: () => void this.selectFile(this.meta.run, tagSel.value) } },
      ...tags.map((x) => option(x, x, x === this.meta.tag)));
    const c = this.config;
    const stepSel = h('select', { testid: 'stepSelect', on: { change: () => void this.changeView({ step: Number(stepSel.value) }) } },
      ...(c?.steps ?? []).map((s) => option(String(s), String(s), s === this.meta.step)));
    const rankSel = h('select', { testid: 'rankSelect', on: { change: () => void this.changeView({ rank: Number(rankSel.value) }) } },
      ...(c?.ranks ?? []).map((s) => option(String(s), String(s), s === this.meta.rank)));
    const micro = c?.microSteps ? [-1, ...Array.from({ length: c.microSteps }, (_, i) => i)] : [-1];
    const microSel = h('select', { testid: 'microStepSelect', disabled: !c?.microSteps, on: { change: () => void this.changeView({ microStep: Number(microSel.value) }) } },
      ...micro.map((m) => option(String(m), m === -1 ? t('all') : String(m), m === this.meta.microStep)));
    const errs = this.catalogErrors.length
      ? h('div.catalog-errors', { testid: 'catalogErrorList' }, h('h4', null, t('risk_warning')), ...this.catalogErrors.map((e) => h('div.error-line', null, `${e.run}/${e.tag}: ${e.info}`)))
      : null;
    return h('div.panel-section', { testid: 'dataPanel' }, h('h3', null, t('sider.dataSelection')),
      this.catalogFailure ? h('div.error-box', { testid: 'catalogFailure' }, this.catalogFailure) : runs.length ? null : h('p.muted', null, t('noFiles')),
      this.field(t('dir'), runSel), this.field(t('file'), tagSel), this.field(t('step'), stepSel), this.field(t('rank'), rankSel), this.field(t('microStep'), microSel), errs);
  }

  // precision / overflow filter
  private precisionPanel(): HTMLElement {
    const c = this.config;
    const single = Boolean(c?.isSingleGraph);
    const seg = h('div.segmented', { testid: 'precisionSegmented' },
      h('button', { class: this.mode === 'precision' ? 'on' : '', on: { click: () => this.setMode('precision') } }, t('accuracy_error')),
      h('button', { testid: 'overflowMode', title: c?.overflowCheck ? '' : t('noOverflowData'), disabled: !c?.overflowCheck, class: this.mode === 'overflow' ? 'on' : '', on: { click: () => this.setMode('overflow') } }, t('overflow')));
    const values: [string, Key, string][] = this.mode === 'overflow'
      ? [['medium', 'medium', OVERFLOW_COLORS.medium], ['high', 'high', OVERFLOW_COLORS.high], ['critical', 'critical', OVERFLOW_COLORS.critical]]
      : [['pass', 'pass', this.colors.buckets[0]?.color ?? LEVEL_COLORS.pass], ['warning', 'warning', this.colors.buckets[1]?.color ?? LEVEL_COLORS.warning], ['error', 'error', this.colors.buckets[2]?.color ?? LEVEL_COLORS.error], ['-1', 'unmatched', this.colors.unmatched]];
    const counts = new Map<string, number>();
    for (const hit of this.filterHits) counts.set(hit.status, (counts.get(hit.status) ?? 0) + 1);
    const boxes = h('div.checks', { testid: 'precisionChecks' },
      ...values.map(([v, label, color]) => {
        const status = v === '-1' ? 'unmatched' : v;
        const cb = h('input', { type: 'checkbox', testid: `filter-${status}`, checked: this.filterValues.has(v), disabled: single && this.mode === 'precision' && v !== '-1',
          on: { change: () => { if (cb.checked) this.filterValues.add(v); else this.filterValues.delete(v); void this.runFilter(); } } });
        return h('label.check', null, cb, h('span.swatch', { style: { background: color } }), t(label), counts.has(status) ? h('span.count', null, ` (${counts.get(status)})`) : null);
      }));
    const list = hitList(this.hitHost, this.filterHits.map((x) => x.name), (name) => {
      const hit = this.filterHits.find((x) => x.name === name);
      return hit ? (hit.status === 'unmatched' ? this.colors.unmatched : this.mode === 'overflow' ? OVERFLOW_COLORS[hit.status] ?? '#fff' : this.colors.buckets.find((b) => b.level === hit.status)?.color ?? LEVEL_COLORS[hit.status] ?? '#fff') : '#fff';
    }, 'precision', 'NPU');
    return h('div.panel-section', { testid: 'precisionPanel' }, h('h3', null, t('sider.precisionFiltering')), seg, boxes, list);
  }

  private setMode(mode: ColorMode): void {
    if (this.mode === mode) return;
    this.mode = mode;
    this.filterValues.clear();
    this.filterHits = [];
    this.recolor();
    this.renderHeader();
    this.renderPanel();
  }

  private async runFilter(): Promise<void> {
    if (!this.filterValues.size) {
      this.filterHits = [];
      this.highlight([]);
      this.renderPanel();
      return;
    }
    const values = [...this.filterValues].map((v) => (v === '-1' ? -1 : v));
    const r = await post<FilterHit[]>('filterNodes', { metaData: this.meta, type: this.mode, values });
    if (!r.success) {
      this.toast(`filterNodes: ${r.error}`, 'error');
      this.filterHits = [];
    } else this.filterHits = Array.isArray(r.data) ? r.data : [];
    this.highlight(this.filterHits.map((x) => x.name));
    this.renderPanel();
  }

  private highlight(names: string[]): void {
    this.panes.NPU.highlighted = new Set(names.map(unprefixed));
    this.panes.NPU.invalidate();
  }

  // search
  private searchSide: PaneSide = 'NPU';
  private searchQuery = '';

  private async ensureNodeList(): Promise<void> {
    const key = metaKey(this.meta);
    if (this.nodeList?.key === key) return;
    const r = await post<{ npuNodeList?: string[]; benchNodeList?: string[] }>('loadGraphAllNodeList', { metaData: this.meta });
    if (!r.success || !r.data) {
      this.toast(`loadGraphAllNodeList: ${r.error ?? 'no data'}`, 'error');
      return;
    }
    this.setNodeList(r.data.npuNodeList ?? [], r.data.benchNodeList ?? []);
  }

  /** The names the search panel looks through (the benchmark also feeds it 1M names). */
  setNodeList(npu: string[], bench: string[]): void {
    this.nodeList = { key: metaKey(this.meta), NPU: new NameIndex(npu), Bench: new NameIndex(bench) };
    if (this.tab === 'search') this.renderPanel();
  }

  private searchPanel(): HTMLElement {
    const single = Boolean(this.config?.isSingleGraph);
    const radio = (side: PaneSide, label: Key) =>
      h('label.radio', null, h('input', { type: 'radio', name: 'searchSide', testid: `searchSide${side}`, checked: this.searchSide === side, disabled: side === 'Bench' && single,
        on: { change: () => { this.searchSide = side; update(); } } }), t(label));
    const input = h('input.search', { type: 'search', maxLength: 200, placeholder: t('searchName'), testid: 'searchInput', value: this.searchQuery });
    const listHost = h('div.list-host');
    const update = () => {
      this.searchQuery = input.value;
      clear(listHost);
      const nl = this.nodeList;
      if (!nl) {
        listHost.append(h('p.muted', null, t('loading')));
        return;
      }
      const index = this.searchSide === 'Bench' ? nl.Bench : nl.NPU;
      const names = index.names;
      const t0 = performance.now();
      const hits = index.search(this.searchQuery);
      const found = new Array<string>(hits.length);
      for (let i = 0; i < hits.length; i++) found[i] = names[hits[i]];
      listHost.dataset.searchMs = (performance.now() - t0).toFixed(1);
      listHost.append(hitList(this.hitHost, found, null, 'search', () => this.searchSide));
    };
    input.addEventListener('input', update);
    update();
    return h('div.panel-section', { testid: 'searchPanel' }, h('h3', null, t('sider.nodeSearch')),
      h('div.radios', null, radio('NPU', 'debug'), radio('Bench', 'bench')), input, listHost);
  }

  // matching
  private async ensureRelations(force = false): Promise<void> {
    const key = metaKey(this.meta);
    if (!force && this.relations?.key === key) return;
    const r = await post<MatchedRelations>('loadGraphMatchedRelations', { metaData: this.meta });
    if (!r.success || !r.data) {
      this.toast(`loadGraphMatchedRelations: ${r.error ?? 'no data'}`, 'error');
      return;
    }
    this.relations = { key, data: r.data };
    if (this.tab === 'match') this.renderPanel();
  }

  private matchState = { npuUn: '', benchUn: '', npuM: '', benchM: '', children: false, unChildren: false };

  private picker(id: string, names: string[], value: string, onPick: (v: string) => void): HTMLElement {
    const input = h('input.picker', { type: 'search', testid: `${id}Select`, value, placeholder: t('selectNode'), list: `${id}-options`, maxLength: 4096 });
    const dl = h('datalist', { id: `${id}-options` });
    const fill = () => {
      clear(dl);
      const q = input.value.toLowerCase();
      let n = 0;
      for (const name of names) {
        if (q && !name.toLowerCase().includes(q)) continue;
        dl.append(option(name, name));
        if (++n >= 300) break;
      }
    };
    input.addEventListener('input', () => {
      fill();
      onPick(input.value);
    });
    fill();
    const idx = () => names.indexOf(input.value);
    const move = (d: number) => {
      const i = Math.max(0, Math.min(names.length - 1, idx() + d));
      if (names[i] !== undefined) {
        input.value = names[i];
        onPick(names[i]);
      }
    };
    return h('div.picker-row', null, input, dl,
      h('button.icon', { testid: `${id}Up`, on: { click: () => move(-1) } }, '↑'),
      h('button.icon', { testid: `${id}Down`, on: { click: () => move(1) } }, '↓'));
  }

  private prefillMatch(): void {
    if (!this.selected || !this.relations) return;
    const d = this.relations.data;
    const { side, key } = this.selected;
    const ms = this.matchState;
    if (side === 'NPU') {
      if (d.npuUnMatchNodes.includes(key)) ms.npuUn = key;
      else if (d.npuMatchNodes[key]) {
        ms.npuM = key;
        ms.benchM = d.npuMatchNodes[key];
      }
    } else {
      if (d.benchUnMatchNodes.includes(key)) ms.benchUn = key;
      else if (d.benchMatchNodes[key]) {
        ms.benchM = key;
        ms.npuM = d.benchMatchNodes[key];
      }
    }
    this.renderPanel();
  }

  private matchPanel(): HTMLElement {
    const rel = this.relations?.data;
    const c = this.config;
    if (!rel || !c) return h('div.panel-section', { testid: 'matchPanel' }, h('p.muted', null, t('loading')));
    const ms = this.matchState;
    const task = c.task;
    const cfgSel = h('select', { testid: 'configurationSelect', on: { change: () => void this.matchByConfig(cfgSel.value) } },
      option('', t('notSelected')), ...(c.matchedConfigFiles ?? []).map((f) => option(f, f)));
    const cfg = task === 'all' ? null : h('div.match-block', null, h('h4', null, t('configFile')), cfgSel,
      h('button', { testid: 'configurationGenerateButton', title: `${this.meta.tag}_${this.meta.step}_${this.meta.rank}.vis.config`, on: { click: () => void this.saveRelations() } }, t('generateConfigFile')));
    const matchedNpu = Object.keys(rel.npuMatchNodes);
    const matchedBench = Object.keys(rel.benchMatchNodes);
    const childBox = (testid: string, prop: 'children' | 'unChildren') =>
      task === 'all' ? null : h('label.check', null, h('input', { type: 'checkbox', testid, checked: ms[prop], on: { change: (e: Event) => (ms[prop] = (e.target as HTMLInputElement).checked) } }), t('manageDesendant'));
    return h('div.panel-section', { testid: 'matchPanel' }, h('h3', null, t('sider.nodeMatching')), cfg,
      h('div.match-block', null, h('h4', null, t('matchNodes')),
        h('div.field-label', { testid: 'debugUnmatchedCount' }, t('debugUnmatched', { count: rel.npuUnMatchNodes.length })),
        this.picker('debugUnmatched', rel.npuUnMatchNodes, ms.npuUn, (v) => (ms.npuUn = v)),
        h('div.field-label', { testid: 'benchUnmatchedCount' }, t('benchUnmatched', { count: rel.benchUnMatchNodes.length })),
        this.picker('benchUnmatched', rel.benchUnMatchNodes, ms.benchUn, (v) => (ms.benchUn = v)),
        childBox('matchDesendantCheckbox', 'children'),
        h('button.primary', { testid: 'matchButton', on: { click: () => void this.match(true) } }, t('matchNodes'))),
      h('div.match-block', null, h('h4', null, t('unmatchNodes')),
        h('div.field-label', { testid: 'debugMatchedCount' }, t('debugMatched', { count: matchedNpu.length })),
        this.picker('debugMatched', matchedNpu, ms.npuM, (v) => { ms.npuM = v; if (rel.npuMatchNodes[v]) { ms.benchM = rel.npuMatchNodes[v]; this.renderPanel(); } }),
        h('div.field-label', { testid: 'benchMatchedCount' }, t('benchMatched', { count: matchedBench.length })),
        this.picker('benchMatched', matchedBench, ms.benchM, (v) => { ms.benchM = v; if (rel.benchMatchNodes[v]) { ms.npuM = rel.benchMatchNodes[v]; this.renderPanel(); } }),
        childBox('unmatchDesendantCheckbox', 'unChildren'),
        h('button', { testid: 'unmatchButton', on: { click: () => void this.match(false) } }, t('unmatchNodes'))));
  }

  private async match(add: boolean): Promise<void> {
    const ms = this.matchState;
    const npu = add ? ms.npuUn : ms.npuM;
    const bench = add ? ms.benchUn : ms.benchM;
    if (!npu || !bench) {
      this.toast(t('selectNode'), 'error');
      return;
    }
    const body = add
      ? { npuNodeName: npu, benchNodeName: bench, metaData: this.meta, isMatchChildren: ms.children }
      : { npuNodeName: npu, benchNodeName: bench, metaData: this.meta, isUnMatchChildren: ms.unChildren };
    const r = await post<MatchedRelations>(add ? 'addMatchNodes' : 'deleteMatchNodes', body);
    if (!r.success || !r.data) {
      this.toast(`${add ? 'addMatchNodes' : 'deleteMatchNodes'}: ${r.error ?? 'failed'}`, 'error');
      return;
    }
    this.toast(t(add ? 'matchSuccess' : 'unmatchSuccess'), 'success');
    if (add) ms.npuUn = ms.benchUn = '';
    else ms.npuM = ms.benchM = '';
    await this.afterMatch(r.data);
  }

  private async afterMatch(data: MatchedRelations): Promise<void> {
    this.relations = { key: metaKey(this.meta), data };
    for (const side of ['NPU', 'Bench'] as const) {
      const r = await post<Record<string, RenderNode>>('updateHierarchyData', { graphType: side, metaData: this.meta });
      if (r.success && r.data) this.setHierarchy(side, r.data);
      else this.toast(`updateHierarchyData (${side}): ${r.error ?? 'no data'}`, 'error');
    }
    if (this.selected) await this.selectNode(this.selected.side, this.selected.key);
    this.renderPanel();
  }

  private async matchByConfig(file: string): Promise<void> {
    if (!file) return;
    const r = await post<MatchedRelations>('addMatchNodesByConfig', { configFile: file, metaData: this.meta });
    if (!r.success || !r.data) {
      this.toast(`addMatchNodesByConfig: ${r.error ?? 'failed'}`, 'error');
      return;
    }
    const total = r.data.matchedTotal ?? 0, success = r.data.matchedSuccess ?? 0;
    this.toast(t('matchSuccessByConfig', { total, success, failed: total - success }), 'success');
    await this.afterMatch(r.data);
  }

  private async saveRelations(): Promise<void> {
    const r = await post<string>('saveMatchedRelations', { metaData: this.meta });
    if (!r.success) {
      this.toast(`saveMatchedRelations: ${r.error}`, 'error');
      return;
    }
    const name = String(r.data ?? '');
    if (this.config && name && !this.config.matchedConfigFiles.includes(name)) this.config.matchedConfigFiles.push(name);
    this.toast(t('file_generate_success', { name }), 'success');
    this.renderPanel();
  }

  // ------------------------------------------------------------------ node details

  renderDetails(): void {
    const body = this.els.detailsBody;
    clear(body);
    const single = !this.config || this.config.isSingleGraph;
    const tabs = h('div.tabs', null,
      h('button.tab', { testid: 'detailsTableTab', class: this.detailTab === 'table' ? 'on' : '', on: { click: () => { this.detailTab = 'table'; this.renderDetails(); } } }, t(single ? 'singleDetails' : 'comparisonDetails')),
      h('button.tab', { testid: 'detailsInfoTab', class: this.detailTab === 'info' ? 'on' : '', on: { click: () => { this.detailTab = 'info'; this.renderDetails(); } } }, t('nodeInfo')));
    body.append(tabs);
    const info = this.lastInfo;
    if (this.selected && this.detailError) {
      body.append(h('div.error-box', { testid: 'detailsError' }, this.detailError));
      return;
    }
    if (!this.selected || !info) {
      body.append(h('p.muted', { testid: 'detailsEmpty' }, this.selected ? t('loading') : t('selectNodeHint')));
      return;
    }
    const npu = isNode(info.npu) ? info.npu : null;
    const bench = isNode(info.bench) ? info.bench : null;
    if (this.detailTab === 'table') body.append(detailTableView(npu, bench, single, this.config?.tooltips ?? null));
    else body.append(nodeInfoView(npu, bench, single, (text) => void this.copy(text)));
  }

  private async copy(text: string): Promise<void> {
    try {
      await navigator.clipboard.writeText(text);
      this.toast(t('copied'), 'success');
    } catch {
      const ta = h('textarea', { style: { position: 'fixed', opacity: '0' } });
      ta.value = text;
      document.body.append(ta);
      ta.select();
      const ok = document.execCommand('copy');
      ta.remove();
      this.toast(ok ? t('copied') : t('copyFailed'), ok ? 'success' : 'error');
    }
  }

  /** After a conversion: re-list files and open the new one. */
  async openConverted(outputFile: string): Promise<void> {
    await this.loadCatalog();
    const parts = outputFile.replace(/\\/g, '/').split('/').filter(Boolean);
    const file = parts[parts.length - 1] ?? '';
    const tag = file.endsWith('.vis.db') ? file.slice(0, -7) : file;
    const run = parts.length >= 2 ? parts[parts.length - 2] : Object.keys(this.catalog).find((r) => this.catalog[r].tags.includes(tag));
    this.showPage('dashboard');
    if (run && this.catalog[run]) await this.selectFile(run, this.catalog[run].tags.includes(tag) ? tag : this.catalog[run].tags[0]);
    else this.toast(t('notListed', { file: outputFile }), 'error');
  }
}

