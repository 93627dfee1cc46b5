/**
 * The line above the panes that says where the page is: the file, the step, the rank and the
 * micro-batch shown; and, when the diagnosis's first source is at another step or rank, where it
 * is, one click away ("The first source is at step 2 · rank 1 — go"). Drawn with the toolbar
 * (the view and the diagnosis both redraw it).
 */
import type { PageCtx } from './ctx';
import { fileKey } from './diagnosis';
import { clear, h } from './dom';
import { t } from './i18n';
import type { Store } from './store';

/** Where the shown graph is, in words: "step 2 · rank 1 · micro-batch 0" (all micro-batches: so named). */
export function pointText(s: Store): string {
  const m = s.meta;
  const micro = m.microStep === -1 ? t('where.microAll') : t('where.micro', { micro: m.microStep });
  return `${t('where.point', { step: m.step, rank: m.rank })} · ${micro}`;
}

export function renderWhere(el: HTMLElement, ctx: PageCtx): void {
  const s = ctx.store;
  clear(el);
  const m = s.meta;
  el.style.display = m.run && s.config ? '' : 'none';
  if (!m.run || !s.config) return;
  el.append(
    h('span.where-label', null, t('where.label')),
    h('span.where-file', { testid: 'whereFile', title: `${m.run}/${m.tag}` }, `${m.run}/${m.tag}`),
    h('span.where-point', { testid: 'wherePoint' }, pointText(s)),
  );
  const d = s.diagnosis?.file === fileKey(m) ? s.diagnosis.data : null;
  const first = d?.sources[0];
  if (!first) return;
  if (first.step === m.step && first.rank === m.rank) {
    el.append(h('span.where-source.here', { testid: 'whereSourceHere' }, t('where.here')));
    return;
  }
  el.append(
    h('span.where-source', { testid: 'whereSource' },
      `${t('where.elsewhere', { step: first.step, rank: first.rank })} — `,
      h('button.where-go', { testid: 'whereGo', title: t('where.goTip'), on: { click: () => void ctx.openNodeAt(first) } }, t('where.go'))),
  );
}
