/**
 * The Diagnosis panel: where the compare first went wrong (the `diagnosis` route). The first
 * inf/NaN is flagged on its own, then the ranked sources with their reasons in words; a click
 * switches to the source's step and rank if needed, expands its ancestors and selects it (as a
 * search hit does). The colour mode "where the error is introduced" paints the target's boxes
 * source / inherited / fine; "Download CSV" saves the compare of the shown step and rank.
 */
import { clientId, get, metaQuery, normalize, parseLooseJson } from '../api';
import type { ColorMode } from '../colors';
import type { PageCtx } from '../ctx';
import { attachmentName, csvAddress, fileKey, reasonText, scoreText, viewFor, type DiagnosisNonFinite, type DiagnosisSource } from '../diagnosis';
import { h } from '../dom';
import { t, type Key } from '../i18n';
import { icon } from '../icons';
import { metaKey } from '../state';

/** Sources asked for: the list shows them all (the count of the rest is said). */
const TOP = 200;

export class DiagnosisPanel {
  private seq = 0;

  constructor(private ctx: PageCtx) {}

  /**
   * Fetch the open file's diagnosis unless it is here; with `states`, also the verdicts of the
   * shown step and rank (the colour mode), unless those are here too.
   */
  async ensure(states = false): Promise<void> {
    const s = this.ctx.store;
    if (!s.meta.run || s.single) return;
    const file = fileKey(s.meta);
    const view = metaKey(s.meta);
    const have = s.diagnosis?.file === file && (!states || s.diagnosis.statesKey === view);
    if (have) return;
    const seq = ++this.seq;
    s.diagnosisError = '';
    if (s.tab === 'diagnosis') s.changed('panel');
    const r = await get('diagnosis', { ...metaQuery(s.meta), top: TOP, states: states || undefined });
    if (seq !== this.seq || fileKey(s.meta) !== file) return;
    if (!r.success || !r.data) {
      s.diagnosisError = r.error ?? 'diagnosis: no data';
      this.ctx.toast(`diagnosis: ${s.diagnosisError}`, 'error');
    } else {
      const st = r.states;
      s.diagnosis = {
        file,
        data: r.data,
        statesKey: st ? view : '',
        source: new Set(st?.source ?? []),
        inherited: new Set(st?.inherited ?? []),
      };
      if (s.mode === 'diagnosis') this.ctx.recolor();
    }
    s.changed('panel', 'toolbar');
  }

  render(): HTMLElement {
    const s = this.ctx.store;
    const title = h('h3', null, t('sider.diagnosis'));
    if (s.single) return h('div.panel-section', { testid: 'diagnosisPanel' }, title, h('p.muted', null, t('diag.notCompare')));
    const modeBtn = (mode: ColorMode, label: Key, testid: string) =>
      h('button', { testid, class: s.mode === mode ? 'on' : '', on: { click: () => this.setMode(mode) } }, t(label));
    const modes = h('div.diag-modes', null, h('span.muted', null, t('diag.colors')),
      h('div.segmented', { testid: 'diagnosisModes' }, modeBtn('precision', 'diag.modeOutput', 'diagModeOutput'), modeBtn('diagnosis', 'diag.modeIntroduced', 'diagModeIntroduced')));
    const download = h('button.diag-download', { testid: 'diagDownload', title: t('diag.downloadTip'), 'aria-label': t('diag.download'), on: { click: () => void this.download() } }, icon('download'), t('diag.download'));
    return h('div.panel-section.diagnosis', { testid: 'diagnosisPanel' }, title, modes, download, this.body());
  }

