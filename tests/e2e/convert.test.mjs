// The details rules, conversions and their progress in real TensorBoard (under --path_prefix) and real Chromium:
// - item 1: the details table paints from the metric rules the sidecar serves (the ‰ ratios and
//   Cosine are perfect at 1.0; a rounding-sized Mean diff is not an error; users' metrics unpainted);
// - item 2: a cancelled conversion is a neutral state, not a red error, and leaves no file;
// - item 5: a conversion's progress moves (bytes read, rows written, time left), also through a
//   proxy that holds the event stream back until it ends and adds latency: the page polls then.
// Screenshots: tests/artifacts/convert-*.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { appFrame, freePort, makeLogdir, screenshot, sharedStack, testkitBinary, until, withStackPage, pageAddress } from './harness.mjs';

const TENSOR = 'compare_tf_small_tensor';
const STATS = 'compare_tf_stats';
const PREFIX = '/tb';
/** Entries of each generated dump: a conversion of some seconds on a busy 2-core machine. */
// Big enough that the conversion outlasts the page's 2 s stall detection by several 1 s polls on
// an idle 2-core machine (100,000 gave ~4 s there: 0 %, then two polls).
const ENTRIES = process.env.GA_E2E_CONVERT_ENTRIES || '160000';

/** Generated dumps `gen_a` (target) and `gen_b` (golden, perturbed), by the test-support crate's generator. */
function generate(dir) {
  const gen = testkitBinary('gen_dump');
  for (const [name, extra] of [['gen_a', []], ['gen_b', ['--perturb']]]) {
    const r = spawnSync(gen, [path.join(dir, name), ENTRIES, ...extra]);
    if (r.status !== 0) throw new Error(`gen_dump ${name}: ${r.stderr}`);
  }
}

/**
 * A proxy that forwards to TensorBoard, adding `delayMs` to every answer and holding every
 * event stream back until it ends (as some corporate proxies and port forwards do).
 */
function bufferingProxy(target, delayMs) {
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    const up = http.request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers }, (ur) => {
      const chunks = [];
      const sse = String(ur.headers['content-type'] || '').includes('text/event-stream');
      const send = () => setTimeout(() => {
        res.writeHead(ur.statusCode, ur.headers);
        res.end(Buffer.concat(chunks));
      }, delayMs);
      ur.on('data', (c) => chunks.push(c));
      ur.on('end', send);
      if (!sse) return;
      server.heldStreams += 1;
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.heldStreams = 0;
  return server;
}

/** The option of a select whose value names the generated folder `name` (its rank folder if listed). */
async function dumpOption(frame, select, name) {
  const values = await frame.$$eval(`[data-testid=${select}] option`, (os) => os.map((o) => o.value));
  const mine = values.filter((v) => v.split('/')[0] === name).sort((a, b) => b.length - a.length);
  assert.ok(mine.length, `${name} is offered: ${values}`);
  return mine[0];
}

async function openConversion(page, base, token) {
  await page.goto(pageAddress(base, token));
  const frame = await appFrame(page);
  await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
  await frame.click('[data-testid=conversionSiderButton]');
  await frame.waitForSelector('[data-testid=npuPathSelect] option[value^="gen_a"]', { state: 'attached' });
  await frame.selectOption('[data-testid=npuPathSelect]', await dumpOption(frame, 'npuPathSelect', 'gen_a'));
  await frame.selectOption('[data-testid=benchPathSelect]', await dumpOption(frame, 'benchPathSelect', 'gen_b'));
  return frame;
}

