/**
 * Whether this page may change anything (start or cancel conversions, edit matches, save match
 * configurations). The plugin accepts changes only from this machine's own page unless its operator
 * allows more (docs/security.md, "Who may write"), and says on every answer, in
 * `X-Graph-Ascend-Writes`, whether it would accept one from here. Controls that change things are
 * marked with `guardWrite`: while changes are refused they are disabled, with a tooltip saying why.
 */
import { t } from './i18n';

export const WRITE_STATE_HEADER = 'X-Graph-Ascend-Writes';
/** The header that carries this launch's write token (the plugin prints, at start, the link that gives it). */
export const WRITE_TOKEN_HEADER = 'X-Graph-Ascend-Token';
/** The URL parameter of that link: `http://localhost:6006/?graph_ascend_token=…#graph_ascend`. */
export const WRITE_TOKEN_PARAM = 'graph_ascend_token';
const TOKEN_KEY = 'graph_ascend.writeToken';

/** allowed; refused (another machine, site or proxy); token (this page has no, or an old, write token). */
type WriteState = 'allowed' | 'refused' | 'token';
let state: WriteState = 'allowed';

/** False once the server said this page may not change things. */
export function writesAllowed(): boolean {
  return state === 'allowed';
}

/** Records what an answer said (other values: unchanged) and updates the marked controls. */
export function noteWriteState(value: string | null): void {
  if (value !== 'allowed' && value !== 'refused' && value !== 'token') return;
  if (value === state) return;
  state = value;
  if (typeof document !== 'undefined') document.querySelectorAll<HTMLElement>('[data-write]').forEach(apply);
}

/** Why changes are refused, for the conversion form (null while they are allowed). */
export function readOnlyNote(): string | null {
  if (state === 'allowed') return null;
  return t(state === 'token' ? 'readOnly.tokenNote' : 'readOnly.note');
}

/**
 * This launch's write token: from the address the page was opened with (its own, or TensorBoard's page
 * around its frame, which is of the same origin), kept in localStorage so that reloads and new tabs of
 * this TensorBoard have it; null when the page never got one.
 */
export function writeToken(): string | null {
  const found = tokenInAddress();
  try {
    if (found) localStorage.setItem(TOKEN_KEY, found);
    return found ?? localStorage.getItem(TOKEN_KEY);
  } catch {
    return found;
  }
}

function tokenInAddress(): string | null {
  if (typeof window === 'undefined') return null;
  const places: Location[] = [window.location];
  try {
    if (window.top && window.top !== window) places.push(window.top.location);
  } catch {
    /* a frame of another origin: not ours to read */
  }
  for (const where of places) {
    try {
      const fromQuery = new URLSearchParams(where.search).get(WRITE_TOKEN_PARAM);
      const fromHash = new URLSearchParams(where.hash.replace(/^#[^&?]*[&?]?/, '')).get(WRITE_TOKEN_PARAM);
      const token = fromQuery || fromHash;
      if (token) return token;
    } catch {
      /* an address we may not read */
    }
  }
  return null;
}

/** Marks a control that changes things: disabled, with the reason as its tooltip, while refused. */
export function guardWrite<T extends HTMLButtonElement | HTMLSelectElement>(el: T): T {
  el.dataset.write = '';
  el.dataset.ownTitle = el.title;
  apply(el);
  return el;
}

function apply(el: HTMLElement): void {
  (el as HTMLButtonElement).disabled = state !== 'allowed';
  if (state === 'allowed') el.title = el.dataset.ownTitle ?? '';
  else el.title = t(state === 'token' ? 'readOnly.tokenTooltip' : 'readOnly.tooltip');
}
