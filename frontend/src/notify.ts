/** Notices: toasts (errors are also kept in the store for support and tests) and the modal box. */
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

export function modal(title: string, body: Node, testid = 'modal'): void {
  const close = () => overlay.remove();
  const overlay = h('div.modal-overlay', { testid },
    h('div.modal', { role: 'dialog' }, h('h3', null, title), body, h('div.modal-actions', null, h('button.primary', { on: { click: close } }, t('ok')))));
  document.body.append(overlay);
}
