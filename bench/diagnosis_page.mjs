// The Diagnosis panel's first answer in the page (not a test): real TensorBoard + the real sidecar +
// Chromium (software rendering, --disable-gpu) over a logdir holding one compare file
// (bench/diagnosis_page.sh links it there). Each run starts a fresh TensorBoard (so a fresh sidecar:
// nothing cached) and opens the page once, in one of three ways:
// - `panel`: a link naming the file and the Diagnosis panel (`ga_panel=diagnosis`): the page opens
//   the file, draws the graph and opens the panel;
// - `click`: the page opens the file; the Diagnosis button is clicked once the graph is drawn;
// - `colours`: a link naming the panel and the colour mode "where the error is introduced"
//   (`ga_colors=diagnosis`): the list and the verdicts of every differing node of the shown view.
// Times are from opening the file (the page's first `loadGraphData` request) to the graph drawn and to
// the Diagnosis panel's list drawn (and, for `colours`, the boxes painted by the verdicts); `click`
// also from the click. With them: the `diagnosis` request's own time, the sidecar's CPU time (user +
// system) and peak resident memory (VmHWM) when the list is drawn. Prints one JSON line per run, then
// one per way with the medians, no thresholds.
//   node bench/diagnosis_page.mjs LOGDIR RUN TAG [RUNS] [WAYS]   (GA_PYTHON, GRAPH_ASCEND_BINARY as for
//   the e2e tests; WAYS: comma-separated, default panel,click,colours)
import { appFrame, loadAverage, pageAddress, startStack, until, usage, withBrowser } from './page_harness.mjs';

const [logdir, run, tag, runsArg, waysArg] = process.argv.slice(2);
if (!logdir || !run || !tag) throw new Error('usage: node bench/diagnosis_page.mjs LOGDIR RUN TAG [RUNS] [WAYS]');
const RUNS = Number(runsArg || 3);
const WAYS = (waysArg || 'panel,click,colours').split(',');
const report = (name, value) => console.log(JSON.stringify({ name, ...value }));
// Installed in every frame before its scripts: when the graph, the panel's list and the painted
// boxes first appear, on the frame's clock (performance.now), as the resource timings are.
const watcher = () => {
  const seen = (window.__diagBench = { graph: null, list: null, painted: null });
  const watch = () => {
    const now = performance.now();
    const app = window.__graphAscend;
    if (seen.graph === null && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1) seen.graph = now;
    if (seen.list === null && document.querySelector('[data-testid=diagnosisList]')) seen.list = now;
    if (seen.painted === null && app?.store?.diagnosis?.statesKey) seen.painted = now;
    requestAnimationFrame(watch);
  };
  requestAnimationFrame(watch);
};

const median = (xs) => {
  const v = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  return v.length ? v[Math.floor((v.length - 1) / 2)] : null;
};

async function once(way, browser) {
  const stack = await startStack(logdir);
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.setDefaultTimeout(600_000);
  try {
    await page.addInitScript(watcher);
    const linked = way === 'click' ? '' : `&ga_run=${encodeURIComponent(run)}&ga_tag=${encodeURIComponent(tag)}&ga_panel=diagnosis${way === 'colours' ? '&ga_colors=diagnosis' : ''}`;
    const load = loadAverage();
    await page.goto(pageAddress(stack.base) + linked);
    const frame = await appFrame(page, 120_000);
    let clicked = null;
    if (way === 'click') {
      await until(frame, () => window.__diagBench.graph !== null && window.__graphAscend.fileLoads === 0, null, 600_000);
      clicked = await frame.evaluate(() => {
        document.querySelector('[data-testid=diagnosisSiderButton]').click();
        return performance.now();
      });
    }
    const done = way === 'colours' ? () => window.__diagBench.list !== null && window.__diagBench.painted !== null : () => window.__diagBench.list !== null;
    await until(frame, done, null, 600_000);
    const sidecar = stack.sidecar();
    const use = sidecar ? usage(sidecar) : {};
    const t = await frame.evaluate(() => {
      const res = performance.getEntriesByType('resource');
      const first = (route) => res.find((e) => new URL(e.name).pathname.endsWith(`/${route}`));
      const open = first('loadGraphData');
      const diag = res.filter((e) => new URL(e.name).pathname.endsWith('/diagnosis'));
      return {
        open: open?.startTime ?? null,
        seen: window.__diagBench,
        diagnosis: diag.map((e) => ({ start: e.startTime, ms: e.responseEnd - e.startTime, states: new URL(e.name).searchParams.has('states') })),
      };
    });
    const since = (x) => (x === null || t.open === null ? null : Math.round(x - t.open));
    const row = {
      way,
      graph_ms: since(t.seen.graph),
      list_ms: since(t.seen.list),
      painted_ms: way === 'colours' ? since(t.seen.painted) : undefined,
      from_click_ms: clicked === null ? undefined : Math.round(t.seen.list - clicked),
      diagnosis_requests: t.diagnosis.map((d) => ({ after_open_ms: since(d.start), ms: Math.round(d.ms), states: d.states })),
      sidecar_cpu_s: use.cpu_s,
      sidecar_peak_mb: use.peak_rss_mb,
      load_before: load,
    };
    report('diagnosis_page_run', row);
    return row;
  } finally {
    await page.close();
    await stack.stop();
  }
}

await withBrowser(async (browser) => {
  const rows = [];
  for (let i = 0; i < RUNS; i++) for (const way of WAYS) rows.push(await once(way, browser));
  for (const way of WAYS) {
    const of = rows.filter((r) => r.way === way);
    const m = (k) => median(of.map((r) => r[k]));
    report('diagnosis_page', {
      way,
      runs: of.length,
      graph_ms: m('graph_ms'),
      list_ms: m('list_ms'),
      list_ms_range: [Math.min(...of.map((r) => r.list_ms)), Math.max(...of.map((r) => r.list_ms))],
      painted_ms: way === 'colours' ? m('painted_ms') : undefined,
      from_click_ms: way === 'click' ? m('from_click_ms') : undefined,
      diagnosis_request_ms: median(of.map((r) => r.diagnosis_requests[0]?.ms)),
      sidecar_cpu_s: m('sidecar_cpu_s'),
      sidecar_peak_mb: m('sidecar_peak_mb'),
      load_after: loadAverage(),
    });
  }
});
