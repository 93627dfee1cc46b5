/**
 * The GRAPH_ASCEND page's coordinator: builds the page's frame, owns the store and the graph panes,
 * loads files and views, and routes graph gestures (select, expand, jump). Every panel is its own
 * module drawn from the store (see docs/frontend.md, "Layout"); this file maps each changed part
 * of the store to the module that draws it.
 */
import { get, metaQuery, post, tidyError } from './api';
import { CatalogWatch } from './catalogWatch';
import { buildColorTable, nodeFill, type ColorMode } from './colors';
import { diagnosisFill, openNodeAt, sourcesInside } from './diagnosis';
import { openContextMenu } from './contextMenu';
import { ConvertPage, convertedRun } from './convert';
import type { PageCtx, ToastKind, Want } from './ctx';
import { renderDetails } from './detailsPanel';
import { clear, h } from './dom';
import { initialLang, lang, setLang, t } from './i18n';
import { notice, toast } from './notify';
import { GraphPane } from './pane';
import { dataPanel } from './panels/data';
import { DiagnosisPanel } from './panels/diagnosis';
import { MapPanel } from './panels/map';
import { FilterPanel } from './panels/filter';
import { MatchPanel } from './panels/match';
import { SearchPanel } from './panels/search';
import { DARK, LIGHT } from './render';
import { Scene } from './scene';
import { renderSider } from './sider';
import { bindSplitters } from './splitters';
import { linkedState, reflectInAddress } from './link';
import { LINK_PANELS, matchedOf, metaKey, paneLayout, panelOfTab, readUrlState, unprefixed, visibleOnly, writeUrlState, type UrlState } from './state';
import { Store, type PageName, type Part, type PaneSide, type Tab } from './store';
import { followTensorBoardTheme } from './theme';
import { renderToolbar } from './toolbar';
import { shownReport } from './report/mode';
import { renderWhere } from './where';
import { bindPopovers } from './popovers';
import type { MetaData, RenderNode } from './types';

interface Els {
  sider: HTMLElement;
  panel: HTMLElement;
  panelBody: HTMLElement;
  header: HTMLElement;
  where: HTMLElement;
  graphs: HTMLElement;
  benchWrap: HTMLElement;
  npuWrap: HTMLElement;
  details: HTMLElement;
  detailsBody: HTMLElement;
  status: HTMLElement;
  toasts: HTMLElement;
  convert: HTMLElement;
  dashboard: HTMLElement;
}

/** Where this tab keeps its last view (a query string), for a reload. */
const SAVED_VIEW = 'graph-ascend-view';
/** At most this many expanded modules per side go into a link (and are expanded again). */
const MAX_RESTORED = 300;

export class App implements PageCtx {
  readonly root: HTMLElement;
  readonly store: Store;
  panes!: Record<PaneSide, GraphPane>;
  private els!: Els;
  private readonly convertPage: ConvertPage;
  private readonly catalogWatch: CatalogWatch;
  private readonly filterPanel: FilterPanel;
  private readonly searchPanel: SearchPanel;
  private readonly matchPanel: MatchPanel;
  private readonly diagnosisPanel: DiagnosisPanel;
  readonly mapPanel: MapPanel;
  private loadSeq = 0;
  private starting = false;
  /** Expanding the modules a link names: the address is written once, at the end. */
  private restoring = false;

  constructor(host: HTMLElement) {
    setLang(initialLang());
    this.store = new Store();
    this.store.meta.lang = lang();
    this.root = host;
    this.convertPage = new ConvertPage(this);
    this.catalogWatch = new CatalogWatch({
      store: this.store,
      toast: (m, k) => this.toast(m, k),
      setStatus: (m, e) => this.setStatus(m, e),
      filesAppeared: () => {
        // Once: start() may be running already.
        if (!this.starting) void this.start();
      },
      problemNotice: (message) => {
        if (message) this.store.errors.push(message);
        notice(this.els.toasts, 'catalog', message, { label: t('showProblems'), run: () => this.openTab('data') });
      },
    });
    this.filterPanel = new FilterPanel(this);
    this.searchPanel = new SearchPanel(this);
    this.matchPanel = new MatchPanel(this);
    this.diagnosisPanel = new DiagnosisPanel(this);
    this.mapPanel = new MapPanel(this);
    this.build();
    this.store.subscribe((part) => this.draw(part));
    followTensorBoardTheme(this.store, () => this.renderChrome());
    window.addEventListener('keydown', (e) => this.globalKey(e));
    bindPopovers(document);
    (window as unknown as { __graphAscend: App }).__graphAscend = this;
  }

