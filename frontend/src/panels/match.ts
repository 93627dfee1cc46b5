/**
 * The matching panel (compare files): match two unmatched nodes or unmatch a matched pair by hand,
 * apply a saved `.vis.config`, or save the current relations as one.
 */
import { post } from '../api';
import type { PageCtx } from '../ctx';
import { clear, h, option } from '../dom';
import { t } from '../i18n';
import { icon } from '../icons';
import { metaKey } from '../state';
import type { MatchedRelations } from '../types';
import { guardWrite } from '../writeAccess';
import { readOnlyLine } from '../readOnly';

export class MatchPanel {
  private picked = { npuUn: '', benchUn: '', npuM: '', benchM: '', children: false, unChildren: false };
  /** What a Match / Unmatch click without both nodes chosen asks for, shown under its button. */
  private hint: { add: boolean } | null = null;

  constructor(private ctx: PageCtx) {}

  /** Fetch the matched / unmatched lists of the current view (once, unless forced). */
  async ensureRelations(force = false): Promise<void> {
    const s = this.ctx.store;
    const key = metaKey(s.meta);
    if (!force && s.relations?.key === key) return;
    const r = await post('loadGraphMatchedRelations', { metaData: s.meta });
    if (!r.success || !r.data) {
      this.ctx.toast(`loadGraphMatchedRelations: ${r.error ?? 'no data'}`, 'error');
      return;
    }
    s.relations = { key, data: r.data };
    if (s.tab === 'match') s.changed('panel');
  }

  /** The selected node fills the pickers it belongs to. */
  prefill(): void {
    const s = this.ctx.store;
    if (!s.selected || !s.relations) return;
    const d = s.relations.data;
    const { side, key } = s.selected;
    const ms = this.picked;
    this.hint = null;
    if (side === 'NPU') {
      if (d.npuUnMatchNodes.includes(key)) ms.npuUn = key;
      else if (d.npuMatchNodes[key]) {
        ms.npuM = key;
        ms.benchM = d.npuMatchNodes[key];
      }
    } else {
      if (d.benchUnMatchNodes.includes(key)) ms.benchUn = key;
      else if (d.benchMatchNodes[key]) {
        ms.benchM = key;
        ms.npuM = d.benchMatchNodes[key];
      }
    }
    s.changed('panel');
  }

  private picker(id: string, names: string[], value: string, onPick: (v: string) => void): HTMLElement {
    const input = h('input.picker', { type: 'search', testid: `${id}Select`, value, placeholder: t('selectNode'), list: `${id}-options`, maxLength: 4096 });
    const dl = h('datalist', { id: `${id}-options` });
    const fill = () => {
      clear(dl);
      const q = input.value.toLowerCase();
      let n = 0;
      for (const name of names) {
        if (q && !name.toLowerCase().includes(q)) continue;
        dl.append(option(name, name));
        if (++n >= 300) break;
      }
    };
    input.addEventListener('input', () => {
      fill();
      onPick(input.value);
    });
    fill();
    const idx = () => names.indexOf(input.value);
    const move = (d: number) => {
      const i = Math.max(0, Math.min(names.length - 1, idx() + d));
      if (names[i] !== undefined) {
        input.value = names[i];
        onPick(names[i]);
      }
    };
    return h('div.picker-row', null, input, dl,
      h('button.icon', { testid: `${id}Up`, title: t('previous'), 'aria-label': t('previous'), on: { click: () => move(-1) } }, icon('up')),
      h('button.icon', { testid: `${id}Down`, title: t('next'), 'aria-label': t('next'), on: { click: () => move(1) } }, icon('down')));
  }

