// Landing on the fault (issue 40), on a compare whose only fault is at a later step and on another
// rank: generated dumps of 3 steps × 2 ranks (the test-support crate's `gen_dump`), the target a copy
// of the golden run but for step 2 rank 1, taken from a perturbed run; converted by `graph-ascend
// convert`. A report of it (`graph-ascend report`), opened from file:// with the network blocked, opens
// on the first source: its step and rank, the Diagnosis panel open, the colours "where the error is
// introduced", the source selected with its path expanded; its selectors list what it holds and a
// step and rank it does not hold is said in place. A report made at another point says where the
// first source is and goes there in one click. In TensorBoard, the line above the panes names the
// file, step, rank and micro-batch and goes to the first source; the toolbar's menus close on Escape
// and outside presses.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { appFrame, makeLogdir, pageAddress, repo, screenshot, sharedStack, testkitBinary, until, withStackPage } from './harness.mjs';
import { embeddedData, openReportFromDisk } from './report_view.mjs';

const BINARY = process.env.GRAPH_ASCEND_BINARY || path.join(repo, 'target/release/graph-ascend');
const RUN = 'late_fault';
/** The colour of a source in the mode "where the error is introduced" (diagnosis.ts DIAGNOSIS_COLORS). */
const SOURCE_FILL = 'rgb(229,72,77)';

