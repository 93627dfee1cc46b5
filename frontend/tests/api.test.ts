import { describe, expect, it, vi } from 'vitest';
import { normalize, parseLooseJson, parseSse, post, setTransport, tidyError } from '../src/api';
import { bytesText, convertBody, defaultOutput, durationText, measuresText } from '../src/convert';
import { missingKeys, setLang, t } from '../src/i18n';
import { hashWithoutWriteToken, readOnlyNote, tokenIn, withoutWriteToken, writesAllowed } from '../src/writeAccess';

describe('answers', () => {
  it('accepts bare NaN and Infinity tokens but not inside strings', () => {
    expect(parseLooseJson('{"a": NaN, "b": -Infinity, "c": "NaN x", "d": [Infinity]}')).toEqual({ a: 'NaN', b: '-Infinity', c: 'NaN x', d: ['Infinity'] });
    expect(() => parseLooseJson('{bad')).toThrow();
  });
  it('does not name the route twice', () => {
    expect(tidyError('getNodeInfo (a.b): getNodeInfo: boom')).toBe('getNodeInfo (a.b): boom');
    expect(tidyError('load_meta_dir: load_meta_dir: x')).toBe('load_meta_dir: x');
    expect(tidyError('filterNodes: other: x')).toBe('filterNodes: other: x');
  });
  it('turns HTTP errors and error bodies into success=false with a message', () => {
    expect(normalize(503, 'Service Unavailable', { success: false, error: 'sidecar down' })).toEqual({ success: false, error: 'sidecar down' });
    expect(normalize(500, 'Internal Server Error', undefined)).toEqual({ success: false, error: 'HTTP 500 Internal Server Error' });
    expect(normalize(200, 'OK', { data: { r: 1 }, error: [] }).success).toBe(true);
    expect(normalize(200, 'OK', { success: false, error: ['a', 'b'] })).toMatchObject({ success: false, error: 'a\nb' });
  });
  it('sends relative URLs, JSON and the per-tab client header', async () => {
    const seen: { route: string; init: RequestInit }[] = [];
    setTransport(async (route, init) => {
      seen.push({ route, init });
      return new Response('{"success": true, "data": {"x": NaN}}', { status: 200 });
    });
    const r = await post('changeNodeExpandState', { a: 1 });
    expect(r).toMatchObject({ success: true, data: { x: 'NaN' } });
    expect(seen[0].route).toBe('changeNodeExpandState');
    expect(new Headers(seen[0].init.headers).get('X-Graph-Ascend-Client')).toMatch(/.{8,}/);
    setTransport(async () => {
      throw new TypeError('Failed to fetch');
    });
    const down = await post('load_meta_dir');
    expect(down.success).toBe(false);
    expect(down.error).toContain('no answer from the server');
  });
});

describe('conversion', () => {
  const base = {
    npu_path: 'dump/npu', bench_path: '', output_path: ' out ', is_print_compare_log: false, is_parallel_merge: false,
    layer_mapping: '', overflow_check: true, fuzzy_match: false,
    npu: { rank_size: 2, tp: 2, pp: 1, vpp: 1, order: 'tp-cp-ep-dp-pp' }, bench: { rank_size: 4, tp: 4, pp: 1, vpp: 1, order: 'tp-cp-ep-dp-pp' },
  };
  it('sends parallel parameters only when merging, bench ones only with a golden folder', () => {
    expect(convertBody(base)).not.toHaveProperty('parallel_merge');
    expect(convertBody(base).output_path).toBe('out');
    expect(convertBody({ ...base, is_parallel_merge: true }).parallel_merge).toEqual({ npu: base.npu });
    expect(convertBody({ ...base, is_parallel_merge: true, bench_path: 'b' }).parallel_merge).toEqual({ npu: base.npu, bench: base.bench });
  });
  it('names default outputs by kind', () => {
    expect(defaultOutput(false, 5)).toBe('build_5');
    expect(defaultOutput(true, 5)).toBe('compare_5');
  });
  it('splits server-sent events and keeps a partial tail', () => {
    const { events, rest } = parseSse('data: {"progress": 1}\n\ndata: {"progress"');
    expect(events).toEqual(['{"progress": 1}']);
    expect(rest).toBe('data: {"progress"');
    expect(parseSse(': heartbeat\n\ndata: a\r\n\r\n').events).toEqual(['a']);
  });
});

