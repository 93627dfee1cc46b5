/** The details panel under the graphs: the selected node's table or its stack / merge info. */
import type { PageCtx } from './ctx';
import { detailTableView, isNode, nodeInfoView } from './detailsView';
import { clear, h } from './dom';
import { t } from './i18n';

export function renderDetails(el: HTMLElement, ctx: PageCtx): void {
  const s = ctx.store;
  clear(el);
  const single = s.single;
  const tab = (which: 'table' | 'info', testid: string, label: string) =>
    h('button.tab', { testid, class: s.detailTab === which ? 'on' : '', on: { click: () => { s.detailTab = which; s.changed('details'); } } }, label);
  el.append(h('div.tabs', null, tab('table', 'detailsTableTab', t(single ? 'singleDetails' : 'comparisonDetails')), tab('info', 'detailsInfoTab', t('nodeInfo'))));
  const info = s.lastInfo;
  if (s.selected && s.detailError) {
    el.append(h('div.error-box', { testid: 'detailsError' }, s.detailError));
    return;
  }
  if (!s.selected || !info) {
    el.append(h('p.muted', { testid: 'detailsEmpty' }, s.selected ? t('loading') : t('selectNodeHint')));
    return;
  }
  const npu = isNode(info.npu) ? info.npu : null;
  const bench = isNode(info.bench) ? info.bench : null;
  if (s.detailTab === 'table') el.append(detailTableView(npu, bench, single, s.config?.tooltips ?? null, s.config?.detailColumns ?? []));
  else el.append(nodeInfoView(npu, bench, single, (text) => void copy(ctx, text)));
}

async function copy(ctx: PageCtx, text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    ctx.toast(t('copied'), 'success');
  } catch {
    const ta = h('textarea', { style: { position: 'fixed', opacity: '0' } });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand('copy');
    ta.remove();
    ctx.toast(ok ? t('copied') : t('copyFailed'), ok ? 'success' : 'error');
  }
}
