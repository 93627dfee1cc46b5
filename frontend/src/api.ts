/**
 * Talking to the plugin's routes. Every URL is relative (the app document lives at
 * `<prefix>/data/plugin/graph_ascend/index.html`), every request names this browser tab with
 * `X-Graph-Ascend-Client` so the server keeps one view state per tab, and every failure becomes a
 * plain `{success: false, error}` the page can show (HTTP errors, a backend that is down, bad JSON).
 */
import type { Routes, SseRoute } from './generated/proto';
import type { MetaData } from './types';
import { noteWriteState, WRITE_STATE_HEADER, WRITE_TOKEN_HEADER, writeToken } from './writeAccess';

const CLIENT_KEY = 'graph-ascend-client-id';

function newId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 10)}`;
}

/** One id per browser tab: sessionStorage survives reloads of the tab but not other tabs. */
export function clientId(): string {
  try {
    let id = sessionStorage.getItem(CLIENT_KEY);
    if (!id) {
      id = newId();
      sessionStorage.setItem(CLIENT_KEY, id);
    }
    return id;
  } catch {
    return (cachedId ??= newId());
  }
}
let cachedId: string | undefined;

/** A route that answers one JSON answer (the route table is generated from the proto). */
export type JsonRoute = Exclude<keyof Routes, SseRoute>;
export type { Routes, SseRoute };

/**
 * What a route takes: its request message's fields by JSON name (each optional). Other keys are
 * allowed, as the shim ignores keys that are not fields.
 */
export type RouteRequest<R extends keyof Routes> = Routes[R]['request'] & Record<string, unknown>;

/** A route's answer as the sidecar writes it (one event's, for an SSE route). */
export type RouteAnswer<R extends keyof Routes> = Routes[R]['answer'];

/**
 * A route's answer once `normalize` has made failures uniform: the answer with `success: true`, or
 * `{success: false, error}` (the server's failed answer, an HTTP error, no answer, bad JSON). The
 * type follows from the route, so a call cannot name another answer.
 */
export type Answer<R extends JsonRoute> = (RouteAnswer<R> & { success: true }) | { success: false; error: string };

/** Any answer as `normalize` returns it, before its route gives it a type. */
export interface LooseAnswer {
  success: boolean;
  error?: string;
  [key: string]: unknown;
}

/**
 * JSON.parse that also accepts the bare `NaN`, `Infinity` and `-Infinity` tokens Python's json
 * module writes (msprobe answers carry them); they become strings, as TensorBoard's cleanser does.
 */
export function parseLooseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (first) {
    let out = '';
    let inStr = false;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (inStr) {
        out += ch;
        if (ch === '\\') {
          out += text[i + 1] ?? '';
          i++;
        } else if (ch === '"') inStr = false;
        continue;
      }
      if (ch === '"') {
        inStr = true;
        out += ch;
        continue;
      }
      if (text.startsWith('NaN', i)) {
        out += '"NaN"';
        i += 2;
      } else if (text.startsWith('-Infinity', i)) {
        out += '"-Infinity"';
        i += 8;
      } else if (text.startsWith('Infinity', i)) {
        out += '"Infinity"';
        i += 7;
      } else out += ch;
    }
    try {
      return JSON.parse(out);
    } catch {
      throw first;
    }
  }
}

function errorText(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

/** Turn whatever the server said into an Answer; `error` may be a string or a list upstream. */
export function normalize(status: number, statusText: string, body: unknown): LooseAnswer {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const b = body as Record<string, unknown>;
    if (status >= 200 && status < 300) {
      // load_meta_dir has no `success` key on its normal path (nor getConvertState's answer).
      const success = b.success === undefined ? true : Boolean(b.success);
      const error = b.error === undefined || b.error === null ? undefined : b.error;
      return { ...b, success, error: success ? (error as string | undefined) : describe(error) || `HTTP ${status}` };
    }
    return { success: false, error: describe(b.error) || `HTTP ${status} ${statusText}`.trim() };
  }
  if (status >= 200 && status < 300) return { success: true, data: body };
  return { success: false, error: `HTTP ${status} ${statusText}`.trim() };
}

/** What a download route (`exportCsv`, `exportReport`) answered instead of its file: the
 * sidecar's JSON error when there is one, else the HTTP status. */
export async function downloadError(res: Response): Promise<string> {
  let body: unknown;
  try {
    body = parseLooseJson(await res.text());
  } catch {
    body = undefined;
  }
  return normalize(res.status, res.statusText, body).error ?? `HTTP ${res.status}`;
}

function describe(error: unknown): string {
  if (error === undefined || error === null || error === '') return '';
  if (typeof error === 'string') return error;
  if (Array.isArray(error)) return error.map((e) => describe(e)).join('\n');
  return JSON.stringify(error);
}

export type Transport = (route: string, init: RequestInit) => Promise<Response>;
let transport: Transport = (route, init) => fetch(route, init);
/** Tests swap the transport; the page always uses fetch with relative URLs. */
export function setTransport(t: Transport): void {
  transport = t;
}

async function send<R extends JsonRoute>(route: string, init: RequestInit, timeoutMs = 180_000): Promise<Answer<R>> {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), timeoutMs);
  try {
    const headers = new Headers(init.headers);
    headers.set('X-Graph-Ascend-Client', clientId());
    const token = writeToken();
    if (token) headers.set(WRITE_TOKEN_HEADER, token);
    const res = await transport(route, { ...init, headers, signal: ctrl.signal });
    noteWriteState(res.headers.get(WRITE_STATE_HEADER));
    const text = await res.text();
    let body: unknown = undefined;
    if (text.length) {
      try {
        body = parseLooseJson(text);
      } catch {
        body = undefined;
        if (res.ok) return { success: false, error: `${route}: the server's answer is not JSON` };
      }
    }
    // The route's answer (an answer of another shape would be the server's contract broken).
    return normalize(res.status, res.statusText, body) as Answer<R>;
  } catch (e) {
    if (ctrl.signal.aborted) return { success: false, error: `${route}: request timed out` };
    return { success: false, error: `${route}: no answer from the server (${errorText(e)})` };
  } finally {
    clearTimeout(timer);
  }
}

