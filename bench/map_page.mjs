// The divergence map's page benchmark (not a test): real TensorBoard + the real sidecar + Chromium
// (software rendering, --disable-gpu) over a logdir holding one compare file (bench/map_page.sh makes
// it). Prints one JSON line per measurement, no thresholds:
// 1. map_first_paint: from the click on the Map button to the first drawn cells (the steps judged so
//    far, while the sidecar reads the graphs), to the whole map drawn, and the progress answers seen;
//    then the same on a second opening (the map cached in the sidecar);
// 2. map_scroll_fps: frames drawn per second while the map scrolls (down and across, one step a frame
//    for 3 s), at zoom 1 and zoomed in (×8: more columns, ranks apart), with the cells in view; a map
//    that fits the screen (`scrolls: false`) is drawn again each frame instead; with the time the panel's
//    draw() took (mean and p95: what is left of a frame's 16.7 ms once fps is capped at 60), and again
//    with the CPU slowed MAP_CPU_THROTTLE times (Chromium's CPU throttling, as on a busy host), if set;
// 3. sidecar_peak: the sidecar's peak resident memory (VmHWM) after all of it (map_first_paint: before the
//    map is asked for and after the first whole map), and its CPU time (user +
//    system) after the first whole map and after all of it; each line carries the load average.
//   node bench/map_page.mjs LOGDIR   (GA_PYTHON, GRAPH_ASCEND_BINARY as for the e2e tests)
import { appFrame, launchBrowser, loadAverage, pageAddress, startStack, until, usage } from './page_harness.mjs';

const logdir = process.argv[2];
if (!logdir) throw new Error('usage: node bench/map_page.mjs LOGDIR');
const report = (name, value) => console.log(JSON.stringify({ name, ...value, load: loadAverage() }));