describe('i18n', () => {
  it('has every key in both languages and fills variables', () => {
    expect(missingKeys()).toEqual([]);
    setLang('zh');
    expect(t('nodeList', { count: 3 })).toBe('节点列表（3）');
    setLang('en');
    expect(t('nodeList', { count: 3 })).toBe('Node list (3)');
  });
});

describe('write access', () => {
  it('follows the X-Graph-Ascend-Writes header of every answer', async () => {
    let state: string | null = 'refused';
    setTransport(async () => new Response('{"success": true}', { status: 200, headers: state ? { 'X-Graph-Ascend-Writes': state } : {} }));
    expect(writesAllowed()).toBe(true);
    await post('load_meta_dir');
    expect(writesAllowed()).toBe(false);
    state = null; // an answer without the header (an older plugin, a proxy) changes nothing
    await post('load_meta_dir');
    expect(writesAllowed()).toBe(false);
    state = 'allowed';
    await post('load_meta_dir');
    expect(writesAllowed()).toBe(true);
  });
  it('sends the write token the page was opened with, and explains a missing one', async () => {
    const stored = new Map<string, string>();
    vi.stubGlobal('localStorage', { getItem: (k: string) => stored.get(k) ?? null, setItem: (k: string, v: string) => void stored.set(k, v) });
    const frame = { location: { search: '', hash: '' } } as unknown as Window & typeof globalThis;
    // TensorBoard's window: its address, the history entry the page replaces and the events it is sent.
    const events: string[] = [];
    const top = {
      location: { pathname: '/', search: '', hash: '#graph_ascend', get href() { return `http://tb${this.pathname}${this.search}${this.hash}`; } },
      history: {
        state: null,
        replaceState: (_s: unknown, _t: string, url: string) => {
          const u = new URL(url, 'http://tb');
          Object.assign(top.location, { pathname: u.pathname, search: u.search, hash: u.hash });
        },
      },
      HashChangeEvent: class { constructor(readonly type: string) {} },
      dispatchEvent: (e: { type: string }) => void events.push(e.type),
    };
    Object.assign(frame, { top });
    vi.stubGlobal('window', frame);
    const seen: (string | null)[] = [];
    let state = 'token';
    setTransport(async (_route, init) => {
      seen.push(new Headers(init.headers).get('X-Graph-Ascend-Token'));
      return new Response('{"success": true}', { status: 200, headers: { 'X-Graph-Ascend-Writes': state } });
    });
    try {
      await post('load_meta_dir');
      expect(seen.pop()).toBeNull(); // opened without the link: nothing to send
      expect(writesAllowed()).toBe(false);
      expect(readOnlyNote()).toContain('graph_ascend_token');
      top.location.search = '?graph_ascend_token=abc123'; // TensorBoard's page, around the plugin's frame
      state = 'allowed';
      await post('load_meta_dir');
      expect(seen.pop()).toBe('abc123');
      expect(writesAllowed()).toBe(true);
      expect(readOnlyNote()).toBeNull();
      // Stored, then taken out of the address in place (issue 42 item 6); the fragment is untouched.
      expect(stored.get('graph_ascend.writeToken')).toBe('abc123');
      expect(top.location.href).toBe('http://tb/#graph_ascend');
      expect(events).toEqual([]);
      await post('load_meta_dir'); // the token is kept
      expect(seen.pop()).toBe('abc123');
      top.location.hash = '#graph_ascend&ga_run=r&graph_ascend_token=def456'; // in the fragment too
      await post('load_meta_dir');
      expect(seen.pop()).toBe('def456');
      expect(top.location.href).toBe('http://tb/#graph_ascend&ga_run=r');
      expect(events).toEqual(['hashchange']); // TensorBoard's copy of its hash follows
      // Where storage refuses the token, it stays in the address (a reload would lose it) and in memory.
      vi.stubGlobal('localStorage', { getItem: () => null, setItem: () => { throw new Error('quota'); } });
      top.location.search = '?graph_ascend_token=ghi789';
      await post('load_meta_dir');
      expect(seen.pop()).toBe('ghi789');
      expect(top.location.search).toBe('?graph_ascend_token=ghi789');
    } finally {
      vi.unstubAllGlobals();
    }
  });
  it('explains the read-only state in both languages', () => {
    for (const l of ['en', 'zh'] as const) {
      setLang(l);
      expect(t('readOnly.tooltip')).toContain('GRAPH_ASCEND_ALLOW_REMOTE_WRITES');
      expect(t('readOnly.tokenTooltip')).toContain('graph_ascend_token');
      expect(t('readOnly.tokenNote')).toContain('graph_ascend_token');
    }
    setLang('en');
  });
});