  // The fields the e2e tests and the benchmark read through window.__graphAscend.
  get meta(): MetaData {
    return this.store.meta;
  }
  get selected(): { side: PaneSide; key: string } | null {
    return this.store.selected;
  }
  get hier(): Record<PaneSide, Record<string, RenderNode>> {
    return this.store.hier;
  }
  get errors(): string[] {
    return this.store.errors;
  }
  get fileLoads(): number {
    return this.store.fileLoads;
  }
  get syncExpand(): boolean {
    return this.store.syncExpand;
  }
  set syncExpand(on: boolean) {
    this.store.syncExpand = on;
  }

  // ------------------------------------------------------------------ frame and drawing

  private build(): void {
    clear(this.root);
    const sider = h('nav.sider', { testid: 'sider' });
    const panelBody = h('div.panel-body');
    const panel = h('aside.panel', { testid: 'controlPanel' }, panelBody);
    const header = h('header.board-header', { testid: 'boardHeader' });
    const where = h('div.where', { testid: 'whereLine', role: 'status' });
    const npuWrap = h('div.pane-wrap', { testid: 'debugGraph' });
    const benchWrap = h('div.pane-wrap', { testid: 'benchGraph' });
    const graphs = h('div.graphs', null, npuWrap, h('div.splitter.vertical', { testid: 'paneSplitter' }), benchWrap);
    const detailsBody = h('div.details-body');
    const details = h('section.details', { testid: 'nodeDetails' }, detailsBody);
    const status = h('div.status', { testid: 'status' });
    const dashboard = h('main.content', null, header, where, status, graphs, h('div.splitter.horizontal', { testid: 'detailsSplitter' }), details);
    const convert = h('main.content.convert-page', { testid: 'conversionPage', style: { display: 'none' } });
    const content = h('div.main', null, dashboard, convert);
    const toasts = h('div.toasts', { testid: 'toasts' });
    this.root.append(h('div.app', null, sider, panel, h('div.splitter.vertical.panel-splitter', { testid: 'panelSplitter' }), content), toasts);
    this.els = { sider, panel, panelBody, header, where, graphs, benchWrap, npuWrap, details, detailsBody, status, toasts, convert, dashboard };
    const theme = () => (this.store.dark ? DARK : LIGHT);
    this.panes = {
      NPU: new GraphPane(npuWrap, 'NPU', this.paneEvents('NPU'), theme),
      Bench: new GraphPane(benchWrap, 'Bench', this.paneEvents('Bench'), theme),
    };
    bindSplitters({ root: this.root, panel, graphs, npuWrap, details, dashboard }, () => {
      this.store.detailsCollapsed = false;
      this.store.changed('layout');
    });
    this.renderChrome();
  }

  /** Draw one part of the page from the store. */
  private draw(part: Part): void {
    switch (part) {
      case 'sider':
        return renderSider(this.els.sider, this, () => this.renderChrome());
      case 'toolbar':
        renderToolbar(this.els.header, this);
        return renderWhere(this.els.where, this);
      case 'panel':
        return this.renderPanel();
      case 'details':
        return renderDetails(this.els.detailsBody, this);
      case 'layout':
        return this.applyPaneLayout();
      case 'selection':
        if (this.store.tab === 'match') this.matchPanel.prefill();
        return;
    }
  }

  /** Everything that depends on language or theme. */
  renderChrome(): void {
    document.documentElement.lang = lang() === 'zh' ? 'zh-CN' : 'en';
    document.documentElement.classList.toggle('dark', this.store.dark);
    this.store.changed('sider', 'toolbar', 'panel', 'details', 'layout');
    if (this.store.page === 'convert') this.convertPage.render(this.els.convert);
    for (const p of Object.values(this.panes)) p.themeChanged();
  }

