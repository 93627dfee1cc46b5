// Page benchmarks in real TensorBoard + the real sidecar + Chromium (software rendering,
// --disable-gpu). Prints one JSON line per measurement; no pass/fail thresholds (numbers, not asserts).
//   node bench/bench.mjs            (from frontend/; GA_PYTHON / GRAPH_ASCEND_* env as for the e2e tests)
// 1. open a synthetic 100k-node-per-side compare file (make_big_visdb.py): time to both panes drawn;
// 2. double-click a module with 1,000 children: time to the redrawn pane;
// 3. pan/zoom frame rate with ~10k boxes on screen (and with ~1.5k labelled boxes);
// 4. search keystroke over 1M names: time from the input event to the painted list.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { appFrame, launchBrowser, startTensorBoard, until } from '../../tests/e2e/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const logdir = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-bench-'));
fs.mkdirSync(path.join(logdir, 'big'));
execFileSync('python3', [path.join(here, 'make_big_visdb.py'), path.join(logdir, 'big', 'compare_big.vis.db')], { stdio: 'inherit' });
const report = (name, value, extra = {}) => console.log(JSON.stringify({ name, ...value, ...extra }));

const tb = await startTensorBoard(logdir);
const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.setDefaultTimeout(60_000);
  // 1. First graph: from navigation to both panes drawn (includes TensorBoard's own page load).
  const t0 = Date.now();
  await page.goto(`${tb.base}/#graph_ascend`);
  const frame = await appFrame(page, 60_000);
  const tFrame = Date.now();
  await until(frame, () => Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, null, 60_000);
  const tDrawn = Date.now();
  report('first_graph', { from_navigation_ms: tDrawn - t0, from_app_frame_ms: tDrawn - tFrame });
  // Re-open the same file through the selection (warm server): loadGraphData + config + two roots.
  const reopen = await frame.evaluate(async () => {
    const a = window.__graphAscend;
    const s = performance.now();
    await a.selectFile(a.meta.run, a.meta.tag);
    await new Promise((r) => requestAnimationFrame(() => r()));
    return performance.now() - s;
  });
  report('reopen_file', { ms: +reopen.toFixed(1) });

  // 2. Expand a module with 1,000 children (layer 0 first, then the wide module), sync off.
  await frame.evaluate(async () => {
    const a = window.__graphAscend;
    a.syncExpand = false;
    await a.toggleNode('NPU', 'Module.layers.0.Layer.forward.0');
  });
  const expand = await frame.evaluate(async () => {
    const a = window.__graphAscend;
    const s = performance.now();
    await a.toggleNode('NPU', 'Module.wide.Wide.forward.0');
    const answered = performance.now();
    await new Promise((r) => requestAnimationFrame(() => r()));
    return { total_ms: performance.now() - s, boxes: a.panes.NPU.scene.boxes.length, until_scene_ms: answered - s };
  });
  report('expand_1000_children', { ms: +expand.total_ms.toFixed(1), scene_ready_ms: +expand.until_scene_ms.toFixed(1), boxes: expand.boxes });

  // 3. Frame rate while panning/zooming a synthetic 10k-box scene (the renderer's worst case).
  const fps = await frame.evaluate(async () => {
    const a = window.__graphAscend;
    const mk = (cols, rows) => {
      const data = { root: { x: 0, y: 0, width: cols * 55 + 10, height: rows * 25 + 30, expand: true, isRoot: true, parentNode: '', label: 'root', name: 'root', nodeType: 0, matchedNodeLink: ['root'], precisionIndex: 0, overflowLevel: null, matchedDistributed: {} } };
      for (let i = 0; i < cols * rows; i++)
        data[`Torch.op.${i}.forward`] = { x: 5 + (i % cols) * 55, y: 25 + Math.floor(i / cols) * 25, width: 50, height: 15, expand: false, isRoot: false, parentNode: 'root', label: `op.${i}.forward`, name: `N___Torch.op.${i}.forward`, nodeType: 1, matchedNodeLink: ['x'], precisionIndex: (i % 10) / 10, overflowLevel: null, matchedDistributed: {} };
      return data;
    };
    const run = async (data, scale) => {
      const pane = a.panes.NPU;
      a.setHierarchy('NPU', data, 'fit');
      if (scale) pane.view = { tx: 0, ty: 0, scale };
      pane.draw();
      const drawn = pane.lastDrawn;
      const times = [];
      const f0 = pane.frames;
      const s = performance.now();
      await new Promise((resolve) => {
        const step = (now) => {
          const k = Math.floor((now - s) / 16);
          pane.pan(k % 2 ? 3 : -3, k % 3 ? 2 : -2);
          if (k % 20 === 0) pane.zoom(k % 40 ? 1.02 : 1 / 1.02);
          times.push(pane.lastFrameMs);
          if (now - s < 2000) requestAnimationFrame(step);
          else resolve();
        };
        requestAnimationFrame(step);
      });
      const el = performance.now() - s;
      times.sort((x, y) => x - y);
      return { boxes_on_screen: drawn, fps: +(((pane.frames - f0) * 1000) / el).toFixed(1), draw_ms_avg: +(times.reduce((x, y) => x + y, 0) / times.length).toFixed(2), draw_ms_p95: +times[Math.floor(times.length * 0.95)].toFixed(2) };
    };
    const all = await run(mk(100, 100), 0);
    const labelled = await run(mk(100, 100), 0.75);
    return { all, labelled };
  });
  report('pan_zoom_10k_boxes', fps.all);
  report('pan_zoom_labelled', fps.labelled);

  // 4. Search over 1M names: one keystroke, to the painted list.
  const search = await frame.evaluate(async () => {
    const a = window.__graphAscend;
    const names = Array.from({ length: 1_000_000 }, (_, i) => `Module.layers.${i % 997}.block${i}.Linear.forward.${i % 7}`);
    a.setNodeList(names, []);
    a.openTab('search');
    const input = document.querySelector('[data-testid=searchInput]');
    const out = [];
    for (const q of ['b', 'bl', 'block12', 'block1234', 'LINEAR.forward.3']) {
      input.value = q;
      const s = performance.now();
      input.dispatchEvent(new Event('input'));
      await new Promise((r) => requestAnimationFrame(() => r()));
      const match = Number(document.querySelector('.list-host')?.dataset.searchMs ?? NaN);
      out.push({ query: q, ms: +(performance.now() - s).toFixed(1), match_ms: match, hits: document.querySelector('[data-testid=searchCount]').textContent });
    }
    return out;
  });
  for (const s of search) report('search_1m_names', s);
} finally {
  await browser.close();
  tb.stop();
  fs.rmSync(logdir, { recursive: true, force: true });
}
