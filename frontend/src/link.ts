/**
 * Shareable links: the view (file, step, rank, micro step, selected node, expanded modules) in
 * TensorBoard's own address, and the "Copy link" button.
 *
 * The page runs in TensorBoard's plugin iframe, same-origin, so it can read and replace the top
 * window's hash (`#graph_ascend&ga_run=…`, in TensorBoard's tf_storage format, see state.ts). The
 * hash is replaced with `location.replace` on the top window: a same-document navigation that
 * adds no history entry and fires `hashchange`, so TensorBoard's own copy of its hash state stays
 * in step. Where there is no reachable TensorBoard window (VS Code's TensorBoard view embeds it in a
 * webview of another origin, or the page is opened on its own) the link is the page's own address
 * with the view in its query string. Either way the link is built from the address the browser
 * shows, so it holds whatever prefix, proxy or forwarded port the user goes through.
 */
import { clear, h } from './dom';
import { t } from './i18n';
import { icon } from './icons';
import { hashShowsPlugin, readHashState, writeHashState, writeUrlState, type UrlState } from './state';
import { hashWithoutWriteToken, withoutWriteToken } from './writeAccess';

/** TensorBoard's window when the page is in its same-origin plugin iframe, else null. */
function tensorBoardWindow(): Window | null {
  try {
    const top = window.parent;
    if (!top || top === window) return null;
    // Reading another origin's address throws.
    return typeof top.location.href === 'string' ? top : null;
  } catch {
    return null;
  }
}

/** The view named in TensorBoard's address (a shared link, or the view before a reload). */
export function linkedState(): UrlState {
  const tb = tensorBoardWindow();
  return tb ? readHashState(tb.location.hash) : {};
}

/** Show the view in TensorBoard's address, while TensorBoard shows this plugin. */
export function reflectInAddress(st: UrlState): void {
  const tb = tensorBoardWindow();
  if (!tb) return;
  const hash = tb.location.hash;
  if (!hashShowsPlugin(hash)) return;
  const next = writeHashState(hashWithoutWriteToken(hash), st);
  if (next === (hash || '#')) return;
  try {
    tb.location.replace(`${tb.location.href.split('#')[0]}${next}`);
  } catch {
    /* a sandboxed frame may not navigate its parent: the button still gives the link */
  }
}

/**
 * A link that opens `st` in a fresh browser. Never the write token (in the query or the fragment: the
 * page reads it from both): a shared view is not a password.
 */
export function shareLink(st: UrlState): string {
  const tb = tensorBoardWindow();
  if (tb && hashShowsPlugin(tb.location.hash)) return `${withoutWriteToken(tb.location.href.split('#')[0])}${writeHashState(hashWithoutWriteToken(tb.location.hash), st)}`;
  return `${location.href.split(/[?#]/)[0]}${writeUrlState('', st)}`;
}

/** Copy `text`: the clipboard API where the frame may use it, else the selection copy command. */
async function copyText(input: HTMLInputElement): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(input.value);
    return true;
  } catch {
    input.focus();
    input.select();
    try {
      return document.execCommand('copy');
    } catch {
      return false;
    }
  }
}

/**
 * The toolbar's "Copy link" button: copies the link and shows it in a popover (selected), so that
 * it can be copied by hand where the browser refuses (an iframe without clipboard permission).
 */
export function copyLinkButton(view: () => UrlState): HTMLElement {
  const text = h('input.share-link-text', { testid: 'shareLinkText', readOnly: true, 'aria-label': t('header.copyLink') });
  const note = h('div.share-link-note', { testid: 'shareLinkNote' });
  const pop = h('div.popover.share-link', { testid: 'shareLinkPopover' }, text, note);
  pop.style.display = 'none';
  const click = async () => {
    text.value = shareLink(view());
    pop.style.display = '';
    clear(note);
    const copied = await copyText(text);
    note.textContent = copied ? t('linkCopied') : t('linkCopyByHand');
    note.dataset.copied = String(copied);
    text.focus();
    text.select();
  };
  const button = h('button.toggle', { testid: 'copyLinkButton', title: t('header.copyLink'), 'aria-label': t('header.copyLink'), on: { click: () => void click() } }, icon('link'));
  return h('span.popover-anchor', null, button, pop);
}
