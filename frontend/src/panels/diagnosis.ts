/**
 * The Diagnosis panel: where the compare first went wrong (the `diagnosis` route). The first
 * inf/NaN is flagged on its own, then the faults, one line per call site across micro-batches,
 * ranks and steps, with their reasons in words; a click opens a fault's first occurrence (its
 * step and rank first if needed, then its ancestors expanded and it selected, as a search hit
 * does), and the line expands to list its other occurrences, each one click away. The colour
 * mode "where the error is introduced" paints the target's boxes source / inherited / fine and
 * marks the modules holding sources; "Download CSV" saves the compare of the shown step and rank.
 */
import { clientId, downloadError, get, metaQuery } from '../api';
import type { ColorMode } from '../colors';
import type { PageCtx } from '../ctx';
import { attachmentName, csvAddress, fileKey, readWithProgress, sizeText, groupSummary, kindLabel, modulePath, reasonPieces, reasonTip, splitKey, tolerancesText, type DiagnosisGroup, type DiagnosisNonFinite, type DiagnosisOccurrence, type DiagnosisReasonPart, type DiagnosisSource } from '../diagnosis';
import { h, saveBlob } from '../dom';
import { t, type Key } from '../i18n';
import { icon } from '../icons';
import { metaKey, unprefixed } from '../state';

/** Faults (and sources) asked for: the list shows them all (the count of the rest is said). */
const TOP = 200;

export class DiagnosisPanel {
  private seq = 0;
  /** The reference compare chosen to learn tolerances from (`run|tag`; '' none), and the one the
   * answer in the store was made with. */
  private reference = '';
  private answered = '';
  /** The faults whose other occurrences are listed, by `file|index`. */
  private readonly opened = new Set<string>();
  /** The CSV download under way: its progress line (kept across renders), else null. */
  private csvProgress: HTMLElement | null = null;
  /** The request under way (its answer's file, reference and view of the verdicts), if any. */
  private pending: { key: string; done: Promise<void> } | null = null;

  constructor(private ctx: PageCtx) {}

  /**
   * Fetch the open file's diagnosis unless it is here; with `states`, also the verdicts of the
   * shown step and rank (the colour mode), unless those are here too. The list is asked for first
   * (and drawn) when it is not here yet: the verdicts of every differing node take longer. A
   * request already under way for the same answer is waited for, not made again.
   */
  async ensure(states = false, quiet = false): Promise<void> {
    const s = this.ctx.store;
    if (!s.meta.run || s.single || s.structureOnly) return;
    const file = fileKey(s.meta);
    const view = metaKey(s.meta);
    const reference = this.reference;
    const haveList = s.diagnosis?.file === file && this.answered === reference;
    if (haveList && (!states || s.diagnosis?.statesKey === view)) return;
    if (states && !haveList) {
      await this.ensure(false);
      if (fileKey(s.meta) === file && this.reference === reference && s.diagnosis?.file === file) await this.ensure(true);
      return;
    }
    const key = `${file}|${reference}|${states ? view : ''}`;
    if (this.pending?.key === key) return this.pending.done;
    const done = this.fetch(file, view, reference, states, quiet);
    this.pending = { key, done };
    try {
      await done;
    } finally {
      if (this.pending?.done === done) this.pending = null;
    }
  }

