/**
 * The precision / overflow panel: the colour mode, a checkbox per level, and the list of nodes at
 * the checked levels (also outlined in the debug pane).
 */
import { post } from '../api';
import { LEVEL_COLORS, OVERFLOW_COLORS, type ColorMode } from '../colors';
import type { PageCtx } from '../ctx';
import { h } from '../dom';
import { hitHostOf, hitList } from '../hitlist';
import { t, type Key } from '../i18n';
import { unprefixed } from '../state';

export class FilterPanel {
  constructor(private ctx: PageCtx) {}

  render(): HTMLElement {
    const s = this.ctx.store;
    const c = s.config;
    const single = Boolean(c?.isSingleGraph);
    const seg = h('div.segmented', { testid: 'precisionSegmented' },
      h('button', { class: s.mode === 'precision' ? 'on' : '', on: { click: () => this.setMode('precision') } }, t('accuracy_error')),
      h('button', { testid: 'overflowMode', title: c?.overflowCheck ? '' : t('noOverflowData'), disabled: !c?.overflowCheck, class: s.mode === 'overflow' ? 'on' : '', on: { click: () => this.setMode('overflow') } }, t('overflow')));
    const values: [string, Key, string][] = s.mode === 'overflow'
      ? [['medium', 'medium', OVERFLOW_COLORS.medium], ['high', 'high', OVERFLOW_COLORS.high], ['critical', 'critical', OVERFLOW_COLORS.critical]]
      : [['pass', 'pass', s.colors.buckets[0]?.color ?? LEVEL_COLORS.pass], ['warning', 'warning', s.colors.buckets[1]?.color ?? LEVEL_COLORS.warning], ['error', 'error', s.colors.buckets[2]?.color ?? LEVEL_COLORS.error], ['-1', 'unmatched', s.colors.unmatched]];
    const counts = new Map<string, number>();
    for (const hit of s.filterHits) counts.set(hit.status, (counts.get(hit.status) ?? 0) + 1);
    const boxes = h('div.checks', { testid: 'precisionChecks' },
      ...values.map(([v, label, color]) => {
        const status = v === '-1' ? 'unmatched' : v;
        const cb = h('input', { type: 'checkbox', testid: `filter-${status}`, checked: s.filterValues.has(v), disabled: single && s.mode === 'precision' && v !== '-1',
          on: { change: () => { if (cb.checked) s.filterValues.add(v); else s.filterValues.delete(v); void this.run(); } } });
        return h('label.check', null, cb, h('span.swatch', { style: { background: color } }), t(label), counts.has(status) ? h('span.count', null, ` (${counts.get(status)})`) : null);
      }));
    const list = hitList(hitHostOf(this.ctx), s.filterHits.map((x) => x.name), (name) => {
      const hit = s.filterHits.find((x) => x.name === name);
      return hit ? (hit.status === 'unmatched' ? s.colors.unmatched : s.mode === 'overflow' ? OVERFLOW_COLORS[hit.status] ?? '#fff' : s.colors.buckets.find((b) => b.level === hit.status)?.color ?? LEVEL_COLORS[hit.status] ?? '#fff') : '#fff';
    }, 'precision', 'NPU');
    return h('div.panel-section', { testid: 'precisionPanel' }, h('h3', null, t('sider.precisionFiltering')), seg, boxes, list);
  }

  private setMode(mode: ColorMode): void {
    this.ctx.setColorMode(mode);
  }

  /** Ask the server for the nodes at the checked levels (none checked: clear the list). */
  async run(): Promise<void> {
    const s = this.ctx.store;
    if (!s.filterValues.size) {
      s.filterHits = [];
      this.highlight([]);
      s.changed('panel');
      return;
    }
    const values = [...s.filterValues].map((v) => (v === '-1' ? -1 : v));
    const r = await post('filterNodes', { metaData: s.meta, type: s.mode, values });
    if (!r.success) {
      this.ctx.toast(`filterNodes: ${r.error}`, 'error');
      s.filterHits = [];
    } else s.filterHits = Array.isArray(r.data) ? r.data : [];
    this.highlight(s.filterHits.map((x) => x.name));
    s.changed('panel');
  }

  private highlight(names: string[]): void {
    const pane = this.ctx.panes.NPU;
    pane.highlighted = new Set(names.map(unprefixed));
    pane.invalidate();
  }
}
