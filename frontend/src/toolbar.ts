/**
 * The header above the graphs: the shape legend, the colour legend of the current mode (a
 * structure-only compare: matched and unmatched only), and the toolbar (minimaps, synchronized
 * expansion, bench pane, details, shortcuts, copy link, pictures of the panes, fit).
 */
import { LEVEL_COLORS, OVERFLOW_COLORS, SOURCE_RED, WHITE } from './colors';
import { DIAGNOSIS_COLORS } from './diagnosis';
import type { PageCtx } from './ctx';
import { clear, h, saveBlob } from './dom';
import { t, type Key } from './i18n';
import { icon, type IconName } from './icons';
import { copyLinkButton } from './link';
import { PNG_MAX_AREA, PNG_MAX_SIDE, type LegendEntry, type PictureHeader, type ShapeKind } from './picture';
import type { PaneSide, Store } from './store';
import { reportDownloadButton } from './report/download';
import { pointText } from './where';

export function renderToolbar(el: HTMLElement, ctx: PageCtx): void {
  const s = ctx.store;
  clear(el);
  const single = s.single;
  const legend = h('div.legend', { testid: 'legend' },
    ...shapeLegend().map((e) => h('span.legend-item', { title: e.tip ?? '' }, h(`span.legend-shape.${e.shape ?? ''}`), e.label)));
  const colors = h('div.legend.colors', { testid: 'colorLegend' },
    ...colorLegend(s).map((e) => h('span.legend-item', { testid: e.testid, title: e.tip ?? '' }, swatch(e), e.label)));
  const toggle = (testid: string, glyph: IconName, title: Key, on: boolean, click: () => void, badge = '') =>
    h('button.toggle', { testid, title: t(title), 'aria-label': t(title), 'aria-pressed': String(on), class: on ? 'on' : '', 'data-badge': badge || null, on: { click } }, icon(glyph));
  const tools = h('div.tools', null,
    toggle('npuMiniMapToggle', 'minimap', 'header.debugMap', s.showMini.NPU, () => {
      s.showMini.NPU = !s.showMini.NPU;
      s.changed('toolbar', 'layout');
    }, single ? '' : 'D'),
    single ? null : toggle('benchMiniMapToggle', 'minimap', 'header.benchMap', s.showMini.Bench, () => {
      s.showMini.Bench = !s.showMini.Bench;
      s.changed('toolbar', 'layout');
    }, 'B'),
    single ? null : toggle('syncExpandToggle', 'sync', 'header.syncExpand', s.syncExpand, () => {
      s.syncExpand = !s.syncExpand;
      s.changed('toolbar');
    }),
    single ? null : toggle('benchCollapseToggle', s.benchCollapsed ? 'showBench' : 'hideBench', 'header.benchPane', !s.benchCollapsed, () => {
      s.benchCollapsed = !s.benchCollapsed;
      s.changed('toolbar', 'layout');
    }),
    toggle('detailsToggle', s.detailsCollapsed ? 'showDetails' : 'hideDetails', 'header.details', !s.detailsCollapsed, () => {
      s.detailsCollapsed = !s.detailsCollapsed;
      s.changed('toolbar', 'layout');
    }),
    shortcutsButton(),
    copyLinkButton(() => ctx.view()),
    pictureButton(ctx),
    reportDownloadButton(ctx),
    toggle('fitScreenButton', 'fit', 'header.fit', false, () => {
      ctx.panes.NPU.fitWhole();
      ctx.panes.Bench.fitWhole();
    }));
  el.append(legend, colors, tools);
}

/** What the boxes' colours say: the colour mode, as the store's mode and the file make it. */
export type ColourScheme = 'overflow' | 'diagnosis' | 'structure' | 'precision' | 'none';

export function colourScheme(s: Store): ColourScheme {
  if (s.mode === 'overflow') return 'overflow';
  if (s.mode === 'diagnosis' && !s.single) return 'diagnosis';
  if (s.structureOnly) return 'structure';
  return s.single ? 'none' : 'precision';
}