  private body(): HTMLElement {
    const s = this.ctx.store;
    const d = s.diagnosis?.file === fileKey(s.meta) ? s.diagnosis.data : null;
    if (s.diagnosisError) return h('p.error', { testid: 'diagnosisError' }, s.diagnosisError);
    if (!d) return h('p.muted', { testid: 'diagnosisLoading' }, t('loading'));
    const list = h('div.diag-list', { testid: 'diagnosisList' });
    if (d.first_non_finite.length) {
      list.append(h('h4', null, t('diag.nonFinite')));
      for (const nf of d.first_non_finite) list.append(this.nonFiniteRow(nf));
    }
    list.append(h('h4', null, t('diag.sources')));
    if (!d.sources.length) list.append(h('p.muted', { testid: 'diagnosisNone' }, t('diag.none')));
    d.sources.forEach((src, i) => list.append(this.sourceRow(src, i)));
    if (d.total_sources > d.sources.length) list.append(h('p.muted', null, t('diag.more', { count: d.total_sources - d.sources.length })));
    return h('div', null, h('p.diag-summary', { testid: 'diagnosisSummary' }, t('diag.summary', { step: d.step, count: d.total_sources })), list);
  }

  private sourceRow(src: DiagnosisSource, i: number): HTMLElement {
    const kind = (['cause', 'introduced', 'amplified'].includes(src.kind) ? `diag.kind.${src.kind}` : 'diag.kind.introduced') as Key;
    return h('button.diag-item', { testid: 'diagSource', title: src.node, on: { click: () => void this.jump(src) } },
      h('span.diag-rank', null, String(i + 1)),
      h('span.diag-main', null,
        h('span.diag-node', null, src.node),
        h('span.diag-meta', null, h(`span.diag-kind.${src.kind}`, null, t(kind)), ' ', t('diag.where', { step: src.step, rank: src.rank, direction: src.direction }), ' ', scoreText(src.score)),
        src.enclosing.length ? h('span.diag-meta', null, t('diag.enclosing', { module: src.enclosing[0] })) : null,
        h('span.diag-reason', { testid: 'diagReason' }, reasonText(src.reason, src.reason_parts))));
  }

  private nonFiniteRow(nf: DiagnosisNonFinite): HTMLElement {
    return h('button.diag-item.flag', { testid: 'diagNonFinite', title: nf.node, on: { click: () => void this.jump(nf) } },
      h('span.diag-rank', null, '!'),
      h('span.diag-main', null, h('span.diag-node', null, nf.node),
        h('span.diag-meta', null, t('diag.where', { step: nf.step, rank: nf.rank, direction: nf.direction })),
        h('span.diag-reason', { testid: 'diagNonFiniteReason' }, reasonText(nf.reason, nf.reason_parts))));
  }

  /** Show a node of the diagnosis: its step and rank first, then expanded, selected, centred. */
  async jump(src: Pick<DiagnosisSource, 'step' | 'rank' | 'node'>): Promise<void> {
    const patch = viewFor(src, this.ctx.store.meta);
    if (patch) await this.ctx.changeView(patch);
    await this.ctx.jumpTo('NPU', src.node);
  }

  private setMode(mode: ColorMode): void {
    this.ctx.setColorMode(mode);
    if (mode === 'diagnosis') void this.ensure(true);
  }

  /** The CSV of the shown step and rank, rendered by the sidecar, saved under its own name. */
  private async download(): Promise<void> {
    const s = this.ctx.store;
    const address = csvAddress(s.meta);
    try {
      const res = await fetch(address, { headers: { 'X-Graph-Ascend-Client': clientId() } });
      if (!res.ok || !(res.headers.get('Content-Type') ?? '').startsWith('text/csv')) {
        const text = await res.text();
        let body: unknown;
        try {
          body = parseLooseJson(text);
        } catch {
          body = undefined;
        }
        const a = normalize(res.status, res.statusText, body);
        this.ctx.toast(`exportCsv: ${a.error ?? `HTTP ${res.status}`}`, 'error');
        return;
      }
      const name = attachmentName(res.headers.get('Content-Disposition'), `${s.meta.tag}.csv`);
      const url = URL.createObjectURL(await res.blob());
      const link = h('a', { href: url, download: name, style: { display: 'none' } });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      this.ctx.toast(t('diag.downloaded', { file: name }), 'success');
    } catch (e) {
      this.ctx.toast(`exportCsv: ${e instanceof Error ? e.message : String(e)}`, 'error');
    }
  }
}
