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
import { launchBrowser, repo, screenshot, until } from './harness.mjs';
import { assertFirstSourceShown, FIRST_SOURCE as FIRST, openReportFromDisk } from './report_view.mjs';

const DEMO = path.join(repo, 'examples/compare_tf_stats/compare_20261122090320.vis.db');
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

  const open = (file, name, fn) => openReportFromDisk(browser, file, name, fn);

  it('opens from disk with no network: the diagnosis, the first source one click away, its details', async () => {
    const out = path.join(dir, 'demo.html');
    report(DEMO, out);
    await open(out, 'report', async (page) => {
      await assertFirstSourceShown(page);
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
      if (!(await page.$('[data-testid=diagnosisPanel]'))) await page.click('[data-testid=diagnosisSiderButton]');
      await page.waitForSelector('[data-testid=diagGroup]');
      assert.ok((await page.locator('[data-testid=diagGroup]').first().textContent()).includes(evil), 'the name is shown as text');
    });
  });
});
