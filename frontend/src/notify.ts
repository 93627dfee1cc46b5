/** Notices: toasts (errors are also kept in the store for support and tests) and lasting notices, one per subject. */
import { tidyError } from './api';
import type { ToastKind } from './ctx';
import { h } from './dom';
import { t } from './i18n';
import { icon } from './icons';

export function toast(host: HTMLElement, errors: string[], message: string, kind: ToastKind = 'info'): void {
  const text = tidyError(message);
  if (kind === 'error') errors.push(text);
  const el = h(`div.toast.${kind}`, { testid: kind === 'error' ? 'errorToast' : 'toast', role: kind === 'error' ? 'alert' : 'status' },
    h('span.toast-text', null, text),
    h('button.toast-close', { 'aria-label': t('close'), title: t('close'), on: { click: () => el.remove() } }, icon('close')));
  host.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 12000 : 4000);
}

/**
 * A notice that stays until closed: one per `key`, so a new one replaces the last (notices never
 * stack); an empty message takes it away. `action` adds a button (e.g. "Show" opens a panel).
 */
export function notice(host: HTMLElement, key: string, message: string, action?: { label: string; run: () => void }): void {
  host.querySelector(`[data-notice="${key}"]`)?.remove();
  if (!message) return;
  const el = h('div.toast.error.notice', { testid: `${key}Notice`, role: 'alert', 'data-notice': key },
    h('span.toast-text', null, message),
    action ? h('button.toast-action', { testid: `${key}NoticeAction`, on: { click: () => { el.remove(); action.run(); } } }, action.label) : null,
    h('button.toast-close', { 'aria-label': t('close'), title: t('close'), on: { click: () => el.remove() } }, icon('close')));
  host.append(el);
}
