/**
 * "Download report": the self-contained report of the shown file, step and rank (`exportReport`,
 * made by the sidecar, as the CSV is), saved under the name the sidecar gives it. A report opens
 * from disk in any browser with no server (docs/report.md).
 */
import { clientId, downloadError } from '../api';
import type { PageCtx } from '../ctx';
import { attachmentName } from '../diagnosis';
import { h, saveBlob } from '../dom';
import { icon } from '../icons';
import { lang } from '../i18n';
import type { MetaData } from '../types';

const words = {
  en: { label: 'Download report', tip: 'One HTML file with the graph, the diagnosis and the node details that opens in any browser without a server', making: 'Making the report…', saved: 'Saved {file}' },
  zh: { label: '下载报告', tip: '单个 HTML 文件，包含图、诊断与节点详情，无需服务器即可在任意浏览器中打开', making: '正在生成报告…', saved: '已保存 {file}' },
};

function say(key: keyof typeof words.en, file = ''): string {
  return (lang() === 'zh' ? words.zh : words.en)[key].replace('{file}', file);
}

/** The relative address of the report of the shown step and rank. */
export function reportAddress(m: Pick<MetaData, 'run' | 'tag' | 'lang' | 'step' | 'rank'>): string {
  const q = new URLSearchParams({ run: m.run, tag: m.tag, lang: m.lang, step: String(m.step), rank: String(m.rank) });
  return `exportReport?${q.toString()}`;
}

async function download(ctx: PageCtx, button: HTMLButtonElement): Promise<void> {
  const m = ctx.store.meta;
  if (!m.run) return;
  button.disabled = true;
  ctx.toast(say('making'), 'info');
  try {
    const res = await fetch(reportAddress(m), { headers: { 'X-Graph-Ascend-Client': clientId() } });
    if (!res.ok || !(res.headers.get('Content-Type') ?? '').startsWith('text/html')) {
      ctx.toast(`exportReport: ${await downloadError(res)}`, 'error');
      return;
    }
    const name = attachmentName(res.headers.get('Content-Disposition'), `${m.tag}_report.html`);
    saveBlob(await res.blob(), name);
    ctx.toast(say('saved', name), 'success');
  } catch (e) {
    ctx.toast(`exportReport: ${e instanceof Error ? e.message : String(e)}`, 'error');
  } finally {
    button.disabled = false;
  }
}

/** The toolbar's button (hidden inside a report, which has no server to make one). */
export function reportDownloadButton(ctx: PageCtx): HTMLElement {
  const b = h('button.toggle.report-download', { testid: 'reportDownload', title: say('tip'), 'aria-label': say('label') }, icon('download'));
  b.addEventListener('click', () => void download(ctx, b));
  return b;
}