  private renderPanel(): void {
    const s = this.store;
    const body = this.els.panelBody;
    clear(body);
    this.els.panel.style.display = s.page === 'dashboard' && s.tab ? '' : 'none';
    if (s.tab === 'data') body.append(dataPanel(this));
    else if (s.tab === 'precision') body.append(this.filterPanel.render());
    else if (s.tab === 'search') body.append(this.searchPanel.render());
    else if (s.tab === 'match') body.append(this.matchPanel.render());
    else if (s.tab === 'diagnosis') body.append(this.diagnosisPanel.render());
    else if (s.tab === 'map') body.append(this.mapPanel.render());
    this.els.panel.classList.toggle('wide', s.tab === 'map');
  }

  private applyPaneLayout(): void {
    const s = this.store;
    const l = paneLayout({ page: s.page, tab: s.tab, single: s.single, benchCollapsed: s.benchCollapsed, detailsCollapsed: s.detailsCollapsed });
    this.els.benchWrap.style.display = l.benchPane ? '' : 'none';
    const split = this.els.graphs.querySelector('.splitter') as HTMLElement | null;
    if (split) split.style.display = l.paneSplitter ? '' : 'none';
    if (!l.benchPane) this.els.npuWrap.style.flex = '1 1 auto';
    else if (this.els.npuWrap.style.flex.startsWith('1 1')) this.els.npuWrap.style.flex = '';
    this.els.details.classList.toggle('collapsed', !l.details);
    this.els.panel.style.display = l.panel ? '' : 'none';
    this.els.dashboard.style.display = l.dashboard ? '' : 'none';
    this.els.convert.style.display = l.convert ? '' : 'none';
    this.panes.NPU.setMinimap(s.showMini.NPU);
    this.panes.Bench.setMinimap(s.showMini.Bench);
  }

  openTab(tab: Tab): void {
    // A report has no divergence map (it holds a few steps and ranks): its diagnosis instead.
    if (tab === 'map' && shownReport()) tab = 'diagnosis';
    if (this.store.page !== 'dashboard') this.showPage('dashboard');
    this.store.tab = tab;
    this.store.changed('sider', 'panel');
    this.saveSelection();
    if (tab === 'search') void this.searchPanel.ensureNodeList();
    if (tab === 'match') void this.matchPanel.ensureRelations();
    if (tab === 'diagnosis') void this.diagnosisPanel.ensure(this.store.mode === 'diagnosis');
  }

  showPage(page: PageName): void {
    this.store.page = page;
    this.applyPaneLayout();
    if (page === 'convert') void this.convertPage.open(this.els.convert);
    this.store.changed('sider');
  }

  toast(message: string, kind: ToastKind = 'info'): void {
    toast(this.els.toasts, this.store.errors, message, kind);
  }

  private setStatus(message: string, error = false): void {
    const msg = tidyError(message);
    this.els.status.textContent = msg;
    this.els.status.classList.toggle('error', error);
    this.els.status.style.display = msg ? '' : 'none';
    this.els.status.dataset.testid = error ? 'graphError' : 'status';
  }

  private failGraph(msg: string): void {
    this.setStatus(msg, true);
    this.toast(msg, 'error');
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
    // W/S/A/D act on the pane under the pointer, whichever was clicked last; away from both, on
    // the last one clicked, else the debug pane.
    const panes = [this.panes.NPU, this.panes.Bench];
    const pane = panes.find((p) => p.isHovered()) ?? panes.find((p) => p.isFocused()) ?? this.panes.NPU;
    if (pane.key(e)) e.preventDefault();
  }

  /** The names the search panel looks through (the benchmark feeds it 1M names). */
  setNodeList(npu: string[], bench: string[]): void {
    this.searchPanel.setNodeList(npu, bench);
  }

  // ------------------------------------------------------------------ files and views

  async start(): Promise<void> {
    this.catalogWatch.watch();
    this.starting = true;
    try {
      await this.startOnce();
    } finally {
      this.starting = Boolean(this.store.meta.run);
    }
  }