describe('GRAPH_ASCEND details rules and conversions', () => {
  const stack = sharedStack(before, after, () => makeLogdir([TENSOR, STATS], generate), { pathPrefix: PREFIX });
  const withPage = (name, viewport, fn) => withStackPage(stack, `convert-${name}`, viewport, fn);

  /** Open `run`, select `node` on the debug side and return the details table as the page shows it. */
  async function detailsOf(frame, run, node) {
    await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
    if ((await frame.evaluate(() => window.__graphAscend.meta.run)) !== run) {
      await frame.click('[data-testid=dataSiderButton]');
      await frame.selectOption('[data-testid=runSelect]', run);
      await frame.click('[data-testid=dataSiderButton]');
      await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r, run);
    }
    await frame.evaluate((k) => window.__graphAscend.selectNode('NPU', k, true), node);
    await until(frame, (k) => document.querySelector('[data-testid=debugNodeName]')?.textContent.includes(k) && document.querySelector('[data-testid=detailsTable]'), node);
    return frame.evaluate(() => {
      const heads = [...document.querySelectorAll('[data-testid=detailsTable] thead th')].map((th) => th.textContent);
      const rows = [...document.querySelectorAll('[data-testid=detailsTable] tbody tr')].map((tr) => [...tr.children].map((td) => ({ text: td.textContent, worst: td.classList.contains('worst') })));
      const cell = (r, col) => rows[r][heads.indexOf(col)];
      return { heads, rows: rows.map((_, r) => Object.fromEntries(heads.map((h) => [h, cell(r, h)]))), rules: window.__graphAscend.store.config?.detailColumns ?? [] };
    });
  }

  it('paints tensor metrics by their served direction and leaves rounding unpainted (item 1)', () =>
    withPage('details-rules', { width: 1500, height: 950 }, async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      const t = await detailsOf(frame, TENSOR, 'Module.layers.1.mlp.fc1.Linear.forward.0');
      assert.ok(t.rules.some((r) => r.name === 'One Thousandth Err Ratio' && r.worse === 'lower'), 'the rules come with the file');
      const painted = (col) => t.rows.filter((r) => r[col]?.worst).map((r) => r[col].text);
      // Ratios of 0.0083, 0.0, 1.0, 1.0 on the debug side: 0.0 is the worst, 1.0 never.
      assert.deepEqual(painted('One Thousandth Err Ratio'), ['0.0']);
      assert.ok(t.rows.some((r) => r['One Thousandth Err Ratio']?.text === '1.0'), 'a perfect ratio is shown');
      assert.equal(painted('Cosine').length, 1);
      assert.notEqual(painted('Cosine')[0], '1.0');
      // The metric columns are on the right of the table: scrolled into view for the screenshot.
      await frame.evaluate(() => { const s = document.querySelector('.table-scroll'); s.scrollLeft = s.scrollWidth; });
      await screenshot(page, 'convert-details-tensor-rules');
      // Statistics: this LayerNorm's Mean diffs are -5.1e-9 and 0: rounding, not an error.
      const s = await detailsOf(frame, STATS, 'Module.layers.1.ln2.LayerNorm.forward.0');
      assert.ok(s.rows.some((r) => /e-0?9$/.test(r['Mean diff']?.text ?? '')), 'the tiny Mean diff is shown');
      assert.deepEqual(s.rows.filter((r) => r['Mean diff']?.worst), []);
      await screenshot(page, 'convert-details-stats-rounding');
    }));

  it('shows a cancelled conversion as a neutral state and leaves nothing behind (item 2)', () =>
    withPage('cancel', { width: 1280, height: 720 }, async (page) => {
      const frame = await openConversion(page, stack.tb.base);
      await frame.fill('[data-testid=outputPathInput]', 'cancelled_out');
      await frame.click('[data-testid=startConversionButton]');
      await frame.waitForSelector('[data-testid=conversionProgress]');
      // Cancel once the converter is at work (it has read something).
      await until(frame, () => /\d/.test(document.querySelector('[data-testid=conversionMeasures]')?.textContent ?? ''), undefined, 60_000);
      await frame.click('[data-testid=cancelConversionButton]');
      await frame.waitForSelector('[data-testid=conversionResult][data-status=cancelled]', { timeout: 10_000 });
      const view = await frame.evaluate(() => {
        const el = document.querySelector('[data-testid=conversionResult]');
        const red = [el, ...el.querySelectorAll('*')].filter((e) => /^rgb\((2[0-9]{2}|1[5-9][0-9]), ?([0-9]{1,2}|1[0-1][0-9]), ?([0-9]{1,2}|1[0-1][0-9])\)$/.test(getComputedStyle(e).color) && e.textContent.trim());
        return { classes: el.className, errorLog: Boolean(el.querySelector('[data-testid=conversionErrorLog], .error-log, .error-box')), red: red.map((e) => e.textContent.trim()), text: el.textContent };
      });
      assert.ok(!/failure/.test(view.classes), view.classes);
      assert.equal(view.errorLog, false, 'no error log for a cancel');
      assert.deepEqual(view.red, [], 'nothing in red');
      assert.match(view.text, /cancelled/i);
      await screenshot(page, 'convert-cancelled-1280x720');
      // The engine stops and removes its staging files within a few seconds; no result appears.
      const out = path.join(stack.logdir, 'cancelled_out');
      const deadline = Date.now() + 5000;
      const leftOver = () => (fs.existsSync(out) ? fs.readdirSync(out) : []);
      while (leftOver().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(leftOver(), [], 'nothing left in the output folder');
    }));

  it('moves the progress by bytes and rows with the time left, through a proxy that holds the stream back (item 5)', () =>
    withPage('progress-proxy', { width: 1280, height: 720 }, async (page) => {
      const proxy = bufferingProxy(`http://127.0.0.1:${stack.tb.port}`, 150);
      const port = await freePort();
      await new Promise((r) => proxy.listen(port, '127.0.0.1', r));
      try {
        const frame = await openConversion(page, `http://127.0.0.1:${port}${PREFIX}`, stack.tb.token);
        await frame.fill('[data-testid=outputPathInput]', 'proxied_out');
        await frame.click('[data-testid=startConversionButton]');
        await frame.waitForSelector('[data-testid=conversionProgress]');
        const seen = [];
        let shot = false;
        const deadline = Date.now() + 240_000;
        for (;;) {
          const s = await frame.evaluate(() => ({
            pct: document.querySelector('[data-testid=conversionPercent]')?.textContent ?? null,
            measures: document.querySelector('[data-testid=conversionMeasures]')?.textContent ?? '',
            polling: !(document.querySelector('[data-testid=conversionPolling]')?.hidden ?? true),
            done: Boolean(document.querySelector('[data-testid=conversionResult]')),
          }));
          if (s.done) break;
          seen.push(s);
          if (!shot && /left/.test(s.measures) && s.polling) {
            await screenshot(page, 'convert-progress-proxy-1280x720');
            shot = true;
          }
          assert.ok(Date.now() < deadline, 'the conversion ends');
          await new Promise((r) => setTimeout(r, 150));
        }
        const status = await frame.getAttribute('[data-testid=conversionResult]', 'data-status');
        const result = await frame.textContent('[data-testid=conversionResult]');
        assert.equal(status, null, `a finished conversion is the success view: ${result}`);
        assert.ok(await frame.$('[data-testid=loadConvertedFileButton]'), 'the result can be opened');
        const pcts = [...new Set(seen.map((s) => s.pct))];
        // How many values a 1 s poll can see depends on how long the conversion runs on this
        // machine; what must hold is that the bar moved more than once before the end.
        const between = pcts.filter((p) => p !== null && parseFloat(p) > 0 && parseFloat(p) < 100);
        assert.ok(between.length >= 2, `the bar moved in steps through the proxy: ${pcts}`);
        assert.ok(seen.some((s) => s.polling), 'the page noticed the held-back stream and polled');
        assert.ok(seen.some((s) => /read .+ of .+MB/.test(s.measures)), `bytes read shown: ${seen.map((s) => s.measures).slice(-3)}`);
        assert.ok(seen.some((s) => /rows written \d+ of \d+/.test(s.measures)), 'rows written shown');
        assert.ok(seen.some((s) => /about .* left/.test(s.measures)), 'time left shown');
        assert.ok(proxy.heldStreams >= 1, 'the progress stream went through the holding proxy');
        assert.ok(shot, 'a screenshot of the moving bar was taken');
      } finally {
        await new Promise((r) => { proxy.closeAllConnections?.(); proxy.close(r); });
      }
    }));
});
