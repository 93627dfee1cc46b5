/**
 * The conversion page: dump folders under the logdir → a `.vis.db`. A form (target, optional
 * golden, output name, layer mapping, overflow check, fuzzy match, parallel merge), live progress
 * streamed from `getConvertProgress` (read with fetch so it carries the tab's client header),
 * a real Cancel (`cancelConvert`), and the result with "open this file" or the error log.
 */
import { followSse, get, post, tidyError } from './api';
import { clear, h, option } from './dom';
import { t, type Key } from './i18n';
import type { ConvertCandidates, ConvertProgress } from './types';
import { guardWrite } from './writeAccess';
import { readOnlyLine } from './readOnly';

interface Host {
  toast(text: string, kind?: 'info' | 'error' | 'success'): void;
  openConverted(outputFile: string): Promise<void>;
}

interface Params {
  npu_path: string;
  bench_path: string;
  output_path: string;
  is_print_compare_log: boolean;
  is_parallel_merge: boolean;
  layer_mapping: string;
  overflow_check: boolean;
  fuzzy_match: boolean;
  npu: { rank_size: number; tp: number; pp: number; vpp: number; order: string };
  bench: { rank_size: number; tp: number; pp: number; vpp: number; order: string };
}

export function defaultOutput(hasBench: boolean, now = Date.now()): string {
  return `${hasBench ? 'compare' : 'build'}_${now}`;
}

/** msprobe's graph_visualize documentation (a link in the form; nothing is loaded from it). */
const DOCS_URL = 'https://gitee.com/ascend/mstt/tree/master/debug/accuracy_tools/msprobe/docs';

/** The file a conversion writes: `<output>/{build|compare}_<YYYYMMDDhhmmss>.vis.db`, as msprobe names it. */
export function resultName(output: string, hasBench: boolean): string {
  const dir = output.trim().replace(/\/+$/, '') || '…';
  return `${dir}/${hasBench ? 'compare' : 'build'}_YYYYMMDDhhmmss.vis.db`;
}

/** The request body: parallel parameters only when merging, bench ones only with a golden folder. */
export function convertBody(p: Params): Record<string, unknown> {
  const body: Record<string, unknown> = {
    npu_path: p.npu_path,
    bench_path: p.bench_path || '',
    output_path: p.output_path.trim(),
    is_print_compare_log: p.is_print_compare_log,
    is_parallel_merge: p.is_parallel_merge,
    layer_mapping: p.layer_mapping || '',
    overflow_check: p.overflow_check,
    fuzzy_match: p.fuzzy_match,
  };
  if (p.is_parallel_merge) {
    body.parallel_merge = p.bench_path ? { npu: { ...p.npu }, bench: { ...p.bench } } : { npu: { ...p.npu } };
  }
  return body;
}

/**
 * The run and tag of a converted file (`outputFile`, relative to the logdir) in the catalog: the
 * run is the file's folder path below the logdir (`converted/s1`, as the catalog names runs); a
 * file right in the logdir belongs to the run named after the logdir, found by its tag.
 */
export function convertedRun(outputFile: string, catalog: Record<string, { tags: string[] }>): { run: string; tag: string } | null {
  const parts = outputFile.replace(/\\/g, '/').split('/').filter((p) => p && p !== '.');
  const file = parts.pop() ?? '';
  const tag = file.endsWith('.vis.db') ? file.slice(0, -7) : file;
  const run = parts.length ? parts.join('/') : Object.keys(catalog).find((r) => catalog[r].tags.includes(tag));
  if (run === undefined || !catalog[run]) return null;
  return { run, tag: catalog[run].tags.includes(tag) ? tag : catalog[run].tags[0] };
}

export class ConvertPage {
  private el: HTMLElement | null = null;
  private step: 'form' | 'progress' | 'result' = 'form';
  private cands: ConvertCandidates = { dirs: [], yaml_files: [] };
  private params: Params = {
    npu_path: '',
    bench_path: '',
    output_path: defaultOutput(false),
    is_print_compare_log: false,
    is_parallel_merge: false,
    layer_mapping: '',
    overflow_check: false,
    fuzzy_match: false,
    npu: { rank_size: 1, tp: 1, pp: 1, vpp: 1, order: 'tp-cp-ep-dp-pp' },
    bench: { rank_size: 1, tp: 1, pp: 1, vpp: 1, order: 'tp-cp-ep-dp-pp' },
  };
  private progress: ConvertProgress = { progress: 0, status: 'building' };
  private jobId = '';
  private abort: AbortController | null = null;
  /** The event stream stalled and the page is polling the job's state. */
  private stalled = false;
  private error = '';

  constructor(private host: Host) {}

