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
import type { PaneSide } from './store';
import { reportDownloadButton } from './report/download';

export function renderToolbar(el: HTMLElement, ctx: PageCtx): void {
  const s = ctx.store;
  clear(el);
  const single = s.single;
  const legendItem = (cls: string, label: Key, tip?: Key) =>
    h('span.legend-item', { title: tip ? t(tip) : '' }, h(`span.legend-shape.${cls}`), t(label));
  const legend = h('div.legend', { testid: 'legend' },
    legendItem('module', 'legend.module'),
    legendItem('leaf', 'legend.leaf', 'tooltip.leaf'),
    legendItem('apilist', 'legend.apiList', 'tooltip.apiList'),
    legendItem('fused', 'legend.fused', 'tooltip.fused'));
  const colors = h('div.legend.colors', { testid: 'colorLegend' });
  if (s.mode === 'overflow') {
    for (const lvl of ['medium', 'high', 'critical'] as const)
      colors.append(h('span.legend-item', null, h('span.swatch', { style: { background: OVERFLOW_COLORS[lvl] } }), t(lvl)));
  } else if (s.mode === 'diagnosis' && !single) {
    for (const v of ['source', 'peer', 'inherited', 'fine'] as const)
      colors.append(h('span.legend-item', null, h('span.swatch', { style: { background: DIAGNOSIS_COLORS[v] } }), t(`legend.${v}`)));
    // A module holding sources is marked whatever its own verdict, so the top level shows where to dig.
    colors.append(h('span.legend-item', { testid: 'legendSourcesInside', title: t('legend.sourcesInsideTip') },
      h('span.swatch.sources-inside', { style: { background: DIAGNOSIS_COLORS.fine, borderColor: SOURCE_RED } }, h('span.badge', { style: { background: SOURCE_RED } }, 'n')),
      t('legend.sourcesInside')));
    colors.append(h('span.legend-item', { title: s.colors.unmatchedDescription ?? '' }, h('span.swatch', { style: { background: s.colors.unmatched } }), t('unmatched')));
  } else if (s.structureOnly) {
    // Nothing compared: matched boxes stay white (msprobe's file has no precision colours).
    colors.append(h('span.legend-item', { testid: 'legendMatched', title: t('legend.matchedTip') }, h('span.swatch', { style: { background: WHITE } }), t('legend.matched')));
    colors.append(h('span.legend-item', { title: s.colors.unmatchedDescription ?? '' }, h('span.swatch', { style: { background: s.colors.unmatched } }), t('legend.unmatchedStructure')));
  } else if (!single) {
    for (const b of s.colors.buckets)
      colors.append(h('span.legend-item', { title: b.description ?? '' }, h('span.swatch', { style: { background: b.color } }), `${b.level ? t((b.level in LEVEL_COLORS ? b.level : 'pass') as Key) : ''} [${b.lo}, ${b.hi})`));
    colors.append(h('span.legend-item', { title: s.colors.unmatchedDescription ?? '' }, h('span.swatch', { style: { background: s.colors.unmatched } }), t('unmatched')));
  }
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

/**
 * "Export picture": each shown pane's current view as SVG or PNG — what is drawn, in the current
 * theme (the PNG is the canvas itself, the SVG the same drawing code painting into SVG).
 */
function pictureButton(ctx: PageCtx): HTMLElement {
  const s = ctx.store;
  const name = (side: PaneSide, ext: string) => `${s.meta.tag || 'graph'}_${side === 'Bench' ? 'bench' : 'debug'}.${ext}`;
  const save = async (side: PaneSide, ext: 'svg' | 'png') => {
    try {
      const pane = ctx.panes[side];
      const blob = ext === 'svg' ? new Blob([pane.svg()], { type: 'image/svg+xml' }) : await pane.png();
      saveBlob(blob, name(side, ext));
    } catch (e) {
      ctx.toast(`${t('header.picture')}: ${e instanceof Error ? e.message : String(e)}`, 'error');
    }
  };
  const sides: PaneSide[] = s.single || s.benchCollapsed ? ['NPU'] : ['NPU', 'Bench'];
  // Download links (the header's buttons are icons; these are what each one saves).
  const link = (side: PaneSide, ext: 'svg' | 'png') =>
    h('a.picture-link', { href: '#', testid: `export${ext === 'svg' ? 'Svg' : 'Png'}${side}`, on: { click: (e: Event) => {
      e.preventDefault();
      void save(side, ext);
    } } }, ext.toUpperCase());
  const row = (side: PaneSide) =>
    h('div.picture-row', null, h('span', null, s.single ? t('graph') : t(side === 'Bench' ? 'bench' : 'debug')), link(side, 'svg'), link(side, 'png'));
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
