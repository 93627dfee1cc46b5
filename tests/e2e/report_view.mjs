// What the report tests share (report.test.mjs: reports written by `graph-ascend report`;
// report_download.test.mjs: reports downloaded from the page): a report opened from file:// in
// Chromium with every request that is not file:// aborted (no server, no network), and the check
// that it shows the diagnosis and the first source's details one click away.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { pathToFileURL } from 'node:url';
import { screenshot, until } from './harness.mjs';

/** The demo's first source (examples/compare_tf_stats). */
export const FIRST_SOURCE = 'Functional.layer_norm.3.forward';

/** The JSON a report embeds (its data, docs/report.md). */
export function embeddedData(html) {
  const m = /<script type="application\/json" id="graph-ascend-report">([\s\S]*?)<\/script>/.exec(html);
  assert.ok(m, 'the report embeds its data');
  return JSON.parse(m[1]);
}

/**
 * A report file is one self-contained HTML file: nothing it loads comes from elsewhere (no script,
 * style sheet or image by address), and its data are embedded.
 */
export function assertSelfContained(file) {
  const html = fs.readFileSync(file, 'utf8');
  assert.match(html.slice(0, 100), /^<!doctype html>/i);
  assert.doesNotMatch(html, /<script[^>]+\bsrc=/i, 'no script by address');
  assert.doesNotMatch(html, /<link[^>]+\bhref="(?!data:)/i, 'no style sheet or icon by address');
  return embeddedData(html);
}

/**
 * Opens `file` (a report) from disk in a new page of `browser`, every request that leaves file://
 * aborted and counted, waits for both graphs drawn, runs `fn(page)`; no request may have left and
 * no error been thrown in the page. On a failure the page is kept as `<name>-failure.png`.
 */
export async function openReportFromDisk(browser, file, name, fn) {
  const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
  page.setDefaultTimeout(15_000);
  const errors = [];
  const blocked = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file://')) return route.continue();
    blocked.push(url);
    return route.abort();
  });
  try {
    await page.goto(pathToFileURL(file).href);
    await until(page, () => window.__graphAscend?.fileLoads === 0 && window.__graphAscend.meta.run
      && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, undefined, 20_000);
    await fn(page);
    assert.deepEqual(blocked, [], 'no request leaves the file');
    if (errors.length) throw new Error(`errors in the page: ${errors.join('\n')}`);
  } catch (e) {
    await screenshot(page, `${name}-failure`).catch(() => {});
    const shown = await page.evaluate(() => window.__graphAscend?.errors ?? []).catch(() => []);
    if (shown.length) e.message += `\n--- errors the page showed ---\n${shown.join('\n')}`;
    throw e;
  } finally {
    await page.close();
  }
}

/**
 * In an open report of the demo: the target graph drawn, the diagnosis list with the first source
 * first, a click on it selects it with its ancestors open, and its details are shown.
 */
export async function assertFirstSourceShown(page) {
  assert.ok(Number(await page.getAttribute('[data-testid=debugGraph]', 'data-nodes')) > 1, 'the target graph is drawn');
  // A report opens with its Diagnosis panel open (on its first source).
  if (!(await page.$('[data-testid=diagnosisPanel]'))) await page.click('[data-testid=diagnosisSiderButton]');
  await page.waitForSelector('[data-testid=diagGroup]');
  const first = page.locator('[data-testid=diagGroup]').first();
  assert.match(await first.textContent(), new RegExp(FIRST_SOURCE.replace(/\./g, '\\.')));
  await first.click();
  await until(page, (k) => window.__graphAscend.selected?.side === 'NPU' && window.__graphAscend.selected.key === k, FIRST_SOURCE);
  assert.ok(await page.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), FIRST_SOURCE), 'its ancestors are open');
  await page.waitForSelector('[data-testid=detailsTable]');
  assert.ok((await page.textContent('[data-testid=debugNodeName]')).includes(FIRST_SOURCE));
  assert.match(await page.textContent('[data-testid=detailsTable]'), /output\.0/);
}
