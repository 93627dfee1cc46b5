// Overflow mode (filter by level, boxes coloured by level) and the communication context menu
// (peer ranks: switches rank and selects the peer node), on real msprobe files in real TensorBoard.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, launchBrowser, makeLogdir, screenshot, startTensorBoard, until, pageAddress } from './harness.mjs';

const OVERFLOW = 'compare_mlp_overflow_oc';
const DIST = 'compare_dist_ranks';
const STEPS = 'build_mlp_steps';

async function openRun(page, base, run) {
  await page.goto(pageAddress(base));
  const frame = await appFrame(page);
  await until(frame, () => Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 1);
  await frame.click('[data-testid=dataSiderButton]');
  if ((await frame.inputValue('[data-testid=runSelect]')) !== run) {
    await frame.selectOption('[data-testid=runSelect]', run);
    await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, run);
  }
  return frame;
}

describe('GRAPH_ASCEND modes', () => {
  let logdir, tb, browser;
  before(async () => {
    logdir = makeLogdir([STEPS, OVERFLOW, DIST]);
    tb = await startTensorBoard(logdir);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    tb?.stop();
    fs.rmSync(logdir, { recursive: true, force: true });
  });

  const withPage = async (name, fn) => {
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    page.setDefaultTimeout(15_000);
    try {
      await fn(page);
    } catch (e) {
      await screenshot(page, `${name}-failure`).catch(() => {});
      const f = page.frames().find((x) => /graph_ascend\/index\.html/.test(x.url()));
      const shown = f ? await f.evaluate(() => window.__graphAscend?.errors ?? []).catch(() => []) : [];
      if (shown.length) e.message += `\n--- errors the page showed ---\n${shown.join('\n')}`;
      throw e;
    } finally {
      await page.close();
    }
  };

  it('filters by overflow level and colours boxes by level', () =>
    withPage('overflow', async (page) => {
      const frame = await openRun(page, tb.base, OVERFLOW);
      await frame.click('[data-testid=precisionSiderButton]');
      await frame.click('[data-testid=overflowMode]');
      await frame.check('[data-testid=filter-critical]');
      await until(frame, () => document.querySelectorAll('[data-testid=precisionItem]').length > 0);
      const hits = await frame.$$eval('[data-testid=precisionItem]', (els) => els.map((e) => e.textContent));
      assert.ok(hits.includes('Torch.exp.0.forward'), `critical hits: ${hits}`);
      const legend = await frame.textContent('[data-testid=colorLegend]');
      assert.match(legend, /Critical/);
      const item = await frame.$('[data-testid=precisionItem]:has-text("Torch.exp.0.forward")');
      await item.click();
      await until(frame, () => window.__graphAscend.selected?.key === 'Torch.exp.0.forward');
      const fill = await frame.evaluate(() => window.__graphAscend.panes.NPU.scene.byKey.get('Torch.exp.0.forward').fill);
      assert.equal(fill, 'rgb(22,104,220)');
      await screenshot(page, 'overflow-mode');
    }));

  it('offers the peer ranks of a communication node and goes there', () =>
    withPage('peers', async (page) => {
      const frame = await openRun(page, tb.base, DIST);
      const ranks = await frame.$$eval('[data-testid=rankSelect] option', (os) => os.map((o) => o.value));
      assert.deepEqual(ranks, ['0', '1']);
      await frame.click('[data-testid=searchSiderButton]');
      await frame.fill('[data-testid=searchInput]', 'Distributed.send.0');
      await frame.click('[data-testid=searchItem] >> nth=0');
      const key = 'Distributed.send.0.forward';
      await until(frame, (k) => window.__graphAscend.selected?.key === k, key);
      const p = await until(frame, (k) => window.__graphAscend.panes.NPU.screenOf(k), key);
      const pane = await (await frame.$('[data-testid=debugGraph]')).boundingBox();
      await page.mouse.click(pane.x + p.x, pane.y + p.y, { button: 'right' });
      await frame.waitForSelector('[data-testid=peerRank1]');
      await screenshot(page, 'peer-ranks-menu');
      await frame.click('[data-testid=peerRank1]');
      await until(frame, () => window.__graphAscend.meta.rank === 1 && window.__graphAscend.selected?.key === 'Distributed.recv.0.forward');
      await frame.waitForSelector('[data-testid=detailsTable]');
      assert.match(await frame.textContent('[data-testid=debugNodeName]'), /Distributed\.recv\.0\.forward/);
    }));

  it('switches steps of a single-graph file and shows one pane', () =>
    withPage('steps', async (page) => {
      const frame = await openRun(page, tb.base, STEPS);
      assert.equal(await frame.isVisible('[data-testid=benchGraph]'), false, 'a single graph has one pane');
      const steps = await frame.$$eval('[data-testid=stepSelect] option', (os) => os.map((o) => o.value));
      assert.deepEqual(steps, ['0', '1']);
      await frame.evaluate(() => (window.__stepProbe = window.__graphAscend.panes.NPU.scene));
      await frame.selectOption('[data-testid=stepSelect]', '1');
      await until(frame, () => window.__graphAscend.meta.step === 1 && window.__graphAscend.panes.NPU.scene && window.__graphAscend.panes.NPU.scene !== window.__stepProbe);
      assert.ok((await frame.evaluate(() => window.__graphAscend.panes.NPU.scene.boxes.length)) > 1);
      assert.match(frame.url(), /step=1/);
    }));

  it('follows TensorBoard dark mode, lists shortcuts and moves the view from the minimap', () =>
    withPage('chrome', async (page) => {
      const frame = await openRun(page, tb.base, OVERFLOW);
      assert.equal(await frame.evaluate(() => document.documentElement.classList.contains('dark')), false);
      await page.evaluate(() => document.body.classList.add('dark-mode'));
      await until(frame, () => document.documentElement.classList.contains('dark'));
      await page.evaluate(() => document.body.classList.remove('dark-mode'));
      await until(frame, () => !document.documentElement.classList.contains('dark'));

      await frame.click('[data-testid=shortcutsButton]');
      const keys = await frame.$$eval('[data-testid=shortcutsList] kbd', (ks) => ks.map((k) => k.textContent));
      for (const k of ['W', 'S', 'A', 'D']) assert.ok(keys.includes(k), `shortcut ${k} listed: ${keys}`);

      const ty0 = await frame.evaluate(() => window.__graphAscend.panes.NPU.view.ty);
      const mini = await (await frame.$('[data-testid=debugMinimap]')).boundingBox();
      await page.mouse.click(mini.x + mini.width / 2, mini.y + mini.height - 5);
      const ty1 = await frame.evaluate(() => window.__graphAscend.panes.NPU.view.ty);
      assert.ok(ty1 < ty0, `clicking low on the minimap scrolls down: ${ty0} -> ${ty1}`);
    }));

  it('lists a file that appears in the log directory while the page is open', () =>
    withPage('live', async (page) => {
      const frame = await openRun(page, tb.base, STEPS);
      const before = await frame.$$eval('[data-testid=runSelect] option', (os) => os.map((o) => o.value));
      assert.ok(!before.includes('late_run'));
      // Written elsewhere, then renamed into place, as a finished conversion would be.
      const src = fs.readdirSync(path.join(logdir, STEPS)).find((f) => f.endsWith('.vis.db'));
      fs.mkdirSync(path.join(logdir, 'late_run'));
      fs.copyFileSync(path.join(logdir, STEPS, src), path.join(logdir, 'late.tmp'));
      fs.renameSync(path.join(logdir, 'late.tmp'), path.join(logdir, 'late_run', 'build_late.vis.db'));
      await until(frame, () => [...document.querySelectorAll('[data-testid=runSelect] option')].some((o) => o.value === 'late_run'), null, 20_000);
      await frame.selectOption('[data-testid=runSelect]', 'late_run');
      await until(frame, () => window.__graphAscend.meta.run === 'late_run' && Number(document.querySelector('[data-testid=debugGraph]').dataset.nodes) > 1);
    }));
});