const stack = await startStack(logdir);
const tb = stack.tb;
const ourSidecar = stack.sidecar;
const cpuSeconds = (pid) => usage(pid).cpu_s;
const peakMb = (pid) => usage(pid).peak_rss_mb;
const browser = await launchBrowser();
try {
  let peakBeforeMap;
  /** Open the page on the file in a new tab, then the Map panel; times from the click. */
  const openMap = async () => {
    const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
    page.setDefaultTimeout(600_000);
    await page.goto(pageAddress(tb.base));
    const frame = await appFrame(page, 120_000);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, null, 300_000);
    // The sidecar's peak before the map is asked for (the file opened, its first graph drawn).
    if (peakBeforeMap === undefined) peakBeforeMap = ourSidecar() ? peakMb(ourSidecar()) : null;
    await frame.evaluate(() => {
      const seen = (window.__mapBench = { t0: performance.now(), firstCells: null, whole: null, progress: [] });
      const watch = () => {
        const c = document.querySelector('[data-testid=mapCanvas]');
        const cells = Number(c?.dataset.cells || 0);
        if (cells > 0 && seen.firstCells === null) seen.firstCells = performance.now() - seen.t0;
        const p = document.querySelector('[data-testid=mapLoading]')?.textContent;
        if (p && seen.progress[seen.progress.length - 1] !== p) seen.progress.push(p);
        if (document.querySelector('[data-testid=mapSummary]') && cells > 0) {
          seen.whole = performance.now() - seen.t0;
          return;
        }
        requestAnimationFrame(watch);
      };
      document.querySelector('[data-testid=mapSiderButton]').click();
      requestAnimationFrame(watch);
    });
    await until(frame, () => window.__mapBench.whole !== null, null, 1_800_000);
    return frame;
  };

  const frame = await openMap();
  const cpuFirst = ourSidecar() ? cpuSeconds(ourSidecar()) : null;
  const first = await frame.evaluate(() => ({ ...window.__mapBench, columns: window.__graphAscend.mapPanel.drawn.columns.length, lines: window.__graphAscend.mapPanel.lines.length, ranks: window.__graphAscend.mapPanel.drawn.ranks.length, steps: window.__graphAscend.mapPanel.drawn.steps.length }));
  report('map_first_paint', {
    first_cells_ms: Math.round(first.firstCells),
    whole_map_ms: Math.round(first.whole),
    steps: first.steps,
    ranks: first.ranks,
    columns: first.columns,
    lines: first.lines,
    progress_seen: first.progress.length,
    progress_first: first.progress[0] ?? null,
    progress_last: first.progress[first.progress.length - 1] ?? null,
    sidecar_cpu_s: cpuFirst,
    sidecar_peak_before_map_mb: peakBeforeMap,
    sidecar_peak_after_map_mb: ourSidecar() ? peakMb(ourSidecar()) : null,
  });
  const again = await openMap();
  const cached = await again.evaluate(() => window.__mapBench);
  report('map_first_paint_cached', { first_cells_ms: Math.round(cached.firstCells), whole_map_ms: Math.round(cached.whole) });

  /** Scroll down and across for `ms`, one step a frame; frames drawn per second and the draw time. */
  const scroll = (ms) =>
    again.evaluate(async (ms) => {
      const panel = window.__graphAscend.mapPanel;
      const s = panel.scrollElement;
      s.scrollTop = 0;
      s.scrollLeft = 0;
      await new Promise((r) => requestAnimationFrame(r));
      const scrolls = s.scrollWidth > s.clientWidth || s.scrollHeight > s.clientHeight;
      const f0 = panel.frames;
      const t0 = performance.now();
      let k = 0;
      const gaps = [];
      let last = t0;
      const draws = [];
      let seen = panel.frames;
      while (performance.now() - t0 < ms) {
        k++;
        s.scrollTop = (k * 7) % Math.max(1, s.scrollHeight - s.clientHeight);
        s.scrollLeft = (k * 23) % Math.max(1, s.scrollWidth - s.clientWidth);
        // A map that fits the screen does not scroll: drawn again each frame all the same (its cost).
        if (!scrolls) panel.draw();
        await new Promise((r) => requestAnimationFrame(r));
        if (panel.frames !== seen) {
          seen = panel.frames;
          draws.push(panel.lastDrawMs);
        }
        const now = performance.now();
        gaps.push(now - last);
        last = now;
      }
      const t = performance.now() - t0;
      gaps.sort((a, b) => a - b);
      const drawMean = draws.reduce((a, b) => a + b, 0) / Math.max(1, draws.length);
      draws.sort((a, b) => a - b);
      const c = document.querySelector('[data-testid=mapCanvas]');
      return { scrolls, fps: ((panel.frames - f0) * 1000) / t, frame_p95_ms: gaps[Math.floor(gaps.length * 0.95)] ?? 0, draw_mean_ms: drawMean, draw_p95_ms: draws[Math.floor(draws.length * 0.95)] ?? 0, cells_in_view: Number(c.dataset.cells), columns: Number(c.dataset.columns), scroll_width: s.scrollWidth, scroll_height: s.scrollHeight };
    }, ms);
  const throttle = Number(process.env.MAP_CPU_THROTTLE || 1);
  const cdp = throttle > 1 ? await again.page().context().newCDPSession(again.page()) : null;
  /** Scroll at the CPU's speed, then (MAP_CPU_THROTTLE) slowed; one line each. */
  const measure = async (fields) => {
    for (const rate of cdp ? [1, throttle] : [1]) {
      if (cdp) await cdp.send('Emulation.setCPUThrottlingRate', { rate });
      const m = await scroll(3000);
      report('map_scroll_fps', { ...fields, cpu_throttle: rate, scrolls: m.scrolls, fps: +m.fps.toFixed(1), frame_p95_ms: +m.frame_p95_ms.toFixed(1), draw_mean_ms: +m.draw_mean_ms.toFixed(2), draw_p95_ms: +m.draw_p95_ms.toFixed(2), cells_in_view: m.cells_in_view, columns: m.columns, content_px: [m.scroll_width, m.scroll_height] });
    }
    if (cdp) await cdp.send('Emulation.setCPUThrottlingRate', { rate: 1 });
  };
  await measure({ zoom: 1 });
  // Zoomed in ×8: more columns (asked of the sidecar), the map scrolls sideways.
  const tz = Date.now();
  for (let i = 0; i < 3; i++) await again.click('[data-testid=mapZoomIn]');
  await until(again, () => document.querySelector('[data-testid=mapZoom]')?.textContent === '×8' && window.__graphAscend.mapPanel.ready, null, 1_800_000);
  await again.evaluate(() => new Promise((r) => requestAnimationFrame(r)));
  const zoomMs = Date.now() - tz;
  await measure({ zoom: 8, zoom_answer_ms: zoomMs });

  const pid = ourSidecar();
  report('sidecar_peak', { pid, peak_rss_mb: pid ? peakMb(pid) : null, cpu_s: pid ? cpuSeconds(pid) : null });
} finally {
  await browser.close();
  await stack.stop();
}