  /** `quiet`: asked for the line above the panes only; a failure is said in the panel, not a toast. */
  private async fetch(file: string, view: string, reference: string, states: boolean, quiet = false): Promise<void> {
    const s = this.ctx.store;
    const seq = ++this.seq;
    s.diagnosisError = '';
    if (s.tab === 'diagnosis') s.changed('panel');
    const [referenceRun, referenceTag] = reference ? splitKey(reference) : ['', ''];
    const r = await get('diagnosis', {
      ...metaQuery(s.meta),
      top: TOP,
      states: states || undefined,
      reference_run: referenceRun || undefined,
      reference_tag: referenceTag || undefined,
    });
    if (seq !== this.seq || fileKey(s.meta) !== file || this.reference !== reference) return;
    this.answered = reference;
    if (!r.success || !r.data) {
      s.diagnosisError = r.error ?? 'diagnosis: no data';
      if (!quiet) this.ctx.toast(`diagnosis: ${s.diagnosisError}`, 'error');
    } else {
      const st = r.states;
      s.diagnosis = {
        file,
        data: r.data,
        statesKey: st ? view : '',
        source: new Set(st?.source ?? []),
        inherited: new Set(st?.inherited ?? []),
        // What came from a peer rank, of the view asked for (said apart from "inherited from upstream").
        peer: new Set(st ? (r.data.peer_inheritance ?? []).filter((p) => p.step === st.step && p.rank === st.rank).map((p) => unprefixed(p.node)) : []),
        inside: new Map(Object.entries(st?.sources_inside ?? {})),
      };
      if (s.mode === 'diagnosis') this.ctx.recolor();
    }
    s.changed('panel', 'toolbar');
  }

  render(): HTMLElement {
    const s = this.ctx.store;
    const title = h('h3', null, t('sider.diagnosis'));
    if (s.single) return h('div.panel-section', { testid: 'diagnosisPanel' }, title, h('p.muted', null, t('diag.notCompare')));
    // The sidecar answers the same for such a file; no request is needed to say it.
    if (s.structureOnly) return h('div.panel-section', { testid: 'diagnosisPanel' }, title, h('p.muted', { testid: 'diagnosisStructureOnly' }, t('diag.structureOnly')));
    const modeBtn = (mode: ColorMode, label: Key, testid: string) =>
      h('button', { testid, class: s.mode === mode ? 'on' : '', on: { click: () => this.setMode(mode) } }, t(label));
    const modes = h('div.diag-modes', null, h('span.muted', null, t('diag.colors')),
      h('div.segmented', { testid: 'diagnosisModes' }, modeBtn('precision', 'diag.modeOutput', 'diagModeOutput'), modeBtn('diagnosis', 'diag.modeIntroduced', 'diagModeIntroduced')));
    const download = h('button.diag-download', { testid: 'diagDownload', title: t('diag.downloadTip'), 'aria-label': t('diag.download'), disabled: Boolean(this.csvProgress), on: { click: () => void this.download() } }, icon('download'), t('diag.download'));
    return h('div.panel-section.diagnosis', { testid: 'diagnosisPanel' }, title, modes, this.referencePicker(), download, this.csvProgress, this.body());
  }

  /** Learn the tolerances from `reference` (`run|tag` of the catalog; '' none) and ask again. */
  async setReference(reference: string): Promise<void> {
    const s = this.ctx.store;
    if (reference === this.reference) return;
    this.reference = reference;
    s.diagnosis = null;
    s.diagnosisError = '';
    await this.ensure(s.mode === 'diagnosis');
  }

  /** The choice of a reference compare (any other file of the catalog) to learn tolerances from. */
  private referencePicker(): HTMLElement {
    const s = this.ctx.store;
    const here = fileKey(s.meta);
    const files = Object.entries(s.catalog).flatMap(([run, f]) => f.tags.map((tag) => fileKey({ run, tag }))).filter((k) => k !== here);
    const select = h('select', {
      testid: 'diagReference',
      title: t('diag.referenceTip'),
      on: {
        change: (e: Event) => void this.setReference((e.target as HTMLSelectElement).value),
      },
    }, h('option', { value: '' }, t('diag.referenceNone')), ...files.map((k) => h('option', { value: k }, k.replace('|', '/'))));
    select.value = files.includes(this.reference) ? this.reference : '';
    return h('label.diag-reference', null, h('span.muted', null, t('diag.reference')), select);
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
    list.append(h('h4', null, t('diag.faults')));
    if (!d.groups.length) list.append(h('p.muted', { testid: 'diagnosisNone' }, t('diag.none')));
    d.groups.forEach((g, i) => list.append(this.groupRow(g, i)));
    if (d.total_groups > d.groups.length) list.append(h('p.muted', null, t('diag.moreFaults', { count: d.total_groups - d.groups.length })));
    return h('div', null,
      h('p.diag-summary', { testid: 'diagnosisSummary' }, t('diag.faultsSummary', { step: d.step, count: d.total_groups, sources: d.total_sources })),
      h('p.muted.diag-tolerances', { testid: 'diagTolerances' }, tolerancesText(d.tolerances)),
      list);
  }

