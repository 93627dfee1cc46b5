/** The search panel: a side (debug / bench) and a name query over every node of that side. */
import { post } from '../api';
import type { PageCtx } from '../ctx';
import { clear, h } from '../dom';
import { hitHostOf, hitList } from '../hitlist';
import { t, type Key } from '../i18n';
import { metaKey, NameIndex } from '../state';
import type { PaneSide } from '../store';

export class SearchPanel {
  private side: PaneSide = 'NPU';
  private query = '';
  /** Redraws the hits of the panel on screen, its input left as it is (focus and caret too). */
  private redrawHits: (() => void) | null = null;

  constructor(private ctx: PageCtx) {}

  /** Fetch the node names of the current view, once per view. */
  async ensureNodeList(): Promise<void> {
    const s = this.ctx.store;
    const key = metaKey(s.meta);
    if (s.nodeList?.key === key) return;
    const r = await post('loadGraphAllNodeList', { metaData: s.meta });
    if (!r.success || !r.data) {
      this.ctx.toast(`loadGraphAllNodeList: ${r.error ?? 'no data'}`, 'error');
      return;
    }
    this.setNodeList(r.data.npuNodeList ?? [], r.data.benchNodeList ?? []);
  }

  /** The names the search looks through (the benchmark also feeds it 1M names). */
  setNodeList(npu: string[], bench: string[]): void {
    const s = this.ctx.store;
    s.nodeList = { key: metaKey(s.meta), NPU: new NameIndex(npu), Bench: new NameIndex(bench) };
    if (s.tab !== 'search') return;
    // The list often arrives while the user types: drawing the panel anew would replace the input
    // under their fingers (the keys after it were lost), so only the hits are drawn again.
    if (this.redrawHits) this.redrawHits();
    else s.changed('panel');
  }

  render(): HTMLElement {
    const s = this.ctx.store;
    const single = Boolean(s.config?.isSingleGraph);
    const radio = (side: PaneSide, label: Key) =>
      h('label.radio', null, h('input', { type: 'radio', name: 'searchSide', testid: `searchSide${side}`, checked: this.side === side, disabled: side === 'Bench' && single,
        on: { change: () => { this.side = side; update(); } } }), t(label));
    const input = h('input.search', { type: 'search', maxLength: 200, placeholder: t('searchName'), testid: 'searchInput', value: this.query });
    const listHost = h('div.list-host');
    const update = () => {
      this.query = input.value;
      clear(listHost);
      const nl = s.nodeList;
      if (!nl) {
        listHost.append(h('p.muted', null, t('loading')));
        return;
      }
      const index = this.side === 'Bench' ? nl.Bench : nl.NPU;
      const names = index.names;
      const t0 = performance.now();
      const hits = index.search(this.query);
      const found = new Array<string>(hits.length);
      for (let i = 0; i < hits.length; i++) found[i] = names[hits[i]];
      listHost.dataset.searchMs = (performance.now() - t0).toFixed(1);
      listHost.append(hitList(hitHostOf(this.ctx), found, null, 'search', () => this.side, this.query));
    };
    input.addEventListener('input', update);
    update();
    this.redrawHits = () => {
      if (input.isConnected) update();
      else s.changed('panel');
    };
    return h('div.panel-section', { testid: 'searchPanel' }, h('h3', null, t('sider.nodeSearch')),
      h('div.radios', null, radio('NPU', 'debug'), radio('Bench', 'bench')), input, listHost);
  }
}
