// Links and the catalog in real TensorBoard + Chromium, under --path_prefix:
// - shareable links: the view (file, step, rank, micro step, selected node, expanded modules) is in
//   TensorBoard's address and behind "Copy link"; the link opens the same view in a fresh browser,
//   a reload keeps the expanded modules, a link to a file that is gone says so, and the page's own
//   address (what VS Code's TensorBoard view, without an address bar, gets from the button) works too;
// - a file being copied into the logdir is held back until it is complete: no dialog, no error;
// - reading the files leaves no `-wal`/`-shm` files beside them.
// Screenshots: tests/artifacts/issue13-link-*.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, repo, screenshot, sharedStack, until, withStackPage, pageAddress } from './harness.mjs';

const FIRST = 'compare_ms_stats';
const COMPARE = 'compare_tf_stats';
const PREFIX = '/ga-prefix';

/** Where a node's label bar is on screen (page coordinates), from the pane's own layout. */
async function nodePoint(frame, side, key) {
  const p = await until(frame, ([s, k]) => window.__graphAscend?.panes[s].screenOf(k) ?? null, [side, key]);
  const pane = await frame.$(`[data-testid=${side === 'Bench' ? 'benchGraph' : 'debugGraph'}]`);
  const box = await pane.boundingBox();
  return { x: box.x + p.x, y: box.y + p.y };
}

const loaded = (frame, run) =>
  until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
    && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, run);

/** A module of the NPU pane, not expanded, with child modules of its own when `parent` is given. */
const moduleUnder = (frame, parent) =>
  frame.evaluate((p) => {
    const h = window.__graphAscend.hier.NPU;
    const rootKey = Object.keys(h).find((k) => h[k].isRoot);
    const under = p ?? rootKey;
    return Object.keys(h).find((k) => h[k].parentNode === under && h[k].nodeType === 0 && !h[k].expand) ?? null;
  }, parent);

/** What the page shows, as a link must bring it back. */
const viewOf = (frame) =>
  frame.evaluate(() => {
    const a = window.__graphAscend;
    const open = (side) => Object.keys(a.hier[side]).filter((k) => a.hier[side][k].expand && !a.hier[side][k].isRoot).sort();
    return { run: a.meta.run, tag: a.meta.tag, step: a.meta.step, rank: a.meta.rank, micro: a.meta.microStep, node: a.selected?.key ?? null, npu: open('NPU'), bench: open('Bench') };
  });

