// The page as a demanding user finds it, in real TensorBoard + Chromium: search hits
// highlight the query, the toolbar fits a 1280×720 laptop, the details table keeps one column
// order and its name column in view, "Unmatch" with nothing chosen says what to do, the minimap
// is opaque, out of the graph's way and readable on a 48-layer model, and buttons carry bundled
// icons with tooltips in both languages. Screenshots: tests/artifacts/issue13-*.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, PYTHON, repo, screenshot, sharedStack, until, withStackPage, pageAddress } from './harness.mjs';

const COMPARE = 'compare_tf_stats';
const MS = 'compare_ms_stats';
const BIG = 'big48';
const DUMP = 'dump_folder';

describe('GRAPH_ASCEND page', () => {
  const stack = sharedStack(before, after, () =>
    makeLogdir([COMPARE, MS], (dir) => {
      // A 48-layer compare file (the shape of a large transformer), made by the benchmark's generator.
      fs.mkdirSync(path.join(dir, BIG));
      const gen = spawnSync(PYTHON, [path.join(repo, 'frontend/bench/make_big_visdb.py'), path.join(dir, BIG, 'compare_48.vis.db'), '48', '6', '4', '20']);
      if (gen.status !== 0) throw new Error(`make_big_visdb.py: ${gen.stderr}`);
      // A folder the conversion form offers as a dump (the folders of graphs are not offered).
      fs.mkdirSync(path.join(dir, DUMP));
    }));

  const withPage = (name, viewport, fn) => withStackPage(stack, `issue13-${name}`, viewport, fn);

  /** Open run `run` (its only file) and wait until every pane has drawn. */
  async function open(page, run) {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
    if ((await frame.evaluate(() => window.__graphAscend.meta.run)) !== run) {
      await frame.click('[data-testid=dataSiderButton]');
      await frame.selectOption('[data-testid=runSelect]', run);
      await frame.click('[data-testid=dataSiderButton]');
    }
    await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
      && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, run);
    return frame;
  }

  it('search highlights the matched text in every result (item 6)', () =>
    withPage('search', { width: 1500, height: 950 }, async (page) => {
      const frame = await open(page, COMPARE);
      await frame.click('[data-testid=searchSiderButton]');
      await frame.fill('[data-testid=searchInput]', 'LayerNorm');
      await frame.waitForSelector('[data-testid=searchItem]');
      const rows = await frame.$$eval('[data-testid=searchItem]', (els) => els.map((e) => ({ text: e.textContent, marks: [...e.querySelectorAll('mark')].map((m) => m.textContent) })));
      assert.ok(rows.length > 1);
      for (const r of rows) assert.deepEqual(r.marks, ['LayerNorm'], `${r.text} highlights the query`);
      await screenshot(page, 'issue13-search');
    }));

  it('keeps what the user types in the search box while the node list arrives (item 6)', () =>
    withPage('search-typing', { width: 1500, height: 950 }, async (page) => {
      const frame = await open(page, COMPARE);
      // The node list is held back until the user has begun to type, as on a large file.
      let release;
      const held = new Promise((resolve) => { release = resolve; });
      let asked = 0;
      await page.route('**/loadGraphAllNodeList', async (route) => {
        asked++;
        await held;
        await route.continue();
      });
      await frame.click('[data-testid=searchSiderButton]');
      await frame.click('[data-testid=searchInput]');
      await page.keyboard.type('Layer');
      release();
      await frame.waitForSelector('[data-testid=searchItem]');
      await page.keyboard.type('Norm');
      assert.equal(asked, 1, 'the panel asked for the node list once, after it opened');
      assert.equal(await frame.inputValue('[data-testid=searchInput]'), 'LayerNorm', 'the keys typed after the list arrived reached the box');
      const marks = await frame.$$eval('[data-testid=searchItem] mark', (els) => els.map((e) => e.textContent));
      assert.ok(marks.length > 0 && marks.every((m) => m === 'LayerNorm'), `${marks}`);
    }));

  it('keeps every toolbar button on screen at 1280×720 with a side panel open (item 9)', () =>
    withPage('toolbar', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, COMPARE);
      await frame.click('[data-testid=dataSiderButton]');
      const off = await frame.evaluate(() => {
        const header = document.querySelector('[data-testid=boardHeader]').getBoundingClientRect();
        // Toolbar buttons only: the entries of a popover menu (the report's) are hidden until it opens.
        return [...document.querySelectorAll('[data-testid=boardHeader] button:not(.popover button)')].filter((b) => {
          const r = b.getBoundingClientRect();
          const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
          return r.right > Math.min(header.right, window.innerWidth) + 0.5 || r.left < header.left || r.bottom > window.innerHeight || !(hit && b.contains(hit));
        }).map((b) => b.dataset.testid);
      });
      await screenshot(page, 'issue13-toolbar-1280');
      assert.deepEqual(off, [], 'buttons off screen or hidden');
    }));

  it('gives the details table one column order and keeps the name column in view (item 10)', () =>
    withPage('details', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, MS);
      const headerOf = async (node) => {
        await frame.evaluate((n) => window.__graphAscend.jumpTo('NPU', n), node);
        await until(frame, (n) => document.querySelector('[data-testid=debugNodeName]')?.textContent.endsWith(n) && document.querySelector('[data-testid=detailsTable]'), node);
        return frame.$$eval('[data-testid=detailsTable] thead th', (ths) => ths.map((th) => th.textContent));
      };
      // A scalar first input (type, value, requires_grad, Max… dtype, shape) and a tensor one.
      const scalar = await headerOf('Functional.arange.0.forward');
      const tensor = await headerOf('Tensor.view.0.forward');
      assert.deepEqual(scalar, tensor, 'the same columns in the same order for both nodes');
      assert.deepEqual(tensor.slice(0, 9), ['name', 'type', 'dtype', 'shape', 'Max', 'Min', 'Mean', 'Norm', 'requires_grad']);
      // Scrolled sideways, the name column stays at the left edge.
      const pos = await frame.evaluate(() => {
        const scroll = document.querySelector('[data-testid=nodeDetails] .table-scroll');
        scroll.scrollLeft = scroll.scrollWidth;
        const name = document.querySelector('[data-testid=detailsTable] tbody td.name');
        return { scrolled: scroll.scrollLeft, box: scroll.getBoundingClientRect().left, name: name.getBoundingClientRect().left };
      });
      assert.ok(pos.scrolled > 0, 'the table is wider than the panel at 1280 px');
      assert.ok(Math.abs(pos.name - pos.box) < 2, `name column at ${pos.name}, panel at ${pos.box}`);
      await screenshot(page, 'issue13-details-scrolled');
    }));

  it('"Unmatch" with nothing chosen says what to choose, not an error (item 12)', () =>
    withPage('unmatch', { width: 1500, height: 950 }, async (page) => {
      const frame = await open(page, COMPARE);
      await frame.click('[data-testid=matchSiderButton]');
      await frame.waitForSelector('[data-testid=unmatchButton]');
      await frame.click('[data-testid=unmatchButton]');
      const hint = await frame.waitForSelector('[data-testid=unmatchHint]');
      const text = await hint.textContent();
      const placeholder = await frame.getAttribute('[data-testid=debugMatchedSelect]', 'placeholder');
      assert.notEqual(text.trim(), placeholder);
      assert.match(text, /debug|bench/i);
      assert.equal(await frame.$('[data-testid=errorToast]'), null);
      assert.deepEqual(await frame.evaluate(() => window.__graphAscend.errors), []);
    }));

  it('draws an opaque, readable minimap beside the graph on both panes of a 48-layer model (item 8)', () =>
    withPage('minimap', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, BIG);
      // Expand every layer: the graph becomes far taller than wide.
      await frame.evaluate(async () => {
        const a = window.__graphAscend;
        for (let i = 0; i < 48; i++) await a.toggleNode('NPU', `Module.layers.${i}.Layer.forward.0`);
      });
      await frame.click('[data-testid=fitScreenButton]');
      for (const side of ['NPU', 'Bench']) {
        const m = await until(frame, (s) => window.__graphAscend.panes[s].minimapReport(), side);
        assert.ok(m.graphAspect > 8, `${side}: the graph is tall (${m.graphAspect})`);
        assert.equal(m.opacity, 1, `${side}: opaque`);
        assert.ok(m.graph.x1 - m.graph.x0 >= 0.5 * m.frame.w, `${side}: the graph fills the minimap's width (${JSON.stringify(m.graph)})`);
        const v = m.viewport;
        assert.ok(v.x0 >= 0 && v.y0 >= 0 && v.x1 <= m.frame.w && v.y1 <= m.frame.h && v.x1 > v.x0 && v.y1 > v.y0, `${side}: viewport box inside the minimap (${JSON.stringify(v)})`);
        assert.ok(m.graphOnScreen.x1 <= m.minimapOnScreen.x0, `${side}: the fitted graph ends left of the minimap (${JSON.stringify(m)})`);
      }
      await screenshot(page, 'issue13-minimap');
    }));

  it('uses bundled icons with tooltips in both languages (item 11)', () =>
    withPage('icons', { width: 1500, height: 950 }, async (page) => {
      const frame = await open(page, COMPARE);
      const buttons = () => frame.$$eval('[data-testid=sider] button, [data-testid=boardHeader] button:not(.popover button)', (bs) =>
        bs.map((b) => ({ id: b.dataset.testid, svg: Boolean(b.querySelector('svg')), title: b.title, text: b.textContent.trim() })));
      const en = await buttons();
      assert.ok(en.length >= 10);
      for (const b of en) {
        assert.ok(b.svg, `${b.id} has an icon`);
        assert.ok(b.title, `${b.id} has a tooltip`);
        assert.equal(b.text, '', `${b.id} shows no glyph`);
      }
      await screenshot(page, 'issue13-icons-en');
      await frame.click('[data-testid=languageSiderButton]');
      const zh = await buttons();
      for (const b of zh) {
        const before = en.find((x) => x.id === b.id);
        assert.ok(b.title && b.title !== before?.title && /[\u4e00-\u9fff]/.test(b.title), `${b.id} tooltip in Chinese: ${b.title}`);
      }
    }));

  it('explains the conversion form: folders, msprobe flags and the result\'s name (item 7)', () =>
    withPage('convert-form', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, COMPARE);
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      const help = async (id) => frame.textContent(`[data-testid=${id}]`);
      assert.match(await help('npuPathHelp'), /-tp\b.*rank.*step/s);
      assert.match(await help('benchPathHelp'), /-gp\b/);
      assert.match(await help('outputPathHelp'), /-o\b/);
      assert.match(await help('layerMappingHelp'), /-lm\b/);
      assert.match(await help('overflowCheckCheckboxHelp'), /-oc\b/);
      assert.match(await help('fuzzyMatchCheckboxHelp'), /-fm\b/);
      assert.ok(await frame.getAttribute('[data-testid=conversionDocsLink]', 'href'));
      await frame.fill('[data-testid=outputPathInput]', 'my_run');
      assert.match(await help('conversionResultName'), /my_run\/build_YYYYMMDDhhmmss\.vis\.db/);
      await frame.selectOption('[data-testid=benchPathSelect]', DUMP);
      assert.match(await help('conversionResultName'), /\/compare_YYYYMMDDhhmmss\.vis\.db/);
      await screenshot(page, 'issue13-convert-form');
    }));
});
