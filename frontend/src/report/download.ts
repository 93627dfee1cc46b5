/**
 * "Download report": the self-contained report of the shown file, step and rank (`exportReport`,
 * made by the sidecar, as the CSV is), saved under the name the sidecar gives it. A report opens
 * from disk in any browser with no server (docs/report.md). The button opens a menu: the whole
 * report, or one without stacks and paths (`no_paths`: they can name private folders); while the
 * sidecar makes it the menu says so, then counts the bytes as they come (as the CSV's download).
 */
import { clientId, downloadError } from '../api';
import type { PageCtx } from '../ctx';
import { attachmentName, readWithProgress, sizeText } from '../diagnosis';
import { h, saveBlob } from '../dom';
import { icon } from '../icons';
import { lang } from '../i18n';
import type { MetaData } from '../types';

const words = {
  en: {
    label: 'Download report',
    tip: 'One HTML file with the graph, the diagnosis and the node details that opens in any browser without a server',
    whole: 'Report',
    wholeTip: 'With the stacks of the nodes and the file’s folder',
    noPaths: 'Without stacks and paths',
    noPathsTip: 'Stacks and folders can name private paths: this report leaves them out',
    making: 'Preparing the report (the sidecar lays out its views)…',
    received: 'Downloading the report: {size} received…',
    saved: 'Saved {file}',
  },
  zh: {
    label: '下载报告',
    tip: '单个 HTML 文件，包含图、诊断与节点详情，无需服务器即可在任意浏览器中打开',
    whole: '报告',
    wholeTip: '包含节点的调用栈与文件所在目录',
    noPaths: '不含调用栈与路径',
    noPathsTip: '调用栈与目录可能暴露私有路径：此报告不包含它们',
    making: '正在生成报告（先布局各视图）……',
    received: '正在下载报告：已接收 {size}……',
    saved: '已保存 {file}',
  },
};

function say(key: keyof typeof words.en, fill = ''): string {
  return (lang() === 'zh' ? words.zh : words.en)[key].replace(/\{(file|size)\}/, fill);
}

/** The relative address of the report of the shown step and rank (without stacks and paths: `noPaths`). */
export function reportAddress(m: Pick<MetaData, 'run' | 'tag' | 'lang' | 'step' | 'rank'>, noPaths = false): string {
  const q = new URLSearchParams({ run: m.run, tag: m.tag, lang: m.lang, step: String(m.step), rank: String(m.rank) });
  if (noPaths) q.set('no_paths', 'true');
  return `exportReport?${q.toString()}`;
}

/** The menu of one page: kept across the toolbar's renders, so a download's progress stays shown. */
const menus = new WeakMap<PageCtx, { anchor: HTMLElement; words: () => void }>();

async function download(ctx: PageCtx, noPaths: boolean, entries: HTMLButtonElement[], status: HTMLElement): Promise<void> {
  const m = ctx.store.meta;
  if (!m.run) return;
  for (const e of entries) e.disabled = true;
  status.hidden = false;
  status.textContent = say('making');
  try {
    const res = await fetch(reportAddress(m, noPaths), { headers: { 'X-Graph-Ascend-Client': clientId() } });
    if (!res.ok || !(res.headers.get('Content-Type') ?? '').startsWith('text/html')) {
      ctx.toast(`exportReport: ${await downloadError(res)}`, 'error');
      return;
    }
    const name = attachmentName(res.headers.get('Content-Disposition'), `${m.tag}_report.html`);
    const blob = await readWithProgress(res.body, res.headers.get('Content-Type') ?? 'text/html', (bytes) => {
      status.textContent = say('received', sizeText(bytes));
    });
    saveBlob(blob, name);
    ctx.toast(say('saved', name), 'success');
  } catch (e) {
    ctx.toast(`exportReport: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    for (const e of entries) e.disabled = false;
    status.hidden = true;
    status.textContent = '';
  }
}

/** The toolbar's button and its menu (hidden inside a report, which has no server to make one). */
export function reportDownloadButton(ctx: PageCtx): HTMLElement {
  const kept = menus.get(ctx) ?? makeMenu(ctx);
  menus.set(ctx, kept);
  kept.words(); // the language may have changed since the last render
  return kept.anchor;
}

function makeMenu(ctx: PageCtx): { anchor: HTMLElement; words: () => void } {
  const status = h('p.muted.report-progress', { testid: 'reportProgress', role: 'status' });
  status.hidden = true;
  const whole = h('button.report-entry', { testid: 'reportDownloadWhole' });
  const noPaths = h('button.report-entry', { testid: 'reportDownloadNoPaths' });
  const entries = [whole, noPaths];
  whole.addEventListener('click', () => void download(ctx, false, entries, status));
  noPaths.addEventListener('click', () => void download(ctx, true, entries, status));
  const pop = h('div.popover.report-menu', { testid: 'reportMenu' }, whole, noPaths, status);
  pop.style.display = 'none';
  const b = h('button.toggle', { testid: 'reportDownload' }, icon('download'));
  b.addEventListener('click', () => (pop.style.display = pop.style.display === 'none' ? '' : 'none'));
  const words = () => {
    b.title = say('tip');
    b.setAttribute('aria-label', say('label'));
    whole.textContent = say('whole');
    whole.title = say('wholeTip');
    noPaths.textContent = say('noPaths');
    noPaths.title = say('noPathsTip');
  };
  return { anchor: h('span.popover-anchor.report-download', null, b, pop), words };
}
