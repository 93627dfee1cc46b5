// The GRAPH_ASCEND tab in real TensorBoard + real Chromium: it loads, draws the graph, a
// double-click expands a module, a click shows the node's inputs/outputs and stack; the same
// under --path_prefix. Screenshots go to tests/artifacts/.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { appFrame, launchBrowser, makeLogdir, screenshot, startTensorBoard, until, pageAddress } from './harness.mjs';

const COMPARE = 'compare_tf_stats';
const SINGLE = 'build_mlp_step0';
const BLOCK = 'Module.layers.0.Block.forward.0';
const ATTN = 'Module.layers.0.attn.Attention.forward.0';

/** Box count of a pane as the page reports it on its element. */
const paneNodes = (frame, testid) => frame.$eval(`[data-testid=${testid}]`, (el) => Number(el.dataset.nodes || 0));

/** Where a node's label bar is on screen (page coordinates), from the pane's own layout. */
async function nodePoint(page, frame, side, key) {
  const p = await until(frame, ([s, k]) => window.__graphAscend?.panes[s].screenOf(k) ?? null, [side, key]);
  const pane = await frame.$(`[data-testid=${side === 'Bench' ? 'benchGraph' : 'debugGraph'}]`);
  const box = await pane.boundingBox();
  return { x: box.x + p.x, y: box.y + p.y };
}

async function flow(base, shotName) {
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(pageAddress(base));
    const frame = await appFrame(page);
    assert.match(frame.url(), /\/data\/plugin\/graph_ascend\/index\.html/);
    try {
      await steps(page, frame, shotName);
    } catch (e) {
      // Say what the user saw: the page's status line and error toasts.
      const seen = await frame.evaluate(() => [...document.querySelectorAll('[data-testid=graphError],[data-testid=status]')].map((x) => x.textContent).filter(Boolean).concat(window.__graphAscend?.errors ?? []));
      await screenshot(page, `${shotName}-failure`);
      e.message += `\n--- the page showed ---\n${seen.join('\n')}`;
      throw e;
    }
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
}

async function steps(page, frame, shotName) {

    // The first file opens by itself: the graph draws.
    await until(frame, () => Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 1);

    // Choose the compare file from the data selection panel: both panes draw.
    await frame.click('[data-testid=dataSiderButton]');
    const runs = await frame.$$eval('[data-testid=runSelect] option', (os) => os.map((o) => o.value));
    assert.deepEqual(runs, [SINGLE, COMPARE]);
    await frame.selectOption('[data-testid=runSelect]', COMPARE);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1);
    assert.ok(await frame.isVisible('[data-testid=benchGraph]'), 'a compare file shows the golden pane');
    const drawn = await frame.$eval('[data-testid=debugCanvas]', (c) => Number(c.dataset.drawn));
    assert.ok(drawn > 1, `boxes drawn on the canvas: ${drawn}`);
    const before = await paneNodes(frame, 'debugGraph');

    // Double-click a module: it expands (more boxes, its child appears) on both sides (sync on).
    const block = await nodePoint(page, frame, 'NPU', BLOCK);
    await page.mouse.dblclick(block.x, block.y);
    await until(frame, ([n, k]) => {
      const a = window.__graphAscend;
      return Number(document.querySelector('[data-testid=debugGraph]').dataset.nodes) > n && a.hier.NPU[k] && a.hier.Bench[k];
    }, [before, ATTN]);

    // Click the child: the details table shows its inputs and outputs, both sides.
    const attn = await nodePoint(page, frame, 'NPU', ATTN);
    await page.mouse.click(attn.x, attn.y);
    await until(frame, (k) => document.querySelector('[data-testid=debugNodeName]')?.textContent.includes(k) && document.querySelector('[data-testid=detailsTable]'), ATTN);
    const rows = await frame.$$eval('[data-testid=detailsTable] tbody tr td.name', (tds) => tds.map((td) => td.textContent));
    assert.ok(rows.some((r) => r.startsWith('input.0')), `input rows: ${rows}`);
    assert.ok(rows.some((r) => r.startsWith('output.0')), `output rows: ${rows}`);
    const headers = await frame.$$eval('[data-testid=detailsTable] thead th', (ths) => ths.map((th) => th.textContent));
    for (const col of ['Max', 'Min', 'Mean', 'Norm']) assert.ok(headers.includes(col), `column ${col} in ${headers}`);
    await screenshot(page, `${shotName}-details`);

    // The node-information tab shows the call stack.
    await frame.click('[data-testid=detailsInfoTab]');
    const stack = await frame.inputValue('[data-testid=debugStackInfo]');
    assert.match(stack, /File .*line \d+/);
    await screenshot(page, shotName);
}

describe('GRAPH_ASCEND in TensorBoard', () => {
  let logdir;
  before(() => {
    logdir = makeLogdir([SINGLE, COMPARE]);
  });
  after(() => fs.rmSync(logdir, { recursive: true, force: true }));

  it('loads, draws, expands and shows node details', async () => {
    const tb = await startTensorBoard(logdir);
    try {
      await flow(tb.base, 'graph-ascend');
    } catch (e) {
      e.message += `\n--- TensorBoard log ---\n${tb.log().slice(-3000)}`;
      throw e;
    } finally {
      tb.stop();
    }
  });

  it('works the same under --path_prefix', async () => {
    const tb = await startTensorBoard(logdir, { pathPrefix: '/some/prefix' });
    try {
      await flow(tb.base, 'graph-ascend-path-prefix');
    } catch (e) {
      e.message += `\n--- TensorBoard log ---\n${tb.log().slice(-3000)}`;
      throw e;
    } finally {
      tb.stop();
    }
  });

  it('says so clearly when the backend cannot run', async () => {
    // A sidecar binary that exits at once: every route answers with an error the page must show.
    const tb = await startTensorBoard(logdir, { env: { GRAPH_ASCEND_BINARY: '/bin/false' } });
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
      await page.goto(pageAddress(tb.base));
      const frame = await appFrame(page);
      await frame.waitForSelector('[data-testid=graphError]', { timeout: 30_000 });
      const text = await frame.textContent('[data-testid=graphError]');
      assert.match(text, /load_meta_dir: \S/);
      assert.ok(await frame.isVisible('[data-testid=errorToast]'));
      await screenshot(page, 'backend-down');
    } finally {
      await browser.close();
      tb.stop();
    }
  });
});