  /**
   * One fault: its line in words, its first occurrence's place and reason (a click opens it), and,
   * when it has more, a toggle that lists the others (at most what the answer carries, the rest
   * counted).
   */
  private groupRow(g: DiagnosisGroup, i: number): HTMLElement {
    const line = h('button.diag-item', { testid: 'diagGroup', title: g.node, on: { click: () => void this.jump(g) } },
      h('span.diag-rank', null, String(i + 1)),
      h('span.diag-main', null,
        h('span.diag-node', { testid: 'diagGroupSummary' }, ...this.summaryWithModule(g)),
        h('span.diag-meta', null, h(`span.diag-kind.${g.kind}`, null, kindLabel(g)), ' ', t('diag.where', { step: g.step, rank: g.rank, direction: g.direction }), ' ', h('span.diag-first', null, g.node)),
        this.reason(g.reason, g.reason_parts, 'diagReason')));
    if (g.occurrences <= 1) return h('div.diag-group', null, line);
    const id = `${this.ctx.store.diagnosis?.file ?? ''}|${i}`;
    const open = this.opened.has(id);
    const toggle = h('button.diag-toggle', {
      testid: 'diagGroupToggle',
      title: t('diag.occurrencesTip'),
      'aria-expanded': String(open),
      on: {
        click: () => {
          if (open) this.opened.delete(id);
          else this.opened.add(id);
          this.ctx.store.changed('panel');
        },
      },
    }, `${open ? '▾' : '▸'} ${t('diag.occurrences', { count: g.occurrences })}`);
    const others = open ? h('div.diag-occurrences', { testid: 'diagOccurrences' }, ...g.others.map((o) => this.occurrenceRow(o))) : null;
    const rest = g.occurrences - 1 - g.others.length;
    if (others && rest > 0) others.append(h('p.muted', null, t('diag.moreOccurrences', { count: rest })));
    return h('div.diag-group', null, line, toggle, others);
  }

  /**
   * A fault's line with the module a call is in as a link (a call's line only: a module's own
   * line opens that module already). The link opens the module of the first occurrence: the
   * source's parent once it is shown.
   */
  private summaryWithModule(g: DiagnosisGroup): (string | HTMLElement)[] {
    const text = groupSummary(g);
    const named = g.api && g.module ? `\`${modulePath(g.module)}\`` : '';
    const at = named ? text.indexOf(named, text.indexOf(g.api) + g.api.length) : -1;
    if (at < 0) return codeSpans(text);
    const link = h('span.diag-module', {
      role: 'link',
      tabIndex: 0,
      testid: 'diagModuleLink',
      title: t('diag.moduleTip'),
      on: {
        click: (e: Event) => {
          e.stopPropagation();
          void this.openModule(g);
        },
        keydown: (e: Event) => {
          if ((e as KeyboardEvent).key !== 'Enter') return;
          e.preventDefault();
          e.stopPropagation();
          void this.openModule(g);
        },
      },
    }, h('code', null, modulePath(g.module)));
    return [...codeSpans(text.slice(0, at)), link, ...codeSpans(text.slice(at + named.length))];
  }

