// The self-contained report (`graph-ascend report`, docs/report.md): built from the demo's compare file,
// opened from file:// in Chromium with every request that is not file:// aborted (no server, no network).
// The page draws both graphs from the report's data, lists the diagnosis, and a click on the first source
// opens its path and shows its details; a node named like markup renders as text; the report's corner
// names the file and what is left out.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { launchBrowser, repo, screenshot, until } from './harness.mjs';

const DEMO = path.join(repo, 'examples/compare_tf_stats/compare_20261122090320.vis.db');
const FIRST = 'Functional.layer_norm.3.forward';
const BINARY = process.env.GRAPH_ASCEND_BINARY || path.join(repo, 'target/release/graph-ascend');

function report(file, out, extra = []) {
  const r = spawnSync(BINARY, ['report', file, '-o', out, ...extra], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`graph-ascend report: ${r.status}\n${r.stderr}`);
  return r.stderr;
}

describe('GRAPH_ASCEND report', () => {
  let dir;
  let browser;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-report-'));
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The report opened from disk; every request that leaves file:// is aborted and counted. */
  const open = async (file, name, fn) => {
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
  };

  it('opens from disk with no network: the diagnosis, the first source one click away, its details', async () => {
    const out = path.join(dir, 'demo.html');
    report(DEMO, out);
    await open(out, 'report', async (page) => {
      assert.ok(Number(await page.getAttribute('[data-testid=debugGraph]', 'data-nodes')) > 1, 'the target graph is drawn');
      await page.click('[data-testid=diagnosisSiderButton]');
      await page.waitForSelector('[data-testid=diagGroup]');
      const first = page.locator('[data-testid=diagGroup]').first();
      assert.match(await first.textContent(), new RegExp(FIRST.replace(/\./g, '\\.')));
      await first.click();
      await until(page, (k) => window.__graphAscend.selected?.side === 'NPU' && window.__graphAscend.selected.key === k, FIRST);
      assert.ok(await page.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), FIRST), 'its ancestors are open');
      await page.waitForSelector('[data-testid=detailsTable]');
      assert.ok((await page.textContent('[data-testid=debugNodeName]')).includes(FIRST));
      assert.match(await page.textContent('[data-testid=detailsTable]'), /output\.0/);
      // Its module collapses and opens again from the views laid out in advance.
      const parent = await page.evaluate((k) => window.__graphAscend.hier.NPU[k].parentNode, FIRST);
      await page.evaluate((p) => window.__graphAscend.toggleNode('NPU', p, false), parent);
      await until(page, (k) => !window.__graphAscend.panes.NPU.scene.byKey.get(k), FIRST);
      await page.evaluate((p) => window.__graphAscend.toggleNode('NPU', p, false), parent);
      await until(page, (k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), FIRST);
      // The report's corner: where it came from, what it leaves out.
      await page.click('[data-testid=reportInfo]');
      const card = await page.textContent('[data-testid=reportCard]');
      assert.match(card, /compare_20261122090320\.vis\.db/);
      assert.match(card, /graph-ascend \d+\.\d+\.\d+/);
      assert.ok((await page.locator('[data-testid=reportLeftOut] li').count()) >= 1);
      await screenshot(page, 'report');
    });
  });

  it('renders a node named like markup as text', async () => {
    // A copy of the demo whose first source is named `</script><script>…`.
    const evil = '</script><script>window.__pwned=1</script>';
    const copy = path.join(dir, 'evil.vis.db');
    fs.copyFileSync(DEMO, copy);
    const py = process.env.GA_PYTHON || 'python3';
    const sql = spawnSync(py, ['-c', `
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for t in ('tb_nodes',):
    db.execute(f"UPDATE {t} SET node_name = replace(node_name, ?, ?), up_node = replace(up_node, ?, ?), sub_nodes = replace(sub_nodes, ?, ?), matched_node_link = replace(matched_node_link, ?, ?)",
               (sys.argv[2], sys.argv[3]) * 4)
db.commit()
`, copy, FIRST, evil], { encoding: 'utf8' });
    assert.equal(sql.status, 0, sql.stderr);
    const out = path.join(dir, 'evil.html');
    report(copy, out, ['--no-paths']);
    const html = fs.readFileSync(out, 'utf8');
    assert.ok(!html.includes(evil), 'the name is escaped in the HTML');
    await open(out, 'report-evil', async (page) => {
      assert.equal(await page.evaluate(() => window.__pwned), undefined, 'no script from the data ran');
      await page.click('[data-testid=diagnosisSiderButton]');
      await page.waitForSelector('[data-testid=diagGroup]');
      assert.ok((await page.locator('[data-testid=diagGroup]').first().textContent()).includes(evil), 'the name is shown as text');
    });
  });
});