  render(): HTMLElement {
    const s = this.ctx.store;
    const rel = s.relations?.data;
    const c = s.config;
    if (!rel || !c) return h('div.panel-section', { testid: 'matchPanel' }, h('p.muted', null, t('loading')));
    const ms = this.picked;
    const task = c.task;
    const cfgSel = guardWrite(h('select', { testid: 'configurationSelect', on: { change: () => void this.matchByConfig(cfgSel.value) } },
      option('', t('notSelected')), ...(c.matchedConfigFiles ?? []).map((f) => option(f, f))));
    const cfg = task === 'all' ? null : h('div.match-block', null, h('h4', null, t('configFile')), cfgSel,
      guardWrite(h('button', { testid: 'configurationGenerateButton', title: `${s.meta.tag}_${s.meta.step}_${s.meta.rank}.vis.config`, on: { click: () => void this.saveRelations() } }, t('generateConfigFile'))));
    const matchedNpu = Object.keys(rel.npuMatchNodes);
    const matchedBench = Object.keys(rel.benchMatchNodes);
    const childBox = (testid: string, prop: 'children' | 'unChildren') =>
      task === 'all' ? null : h('label.check', null, h('input', { type: 'checkbox', testid, checked: ms[prop], on: { change: (e: Event) => (ms[prop] = (e.target as HTMLInputElement).checked) } }), t('manageDesendant'));
    return h('div.panel-section', { testid: 'matchPanel' }, h('h3', null, t('sider.nodeMatching')), readOnlyLine('matchReadOnly'), cfg,
      h('div.match-block', null, h('h4', null, t('matchNodes')),
        h('div.field-label', { testid: 'debugUnmatchedCount' }, t('debugUnmatched', { count: rel.npuUnMatchNodes.length })),
        this.picker('debugUnmatched', rel.npuUnMatchNodes, ms.npuUn, (v) => (ms.npuUn = v)),
        h('div.field-label', { testid: 'benchUnmatchedCount' }, t('benchUnmatched', { count: rel.benchUnMatchNodes.length })),
        this.picker('benchUnmatched', rel.benchUnMatchNodes, ms.benchUn, (v) => (ms.benchUn = v)),
        childBox('matchDesendantCheckbox', 'children'),
        guardWrite(h('button.primary', { testid: 'matchButton', on: { click: () => void this.match(true) } }, t('matchNodes'))),
        this.hint?.add ? h('p.hint', { testid: 'matchHint', role: 'status' }, t('match.pickBoth')) : null),
      h('div.match-block', null, h('h4', null, t('unmatchNodes')),
        h('div.field-label', { testid: 'debugMatchedCount' }, t('debugMatched', { count: matchedNpu.length })),
        this.picker('debugMatched', matchedNpu, ms.npuM, (v) => { ms.npuM = v; if (rel.npuMatchNodes[v]) { ms.benchM = rel.npuMatchNodes[v]; s.changed('panel'); } }),
        h('div.field-label', { testid: 'benchMatchedCount' }, t('benchMatched', { count: matchedBench.length })),
        this.picker('benchMatched', matchedBench, ms.benchM, (v) => { ms.benchM = v; if (rel.benchMatchNodes[v]) { ms.npuM = rel.benchMatchNodes[v]; s.changed('panel'); } }),
        childBox('unmatchDesendantCheckbox', 'unChildren'),
        guardWrite(h('button', { testid: 'unmatchButton', on: { click: () => void this.match(false) } }, t('unmatchNodes'))),
        this.hint && !this.hint.add ? h('p.hint', { testid: 'unmatchHint', role: 'status' }, t('unmatch.pickBoth')) : null));
  }

  private async match(add: boolean): Promise<void> {
    const s = this.ctx.store;
    const ms = this.picked;
    const npu = add ? ms.npuUn : ms.npuM;
    const bench = add ? ms.benchUn : ms.benchM;
    // Nothing to send yet: say what to choose beside the button (not an error, nothing failed).
    this.hint = !npu || !bench ? { add } : null;
    if (this.hint) {
      s.changed('panel');
      return;
    }
    const body = add
      ? { npuNodeName: npu, benchNodeName: bench, metaData: s.meta, isMatchChildren: ms.children }
      : { npuNodeName: npu, benchNodeName: bench, metaData: s.meta, isUnMatchChildren: ms.unChildren };
    const r = await post(add ? 'addMatchNodes' : 'deleteMatchNodes', body);
    if (!r.success || !r.data) {
      this.ctx.toast(`${add ? 'addMatchNodes' : 'deleteMatchNodes'}: ${r.error ?? 'failed'}`, 'error');
      return;
    }
    this.ctx.toast(t(add ? 'matchSuccess' : 'unmatchSuccess'), 'success');
    if (add) ms.npuUn = ms.benchUn = '';
    else ms.npuM = ms.benchM = '';
    await this.afterMatch(r.data);
  }

  private async afterMatch(data: MatchedRelations): Promise<void> {
    const s = this.ctx.store;
    s.relations = { key: metaKey(s.meta), data };
    for (const side of ['NPU', 'Bench'] as const) {
      const r = await post('updateHierarchyData', { graphType: side, metaData: s.meta });
      if (r.success && r.data) this.ctx.setHierarchy(side, r.data);
      else this.ctx.toast(`updateHierarchyData (${side}): ${r.error ?? 'no data'}`, 'error');
    }
    if (s.selected) await this.ctx.selectNode(s.selected.side, s.selected.key);
    s.changed('panel');
  }

  private async matchByConfig(file: string): Promise<void> {
    const s = this.ctx.store;
    if (!file) return;
    const r = await post('addMatchNodesByConfig', { configFile: file, metaData: s.meta });
    if (!r.success || !r.data) {
      this.ctx.toast(`addMatchNodesByConfig: ${r.error ?? 'failed'}`, 'error');
      return;
    }
    const total = r.data.matchedTotal ?? 0, success = r.data.matchedSuccess ?? 0;
    this.ctx.toast(t('matchSuccessByConfig', { total, success, failed: total - success }), 'success');
    await this.afterMatch(r.data);
  }

  private async saveRelations(): Promise<void> {
    const s = this.ctx.store;
    const r = await post('saveMatchedRelations', { metaData: s.meta });
    if (!r.success) {
      this.ctx.toast(`saveMatchedRelations: ${r.error}`, 'error');
      return;
    }
    const name = String(r.data ?? '');
    if (s.config && name && !s.config.matchedConfigFiles.includes(name)) s.config.matchedConfigFiles.push(name);
    this.ctx.toast(t('file_generate_success', { name }), 'success');
    s.changed('panel');
  }
}
