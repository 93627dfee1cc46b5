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
/** The URL parameter of that link: `http://localhost:6006/#graph_ascend&graph_ascend_token=…` (older launches printed `/?graph_ascend_token=…#graph_ascend`, also taken). */
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
 * this TensorBoard have it; null when the page never got one. Once it is stored, the token is taken out
 * of every address that held it (`cleanAddress`): the address bar, the history entry, a bookmark and the
 * `Referer` of later requests no longer carry it. Where storage fails it stays in the address (else a
 * reload would lose it) and is kept in memory.
 */
export function writeToken(): string | null {
  const found = tokenInAddress();
  if (found) {
    kept = found.token;
    if (storeToken(found.token)) for (const where of found.windows) cleanAddress(where);
    return found.token;
  }
  try {
    return localStorage.getItem(TOKEN_KEY) ?? kept;
  } catch {
    return kept;
  }
}

/** Whether localStorage now holds `token`. */
function storeToken(token: string): boolean {
  try {
    localStorage.setItem(TOKEN_KEY, token);
    return localStorage.getItem(TOKEN_KEY) === token;
  } catch {
    return false;
  }
}

/** The token last found in an address, for when localStorage cannot keep it. */
let kept: string | null = null;

/** The windows this page may read (its own and TensorBoard's, of the same origin). */
function readableWindows(): Window[] {
  if (typeof window === 'undefined') return [];
  const places: Window[] = [window];
  try {
    if (window.top && window.top !== window) places.push(window.top);
  } catch {
    /* a frame of another origin: not ours to read */
  }
  return places;
}

/** The token in the first address that holds one, and every window whose address holds one. */
function tokenInAddress(): { token: string; windows: Window[] } | null {
  let token: string | null = null;
  const windows: Window[] = [];
  for (const where of readableWindows()) {
    try {
      const found = tokenIn(where.location.search, where.location.hash);
      if (!found) continue;
      token ??= found;
      windows.push(where);
    } catch {
      /* an address we may not read */
    }
  }
  return token ? { token, windows } : null;
}

/** The token in a query (`?graph_ascend_token=…`) or a fragment (`#graph_ascend&graph_ascend_token=…`). */
export function tokenIn(search: string, hash: string): string | null {
  const fromQuery = new URLSearchParams(search).get(WRITE_TOKEN_PARAM);
  const fromHash = new URLSearchParams(hash.replace(/^#[^&?]*[&?]?/, '')).get(WRITE_TOKEN_PARAM);
  return fromQuery || fromHash || null;
}

/**
 * A window's address without the token, in place: `history.replaceState` (no navigation, no new history
 * entry; a change of the query by `location` would reload TensorBoard), and when the fragment changed a
 * `hashchange`, so that TensorBoard's own copy of its hash state follows.
 */
function cleanAddress(where: Window): void {
  const { pathname, search, hash, href } = where.location;
  const cleanSearch = searchWithoutWriteToken(search);
  const cleanHash = hashWithoutWriteToken(hash);
  if (cleanSearch === search && cleanHash === hash) return;
  try {
    where.history.replaceState(where.history.state, '', `${pathname}${cleanSearch}${cleanHash}`);
    if (cleanHash !== hash) {
      const HashChange = (where as Window & typeof globalThis).HashChangeEvent;
      where.dispatchEvent(new HashChange('hashchange', { oldURL: href, newURL: where.location.href }));
    }
  } catch {
    /* a sandboxed frame may not change its parent's address: the token stays there */
  }
}

/** `?…` without the token's parameter ('' when nothing is left); unchanged when it has none. */
export function searchWithoutWriteToken(search: string): string {
  const params = new URLSearchParams(search);
  if (!params.has(WRITE_TOKEN_PARAM)) return search;
  params.delete(WRITE_TOKEN_PARAM);
  const rest = params.toString();
  return rest ? `?${rest}` : '';
}

/**
 * `#tab&k=v…` without the token's pairs (the first may follow a `?`, as `tokenIn` reads it), every
 * other part kept as it is written; unchanged when it has none.
 */
export function hashWithoutWriteToken(hash: string): string {
  const m = /^#([^&?]*)[&?]?([\s\S]*)$/.exec(hash);
  if (!m) return hash;
  const parts = m[2].split('&').filter((part) => part !== '');
  const kept = parts.filter((part) => !isTokenPair(part));
  if (kept.length === parts.length) return hash;
  return `#${[m[1], ...kept].join('&')}`;
}

function isTokenPair(part: string): boolean {
  const key = part.split('=', 1)[0];
  try {
    return decodeURIComponent(key.replace(/\+/g, ' ')) === WRITE_TOKEN_PARAM;
  } catch {
    return key === WRITE_TOKEN_PARAM;
  }
}

/** An address (query and fragment) without the write token anywhere in it. */
export function withoutWriteToken(address: string): string {
  const hashAt = address.indexOf('#');
  const beforeHash = hashAt < 0 ? address : address.slice(0, hashAt);
  const hash = hashAt < 0 ? '' : address.slice(hashAt);
  const queryAt = beforeHash.indexOf('?');
  const path = queryAt < 0 ? beforeHash : beforeHash.slice(0, queryAt);
  const search = queryAt < 0 ? '' : beforeHash.slice(queryAt);
  return `${path}${searchWithoutWriteToken(search)}${hashWithoutWriteToken(hash)}`;
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