  private async startOnce(): Promise<void> {
    // A link (TensorBoard's address), then the page's own address, then this tab's last view.
    const linked = linkedState();
    const url = readUrlState(location.search);
    let saved: UrlState;
    try {
      saved = readUrlState(sessionStorage.getItem(SAVED_VIEW) || '');
    } catch {
      saved = {};
    }
    // A report opens on its first source (its step and rank, the Diagnosis panel, the colours
    // "where the error is introduced"), unless its address names a view; a report's tab storage
    // is shared by every report opened from disk, so it is not read.
    const report = shownReport();
    const want = report ? (url.run ? url : reportLanding(report)) : linked.run ? linked : url.run ? url : saved;
    const listed = await this.catalogWatch.load();
    const catalog = this.store.catalog;
    const runs = Object.keys(catalog);
    if (!listed) {
      this.openTab('data');
      return;
    }
    if (!runs.length) {
      this.setStatus(t('noFiles'));
      this.showPage('convert');
      return;
    }
    if (want.run && !(catalog[want.run] && (!want.tag || catalog[want.run].tags.includes(want.tag)))) {
      // Say so rather than open another file as if it were the one asked for.
      this.setStatus(t('linkedFileGone', { file: `${want.run}/${want.tag ?? ''}` }), true);
      this.openTab('data');
      return;
    }
    const run = want.run ?? runs[0];
    const tags = catalog[run].tags;
    const tag = want.tag ?? tags[0];
    await this.selectFile(run, tag, want);
  }

  async selectFile(run: string, tag: string, want: Want = {}): Promise<void> {
    this.store.fileLoads++;
    try {
      await this.loadFile(run, tag, want);
    } finally {
      this.store.fileLoads--;
    }
  }

  private async loadFile(run: string, tag: string, want: Want): Promise<void> {
    const s = this.store;
    const seq = ++this.loadSeq;
    s.meta = { ...s.meta, run, tag, lang: lang(), microStep: -1, step: 0, rank: 0 };
    s.config = null;
    s.resetView();
    this.setStatus(t('loading'));
    const ld = await get('loadGraphData', metaQuery(s.meta));
    if (seq !== this.loadSeq) return;
    if (!ld.success) {
      this.failGraph(`loadGraphData (${run}/${tag}): ${ld.error}`);
      return;
    }
    const cf = await post('loadGraphConfigInfo', { metaData: s.meta });
    if (seq !== this.loadSeq) return;
    if (!cf.success || !cf.data) {
      this.failGraph(`loadGraphConfigInfo (${run}/${tag}): ${cf.error ?? 'no data'}`);
      return;
    }
    s.config = cf.data;
    s.colors = buildColorTable(cf.data.colors);
    if (want.colors) s.mode = want.colors;
    if (s.mode === 'overflow' && !cf.data.overflowCheck) s.mode = 'precision';
    if (s.mode === 'diagnosis' && (cf.data.isSingleGraph || s.structureOnly)) s.mode = 'precision';
    const steps = cf.data.steps?.length ? cf.data.steps : [0];
    const ranks = cf.data.ranks?.length ? cf.data.ranks : [0];
    s.meta.step = want.step !== undefined && steps.includes(want.step) ? want.step : steps[0];
    s.meta.rank = want.rank !== undefined && ranks.includes(want.rank) ? want.rank : ranks[0];
    s.meta.microStep = want.micro !== undefined && want.micro >= -1 && want.micro < (cf.data.microSteps || 0) ? want.micro : -1;
    if (this.notInReport()) {
      this.renderChrome();
      return;
    }
    if (s.meta.step !== steps[0] || s.meta.rank !== ranks[0]) {
      const again = await get('loadGraphData', metaQuery(s.meta));
      if (!again.success) this.toast(`loadGraphData: ${again.error}`, 'error');
    }
    this.renderChrome();
    await this.loadRoots();
    if (seq !== this.loadSeq) return;
    await this.restoreExpanded(want, seq);
    if (seq !== this.loadSeq) return;
    if (want.node) {
      const side: PaneSide = want.side === 'Bench' ? 'Bench' : 'NPU';
      await this.jumpTo(side, want.node);
    }
    // The panel the link was shared with (a panel this page does not have is left closed).
    if (seq === this.loadSeq && want.panel) this.openTab(LINK_PANELS[want.panel] as Tab);
  }