describe('conversion progress (what was measured travels with the state)', () => {
  it('shows bytes read, rows written and the time left as they are measured', () => {
    setLang('en');
    expect(measuresText({ progress: 0, status: 'building' })).toBe('');
    expect(measuresText({ progress: 12, status: 'building', bytesRead: 5 * 1024 * 1024, bytesTotal: 140 * 1024 * 1024, rowsTotal: 0, etaSeconds: 75 }))
      .toBe('read 5.0 MB of 140.0 MB · about 1 min 15 s left');
    expect(measuresText({ progress: 70, status: 'building', bytesRead: 2048, bytesTotal: 2048, rowsWritten: 1024, rowsTotal: 4096, etaSeconds: 3.4 }))
      .toBe('read 2 KB of 2 KB · rows written 1024 of 4096 · about 3 s left');
    // A finished job has no time left to show.
    expect(measuresText({ progress: 100, status: 'done', bytesRead: 10, bytesTotal: 10, etaSeconds: 0 })).toBe('read 10 B of 10 B');
  });
  it('words sizes and durations for people', () => {
    expect(bytesText(900)).toBe('900 B');
    expect(durationText(59.6)).toBe('1 min 0 s');
    expect(durationText(-1)).toBe('0 s');
  });
});

describe('shared links', () => {
  it('never carry the write token', () => {
    expect(withoutWriteToken('http://localhost:6006/p/?graph_ascend_token=abc')).toBe('http://localhost:6006/p/');
    expect(withoutWriteToken('http://localhost:6006/?a=1&graph_ascend_token=abc&b=2')).toBe('http://localhost:6006/?a=1&b=2');
    expect(withoutWriteToken('http://localhost:6006/?a=1')).toBe('http://localhost:6006/?a=1');
    expect(withoutWriteToken('http://localhost:6006/')).toBe('http://localhost:6006/');
  });
  it('never carry it in the fragment either, where the page also reads it (issue 42 item 5)', () => {
    const withToken = [
      'http://localhost:6006/#graph_ascend&graph_ascend_token=abc',
      'http://localhost:6006/#graph_ascend&ga_run=r&graph_ascend_token=abc&other=1',
      'http://localhost:6006/#graph_ascend?graph_ascend_token=abc&ga_run=r',
      'http://localhost:6006/?graph_ascend_token=abc#graph_ascend&graph%5Fascend%5Ftoken=abc',
    ];
    for (const address of withToken) {
      const u = new URL(address);
      expect(tokenIn(u.search, u.hash)).toBe('abc');
      const clean = new URL(withoutWriteToken(address));
      expect(tokenIn(clean.search, clean.hash), address).toBeNull();
      expect(clean.href).not.toContain('abc');
    }
    expect(withoutWriteToken(withToken[1])).toBe('http://localhost:6006/#graph_ascend&ga_run=r&other=1');
    expect(hashWithoutWriteToken('#graph_ascend?graph_ascend_token=abc&ga_run=r')).toBe('#graph_ascend&ga_run=r');
    // Without a token every other key stays as it is written.
    expect(hashWithoutWriteToken('#graph_ascend&a=%20b&tensorboard_key=x')).toBe('#graph_ascend&a=%20b&tensorboard_key=x');
    expect(hashWithoutWriteToken('')).toBe('');
  });
});