  async open(el: HTMLElement): Promise<void> {
    this.el = el;
    this.render(el);
    if (this.step !== 'form') return;
    const r = await get('loadConvertedGraphData', {});
    if (!r.success || !r.data) {
      this.error = tidyError(`loadConvertedGraphData: ${r.error ?? 'no data'}`);
      this.host.toast(this.error, 'error');
    } else {
      this.cands = { dirs: r.data.dirs ?? [], yaml_files: r.data.yaml_files ?? [] };
      this.error = '';
    }
    this.render(el);
  }

  render(el: HTMLElement): void {
    this.el = el;
    clear(el);
    if (this.step === 'form') el.append(this.form());
    else if (this.step === 'progress') el.append(this.progressView());
    else el.append(this.resultView());
  }

  private rerender(): void {
    if (this.el) this.render(this.el);
  }

  private form(): HTMLElement {
    const p = this.params;
    const sel = (testid: string, items: string[], value: string, allowNone: boolean, on: (v: string) => void) => {
      const s = h('select', { testid, on: { change: () => on(s.value) } }, allowNone ? option('', t('none'), !value) : option('', '—', !value), ...items.map((d) => option(d, d, d === value)));
      return s;
    };
    const check = (testid: string, label: string, help: Key, value: boolean, on: (v: boolean) => void) =>
      h('label.check', null, h('input', { type: 'checkbox', testid, checked: value, on: { change: (e: Event) => on((e.target as HTMLInputElement).checked) } }), label,
        h('span.help.inline', { testid: `${testid}Help` }, t(help)));
    const field = (label: string, control: HTMLElement, help: Key, testid: string) =>
      h('label.field', null, h('span.field-label', null, label), control, h('span.help', { testid }, t(help)));
    const num = (side: 'npu' | 'bench', key: 'rank_size' | 'tp' | 'pp' | 'vpp', label: string) =>
      h('label.field.inline', null, h('span.field-label', null, label),
        h('input', { type: 'number', min: 1, value: String(p[side][key]), testid: `${side}_${key}`, on: { change: (e: Event) => (p[side][key] = Math.max(1, Math.floor(Number((e.target as HTMLInputElement).value) || 1))) } }));
    const merge = (side: 'npu' | 'bench', title: string) =>
      h('fieldset.merge', null, h('legend', null, title), num(side, 'rank_size', t('rank_size')), num(side, 'tp', 'TP'), num(side, 'pp', 'PP'), num(side, 'vpp', 'VPP'),
        h('label.field.inline', null, h('span.field-label', null, t('order')), h('input', { type: 'text', value: p[side].order, maxLength: 64, testid: `${side}_order`, on: { change: (e: Event) => (p[side].order = (e.target as HTMLInputElement).value) } })));
    const preview = h('p.help.result-name', { testid: 'conversionResultName' }, t('resultName', { file: resultName(p.output_path, Boolean(p.bench_path)) }));
    const out = h('input', { type: 'text', value: p.output_path, testid: 'outputPathInput', maxLength: 255, on: { input: () => {
      p.output_path = out.value;
      preview.textContent = t('resultName', { file: resultName(p.output_path, Boolean(p.bench_path)) });
    } } });
    const start = guardWrite(h('button.primary', { testid: 'startConversionButton', on: { click: () => void this.start() } }, t('button_start_conversion')));
    return h('div.convert-form', { testid: 'conversionForm' }, h('h2', null, t('convertTitle')),
      h('p.help', null, h('a', { href: DOCS_URL, target: '_blank', rel: 'noopener noreferrer', testid: 'conversionDocsLink' }, t('docsLink'))),
      this.error ? h('div.error-box', { testid: 'conversionLoadError' }, this.error) : null,
      readOnlyLine('conversionReadOnly'),
      field(`${t('label_npu_path')} *`, sel('npuPathSelect', this.cands.dirs, p.npu_path, false, (v) => { p.npu_path = v; }), 'help.npuPath', 'npuPathHelp'),
      field(t('label_bench_path'), sel('benchPathSelect', this.cands.dirs, p.bench_path, true, (v) => {
        const wasDefault = /^(build|compare)_\d+$/.test(p.output_path);
        p.bench_path = v;
        if (wasDefault) p.output_path = defaultOutput(Boolean(v));
        this.rerender();
      }), 'help.benchPath', 'benchPathHelp'),
      field(`${t('label_output_path')} *`, out, 'help.outputPath', 'outputPathHelp'),
      preview,
      field(t('label_layer_mapping'), sel('layerMappingSelect', this.cands.yaml_files, p.layer_mapping, true, (v) => (p.layer_mapping = v)), 'help.layerMapping', 'layerMappingHelp'),
      h('div.checks', null,
        check('printLogCheckbox', t('checkbox_print_log'), 'help.printLog', p.is_print_compare_log, (v) => (p.is_print_compare_log = v)),
        check('overflowCheckCheckbox', t('checkbox_overflow_check'), 'help.overflow', p.overflow_check, (v) => (p.overflow_check = v)),
        check('fuzzyMatchCheckbox', t('checkbox_fuzzy_match'), 'help.fuzzy', p.fuzzy_match, (v) => (p.fuzzy_match = v)),
        check('parallelMergeCheckbox', t('checkbox_parallel_merge'), 'help.merge', p.is_parallel_merge, (v) => { p.is_parallel_merge = v; this.rerender(); })),
      p.is_parallel_merge ? merge('npu', t('debug_side')) : null,
      p.is_parallel_merge && p.bench_path ? merge('bench', t('benchmark_side')) : null,
      h('div.actions', null, start));
  }

