// The diagnosis at a glance, in real TensorBoard + Chromium:
// - a module holding a source is marked in "where the error is introduced" even when its own output agrees:
//   a generated bf16 case (tests/diagnosis/cases.json.xz, converted here with our converter) whose faulty
//   Linear weight (layers.1.mlp.fc2) leaves its top-level block's output within the tolerance learned for
//   blocks from the compare (another case's fault, in layers.2.mlp.fc1, moves its block beyond it). The
//   block's box stays "agrees with golden" but carries the outline and a badge with the count, checked on the
//   drawn canvas (the badge's pixels) and the box's state, not only in the answer;
// - one line per fault: on the two-rank fixture each fault is one line over ranks 0–1, worded as the sidecar's
//   summary; the line expands to its other occurrence, and a click on it switches to rank 1 and selects it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, repo, screenshot, sharedStack, until, withStackPage, pageAddress } from './harness.mjs';

const CASE = 'weight_mlp_L1_linear0_w1_s1_step0_32';
const BLOCK = 'Module.layers.1.Block.forward.0';
const SOURCE = 'Functional.linear.7.forward';
const DIST = 'compare_dist_ranks';
const FINE = 'rgb(226,241,226)';
const SOURCE_RED = [229, 72, 77];

/** Writes the case's target and golden dumps (as generated) and converts them into `dir/<CASE>/`. */
function convertCase(dir) {
  const set = JSON.parse(execFileSync('xz', ['-dc', path.join(repo, 'tests/diagnosis/cases.json.xz')], { maxBuffer: 1 << 28 }).toString('utf8'));
  const found = set.cases.find((c) => c.name === CASE);
  assert.ok(found, `${CASE} in the generated set`);
  const dumps = path.join(dir, '.dumps');
  const write = (run) => {
    for (const [rel, text] of Object.entries(set.runs[run])) {
      const file = path.join(dumps, run, rel);
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, text);
      fs.writeFileSync(path.join(path.dirname(file), 'stack.json'), '{}');
    }
    return path.join(dumps, run);
  };
  const target = write(found.target);
  const golden = write(found.golden);
  const binary = process.env.GRAPH_ASCEND_BINARY || path.join(repo, 'target/release/graph-ascend');
  execFileSync(binary, ['convert', '--target_path', target, '--golden_path', golden, '-o', path.join(dir, CASE)], { stdio: 'pipe' });
  fs.rmSync(dumps, { recursive: true, force: true });
}