describe('GRAPH_ASCEND links and the catalog', () => {
  const stack = sharedStack(before, after, () => makeLogdir([FIRST, COMPARE]), { pathPrefix: PREFIX });
  // Each page is a fresh browser context (its own storage: a colleague's browser).
  const withPage = (name, fn) => withStackPage(stack, `issue13-link-${name}`, { width: 1500, height: 950 }, fn);

  let link = '';
  let expected = null;

  it('puts the view in TensorBoard\'s address and behind "Copy link" (item 4)', () =>
    withPage('copy', async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await loaded(frame, FIRST);
      await frame.click('[data-testid=dataSiderButton]');
      await frame.selectOption('[data-testid=runSelect]', COMPARE);
      await frame.click('[data-testid=dataSiderButton]');
      await loaded(frame, COMPARE);
      // TensorBoard must not reload the plugin when the page writes its address.
      await frame.evaluate(() => (window.__sameDocument = true));

      // Expand a module, then a module inside it, then select a node inside that.
      const outer = await moduleUnder(frame);
      assert.ok(outer, 'a module to expand');
      let at = await nodePoint(frame, 'NPU', outer);
      await page.mouse.dblclick(at.x, at.y);
      await until(frame, (k) => window.__graphAscend.hier.NPU[k]?.expand, outer);
      const inner = await moduleUnder(frame, outer);
      const opened = [outer];
      if (inner) {
        at = await nodePoint(frame, 'NPU', inner);
        await page.mouse.dblclick(at.x, at.y);
        await until(frame, (k) => window.__graphAscend.hier.NPU[k]?.expand, inner);
        opened.push(inner);
      }
      const pick = await frame.evaluate((p) => Object.keys(window.__graphAscend.hier.NPU).find((k) => window.__graphAscend.hier.NPU[k].parentNode === p), opened[opened.length - 1]);
      at = await nodePoint(frame, 'NPU', pick);
      await page.mouse.click(at.x, at.y);
      await until(frame, (k) => window.__graphAscend.selected?.key === k, pick);
      expected = await viewOf(frame);
      for (const k of opened) assert.ok(expected.npu.includes(k), `${k} is expanded`);

      // TensorBoard's address shows the view, in its own hash format, and still shows the plugin.
      await until(frame, (k) => window.top.location.hash.includes(`ga_node=${encodeURIComponent(k)}`), pick);
      const address = new URL(page.url());
      assert.equal(address.pathname, `${PREFIX}/`);
      assert.match(address.hash, new RegExp(`^#graph_ascend&.*ga_run=${COMPARE}`));
      assert.match(decodeURIComponent(address.hash), new RegExp(`ga_open=\\[.*"${outer.replace(/\./g, '\\.')}"`));
      assert.equal(await frame.evaluate(() => window.__sameDocument), true, 'the plugin was not reloaded');

      await frame.click('[data-testid=copyLinkButton]');
      await until(frame, () => document.querySelector('[data-testid=shareLinkNote]')?.textContent);
      link = await frame.inputValue('[data-testid=shareLinkText]');
      assert.ok(link.startsWith(`${stack.tb.base}/#graph_ascend&`), link);
      await screenshot(page, 'issue13-link-copy');
    }));

  it('opens the same view from the link in a fresh browser, and keeps it across a reload (item 4)', () =>
    withPage('open', async (page) => {
      assert.ok(link, 'the previous test made a link');
      await page.goto(link);
      let frame = await appFrame(page);
      const restored = async () => {
        await loaded(frame, COMPARE);
        await until(frame, (k) => window.__graphAscend.selected?.key === k && window.__graphAscend.fileLoads === 0, expected.node);
        await until(frame, (n) => Object.values(window.__graphAscend.hier.NPU).filter((x) => x.expand && !x.isRoot).length >= n, expected.npu.length);
        assert.deepEqual(await viewOf(frame), expected);
      };
      await restored();
      await screenshot(page, 'issue13-link-opened');
      await page.reload();
      frame = await appFrame(page);
      await restored();
    }));

  it('says so when the linked file is gone (item 4)', () =>
    withPage('gone', async (page) => {
      const gone = link.replace(`ga_run=${COMPARE}`, 'ga_run=no_such_run');
      await page.goto(gone);
      const frame = await appFrame(page);
      await frame.waitForSelector('[data-testid=graphError]');
      assert.match(await frame.textContent('[data-testid=graphError]'), /no_such_run/);
      assert.equal(await frame.evaluate(() => window.__graphAscend.meta.run), '', 'no other file opened in its place');
      assert.ok(await frame.isVisible('[data-testid=dataPanel]'), 'the data panel is open to choose a file');
    }));

  it('gives a working link where there is no TensorBoard address (VS Code\'s view) (item 4)', () =>
    withPage('standalone', async (page) => {
      // The page on its own, as VS Code's webview shows it: its own address carries the view.
      await page.goto(`${stack.tb.base}/data/plugin/graph_ascend/index.html`);
      await page.waitForSelector('[data-testid=sider]');
      await until(page.mainFrame(), () => window.__graphAscend?.fileLoads === 0 && window.__graphAscend.meta.run !== '');
      await page.click('[data-testid=dataSiderButton]');
      await page.selectOption('[data-testid=runSelect]', COMPARE);
      await loaded(page.mainFrame(), COMPARE);
      await page.click('[data-testid=copyLinkButton]');
      await until(page.mainFrame(), () => document.querySelector('[data-testid=shareLinkNote]')?.textContent);
      const own = await page.inputValue('[data-testid=shareLinkText]');
      assert.ok(own.startsWith(`${stack.tb.base}/data/plugin/graph_ascend/index.html?`), own);
      assert.match(own, new RegExp(`run=${COMPARE}`));
      const other = await stack.browser.newContext();
      try {
        const p2 = await other.newPage();
        await p2.goto(own);
        await loaded(p2.mainFrame(), COMPARE);
      } finally {
        await other.close();
      }
    }));

  it('holds a file back while it is being copied in: no dialog, no error (item 3)', () =>
    withPage('copying', async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
      const src = path.join(repo, 'tests/fixtures/upstream_vis', COMPARE);
      const xz = spawnSync('xz', ['-dc', path.join(src, fs.readdirSync(src).find((f) => f.endsWith('.xz')))], { maxBuffer: 1 << 28 });
      const bytes = xz.stdout;
      fs.mkdirSync(path.join(stack.logdir, 'incoming'));
      const dest = path.join(stack.logdir, 'incoming', 'copy.vis.db');
      // A slow copy: a chunk every 300 ms for about 4 s (the catalog rescans meanwhile).
      const chunks = 14;
      const fd = fs.openSync(dest, 'w', 0o644);
      for (let i = 0; i < chunks; i++) {
        const from = Math.floor((bytes.length * i) / chunks);
        fs.writeSync(fd, bytes, from, Math.floor((bytes.length * (i + 1)) / chunks) - from);
        await page.waitForTimeout(300);
        const seen = await frame.evaluate(() => ({ errors: window.__graphAscend.store.catalogErrors.length, dialogs: document.querySelectorAll('.modal-overlay, [role=dialog]').length, notices: document.querySelectorAll('[data-notice]').length }));
        assert.deepEqual(seen, { errors: 0, dialogs: 0, notices: 0 }, `while ${i + 1}/${chunks} of the file is there`);
      }
      fs.closeSync(fd);
      await until(frame, () => window.__graphAscend.store.catalog.incoming?.tags.includes('copy'), undefined, 20_000);
      const after = await frame.evaluate(() => ({ errors: window.__graphAscend.store.catalogErrors.length, dialogs: document.querySelectorAll('.modal-overlay, [role=dialog]').length, notices: document.querySelectorAll('[data-notice]').length, shown: window.__graphAscend.errors }));
      assert.deepEqual(after, { errors: 0, dialogs: 0, notices: 0, shown: [] });
      await screenshot(page, 'issue13-link-copied-in');
    }));

  it('leaves no -wal/-shm files beside the files it reads (item 12)', () => {
    const beside = [];
    const walk = (d) => {
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(d, e.name));
        else if (/-(wal|shm)$/.test(e.name)) beside.push(path.join(d, e.name));
      }
    };
    walk(stack.logdir);
    assert.deepEqual(beside, []);
  });
});