/** The colour scheme in words (a picture's title). */
export function colourSchemeWords(s: Store): string {
  const scheme = colourScheme(s);
  const key: Record<ColourScheme, Key> = {
    overflow: 'picture.modeOverflow',
    diagnosis: 'diag.modeIntroduced',
    structure: 'picture.modeStructure',
    precision: 'diag.modeOutput',
    none: 'picture.modeNone',
  };
  return t(key[scheme]);
}

/**
 * The colour legend of the current mode (a structure-only compare: matched and unmatched only;
 * a single graph in precision mode: none): what the toolbar shows and a picture's legend draws.
 */
export function colorLegend(s: Store): LegendEntry[] {
  const unmatched = (label: Key): LegendEntry => ({ color: s.colors.unmatched, label: t(label), tip: s.colors.unmatchedDescription ?? '' });
  switch (colourScheme(s)) {
    case 'overflow':
      return (['medium', 'high', 'critical'] as const).map((lvl) => ({ color: OVERFLOW_COLORS[lvl], label: t(lvl) }));
    case 'diagnosis':
      return [
        ...(['source', 'peer', 'inherited', 'fine'] as const).map((v) => ({ color: DIAGNOSIS_COLORS[v], label: t(`legend.${v}`) })),
        // A module holding sources is marked whatever its own verdict, so the top level shows where to dig.
        { color: DIAGNOSIS_COLORS.fine, border: SOURCE_RED, badge: 'n', label: t('legend.sourcesInside'), tip: t('legend.sourcesInsideTip'), testid: 'legendSourcesInside' },
        unmatched('unmatched'),
      ];
    case 'structure':
      // Nothing compared: matched boxes stay white (msprobe's file has no precision colours).
      return [{ color: WHITE, label: t('legend.matched'), tip: t('legend.matchedTip'), testid: 'legendMatched' }, unmatched('legend.unmatchedStructure')];
    case 'precision':
      return [
        ...s.colors.buckets.map((b) => ({ color: b.color, label: `${b.level ? t((b.level in LEVEL_COLORS ? b.level : 'pass') as Key) : ''} [${b.lo}, ${b.hi})`, tip: b.description ?? '' })),
        unmatched('unmatched'),
      ];
    case 'none':
      return [];
  }
}

/** A legend entry's swatch in the toolbar. */
function swatch(e: LegendEntry): HTMLElement {
  if (!e.badge) return h('span.swatch', { style: { background: e.color } });
  return h('span.swatch.sources-inside', { style: { background: e.color, borderColor: e.border ?? '' } }, h('span.badge', { style: { background: SOURCE_RED } }, e.badge));
}

/**
 * A whole-graph picture's title block: the file (and the side, in a compare), where it is (step,
 * rank, micro-batch: the words of the line above the panes), the colour mode, and its legend.
 */
export function pictureHeader(s: Store, side: PaneSide): PictureHeader {
  const m = s.meta;
  const file = `${m.run}/${m.tag}`;
  return {
    title: s.single ? file : `${file} · ${t(side === 'Bench' ? 'bench' : 'debug')}`,
    lines: [pointText(s), t('picture.colours', { mode: colourSchemeWords(s) })],
    legend: colorLegend(s),
    shapes: shapeLegend(),
  };
}

/** What the boxes' shapes mean (the toolbar's shape legend, also drawn in pictures after the colours). */
export function shapeLegend(): LegendEntry[] {
  const entry = (shape: ShapeKind, label: Key, tip?: Key): LegendEntry => ({ shape, color: '', label: t(label), tip: tip ? t(tip) : undefined });
  return [
    entry('module', 'legend.module'),
    entry('leaf', 'legend.leaf', 'tooltip.leaf'),
    entry('apilist', 'legend.apiList', 'tooltip.apiList'),
    entry('fused', 'legend.fused', 'tooltip.fused'),
  ];
}

