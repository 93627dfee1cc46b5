/** The data panel: run (folder), file, step, rank and micro step, and the files that could not be read. */
import type { PageCtx } from '../ctx';
import { h, option } from '../dom';
import { t } from '../i18n';

function field(label: string, control: HTMLElement): HTMLElement {
  return h('label.field', null, h('span.field-label', null, label), control);
}

export function dataPanel(ctx: PageCtx): HTMLElement {
  const s = ctx.store;
  const runs = Object.keys(s.catalog);
  const runSel = h('select', { testid: 'runSelect', on: { change: () => { const r = runSel.value; void ctx.selectFile(r, s.catalog[r].tags[0]); } } },
    ...runs.map((r) => option(r, r, r === s.meta.run)));
  const tags = s.catalog[s.meta.run]?.tags ?? [];
  const tagSel = h('select', { testid: 'tagSelect', on: { change: () => void ctx.selectFile(s.meta.run, tagSel.value) } },
    ...tags.map((x) => option(x, x, x === s.meta.tag)));
  const c = s.config;
  const stepSel = h('select', { testid: 'stepSelect', on: { change: () => void ctx.changeView({ step: Number(stepSel.value) }) } },
    ...(c?.steps ?? []).map((v) => option(String(v), String(v), v === s.meta.step)));
  const rankSel = h('select', { testid: 'rankSelect', on: { change: () => void ctx.changeView({ rank: Number(rankSel.value) }) } },
    ...(c?.ranks ?? []).map((v) => option(String(v), String(v), v === s.meta.rank)));
  const micro = c?.microSteps ? [-1, ...Array.from({ length: c.microSteps }, (_, i) => i)] : [-1];
  const microSel = h('select', { testid: 'microStepSelect', disabled: !c?.microSteps, on: { change: () => void ctx.changeView({ microStep: Number(microSel.value) }) } },
    ...micro.map((m) => option(String(m), m === -1 ? t('all') : String(m), m === s.meta.microStep)));
  const errs = s.catalogErrors.length
    ? h('div.catalog-errors', { testid: 'catalogErrorList' }, h('h4', null, t('risk_warning')), ...s.catalogErrors.map((e) => h('div.error-line', null, `${e.run}/${e.tag}: ${e.info}`)))
    : null;
  return h('div.panel-section', { testid: 'dataPanel' }, h('h3', null, t('sider.dataSelection')),
    s.catalogFailure ? h('div.error-box', { testid: 'catalogFailure' }, s.catalogFailure) : runs.length ? null : h('p.muted', null, t('noFiles')),
    field(t('dir'), runSel), field(t('file'), tagSel), field(t('step'), stepSel), field(t('rank'), rankSel), field(t('microStep'), microSel), errs);
}