  /** Expand the modules a link (or the view before a reload) had expanded, ancestors first. */
  private async restoreExpanded(want: Want, seq: number): Promise<void> {
    const s = this.store;
    this.restoring = true;
    try {
      for (const side of ['NPU', 'Bench'] as const) {
        if (side === 'Bench' && s.single) break;
        const names = (side === 'NPU' ? want.open : want.openBench) ?? [];
        for (const name of names.slice(0, MAX_RESTORED)) {
          if (seq !== this.loadSeq) return;
          await this.setExpanded(side, name, true);
        }
      }
    } finally {
      this.restoring = false;
    }
    if (seq === this.loadSeq) this.saveSelection();
  }

  async changeView(patch: Partial<Pick<MetaData, 'step' | 'rank' | 'microStep'>>): Promise<void> {
    const s = this.store;
    Object.assign(s.meta, patch);
    s.resetView();
    s.changed('toolbar');
    if (this.notInReport()) {
      s.changed('panel', 'details');
      return;
    }
    if (patch.step !== undefined || patch.rank !== undefined) {
      const ld = await get('loadGraphData', metaQuery(s.meta));
      if (!ld.success) {
        this.failGraph(`loadGraphData: ${ld.error}`);
        return;
      }
    }
    await this.loadRoots();
    s.changed('panel', 'details');
  }

  /**
   * In a report, a step and rank it does not hold: the panes emptied and, in their place, what it
   * holds (not an error: the report says what it left out). False elsewhere.
   */
  private notInReport(): boolean {
    const report = shownReport();
    const m = this.store.meta;
    if (!report || report.holds(m.step, m.rank)) return false;
    this.store.hier = { NPU: {}, Bench: {} };
    this.panes.NPU.setScene(null);
    this.panes.Bench.setScene(null);
    const held = report.held().map((p) => t('report.heldPoint', p)).join(', ');
    this.setStatus(t('report.notHeld', { step: m.step, rank: m.rank, held }));
    this.els.status.dataset.testid = 'reportNotHeld';
    this.saveSelection();
    return true;
  }

  private async loadRoots(): Promise<void> {
    const s = this.store;
    const sides: PaneSide[] = s.config?.isSingleGraph ? ['NPU'] : ['NPU', 'Bench'];
    s.hier = { NPU: {}, Bench: {} };
    this.panes.NPU.setScene(null);
    this.panes.Bench.setScene(null);
    const answers = await Promise.all(
      sides.map((side) => post('changeNodeExpandState', { nodeInfo: { nodeName: 'root', nodeType: s.sideName(side) }, metaData: s.meta })),
    );
    let ok = true;
    answers.forEach((r, i) => {
      const side = sides[i];
      if (!r.success || !r.data) {
        ok = false;
        this.failGraph(`changeNodeExpandState (${side}, root): ${r.error ?? 'no data'}`);
        return;
      }
      this.setHierarchy(side, r.data, 'fit');
    });
    if (ok) this.setStatus('');
    this.saveSelection();
    s.changed('details');
    if (s.tab === 'precision' && s.filterValues.size) void this.filterPanel.run();
    if (s.mode === 'diagnosis' || s.tab === 'diagnosis') void this.diagnosisPanel.ensure(s.mode === 'diagnosis');
    // The line above the panes says where the first source is: the list alone, asked quietly.
    else if (!s.single && !s.structureOnly) void this.diagnosisPanel.ensure(false, true);
    s.changed('toolbar');
  }

  /** The view as a link names it: file, step, rank, micro step, selection, expanded modules. */
  view(): UrlState {
    const s = this.store;
    const expanded = (side: PaneSide) =>
      Object.entries(s.hier[side])
        .filter(([, n]) => n.expand && !n.isRoot)
        .map(([k]) => k)
        .slice(0, MAX_RESTORED);
    return {
      run: s.meta.run,
      tag: s.meta.tag,
      step: s.meta.step,
      rank: s.meta.rank,
      micro: s.meta.microStep,
      node: s.selected?.key,
      side: s.selected?.side,
      open: expanded('NPU'),
      openBench: s.single ? [] : expanded('Bench'),
      colors: s.mode === 'precision' ? undefined : s.mode,
      panel: s.page === 'dashboard' ? panelOfTab(s.tab) : undefined,
    };
  }

