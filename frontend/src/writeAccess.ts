/**
 * Whether this page may change anything (start or cancel conversions, edit matches, save match
 * configurations). The plugin accepts changes only from this machine's own page unless its operator
 * allows more (docs/security.md, "Who may write"), and says on every answer, in
 * `X-Graph-Ascend-Writes`, whether it would accept one from here. Controls that change things are
 * marked with `guardWrite`: while changes are refused they are disabled, with a tooltip saying why.
 */
import { t } from './i18n';

export const WRITE_STATE_HEADER = 'X-Graph-Ascend-Writes';

let refused = false;

/** False once the server said this page may not change things. */
export function writesAllowed(): boolean {
  return !refused;
}

/** Records what an answer said (other values: unchanged) and updates the marked controls. */
export function noteWriteState(value: string | null): void {
  if (value !== 'allowed' && value !== 'refused') return;
  const now = value === 'refused';
  if (now === refused) return;
  refused = now;
  if (typeof document !== 'undefined') document.querySelectorAll<HTMLElement>('[data-write]').forEach(apply);
}

/** Marks a control that changes things: disabled, with the reason as its tooltip, while refused. */
export function guardWrite<T extends HTMLButtonElement | HTMLSelectElement>(el: T): T {
  el.dataset.write = '';
  el.dataset.ownTitle = el.title;
  apply(el);
  return el;
}

function apply(el: HTMLElement): void {
  (el as HTMLButtonElement).disabled = refused;
  el.title = refused ? t('readOnly.tooltip') : (el.dataset.ownTitle ?? '');
}