  /** A reason in words, part by part, each part's meaning (the score's) as its tooltip. */
  private reason(reason: string, parts: DiagnosisReasonPart[], testid: string): HTMLElement {
    const out = h('span.diag-reason', { testid });
    reasonPieces(reason, parts).forEach((p, i) => {
      if (i) out.append(t('diag.reason.join'));
      const tip = reasonTip(p.kind);
      out.append(tip ? h('span.diag-score', { title: tip, testid: 'diagScore' }, p.text) : p.text);
    });
    return out;
  }

  /** The module a fault's first occurrence is in: the source shown first, then its parent. */
  private async openModule(g: DiagnosisGroup): Promise<void> {
    await this.jump(g);
    const parent = this.ctx.store.hier.NPU[unprefixed(g.node)]?.parentNode;
    if (parent) await this.ctx.jumpTo('NPU', parent);
  }

  private occurrenceRow(o: DiagnosisOccurrence): HTMLElement {
    return h('button.diag-occurrence', { testid: 'diagOccurrence', title: o.node, on: { click: () => void this.jump(o) } },
      h('span.diag-meta', null, t('diag.occurrence', { step: o.step, rank: o.rank, micro: o.micro_step })), ' ', h('span.diag-node', null, o.node));
  }

  private nonFiniteRow(nf: DiagnosisNonFinite): HTMLElement {
    return h('button.diag-item.flag', { testid: 'diagNonFinite', title: nf.node, on: { click: () => void this.jump(nf) } },
      h('span.diag-rank', null, '!'),
      h('span.diag-main', null, h('span.diag-node', null, nf.node),
        h('span.diag-meta', null, t('diag.where', { step: nf.step, rank: nf.rank, direction: nf.direction })),
        this.reason(nf.reason, nf.reason_parts, 'diagNonFiniteReason')));
  }

  /** Show a node of the diagnosis: its step and rank first, then expanded, selected, centred. */
  async jump(src: Pick<DiagnosisSource, 'step' | 'rank' | 'node'>): Promise<void> {
    await this.ctx.openNodeAt(src);
  }

  private setMode(mode: ColorMode): void {
    this.ctx.setColorMode(mode);
    if (mode === 'diagnosis') void this.ensure(true);
  }

  /** The CSV of the shown step and rank, rendered by the sidecar, saved under its own name. */
  private async download(): Promise<void> {
    const s = this.ctx.store;
    const address = csvAddress(s.meta);
    // The sidecar diagnoses the file before the first row: "preparing", then the bytes as they come.
    const progress = h('p.muted.diag-csv-progress', { testid: 'csvProgress', role: 'status' }, t('diag.csvPreparing'));
    this.csvProgress = progress;
    s.changed('panel');
    try {
      const res = await fetch(address, { headers: { 'X-Graph-Ascend-Client': clientId() } });
      if (!res.ok || !(res.headers.get('Content-Type') ?? '').startsWith('text/csv')) {
        this.ctx.toast(`exportCsv: ${await downloadError(res)}`, 'error');
        return;
      }
      const name = attachmentName(res.headers.get('Content-Disposition'), `${s.meta.tag}.csv`);
      const blob = await readWithProgress(res.body, res.headers.get('Content-Type') ?? 'text/csv', (bytes) => {
        progress.textContent = t('diag.csvReceived', { size: sizeText(bytes) });
      });
      saveBlob(blob, name);
      this.ctx.toast(t('diag.downloaded', { file: name }), 'success');
    } catch (e) {
      this.ctx.toast(`exportCsv: ${e instanceof Error ? e.message : String(e)}`, 'error');
    } finally {
      this.csvProgress = null;
      s.changed('panel');
    }
  }
}

/** A line whose names are in Markdown backticks (the sidecar's summary), the names as code, no backtick shown. */
export function codeSpans(text: string): (string | HTMLElement)[] {
  const parts = text.split('`');
  // An odd backtick out: the text as it is.
  if (parts.length % 2 === 0) return [text];
  return parts.map((p, i) => (i % 2 === 1 ? h('code', null, p) : p)).filter((p) => p !== '');
}
