/**
 * The page's state, in one place, with change notification. Modules read the fields directly and,
 * after changing some, call `changed(...)` with the parts of the page that must be drawn again; the
 * app (app.ts) is the one subscriber that maps each part to its module's `render`. Drawing is
 * synchronous, so a test that clicks and then reads the DOM sees the new state.
 */
import { buildColorTable, type ColorMode, type ColorTable } from './colors';
import { lang } from './i18n';
import type { DiagnosisView } from './diagnosis';
import type { NameIndex } from './state';
import type { Catalog, CatalogError, ConfigInfo, FilterHit, MatchedRelations, MetaData, NodeInfo, RenderNode, Side } from './types';

export type PaneSide = 'NPU' | 'Bench';
export type Tab = 'data' | 'precision' | 'match' | 'search' | 'diagnosis' | 'map' | null;
export type PageName = 'dashboard' | 'convert';

/** A part of the page that is drawn from the store: what `changed` names. */
export type Part = 'sider' | 'toolbar' | 'panel' | 'details' | 'layout' | 'selection';

export class Store {
  dark = false;
  /** The theme the user chose with the button (then TensorBoard's theme is no longer followed). */
  userTheme: 'light' | 'dark' | null = null;
  page: PageName = 'dashboard';
  tab: Tab = null;

  catalog: Catalog = {};
  catalogErrors: CatalogError[] = [];
  /** Why the file list could not be read ('' when it could). */
  catalogFailure = '';

  meta: MetaData = { run: '', tag: '', type: 'db', lang: lang(), microStep: -1, step: 0, rank: 0 };
  config: ConfigInfo | null = null;
  colors: ColorTable = buildColorTable(null);
  mode: ColorMode = 'precision';
  hier: Record<PaneSide, Record<string, RenderNode>> = { NPU: {}, Bench: {} };
  selected: { side: PaneSide; key: string } | null = null;

  syncExpand = true;
  showMini: Record<PaneSide, boolean> = { NPU: true, Bench: true };
  benchCollapsed = false;
  detailsCollapsed = false;

  /** Answers cached for the current view (file, step, rank, micro step): dropped by `resetView`. */
  nodeList: { key: string; NPU: NameIndex; Bench: NameIndex } | null = null;
  relations: { key: string; data: MatchedRelations } | null = null;
  filterHits: FilterHit[] = [];
  filterValues = new Set<string>();
  /** The Diagnosis panel's answer for the open file (its verdicts are for `statesKey`'s view). */
  diagnosis: DiagnosisView | null = null;
  diagnosisError = '';

  detailTab: 'table' | 'info' = 'table';
  lastInfo: NodeInfo | null = null;
  detailError = '';

  /** How many file loads are under way (tests wait for 0 before they click on boxes). */
  fileLoads = 0;
  /** Every error shown to the user this session (newest last), for support and for the e2e tests. */
  readonly errors: string[] = [];

  private listeners = new Set<(part: Part) => void>();

  /** A compare file shows two panes; a build file (or none yet) one. */
  get single(): boolean {
    return !this.config || this.config.isSingleGraph;
  }

  /** A structure-only compare (`task: structure`): nodes matched or not, no data, no precision. */
  get structureOnly(): boolean {
    return !this.single && this.config?.task === 'structure';
  }

  /** The side as the server names it: a build file's only graph is 'Single'. */
  sideName(side: PaneSide): Side {
    return this.config?.isSingleGraph ? 'Single' : side;
  }

  /** Another graph is shown: nothing selected, nothing cached for the previous one. */
  resetView(): void {
    this.selected = null;
    this.lastInfo = null;
    this.nodeList = null;
    this.relations = null;
    this.filterHits = [];
  }

  subscribe(fn: (part: Part) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed(...parts: Part[]): void {
    for (const part of parts) for (const fn of this.listeners) fn(part);
  }
}
