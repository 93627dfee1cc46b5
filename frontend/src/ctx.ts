/**
 * What a page module may ask of the page: the store, the graph panes, and the few actions that
 * cross modules (load a file, jump to a node, say something). The app implements it; modules take
 * it in their constructor, so none of them imports another panel.
 */
import type { ColorMode } from './colors';
import type { GraphPane } from './pane';
import type { PageName, PaneSide, Store, Tab } from './store';
import type { UrlState } from './state';
import type { MetaData, RenderNode } from './types';

export type ToastKind = 'info' | 'error' | 'success';

/** What to show once a file is open (a link's view, say): the file itself is named apart. */
export type Want = Omit<UrlState, 'run' | 'tag'>;

export interface PageCtx {
  readonly store: Store;
  readonly panes: Record<PaneSide, GraphPane>;
  toast(message: string, kind?: ToastKind): void;
  openTab(tab: Tab): void;
  showPage(page: PageName): void;
  /** Open a file (run/tag), optionally at a step, rank, micro step and node. */
  selectFile(run: string, tag: string, want?: Want): Promise<void>;
  /** Step, rank or micro step changed: the same file, another graph. */
  changeView(patch: Partial<Pick<MetaData, 'step' | 'rank' | 'microStep'>>): Promise<void>;
  selectNode(side: PaneSide, key: string, reveal?: boolean): Promise<void>;
  /** Select a node by name, expanding its ancestors when it is not shown. */
  jumpTo(side: PaneSide, name: string): Promise<void>;
  /** Show a node of another step and rank, selected (diagnosis.ts `openNodeAt`). */
  openNodeAt(at: { step: number; rank: number; node: string; microStep?: number }): Promise<void>;
  setHierarchy(side: PaneSide, data: Record<string, RenderNode>, how?: 'fit' | 'keep'): void;
  /** The colour mode changed: paint the boxes again. */
  recolor(): void;
  /** Colour the boxes by another mode (the filter's hits are dropped: they belong to the old one). */
  setColorMode(mode: ColorMode): void;
  /** The view, as a shareable link names it. */
  view(): UrlState;
}
