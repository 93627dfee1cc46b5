/**
 * A result list of node names (filter hits, search hits): a count, previous/next with top/bottom
 * notices, an optional filter box, and a virtualized list whose rows jump to the node.
 */
import type { PageCtx } from './ctx';
import { clear, h } from './dom';
import { t } from './i18n';
import { icon } from './icons';
import { VList } from './vlist';

type Side = 'NPU' | 'Bench';

export interface HitHost {
  jump(side: Side, name: string): void;
  toast(text: string): void;
}

/** The page's jump and toast, as a result list wants them. */
export function hitHostOf(ctx: PageCtx): HitHost {
  return { jump: (side, name) => void ctx.jumpTo(side, name), toast: (text) => ctx.toast(text) };
}

/**
 * A counted, filterable, virtualized list of node names with previous/next. `found` is the query
 * the names were found by (search): it is highlighted in every row, as is the filter box's text.
 */
export function hitList(host: HitHost, names: string[], colorOf: ((name: string) => string) | null, id: string, side: Side | (() => Side), found = ''): HTMLElement {
  const sideOf = () => (typeof side === 'function' ? side() : side);
  let shown = names;
  let q = found.trim().toLowerCase();
  let lower: string[] | null = null; // built on the first use of the filter box
  const vl = new VList<string>({
    rowHeight: 28,
    testid: `${id}List`,
    render: (name, _i, el) => {
      clear(el);
      if (colorOf) el.append(h('span.swatch', { style: { background: colorOf(name) } }));
      if (q) {
        const at = name.toLowerCase().indexOf(q);
        if (at >= 0) el.append(name.slice(0, at), h('mark', null, name.slice(at, at + q.length)), name.slice(at + q.length));
        else el.append(name);
      } else el.append(name);
      el.title = name;
      el.dataset.testid = `${id}Item`;
    },
    click: (name, i) => {
      vl.select(i);
      host.jump(sideOf(), name);
    },
  });
  const count = h('span.count', { testid: `${id}Count` }, t('nodeList', { count: names.length }));
  const step = (d: number) => {
    if (!vl.length) return;
    let i = vl.selected + d;
    if (i < 0) {
      host.toast(t('topOfList'));
      i = 0;
    } else if (i >= vl.length) {
      host.toast(t('bottomOfList'));
      i = vl.length - 1;
    }
    vl.select(i);
    const name = vl.item(i);
    if (name !== undefined) host.jump(sideOf(), name);
  };
  const filter = h('input.filter', { type: 'search', maxLength: 200, placeholder: t('filterList'), testid: `${id}Filter`, on: { input: () => {
    q = filter.value.trim().toLowerCase();
    const lw = (lower ??= names.map((n) => n.toLowerCase()));
    shown = q ? names.filter((_, i) => lw[i].includes(q)) : names;
    count.textContent = t('nodeList', { count: shown.length });
    vl.setItems(shown);
  } } });
  const head = h('div.list-head', null, count,
    h('button.icon', { testid: `${id}Prev`, title: t('previous'), 'aria-label': t('previous'), on: { click: () => step(-1) } }, icon('up')),
    h('button.icon', { testid: `${id}Next`, title: t('next'), 'aria-label': t('next'), on: { click: () => step(1) } }, icon('down')));
  vl.setItems(shown);
  const wrap = h('div.hit-list', null, head, id === 'search' ? null : filter, vl.el);
  requestAnimationFrame(() => vl.paint());
  return wrap;
}