  private async start(): Promise<void> {
    const p = this.params;
    if (!p.npu_path) return this.host.toast(`${t('label_npu_path')} ${t('required')}`, 'error');
    if (!p.output_path.trim()) return this.host.toast(`${t('label_output_path')} ${t('required')}`, 'error');
    const r = await post('convertToGraph', convertBody(p));
    if (!r.success) {
      this.host.toast(`convertToGraph: ${r.error}`, 'error');
      return;
    }
    const job = r.jobId ?? (r as { job_id?: string }).job_id ?? '';
    this.jobId = job;
    this.progress = { progress: 0, status: 'building' };
    this.stalled = false;
    this.step = 'progress';
    this.rerender();
    void this.follow();
  }

  /**
   * Follows the job: its event stream, and, when no event has come for STALL_MS (a proxy or a
   * port forward that holds event streams back until they end), polls `getConvertState` every
   * POLL_MS until the job ends. Whichever sees the final state first shows it.
   */
  private async follow(): Promise<void> {
    this.abort?.abort();
    const ctrl = new AbortController();
    this.abort = ctrl;
    const id = this.jobId;
    const url = id ? `getConvertProgress?jobId=${encodeURIComponent(id)}` : 'getConvertProgress';
    let finished = false;
    let lastEvent = Date.now();
    const apply = (msg: ConvertProgress): boolean => {
      if (finished || ctrl.signal.aborted) return true;
      lastEvent = Date.now();
      // Reports may come from both paths: progress never goes back.
      this.progress = { ...msg, progress: Math.max(Number(msg.progress) || 0, Number(this.progress.progress) || 0) };
      if (msg.status === 'building') {
        this.updateBar();
        return false;
      }
      finished = true;
      ctrl.abort();
      this.step = 'result';
      this.rerender();
      return true;
    };
    let polling = false;
    const poll = async () => {
      polling = true;
      this.stalled = true;
      this.updateBar();
      while (!finished && !ctrl.signal.aborted) {
        const r = await get('getConvertState', { jobId: id || undefined });
        if (finished || ctrl.signal.aborted) return;
        if (r.success && r.status) apply(r);
        await sleep(POLL_MS, ctrl.signal);
      }
    };
    const watchdog = setInterval(() => {
      if (!polling && !finished && Date.now() - lastEvent > STALL_MS) void poll();
    }, 250);
    try {
      const err = await followSse(url, (data) => {
        let msg: ConvertProgress;
        try {
          msg = JSON.parse(data);
        } catch {
          return;
        }
        if (apply(msg)) return false;
      }, ctrl.signal);
      if (finished || ctrl.signal.aborted) return;
      // The stream ended or broke before the job did: the state is asked for until it ends.
      if (!polling) void poll();
      while (!finished && !ctrl.signal.aborted && Date.now() - lastEvent < GIVE_UP_MS) await sleep(POLL_MS, ctrl.signal);
      if (finished || ctrl.signal.aborted) return;
      const why = err ? `getConvertProgress: ${err}` : 'the progress stream ended before the conversion finished';
      this.progress = { ...this.progress, status: 'error', error: [...asList(this.progress.error), why] };
      finished = true;
      ctrl.abort();
      this.step = 'result';
      this.rerender();
    } finally {
      clearInterval(watchdog);
    }
  }

  private updateBar(): void {
    const bar = this.el?.querySelector('.bar-fill') as HTMLElement | null;
    const label = this.el?.querySelector('[data-testid="conversionPercent"]');
    const detail = this.el?.querySelector('[data-testid="conversionMeasures"]');
    const stalled = this.el?.querySelector('[data-testid="conversionPolling"]') as HTMLElement | null;
    const pct = Math.max(0, Math.min(100, Number(this.progress.progress) || 0));
    if (bar) bar.style.width = `${pct}%`;
    if (bar?.parentElement) bar.parentElement.setAttribute('aria-valuenow', String(pct));
    if (label) label.textContent = `${pct}%`;
    if (detail) detail.textContent = measuresText(this.progress);
    if (stalled) stalled.hidden = !this.stalled;
  }