describe('GRAPH_ASCEND diagnosis at a glance', () => {
  const stack = sharedStack(before, after, () => makeLogdir([DIST], convertCase));

  const openRun = async (page, run) => {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 1);
    if (await frame.evaluate(() => window.__graphAscend.meta.run) !== run) {
      await frame.click('[data-testid=dataSiderButton]');
      await frame.selectOption('[data-testid=runSelect]', run);
    }
    await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
      && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, run);
    return frame;
  };

  it('marks the top-level block that holds a source although its own output agrees', () =>
    withStackPage(stack, 'diagnosis-marks', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, CASE);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagGroup]');
      // The summary's `names` are drawn as code: the text without the backticks, the names in <code>.
      assert.match(await frame.textContent('[data-testid=diagGroup] >> nth=0'), /Functional\.linear \(1st call\) in layers\.1\.mlp\.fc2 — weight differs/);
      assert.deepEqual(await frame.$eval('[data-testid=diagGroupSummary]', (el) => [...el.querySelectorAll('code')].map((c) => c.textContent)),
        ['Functional.linear', 'layers.1.mlp.fc2']);
      // The source sits three levels down, inside collapsed modules: only the blocks are drawn.
      assert.equal(await frame.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), SOURCE), false);

      await frame.click('[data-testid=diagModeIntroduced]');
      await until(frame, (k) => (window.__graphAscend.panes.NPU.scene.byKey.get(k)?.mark ?? 0) > 0, BLOCK);
      const state = await frame.evaluate((k) => {
        const pane = window.__graphAscend.panes.NPU;
        const boxes = [...pane.scene.byKey.values()];
        return {
          block: { fill: pane.scene.byKey.get(k).fill, mark: pane.scene.byKey.get(k).mark },
          otherBlocks: boxes.filter((b) => /^Module\.layers\.\d+\.Block\.forward\.0$/.test(b.key) && b.key !== k).map((b) => [b.key, b.mark]),
          benchMarks: [...window.__graphAscend.panes.Bench.scene.byKey.values()].filter((b) => b.mark > 0).length,
        };
      }, BLOCK);
      // Its own verdict: agrees with golden (green), yet marked with its one source.
      assert.deepEqual(state.block, { fill: FINE, mark: 1 });
      assert.ok(state.otherBlocks.length >= 3, JSON.stringify(state.otherBlocks));
      for (const [key, mark] of state.otherBlocks) assert.equal(mark, 0, key);
      assert.equal(state.benchMarks, 0, 'the golden side is never marked');
      assert.match(await frame.textContent('[data-testid=legendSourcesInside]'), /holds a source inside/);

      // Drawn: the last frame marked the block, and the badge's pixels are the mark's red.
      await until(frame, (k) => window.__graphAscend.panes.NPU.lastMarked.includes(k), BLOCK);
      const pixel = await frame.evaluate((k) => {
        const pane = window.__graphAscend.panes.NPU;
        const b = pane.scene.byKey.get(k);
        const v = pane.view;
        const canvas = document.querySelector('[data-testid=debugCanvas]');
        const dpr = canvas.width / canvas.clientWidth;
        // Inside the badge's pill (11 units wide at the bar's right end, 2 units in), left of its digit.
        const gx = b.x + b.w - 2 - 11 + 2;
        const gy = b.y + 15 / 2;
        const x = Math.round((gx * v.scale + v.tx) * dpr);
        const y = Math.round((gy * v.scale + v.ty) * dpr);
        return { rgb: [...canvas.getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3)], marked: canvas.dataset.marked, scale: v.scale };
      }, BLOCK);
      assert.ok(pixel.scale * 15 >= 3, `the bar is big enough to draw marks: ${JSON.stringify(pixel)}`);
      for (let i = 0; i < 3; i++) assert.ok(Math.abs(pixel.rgb[i] - SOURCE_RED[i]) <= 12, `badge pixel ${JSON.stringify(pixel)}`);
      assert.ok(Number(pixel.marked) >= 1, JSON.stringify(pixel));
      await screenshot(page, 'diagnosis-marks');

      // Back to msprobe's colours: no mark.
      await frame.click('[data-testid=diagModeOutput]');
      await until(frame, (k) => window.__graphAscend.panes.NPU.scene.byKey.get(k)?.mark === 0 && window.__graphAscend.panes.NPU.lastMarked.length === 0, BLOCK);
    }));

  it('lists one line per fault over the ranks, and opens another occurrence on its rank', () =>
    withStackPage(stack, 'diagnosis-groups', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DIST);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagGroup]');
      const answer = await frame.evaluate(async () => {
        const m = window.__graphAscend.meta;
        const r = await fetch(`diagnosis?run=${encodeURIComponent(m.run)}&tag=${encodeURIComponent(m.tag)}&step=0&rank=0&top=200`);
        return r.json();
      });
      const groups = answer.data.groups;
      assert.equal(groups.length, 2, JSON.stringify(groups));
      // In English, each line is the sidecar's own summary; faults, not sources: ranks 0–1 on one line.
      const lines = await frame.$$eval('[data-testid=diagGroupSummary]', (els) => els.map((e) => e.textContent));
      assert.deepEqual(lines, groups.map((g) => g.summary.replaceAll('`', '')));
      for (const line of lines) assert.match(line, /ranks 0–1, step 0$/);
      assert.equal(await frame.locator('[data-testid=diagOccurrence]').count(), 0);

      // Expand the first fault: its other occurrence, on rank 1; a click goes there and selects it.
      await frame.click('[data-testid=diagGroupToggle] >> nth=0');
      await frame.waitForSelector('[data-testid=diagOccurrence]');
      const other = groups[0].others[0];
      assert.equal(other.rank, 1);
      assert.equal(await frame.locator('[data-testid=diagOccurrence]').count(), groups[0].others.length);
      assert.match(await frame.textContent('[data-testid=diagOccurrence] >> nth=0'), /step 0 · rank 1/);
      await frame.click('[data-testid=diagOccurrence] >> nth=0');
      await until(frame, (node) => window.__graphAscend.meta.rank === 1 && window.__graphAscend.selected?.side === 'NPU'
        && window.__graphAscend.selected.key === node, other.node);

      // The line itself opens the first occurrence, back on rank 0.
      await frame.click('[data-testid=diagGroup] >> nth=0');
      await until(frame, (node) => window.__graphAscend.meta.rank === 0 && window.__graphAscend.selected?.key === node, groups[0].node);

      // In Chinese, the lines are worded anew.
      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /调用|位于/.test(document.querySelector('[data-testid=diagGroupSummary]')?.textContent ?? ''));
      for (const text of await frame.$$eval('[data-testid=diagGroupSummary]', (els) => els.map((e) => e.textContent)))
        assert.doesNotMatch(text, /differs| call\)|ranks /, text);
      await screenshot(page, 'diagnosis-groups-zh');
    }));
});
