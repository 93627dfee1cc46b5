/**
 * The node-details views: the paired inputs/outputs table (worst metric cells marked by the served
 * metric rules, bench rows shaded, matched/unmatched dots) and the stack / parallel-merge text with
 * copy buttons.
 */
import { badResult, columnsOf, pairRows, scaleRelative, worstCells } from './details';
import { errText } from './diagnosis';
import { h } from './dom';
import { t } from './i18n';
import type { DetailColumn, JsonValue, NodeDetail } from './types';

/** The inputs/outputs table of the selected node (both sides paired) with its header and legend. */
export function detailTableView(npu: NodeDetail | null, bench: NodeDetail | null, single: boolean, tooltips: { [key: string]: JsonValue } | null, rules: readonly DetailColumn[]): HTMLElement {
  const rows = pairRows(npu, single ? null : bench);
  const head = h('div.details-head', null,
    h('span', { testid: 'debugNodeName' }, h('b', null, `${t('debugNode')}: `), npu?.node_name ?? '-'),
    single ? null : h('span', { testid: 'benchNodeName' }, h('b', null, `${t('benchNode')}: `), bench?.node_name ?? '-'),
    single ? null : h('span.legend-item', null, h('span.dot.ok'), t('matchedParams')),
    single ? null : h('span.legend-item', null, h('span.dot.bad'), t('unmatchedParams')));
  if (!rows.length) return h('div', null, head, h('p.muted', { testid: 'detailsNoData' }, t('noData')));
  const cols = ['name', ...columnsOf(rows, rules)];
  const worst = worstCells(rows, cols, rules);
  const table = h('table.details-table', { testid: 'detailsTable' },
    h('thead', null, h('tr', null, ...cols.map((c) => h('th', { title: tooltips?.[c] == null ? '' : String(tooltips[c]) }, c)))),
    h('tbody', null, ...rows.map((r, i) =>
      h('tr', { class: r.side === 'bench' ? 'bench-row' : 'debug-row' },
        ...cols.map((c) => {
          if (c === 'name') return h('td.name', null, single ? null : h(`span.dot.${r.matched ? 'ok' : 'bad'}`), r.name, single ? null : h('span.side-tag', null, r.side === 'bench' ? t('bench') : t('debug')));
          const v = r.cells[c] ?? '-';
          const bad = worst.get(c) === i || (c === 'Result' && badResult(v));
          const sr = scaleRelative(rows, i, c);
          const why = sr ? t('details.scaleRelative', { stat: sr.stat, err: errText(sr.err), scale: sr.scale.toPrecision(3) }) : null;
          return h('td', { class: bad ? 'worst' : '', title: why, testid: why ? 'scaleRelativeCell' : undefined }, v);
        })))));
  return h('div', null, head, h('div.table-scroll', null, table));
}

/** Stack and parallel-merge text of each side, with copy buttons. */
export function nodeInfoView(npu: NodeDetail | null, bench: NodeDetail | null, single: boolean, copy: (text: string) => void): HTMLElement {
  const block = (title: string, text: string, testid: string) => {
    const ta = h('textarea', { readOnly: true, rows: Math.min(10, Math.max(4, text.split('\n').length)), testid });
    ta.value = text;
    return h('div.info-block', null, h('div.info-title', null, title,
      h('button.copy', { testid: `${testid}Copy`, on: { click: () => copy(text) } }, t('copy'))), ta);
  };
  const sideBlock = (node: NodeDetail | null, label: string, prefix: string) => {
    if (!node) return h('div.info-side', null, h('h4', null, label), h('p.muted', null, t('noData')));
    const stack = (node.stack_info ?? []).join('\n');
    const pm = Array.isArray(node.parallel_merge_info) ? node.parallel_merge_info.join('\n') : String(node.parallel_merge_info ?? '');
    return h('div.info-side', null, h('h4', null, `${label}: ${node.node_name ?? ''}`),
      stack ? block(t('stackInfo'), stack, `${prefix}StackInfo`) : h('p.muted', null, `${t('stackInfo')}: ${t('noData')}`),
      pm ? block(t('parallelMergedInfo'), pm, `${prefix}ParallelInfo`) : null);
  };
  return h('div.info-tab', { testid: 'nodeInfoPanel' }, sideBlock(npu, t('debug'), 'debug'), single ? null : sideBlock(bench, t('bench'), 'bench'));
}

export function isNode(n: NodeDetail | null | undefined): n is NodeDetail {
  return Boolean(n && typeof n === 'object' && Object.keys(n).length);
}