  private progressView(): HTMLElement {
    const p = this.params;
    const pct = Math.max(0, Math.min(100, Number(this.progress.progress) || 0));
    const row = (k: string, v: string) => h('tr', null, h('th', null, k), h('td', null, v || '-'));
    return h('div.convert-progress', { testid: 'conversionProgress' }, h('h2', null, t('building')),
      h('div.bar', { role: 'progressbar', 'aria-valuenow': String(pct) }, h('div.bar-fill', { style: { width: `${pct}%` } })),
      h('div', { testid: 'conversionPercent' }, `${pct}%`),
      h('div.help', { testid: 'conversionMeasures' }, measuresText(this.progress)),
      h('div.help', { testid: 'conversionPolling', hidden: !this.stalled }, t('progressPolling')),
      h('table.summary', null, row(t('label_npu_path'), p.npu_path), row(t('label_bench_path'), p.bench_path), row(t('label_output_path'), p.output_path),
        row(t('label_layer_mapping'), p.layer_mapping), row(t('checkbox_overflow_check'), String(p.overflow_check)), row(t('checkbox_fuzzy_match'), String(p.fuzzy_match))),
      h('div.actions', null, guardWrite(h('button', { testid: 'cancelConversionButton', on: { click: () => void this.cancel() } }, t('cancel_conversion')))));
  }

  private async cancel(): Promise<void> {
    const r = await post('cancelConvert', { jobId: this.jobId });
    if (!r.success) this.host.toast(`cancelConvert: ${r.error}`, 'error');
  }

  private resultView(): HTMLElement {
    const st = this.progress.status;
    const back = h('button', { testid: 'conversionBackButton', on: { click: () => { this.step = 'form'; this.params.output_path = defaultOutput(Boolean(this.params.bench_path)); void this.open(this.el as HTMLElement); } } }, t('back'));
    if (st === 'done') {
      const file = this.progress.outputFile ?? '';
      return h('div.convert-result.success', { testid: 'conversionResult' }, h('h2', null, `✔ ${t('build_success')}`),
        h('p', { testid: 'conversionOutput' }, file || this.params.output_path),
        h('div.actions', null, h('button.primary', { testid: 'loadConvertedFileButton', on: { click: () => { this.step = 'form'; void this.host.openConverted(file || this.params.output_path); } } }, t('loadFile')), back));
    }
    if (st === 'cancelled') {
      // A cancel is the user's choice, not a failure: a neutral note, no error log.
      return h('div.convert-result.cancelled', { testid: 'conversionResult', 'data-status': 'cancelled' }, h('h2', null, t('cancelled')),
        h('p.help', { testid: 'conversionCancelledNote' }, t('cancelledNote')),
        h('div.actions', null, h('button.primary', { testid: 'rebuildButton', on: { click: () => void this.start() } }, t('rebuild')), back));
    }
    const log = asList(this.progress.error).join('\n') || t('build_failure');
    const pre = h('pre.error-log', { testid: 'conversionErrorLog' }, log);
    return h('div.convert-result.failure', { testid: 'conversionResult', 'data-status': st }, h('h2', null, `✖ ${t('build_failure')}`),
      h('h4', null, t('errorLog'), h('button.copy', { on: { click: () => void navigator.clipboard?.writeText(log) } }, t('copy'))), pre,
      h('div.actions', null, guardWrite(h('button.primary', { testid: 'rebuildButton', on: { click: () => void this.start() } }, t('rebuild'))), back));
  }
}

/** No progress event for this long: the stream is held back somewhere; poll instead. */
const STALL_MS = 2000;
const POLL_MS = 1000;
/** After the stream ended early, how long polling may go without an answer before giving up. */
const GIVE_UP_MS = 15_000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/** `12.3 MB`, `512 KB`, `900 B`. */
export function bytesText(n: number): string {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${Math.round(n)} B`;
}

/** `42 s`, `3 min 5 s`. */
export function durationText(secs: number): string {
  const s = Math.max(0, Math.round(secs));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** What the converter measured: bytes read, rows written, time left (empty before the first measure). */
export function measuresText(p: ConvertProgress): string {
  const parts: string[] = [];
  if (p.bytesTotal) parts.push(t('progressRead', { done: bytesText(Number(p.bytesRead ?? 0)), total: bytesText(Number(p.bytesTotal)) }));
  if (p.rowsTotal) parts.push(t('progressRows', { done: String(p.rowsWritten ?? 0), total: String(p.rowsTotal) }));
  if (p.etaSeconds !== undefined && p.etaSeconds !== null && p.status === 'building') parts.push(t('progressEta', { time: durationText(Number(p.etaSeconds)) }));
  return parts.join(' · ');
}

function asList(e: string[] | string | undefined): string[] {
  if (!e) return [];
  return Array.isArray(e) ? e.map(String) : [String(e)];
}