function run(bin, args) {
  const r = spawnSync(bin, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${path.basename(bin)} ${args.join(' ')}: ${r.status}\n${r.stderr}`);
  return r;
}

/** `dir/late_fault/<name>.vis.db`: a compare of 3 steps × 2 ranks whose only differences are at step 2, rank 1. */
function makeLateFault(dir) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-late-'));
  try {
    const gen = testkitBinary('gen_dump');
    const golden = path.join(work, 'golden');
    const perturbed = path.join(work, 'perturbed');
    const target = path.join(work, 'target');
    run(gen, [golden, '90', '--ranks', '2', '--steps', '3']);
    run(gen, [perturbed, '90', '--perturb', '--ranks', '2', '--steps', '3']);
    fs.cpSync(golden, target, { recursive: true });
    fs.rmSync(path.join(target, 'step2/rank1'), { recursive: true });
    fs.cpSync(path.join(perturbed, 'step2/rank1'), path.join(target, 'step2/rank1'), { recursive: true });
    const out = path.join(work, 'out');
    run(BINARY, ['convert', '-tp', target, '-gp', golden, '-o', out]);
    const file = fs.readdirSync(out).find((f) => f.endsWith('.vis.db'));
    fs.mkdirSync(path.join(dir, RUN));
    fs.copyFileSync(path.join(out, file), path.join(dir, RUN, `${RUN}.vis.db`));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

/** The page's store, read in the page (or frame). */
const where = (frame) => frame.evaluate(() => {
  const g = window.__graphAscend;
  return { step: g.meta.step, rank: g.meta.rank, mode: g.store.mode, tab: g.store.tab, selected: g.selected, errors: [...g.errors] };
});

describe('GRAPH_ASCEND landing on the fault', () => {
  const stack = sharedStack(before, after, () => makeLogdir([], makeLateFault));
  let reports;
  before(() => {
    reports = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-land-'));
  });
  after(() => {
    if (reports) fs.rmSync(reports, { recursive: true, force: true });
  });
  const file = () => path.join(stack.logdir, RUN, `${RUN}.vis.db`);

  it('opens a report of a fault at step 2 on rank 1 on its first source, from disk with no network', async () => {
    const out = path.join(reports, 'late.html');
    const made = run(BINARY, ['report', file(), '-o', out]);
    const data = embeddedData(fs.readFileSync(out, 'utf8'));
    assert.deepEqual([data.start.step, data.start.rank], [2, 1], made.stderr);
    assert.ok(data.start.node, 'the report names its first source');
    // The source's step and rank first, then those that follow it; the earlier steps by name.
    assert.deepEqual(data.points[0], { ...data.points[0], step: 2, rank: 1 });
    assert.deepEqual(data.points.map((p) => `${p.step}|${p.rank}`), ['2|1', '2|0']);
    assert.match(data.provenance.notHeld, /step 0: ranks 0–1; step 1: ranks 0–1/);
    await openReportFromDisk(stack.browser, out, 'landing-report', async (page) => {
      const node = data.start.node;
      await until(page, (k) => window.__graphAscend.selected?.key === k && Boolean(window.__graphAscend.panes.NPU.scene?.byKey.get(k)), node);
      await until(page, ([k, c]) => window.__graphAscend.panes.NPU.scene.byKey.get(k)?.fill === c, [node, SOURCE_FILL]);
      const w = await where(page);
      assert.deepEqual([w.step, w.rank, w.mode, w.tab], [2, 1, 'diagnosis', 'diagnosis']);
      assert.deepEqual(w.errors, [], 'no error said');
      assert.equal(await page.locator('[data-testid=toasts] .toast.error').count(), 0);
      await page.waitForSelector('[data-testid=diagnosisPanel] [data-testid=diagGroup]');
      // The source in view, clear of the minimap.
      assert.ok(await page.evaluate((k) => window.__graphAscend.panes.NPU.screenOf(k) !== null, node));
      assert.match(await page.textContent('[data-testid=whereLine]'), /step 2 · rank 1/);
      await page.waitForSelector('[data-testid=whereSourceHere]');
      // The map needs the server: not offered.
      assert.equal(await page.isVisible('[data-testid=mapSiderButton]'), false);
      await screenshot(page, 'landing-report');
      // The selectors: what the report holds.
      await page.click('[data-testid=dataSiderButton]');
      const options = (sel) => page.$$eval(`[data-testid=${sel}] option`, (os) => os.map((o) => o.value));
      assert.deepEqual(await options('stepSelect'), ['2']);
      assert.deepEqual(await options('rankSelect'), ['0', '1']);
      // Rank 0 of step 2 is held: drawn, its own verdicts.
      await page.selectOption('[data-testid=rankSelect]', '0');
      await until(page, () => window.__graphAscend.meta.rank === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 1);
      // A step and rank it does not hold (a link, a fault's other occurrence): said in place, no error.
      await page.evaluate(() => window.__graphAscend.changeView({ step: 0, rank: 0 }));
      await page.waitForSelector('[data-testid=reportNotHeld]');
      assert.match(await page.textContent('[data-testid=reportNotHeld]'), /Step 0 · rank 0 is not in this report\. It holds: step 2 · rank 1, step 2 · rank 0/);
      assert.deepEqual((await where(page)).errors, []);
      // Its "go" goes back to the first source.
      await page.click('[data-testid=whereGo]');
      await until(page, (k) => window.__graphAscend.meta.step === 2 && window.__graphAscend.meta.rank === 1 && window.__graphAscend.selected?.key === k, node);
      assert.deepEqual((await where(page)).errors, []);
    });
  });

  it('holds the chosen step and rank first (--step/--rank) and goes to the first source from there', async () => {
    const out = path.join(reports, 'step0.html');
    run(BINARY, ['report', file(), '-o', out, '--step', '0', '--rank', '0']);
    const data = embeddedData(fs.readFileSync(out, 'utf8'));
    assert.deepEqual(data.points.slice(0, 2).map((p) => `${p.step}|${p.rank}`), ['0|0', '2|1']);
    await openReportFromDisk(stack.browser, out, 'landing-report-step0', async (page) => {
      await until(page, () => window.__graphAscend.meta.step === 0 && window.__graphAscend.meta.rank === 0);
      await page.waitForSelector('[data-testid=whereSource]');
      assert.match(await page.textContent('[data-testid=whereSource]'), /The first source is at step 2 · rank 1/);
      await page.click('[data-testid=whereGo]');
      const node = await page.evaluate(() => window.__graphAscend.store.diagnosis.data.sources[0].node);
      await until(page, (k) => {
        const g = window.__graphAscend;
        return g.meta.step === 2 && g.meta.rank === 1 && g.selected?.key === k && Boolean(g.panes.NPU.scene?.byKey.get(k));
      }, node);
      assert.deepEqual((await where(page)).errors, []);
    });
  });

  it('says where the page is above the panes, goes to the first source, and closes its menus on Escape and outside presses', () =>
    withStackPage(stack, 'landing-page', { width: 1280, height: 720 }, async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
        && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, RUN, 30_000);
      const line = () => frame.textContent('[data-testid=whereLine]');
      assert.match(await line(), new RegExp(`${RUN}/${RUN}`));
      assert.match(await line(), /step 0 · rank 0 · all micro-batches/);
      await frame.waitForSelector('[data-testid=whereSource]', { timeout: 30_000 });
      assert.match(await frame.textContent('[data-testid=whereSource]'), /The first source is at step 2 · rank 1 — go/);
      await screenshot(page, 'landing-where');
      await frame.click('[data-testid=whereGo]');
      await until(frame, () => window.__graphAscend.meta.step === 2 && window.__graphAscend.meta.rank === 1 && window.__graphAscend.selected !== null, null, 30_000);
      assert.match(await line(), /step 2 · rank 1/);
      await frame.waitForSelector('[data-testid=whereSourceHere]');
      // In Chinese, the line's words are Chinese.
      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /全部 micro-batch/.test(document.querySelector('[data-testid=whereLine]')?.textContent ?? ''));
      await frame.click('[data-testid=languageSiderButton]');

      // The menus: Escape closes; a press elsewhere closes; opening one closes another.
      const shown = (id) => frame.isVisible(`[data-testid=${id}]`);
      await frame.click('[data-testid=reportDownload]');
      assert.equal(await shown('reportMenu'), true);
      await frame.press('[data-testid=reportDownload]', 'Escape');
      assert.equal(await shown('reportMenu'), false, 'Escape closes the report menu');
      await frame.click('[data-testid=reportDownload]');
      assert.equal(await shown('reportMenu'), true);
      const pane = await (await frame.$('[data-testid=debugGraph]')).boundingBox();
      const box = await (await frame.frameElement()).boundingBox();
      await page.mouse.click(box.x + pane.x + 30, box.y + pane.y + pane.height - 30);
      assert.equal(await shown('reportMenu'), false, 'a press outside closes the report menu');
      await frame.click('[data-testid=reportDownload]');
      await frame.click('[data-testid=pictureButton]');
      assert.equal(await shown('pictureList'), true);
      assert.equal(await shown('reportMenu'), false, 'opening the picture menu closes the report menu');
      await frame.click('[data-testid=shortcutsButton]');
      assert.equal(await shown('pictureList'), false);
      await page.keyboard.press('Escape');
      assert.equal(await shown('shortcutsList'), false);
    }));
});