  /** Keep the view in the page's address, TensorBoard's address and this tab's storage. */
  private saveSelection(): void {
    if (this.restoring || !this.store.meta.run) return;
    const st = this.view();
    try {
      history.replaceState(null, '', `${location.pathname}${writeUrlState(location.search, st)}${location.hash}`);
      sessionStorage.setItem(SAVED_VIEW, writeUrlState('', st));
    } catch {
      /* sandboxed: the selection is simply not kept */
    }
    reflectInAddress(st);
  }

  /** After a conversion: re-list files and open the new one. */
  async openConverted(outputFile: string): Promise<void> {
    await this.catalogWatch.load();
    const found = convertedRun(outputFile, this.store.catalog);
    this.showPage('dashboard');
    if (found) await this.selectFile(found.run, found.tag);
    else this.toast(t('notListed', { file: outputFile }), 'error');
  }

  // ------------------------------------------------------------------ graph interactions

  private fillFor(side: PaneSide): (n: RenderNode) => string {
    const s = this.store;
    const single = Boolean(s.config?.isSingleGraph);
    if (s.mode === 'diagnosis') {
      // The verdicts of this view only (others would colour the wrong step or rank).
      const view = s.diagnosis?.statesKey === metaKey(s.meta) ? s.diagnosis : null;
      return (n) => diagnosisFill(view, unprefixed(n.name), n, single ? 'Single' : side, s.colors);
    }
    return (n) => nodeFill(n, single ? 'Single' : side, s.mode, s.colors, single);
  }

  /** How many sources each box holds inside it: marked in the mode "where the error is introduced" only. */
  private markFor(side: PaneSide): (n: RenderNode) => number {
    const s = this.store;
    if (s.mode !== 'diagnosis' || s.config?.isSingleGraph) return () => 0;
    const view = s.diagnosis?.statesKey === metaKey(s.meta) ? s.diagnosis : null;
    return (n) => sourcesInside(view, unprefixed(n.name), side);
  }

  setHierarchy(side: PaneSide, data: Record<string, RenderNode>, how: 'fit' | 'keep' = 'keep'): void {
    const s = this.store;
    s.hier[side] = visibleOnly(data);
    const scene = new Scene(s.hier[side], this.fillFor(side), this.markFor(side));
    this.panes[side].setScene(scene, how);
    this.panes[side].selected = s.selected?.side === side ? s.selected.key : this.panes[side].selected;
    this.panes[side].el.dataset.nodes = String(scene.boxes.length);
  }

  setColorMode(mode: ColorMode): void {
    const s = this.store;
    if (s.mode === mode) return;
    s.mode = mode;
    s.filterValues.clear();
    s.filterHits = [];
    this.recolor();
    s.changed('toolbar', 'panel');
    this.saveSelection();
  }

  recolor(): void {
    for (const side of ['NPU', 'Bench'] as const) {
      const sc = this.panes[side].scene;
      if (sc) {
        sc.recolor(this.fillFor(side), this.markFor(side));
        this.panes[side].overflowMode = this.store.mode === 'overflow';
        this.panes[side].setScene(sc);
      }
    }
  }

  private paneEvents(side: PaneSide) {
    return {
      select: (key: string) => void this.selectNode(side, key),
      toggle: (key: string) => void this.toggleNode(side, key),
      context: (key: string, x: number, y: number) => openContextMenu(this, side, key, x, y),
      hideMinimap: () => {
        this.store.showMini[side] = false;
        this.store.changed('toolbar', 'layout');
      },
    };
  }

  async selectNode(side: PaneSide, key: string, reveal = false): Promise<void> {
    const s = this.store;
    // The answer below is stale once anything else is selected, even the same name on the other side.
    const selection = { side, key };
    s.selected = selection;
    s.detailError = '';
    s.lastInfo = null;
    s.changed('details'); // never show the previous node's numbers under the new selection
    this.panes[side].selected = key;
    this.panes[side].invalidate();
    const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
    const match = s.config?.isSingleGraph ? undefined : matchedOf(s.hier[side], key);
    const exact = s.hier[side][key]?.matchedNodeLink?.length ? match : undefined;
    this.panes[other].selected = exact && s.hier[other][exact] ? exact : undefined;
    this.panes[other].invalidate();
    if (reveal) this.panes[side].reveal(key);
    this.saveSelection();
    s.changed('selection');
    const r = await post('getNodeInfo', { nodeInfo: { nodeName: key, nodeType: s.sideName(side) }, metaData: s.meta });
    if (s.selected !== selection) return;
    if (!r.success) {
      s.lastInfo = null;
      s.detailError = tidyError(`getNodeInfo (${key}): ${r.error}`);
      this.toast(s.detailError, 'error');
    } else {
      s.lastInfo = r.data ?? null;
      s.detailError = '';
    }
    s.changed('details');
  }