/** POSTs `body` as JSON to `route`; the answer's type is the route's. */
export function post<R extends JsonRoute>(route: R, body?: RouteRequest<R>): Promise<Answer<R>> {
  return send<R>(route, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** GETs `route` with `params` in the query string (flat requests only); the answer's type is the route's. */
export function get<R extends JsonRoute>(route: R, params: RouteRequest<R>): Promise<Answer<R>> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return send<R>(s ? `${route}?${s}` : route, { method: 'GET' });
}

/** The selection flat, as the GET routes (`loadGraphData`, `diagnosis`) take it. */
export function metaQuery(m: MetaData) {
  return { run: m.run, tag: m.tag, type: m.type, lang: m.lang, microStep: m.microStep, step: m.step, rank: m.rank };
}

/** "route (detail): route: message" -> "route (detail): message" (the shim already names the route). */
export function tidyError(text: string): string {
  return text.replace(/^([A-Za-z_]+)((?: \([^)]*\))?): \1: /, '$1$2: ');
}

/**
 * Follow a server-sent-event route with fetch (so the request carries the client header); calls
 * onEvent with each `data:` payload. Resolves when the stream ends or fails; abort with signal.
 */
export async function followSse(route: string, onEvent: (data: string) => boolean | void, signal: AbortSignal): Promise<string | null> {
  try {
    const res = await fetch(route, { headers: { 'X-Graph-Ascend-Client': clientId(), Accept: 'text/event-stream' }, signal });
    if (!res.ok || !res.body) return `HTTP ${res.status} ${res.statusText}`.trim();
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return null;
      buf += dec.decode(value, { stream: true });
      const { events, rest } = parseSse(buf);
      buf = rest;
      for (const data of events) {
        if (onEvent(data) === false) {
          reader.cancel().catch(() => {});
          return null;
        }
      }
    }
  } catch (e) {
    return signal.aborted ? null : errorText(e);
  }
}

/** Parse a text/event-stream body into messages (`data:` lines joined, blank line ends one). */
export function parseSse(buffer: string): { events: string[]; rest: string } {
  const events: string[] = [];
  const norm = buffer.replace(/\r\n/g, '\n');
  const chunks = norm.split('\n\n');
  const rest = chunks.pop() ?? '';
  for (const chunk of chunks) {
    const data = chunk
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data) events.push(data);
  }
  return { events, rest };
}
