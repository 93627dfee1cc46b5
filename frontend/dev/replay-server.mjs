// Dev-only: serves the built page and replays msprobe's recorded answers
// (../shared/fixtures/golden_api26_sequence beside the repository, one JSON file per request) so the
// page can be looked at before the real backend runs.
// Never used by the tests of record, which run against real TensorBoard + the real sidecar.
// Usage: node dev/replay-server.mjs [port] [sequence dir]
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const port = Number(process.argv[2] || 6199);
const seqDir = process.argv[3] || path.resolve(here, '../../../shared/fixtures/golden_api26_sequence');
const staticDir = path.resolve(here, '../../python_shim/graph_ascend_tb/static');
const records = fs
  .readdirSync(seqDir)
  .filter((f) => /^\d+_.*\.json$/.test(f))
  .map((f) => JSON.parse(fs.readFileSync(path.join(seqDir, f), 'utf8')))
  .filter((r) => r.status === 200 && (typeof r.response_raw_text === 'string' || r.response?.__sse_events_dedup__));
const PREFIX = '/data/plugin/graph_ascend/';

function score(rec, body, query) {
  const want = body?.metaData ?? Object.fromEntries(query);
  const got = rec.body?.metaData ?? rec.params ?? {};
  let s = 0;
  if (want.run && got.run === want.run) s += 4;
  if (want.rank !== undefined && String(got.rank) === String(want.rank)) s += 1;
  const wn = body?.nodeInfo?.nodeName, gn = rec.body?.nodeInfo?.nodeName;
  if (wn && gn === wn) s += 8;
  if (body?.nodeInfo?.nodeType && rec.body?.nodeInfo?.nodeType === body.nodeInfo.nodeType) s += 2;
  if (body?.graphType && rec.body?.graphType === body.graphType) s += 2;
  if (/ERR|bad|rejected|dead|before|fail|dotdot/.test(rec.name)) s -= 10;
  return s;
}

http
  .createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let p = url.pathname;
    if (p === '/' || p === '/index.html') p = PREFIX + 'index.html';
    if (!p.startsWith(PREFIX)) {
      res.writeHead(404).end();
      return;
    }
    const route = p.slice(PREFIX.length);
    const file = path.join(staticDir, route);
    if (route && file.startsWith(staticDir) && fs.existsSync(file) && fs.statSync(file).isFile()) {
      const type = file.endsWith('.js') ? 'text/javascript' : file.endsWith('.css') ? 'text/css' : 'text/html';
      res.writeHead(200, { 'Content-Type': type }).end(fs.readFileSync(file));
      return;
    }
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      let body = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = null;
      }
      const cands = records.filter((r) => r.route === PREFIX + route || r.route === route);
      if (!cands.length) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ success: false, error: `replay: no recording for ${route}` }));
        return;
      }
      cands.sort((a, b) => score(b, body, url.searchParams) - score(a, body, url.searchParams));
      const events = cands[0].response?.__sse_events_dedup__;
      if (events) {
        // A recorded event stream: replay it five times faster than it happened.
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
        events.forEach((ev, i) =>
          setTimeout(() => {
            res.write(`data: ${JSON.stringify(ev.data)}\n\n`);
            if (i === events.length - 1) res.end();
          }, ev.t_ms / 5),
        );
        return;
      }
      res.writeHead(200, { 'Content-Type': cands[0].content_type || 'application/json' }).end(cands[0].response_raw_text);
    });
  })
  .listen(port, '127.0.0.1', () => console.log(`replay server on http://127.0.0.1:${port}${PREFIX}index.html`));