/** The last line of a PNG scaled down to the browser's limits. */
export function pictureScaledNote(percent: number): string {
  return t('picture.scaled', { percent, side: PNG_MAX_SIDE, mp: Math.round(PNG_MAX_AREA / 1e6) });
}

type PictureKind = 'whole' | 'view';

/**
 * "Export picture": each shown pane as SVG or PNG, either the whole graph as expanded now (every
 * box, with a title block and the colour legend) or its current view as drawn (the PNG is the
 * canvas itself, the SVG the same drawing code painting into SVG), in the current theme.
 */
function pictureButton(ctx: PageCtx): HTMLElement {
  const s = ctx.store;
  const name = (side: PaneSide, kind: PictureKind, ext: string) =>
    `${s.meta.tag || 'graph'}_${side === 'Bench' ? 'bench' : 'debug'}${kind === 'whole' ? '_whole' : ''}.${ext}`;
  const save = async (side: PaneSide, kind: PictureKind, ext: 'svg' | 'png') => {
    try {
      const pane = ctx.panes[side];
      let blob: Blob;
      if (kind === 'view') blob = ext === 'svg' ? new Blob([pane.svg()], { type: 'image/svg+xml' }) : await pane.png();
      else if (ext === 'svg') blob = new Blob([pane.wholeSvg(pictureHeader(s, side))], { type: 'image/svg+xml' });
      else blob = await pane.wholePng(pictureHeader(s, side), pictureScaledNote);
      saveBlob(blob, name(side, kind, ext));
    } catch (e) {
      ctx.toast(`${t('header.picture')}: ${e instanceof Error ? e.message : String(e)}`, 'error');
    }
  };
  const sides: PaneSide[] = s.single || s.benchCollapsed ? ['NPU'] : ['NPU', 'Bench'];
  // Download links (the header's buttons are icons; these are what each one saves).
  const link = (side: PaneSide, kind: PictureKind, ext: 'svg' | 'png') =>
    h('a.picture-link', { href: '#', testid: `export${kind === 'whole' ? 'Whole' : ''}${ext === 'svg' ? 'Svg' : 'Png'}${side}`, on: { click: (e: Event) => {
      e.preventDefault();
      void save(side, kind, ext);
    } } }, ext.toUpperCase());
  const kindLabel = (kind: PictureKind) =>
    h('span.picture-kind', { title: t(kind === 'whole' ? 'picture.wholeTip' : 'picture.viewTip'), style: { whiteSpace: 'nowrap', minWidth: '0', marginLeft: '6px', opacity: '0.75' } },
      t(kind === 'whole' ? 'picture.whole' : 'picture.view'));
  const row = (side: PaneSide) =>
    h('div.picture-row', null, h('span', null, s.single ? t('graph') : t(side === 'Bench' ? 'bench' : 'debug')),
      kindLabel('whole'), link(side, 'whole', 'svg'), link(side, 'whole', 'png'),
      kindLabel('view'), link(side, 'view', 'svg'), link(side, 'view', 'png'));
  const pop = h('div.popover.pictures', { testid: 'pictureList' }, ...sides.map(row));
  pop.style.display = 'none';
  const b = h('button.toggle', { testid: 'pictureButton', title: t('header.picture'), 'aria-label': t('header.picture'), on: { click: () => (pop.style.display = pop.style.display === 'none' ? '' : 'none') } }, icon('picture'));
  return h('span.popover-anchor', null, b, pop);
}

function shortcutsButton(): HTMLElement {
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
  const b = h('button.toggle', { testid: 'shortcutsButton', title: t('header.shortcuts'), 'aria-label': t('header.shortcuts'), on: { click: () => (pop.style.display = pop.style.display === 'none' ? '' : 'none') } }, icon('shortcuts'));
  return h('span.popover-anchor', null, b, pop);
}
