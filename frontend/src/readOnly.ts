/**
 * The read-only state said where it disables something (the match panel, the conversion form), as
 * a line of its own rather than only a disabled control's tooltip: in a report (no server, nothing
 * can change), else why this TensorBoard refuses changes from this page (writeAccess.ts).
 */
import { h } from './dom';
import { t } from './i18n';
import { shownReport } from './report/mode';
import { readOnlyNote } from './writeAccess';

/** The line, or null while changes are allowed. */
export function readOnlyLine(testid: string): HTMLElement | null {
  const why = shownReport() ? t('readOnly.report') : readOnlyNote();
  return why === null ? null : h('p.help.read-only', { testid, role: 'note' }, why);
}
