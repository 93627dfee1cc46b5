/** The right-click menu of a box: locate its match in the other pane, jump to a communication peer rank. */
import { precisionColor } from './colors';
import type { PageCtx } from './ctx';
import { h } from './dom';
import { t, type Key } from './i18n';
import { matchedOf } from './state';
import type { PaneSide } from './store';
import type { MatchedDistributed } from './types';

export function openContextMenu(ctx: PageCtx, side: PaneSide, key: string, x: number, y: number): void {
  const s = ctx.store;
  document.querySelectorAll('.ctxmenu').forEach((m) => m.remove());
  const node = s.hier[side][key];
  if (!node) return;
  const items: HTMLElement[] = [];
  const close = () => menu.remove();
  if (!s.config?.isSingleGraph) {
    const other: PaneSide = side === 'NPU' ? 'Bench' : 'NPU';
    const m = matchedOf(s.hier[side], key);
    items.push(h('button.ctx-item', { testid: 'locateMatchedNode', disabled: !m, on: { click: () => { close(); if (m) void ctx.jumpTo(other, m); } } }, t('positionMatchNode')));
  }
  const md = node.matchedDistributed as MatchedDistributed | null;
  if (md && md.nodes_info && Object.keys(md.nodes_info).length) {
    const title = (`dataCommunication.${md.communications_type ?? 'send_receive'}` as Key);
    items.push(h('div.ctx-title', null, t(title in { 'dataCommunication.send': 1, 'dataCommunication.receive': 1, 'dataCommunication.send_receive': 1 } ? title : 'dataCommunication.send_receive')));
    for (const [rank, info] of Object.entries(md.nodes_info)) {
      const color = precisionColor(s.colors, info[0]);
      items.push(
        h('button.ctx-item', { testid: `peerRank${rank}`, on: { click: () => { close(); void gotoPeer(ctx, Number(rank), String(info[1])); } } },
          h('span.swatch', { style: { background: color } }), `rank${rank}  ${info[1]}`),
      );
    }
  }
  if (!items.length) return;
  const menu = h('div.ctxmenu', { testid: 'contextMenu', 'data-side': side, 'data-node': key, style: { left: `${x}px`, top: `${y}px` } }, ...items);
  document.body.append(menu);
  setTimeout(() => window.addEventListener('click', close, { once: true }), 0);
}

async function gotoPeer(ctx: PageCtx, rank: number, node: string): Promise<void> {
  const c = ctx.store.config;
  if (c && !c.ranks.includes(rank)) {
    ctx.toast(t('rankMissing', { rank }), 'error');
    return;
  }
  await ctx.changeView({ rank });
  await ctx.jumpTo('NPU', node);
}