  /** Ask the server to expand or collapse `key`; the answer is the side's new layout. */
  private async expandOnServer(side: PaneSide, key: string): Promise<boolean> {
    const s = this.store;
    const r = await post('changeNodeExpandState', { nodeInfo: { nodeName: key, nodeType: s.sideName(side) }, metaData: s.meta });
    if (!r.success || !r.data) {
      this.toast(`changeNodeExpandState (${side} ${key}): ${r.error ?? 'no data'}`, 'error');
      return false;
    }
    this.setHierarchy(side, r.data);
    this.saveSelection();
    return true;
  }

  async toggleNode(side: PaneSide, key: string, sync = true): Promise<void> {
    const s = this.store;
    const node = s.hier[side][key];
    if (!node || node.nodeType === 1 || node.isRoot) return;
    const wantExpanded = !node.expand;
    if (!(await this.expandOnServer(side, key))) return;
    if (sync && s.syncExpand && !s.config?.isSingleGraph) {
      const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
      const m = matchedOf(s.hier[side], key);
      if (m) await this.setExpanded(other, m, wantExpanded);
    }
  }

  /** Make `key` on `side` expanded (or collapsed), locating it first if it is not shown. */
  private async setExpanded(side: PaneSide, key: string, expanded: boolean): Promise<void> {
    const hier = () => this.store.hier[side];
    if (!hier()[key]) {
      if (!expanded) return;
      if (!(await this.expandOnServer(side, key))) return;
    }
    const n = hier()[key];
    if (n && n.nodeType !== 1 && !n.isRoot && Boolean(n.expand) !== expanded) await this.expandOnServer(side, key);
  }

  openNodeAt(at: { step: number; rank: number; node: string; microStep?: number }): Promise<void> {
    return openNodeAt(this, at);
  }

  async jumpTo(side: PaneSide, name: string): Promise<void> {
    const s = this.store;
    const key = unprefixed(name);
    // A report's step and rank it does not hold: said in place already (`notInReport`).
    if (shownReport()?.holds(s.meta.step, s.meta.rank) === false) return;
    if (!s.hier[side][key] && !(await this.expandOnServer(side, key))) return;
    if (!s.hier[side][key]) {
      this.toast(t('nodeNotFound', { node: key }), 'error');
      return;
    }
    const done = this.selectNode(side, key, true);
    if (s.syncExpand && !s.config?.isSingleGraph) await this.revealMatched(side, key);
    await done;
  }

  /** Show the node's own match in the other pane (expanding its ancestors there), outlined and centred. */
  private async revealMatched(side: PaneSide, key: string): Promise<void> {
    const s = this.store;
    const link = s.hier[side][key]?.matchedNodeLink;
    const m = link && link.length ? link[link.length - 1] : undefined;
    if (!m) return;
    const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
    if (!s.hier[other][m]) {
      const r = await post('changeNodeExpandState', { nodeInfo: { nodeName: m, nodeType: s.sideName(other) }, metaData: s.meta });
      if (!r.success || !r.data) return;
      this.setHierarchy(other, r.data);
      this.saveSelection();
    }
    if (s.selected?.side !== side || s.selected.key !== key || !s.hier[other][m]) return;
    this.panes[other].selected = m;
    this.panes[other].reveal(m);
  }
}

/** Where a report opens: its first source's step and rank, selected, in the diagnosis's colours. */
function reportLanding(report: NonNullable<ReturnType<typeof shownReport>>): UrlState {
  const d = report.data;
  const start = d.start ?? { ...d.meta, node: '' };
  const compare = Boolean(d.diagnosis);
  return {
    run: d.meta.run,
    tag: d.meta.tag,
    step: start.step,
    rank: start.rank,
    node: start.node || undefined,
    side: start.node ? 'NPU' : undefined,
    colors: compare ? 'diagnosis' : undefined,
    panel: compare ? 'diagnosis' : undefined,
  };
}
