// Issue-5 features in real TensorBoard + Chromium: search and jump (ancestors expanded by the
// server), precision filter with previous/next, right-click "locate the matched node", W/S zoom,
// theme and language toggles, the selection kept in the URL across a reload, and a conversion of
// real dump folders with progress and "open this file".
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, launchBrowser, makeLogdir, repo, screenshot, startTensorBoard, until, pageAddress } from './harness.mjs';

const COMPARE = 'compare_tf_stats';

/** The logdir holds a broken file: the page reports it in one notice, which the user closes. */
async function acknowledgeCatalog(frame) {
  await frame.click('[data-testid=catalogNotice] .toast-close');
}

async function openCompare(page, base) {
  await page.goto(pageAddress(base));
  const frame = await appFrame(page);
  await until(frame, () => Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 1);
  await acknowledgeCatalog(frame);
  await frame.click('[data-testid=dataSiderButton]');
  // The only good file opens by itself; choosing it again would reload it (and refit the view) under the test.
  if ((await frame.inputValue('[data-testid=runSelect]')) !== COMPARE) await frame.selectOption('[data-testid=runSelect]', COMPARE);
  await until(frame, (run) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === run
    && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, COMPARE);
  return frame;
}

const selectedName = (frame) => frame.evaluate(() => window.__graphAscend.selected?.key ?? null);
const detailsName = (frame) => frame.textContent('[data-testid=debugNodeName]');

