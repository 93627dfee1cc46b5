/**
 * A report's own corner: where it came from (file, steps, ranks, tool, time) and what it leaves
 * out, behind a small button in the page's corner. Its strings are its own (English and Chinese,
 * by the page's language), so the page's table of strings is untouched.
 */
import { h } from '../dom';
import { lang } from '../i18n';
import type { ReportData } from './source';

const words = {
  en: {
    button: 'Report',
    title: 'A self-contained report: it opens with no server, and holds only what is listed.',
    file: 'File',
    shown: 'Opens on',
    stepRank: 'step {step}, rank {rank}',
    held: 'Holds',
    notHeld: 'Not held',
    fileHas: 'The file has',
    stepsRanks: 'steps {steps}; ranks {ranks}',
    made: 'Made by',
    leftOut: 'Left out',
  },
  zh: {
    button: '报告',
    title: '独立报告：无需服务器即可打开，只包含下列内容。',
    file: '文件',
    shown: '打开于',
    stepRank: 'step {step}，rank {rank}',
    held: '包含',
    notHeld: '未包含的 step 与 rank',
    fileHas: '文件包含',
    stepsRanks: 'step {steps}；rank {ranks}',
    made: '生成',
    leftOut: '未包含',
  },
};

function say(key: keyof typeof words.en, vars: Record<string, string | number> = {}): string {
  let s: string = (lang() === 'zh' ? words.zh : words.en)[key];
  for (const [k, v] of Object.entries(vars)) s = s.split(`{${k}}`).join(String(v));
  return s;
}

/** The button and its card, appended to `host`. */
export function reportAbout(host: HTMLElement, data: ReportData): HTMLElement {
  const p = data.provenance;
  const row = (label: string, value: string) => h('div.report-row', null, h('span.report-label', null, label), h('span', null, value));
  const card = h('div.report-card', { testid: 'reportCard', hidden: true },
    h('p.report-title', null, say('title')),
    row(say('file'), p.file),
    row(say('shown'), say('stepRank', { step: p.step, rank: p.rank })),
    row(say('held'), (p.held ?? [{ step: p.step, rank: p.rank }]).map((x) => say('stepRank', x)).join('; ')),
    p.notHeld ? row(say('notHeld'), p.notHeld) : null,
    row(say('fileHas'), say('stepsRanks', { steps: p.steps.join(', '), ranks: p.ranks.join(', ') })),
    row(say('made'), `${p.tool}, ${p.created}`),
    h('div.report-label', null, say('leftOut')),
    h('ul.report-left-out', { testid: 'reportLeftOut' }, ...data.leftOut.map((x) => h('li', null, x))));
  const button = h('button.report-button', { testid: 'reportInfo', title: say('title'), on: { click: () => { card.hidden = !card.hidden; } } }, say('button'));
  const box = h('div.report-about', null, card, button);
  host.append(box);
  return box;
}