describe('GRAPH_ASCEND panels', () => {
  let logdir, tb, browser;
  before(async () => {
    logdir = makeLogdir([COMPARE], (dir) => {
      // Real dump folders for the conversion page, and a broken file the catalog must report.
      fs.cpSync(path.join(repo, 'examples/dumps'), path.join(dir, 'dumps'), { recursive: true });
      fs.mkdirSync(path.join(dir, 'broken'));
      fs.writeFileSync(path.join(dir, 'broken', 'bad.vis.db'), 'this is not a SQLite file');
    });
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
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await fn(page);
      assert.deepEqual(errors, []);
    } catch (e) {
      await screenshot(page, `${name}-failure`).catch(() => {});
      const shown = await page.frames().find((f) => /graph_ascend\/index\.html/.test(f.url()))?.evaluate(() => window.__graphAscend?.errors ?? []).catch(() => []);
      if (shown?.length) e.message += `\n--- errors the page showed ---\n${shown.join('\n')}`;
      e.message += `\n--- TensorBoard log ---\n${tb.log().slice(-2000)}`;
      throw e;
    } finally {
      await page.close();
    }
  };

  it('reports a broken file in the catalog', () =>
    withPage('catalog', async (page) => {
      await page.goto(pageAddress(tb.base));
      const frame = await appFrame(page);
      await frame.waitForSelector('[data-testid=catalogNotice]');
      assert.equal(await frame.locator('.modal-overlay').count(), 0, 'no dialog');
      await frame.click('[data-testid=catalogNoticeAction]');
      await frame.waitForSelector('[data-testid=catalogErrorList]');
      assert.match(await frame.textContent('[data-testid=catalogErrorList]'), /broken\/bad/);
    }));

  it('keeps the graph in sight when a side panel narrows the panes', () =>
    withPage('resize', async (page) => {
      await page.goto(pageAddress(tb.base));
      const frame = await appFrame(page);
      await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1);
      await acknowledgeCatalog(frame);
      const key = 'Module.embed.Embedding.forward.0';
      const place = () => frame.evaluate((k) => ({ at: window.__graphAscend.panes.NPU.screenOf(k), width: window.__graphAscend.panes.NPU.size().width }), key);
      const wide = await place();
      await frame.click('[data-testid=dataSiderButton]');
      await until(frame, (w) => window.__graphAscend.panes.NPU.size().width < w, wide.width);
      const narrow = await place();
      assert.ok(narrow.at.x > 0 && narrow.at.x < narrow.width, `${key} is still inside the pane: ${JSON.stringify({ wide, narrow })}`);
      // Nobody moved the view yet: it is the fit for the new width.
      const refit = await frame.evaluate(() => {
        const pn = window.__graphAscend.panes.NPU;
        const now = { ...pn.view };
        pn.fit();
        return { now, fit: { ...pn.view } };
      });
      assert.deepEqual(refit.now, refit.fit);
      // A view the user chose keeps its centre: pan, close the panel, and the box moves by half the width change.
      await frame.evaluate(() => window.__graphAscend.panes.NPU.pan(-30, 0));
      const panned = await place();
      await frame.click('[data-testid=dataSiderButton]');
      await until(frame, (w) => window.__graphAscend.panes.NPU.size().width > w, panned.width);
      const reopened = await place();
      assert.ok(Math.abs(reopened.at.x - panned.at.x - (reopened.width - panned.width) / 2) <= 1, JSON.stringify({ panned, reopened }));
    }));

  it('searches names and jumps to a deep node', () =>
    withPage('search', async (page) => {
      const frame = await openCompare(page, tb.base);
      await frame.click('[data-testid=searchSiderButton]');
      await frame.fill('[data-testid=searchInput]', 'LINEAR.10');
      await until(frame, () => document.querySelectorAll('[data-testid=searchItem]').length > 0);
      const first = await frame.textContent('[data-testid=searchItem] >> nth=0');
      assert.match(first, /linear\.10/i);
      await frame.click('[data-testid=searchItem] >> nth=0');
      await until(frame, (n) => window.__graphAscend.selected?.key === n, first);
      // The node was inside collapsed modules: the server expanded its ancestors, the pane shows it.
      assert.ok(await frame.evaluate((n) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(n)), first));
      await frame.waitForSelector('[data-testid=detailsTable]');
      assert.equal((await detailsName(frame)).includes(first), true);
      await screenshot(page, 'search');
    }));

  it('filters by precision and steps through the hits', () =>
    withPage('precision', async (page) => {
      const frame = await openCompare(page, tb.base);
      await frame.click('[data-testid=precisionSiderButton]');
      await frame.check('[data-testid=filter-pass]');
      await frame.check('[data-testid=filter-warning]');
      await frame.check('[data-testid=filter-error]');
      await until(frame, () => document.querySelectorAll('[data-testid=precisionItem]').length > 0);
      const count = await frame.textContent('[data-testid=precisionCount]');
      assert.match(count, /\(\d+\)/);
      await frame.click('[data-testid=precisionNext]');
      const firstHit = await frame.textContent('[data-testid=precisionItem] >> nth=0');
      await until(frame, (n) => window.__graphAscend.selected?.key === n, firstHit);
      await frame.click('[data-testid=precisionNext]');
      await until(frame, (n) => window.__graphAscend.selected && window.__graphAscend.selected.key !== n, firstHit);
      await screenshot(page, 'precision-filter');
    }));

  it('locates the matched node from the context menu, zooms with W and follows theme and language toggles', () =>
    withPage('navigation', async (page) => {
      const frame = await openCompare(page, tb.base);
      const key = 'Module.embed.Embedding.forward.0';
      const p = await until(frame, (k) => window.__graphAscend.panes.NPU.screenOf(k), key);
      const pane = await (await frame.$('[data-testid=debugGraph]')).boundingBox();
      await page.mouse.click(pane.x + p.x, pane.y + p.y, { button: 'right' });
      const menu = await frame.waitForSelector('[data-testid=contextMenu]', { timeout: 5000 }).catch(() => null);
      const seen = () => frame.evaluate(([k, x, y]) => {
        const pn = window.__graphAscend.panes.NPU;
        return { now: pn.screenOf(k), hit: pn.boxAt(x, y)?.key ?? null, view: pn.view, top: document.elementFromPoint(x + pn.el.getBoundingClientRect().left, y + pn.el.getBoundingClientRect().top)?.outerHTML.slice(0, 120) };
      }, [key, p.x, p.y]);
      if (!menu) assert.fail(`no context menu after a right-click on ${key}: ${JSON.stringify({ clicked: p, ...(await seen()) })}`);
      const menuNode = await menu.getAttribute('data-node');
      if (menuNode !== key) assert.fail(`the right-click on ${key} opened the menu of ${menuNode}: ${JSON.stringify({ clicked: p, ...(await seen()) })}`);
      await frame.click('[data-testid=locateMatchedNode]');
      await until(frame, (k) => window.__graphAscend.selected?.side === 'Bench' && window.__graphAscend.selected.key === k, key).catch(async (err) => {
        const now = await frame.evaluate(() => ({ selected: window.__graphAscend.selected, errors: window.__graphAscend.errors }));
        assert.fail(`locate matched node did not select Bench ${key}: ${JSON.stringify(now)} (${err.message.split('\n')[0]})`);
      });

      await page.mouse.move(pane.x + 50, pane.y + 300);
      const s0 = await frame.evaluate(() => window.__graphAscend.panes.NPU.view.scale);
      await page.keyboard.press('w');
      const s1 = await frame.evaluate(() => window.__graphAscend.panes.NPU.view.scale);
      assert.ok(s1 > s0, `W zooms in: ${s0} -> ${s1}`);

      const dark0 = await frame.evaluate(() => document.documentElement.classList.contains('dark'));
      await frame.click('[data-testid=themeSiderButton]');
      assert.equal(await frame.evaluate(() => document.documentElement.classList.contains('dark')), !dark0);
      const title0 = await frame.getAttribute('[data-testid=searchSiderButton]', 'title');
      await frame.click('[data-testid=languageSiderButton]');
      const title1 = await frame.getAttribute('[data-testid=searchSiderButton]', 'title');
      assert.notEqual(title0, title1);
      assert.ok([title0, title1].includes('节点搜索') && [title0, title1].includes('Node Search'));
      await screenshot(page, 'theme-language');
    }));

  it('keeps the file and the selected node in the URL across a reload', () =>
    withPage('url', async (page) => {
      const frame = await openCompare(page, tb.base);
      const key = 'Module.pos.Embedding.forward.0';
      const p = await until(frame, (k) => window.__graphAscend.panes.NPU.screenOf(k), key);
      const pane = await (await frame.$('[data-testid=debugGraph]')).boundingBox();
      await page.mouse.click(pane.x + p.x, pane.y + p.y);
      await until(frame, (k) => location.search.includes(encodeURIComponent(k).replace(/%20/g, '+')) || location.search.includes(k), key);
      const url = frame.url();
      assert.match(url, new RegExp(`run=${COMPARE}`));
      await frame.goto(url);
      await acknowledgeCatalog(frame);
      await until(frame, (k) => window.__graphAscend?.selected?.key === k, key);
      assert.equal(await selectedName(frame), key);
      assert.equal(await frame.evaluate(() => window.__graphAscend.meta.run), COMPARE);
    }));

  it('unmatches a matched pair and matches it again from the match panel', () =>
    withPage('matching', async (page) => {
      const frame = await openCompare(page, tb.base);
      const leaf = 'Torch.arange.0.forward';
      // The leaf sits inside a collapsed Apis_Between_Modules box: jump to it first, so its box is drawn.
      await frame.click('[data-testid=searchSiderButton]');
      await frame.fill('[data-testid=searchInput]', leaf);
      await until(frame, (n) => [...document.querySelectorAll('[data-testid=searchItem]')].some((e) => e.textContent.includes(n)), leaf);
      await frame.click(`[data-testid=searchItem] >> text=${leaf}`);
      await until(frame, (n) => window.__graphAscend.hier.NPU[n] !== undefined, leaf);
      assert.ok((await frame.evaluate((k) => window.__graphAscend.hier.NPU[k].matchedNodeLink?.length ?? 0, leaf)) > 0, 'matched at first');
      await frame.click('[data-testid=matchSiderButton]');
      await frame.waitForSelector('[data-testid=debugMatchedSelect]');
      const count = async (id) => Number((await frame.textContent(`[data-testid=${id}]`)).match(/(\d+)/g).pop());
      const unmatched0 = await count('debugUnmatchedCount');
      await frame.fill('[data-testid=debugMatchedSelect]', leaf);
      assert.equal(await frame.inputValue('[data-testid=benchMatchedSelect]'), leaf, 'the bench side follows the matched pair');
      await frame.click('[data-testid=unmatchButton]');
      await until(frame, (n) => Number(document.querySelector('[data-testid=debugUnmatchedCount]').textContent.match(/(\d+)/g).pop()) === n + 1, unmatched0);
      // Unmatched now: the graph repaints it grey and the filter finds it among the unmatched nodes.
      assert.equal(await frame.evaluate((k) => window.__graphAscend.hier.NPU[k]?.matchedNodeLink?.length ?? -1, leaf), 0);
      await frame.fill('[data-testid=debugUnmatchedSelect]', leaf);
      await frame.fill('[data-testid=benchUnmatchedSelect]', leaf);
      await frame.click('[data-testid=matchButton]');
      await until(frame, (n) => Number(document.querySelector('[data-testid=debugUnmatchedCount]').textContent.match(/(\d+)/g).pop()) === n, unmatched0);
      assert.ok((await frame.evaluate((k) => window.__graphAscend.hier.NPU[k]?.matchedNodeLink?.length ?? 0, leaf)) > 0);
      await screenshot(page, 'matching');
    }));

  it('converts real dump folders, shows progress and opens the result', () =>
    withPage('conversion', async (page) => {
      await page.goto(pageAddress(tb.base));
      const frame = await appFrame(page);
      await acknowledgeCatalog(frame);
      await frame.click('[data-testid=conversionSiderButton]');
      await until(frame, () => document.querySelectorAll('[data-testid=npuPathSelect] option').length > 1 || document.querySelector('[data-testid=conversionLoadError]'));
      const loadError = await frame.$('[data-testid=conversionLoadError]');
      if (loadError) assert.fail(`the conversion page could not list dump folders: ${await loadError.textContent()}`);
      const dirs = await frame.$$eval('[data-testid=npuPathSelect] option', (os) => os.map((o) => o.value));
      const npu = dirs.find((d) => /tf_stats_a\/step0\/?$/.test(d)) ?? dirs.find((d) => /tf_stats_a/.test(d));
      const bench = dirs.find((d) => /tf_stats_b\/step0\/?$/.test(d)) ?? dirs.find((d) => /tf_stats_b/.test(d));
      assert.ok(npu && bench, `dump folders offered: ${dirs}`);
      await frame.selectOption('[data-testid=npuPathSelect]', npu);
      await frame.selectOption('[data-testid=benchPathSelect]', bench);
      await frame.fill('[data-testid=outputPathInput]', 'converted');
      await frame.click('[data-testid=startConversionButton]');
      await frame.waitForSelector('[data-testid=conversionResult]', { timeout: 120_000 });
      const text = await frame.textContent('[data-testid=conversionResult]');
      await screenshot(page, 'conversion-result');
      assert.ok(await frame.$('[data-testid=loadConvertedFileButton]'), `conversion failed: ${text}`);
      await frame.click('[data-testid=loadConvertedFileButton]');
      await until(frame, () => window.__graphAscend.meta.run === 'converted' && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, null, 30_000);
      await screenshot(page, 'conversion-opened');
    }));
});
