// The divergence map in real TensorBoard + Chromium, on a multi-step, multi-rank compare: the two-rank
// fixture (msprobe's file, no table of our own: the map is computed on first use) with its step copied to
// steps 1 and 2 here. The Map panel draws every step × rank; hovering a cell gives its numbers; a click on
// a marked cell (one holding a source) of a later step and another rank opens that step and rank with the
// cell's module selected; "First source" opens the diagnosis's first source; a row's name opens it to the
// next depth.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, screenshot, sharedStack, testkitBinary, until, withStackPage, pageAddress } from './harness.mjs';

const CASE = 'compare_dist_ranks';
const RUN = 'dist_steps';
const STEPS = 3;

/** Copies the fixture's step 0 (every rank) to steps 1..STEPS-1, as a run of several steps would hold them. */
function makeSteps(dir) {
  const src = path.join(dir, CASE);
  const file = fs.readdirSync(src).find((f) => f.endsWith('.vis.db'));
  fs.mkdirSync(path.join(dir, RUN));
  const dst = path.join(dir, RUN, file);
  fs.copyFileSync(path.join(src, file), dst);
  execFileSync(testkitBinary('copy_steps'), [dst, String(STEPS)], { stdio: 'pipe' });
  fs.rmSync(src, { recursive: true, force: true });
}

describe('GRAPH_ASCEND divergence map', () => {
  const stack = sharedStack(before, after, () => makeLogdir([CASE], makeSteps));

  const openMap = async (page) => {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
      && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, RUN, 30_000);
    await frame.click('[data-testid=mapSiderButton]');
    await frame.waitForSelector('[data-testid=mapSummary]', { timeout: 60_000 });
    // The summary comes with the answer; the canvas draws it on the next animation frame.
    await until(frame, () => window.__graphAscend.mapPanel.drawn !== null, null, 30_000);
    return frame;
  };

  /** A point of the app's frame in the page's coordinates (the app lives in TensorBoard's plugin iframe). */
  const onPage = async (frame, p) => {
    const box = await (await frame.frameElement()).boundingBox();
    return { x: box.x + p.x, y: box.y + p.y };
  };

  /** The map the panel drew (its answer). */
  const drawnMap = (frame) => frame.evaluate(() => window.__graphAscend.mapPanel.drawn);

  it('draws every step × rank, says a cell\'s numbers, and a click on a marked cell opens its step, rank and module', () =>
    withStackPage(stack, 'divergence-map', { width: 1500, height: 950 }, async (page) => {
      const frame = await openMap(page);
      const map = await drawnMap(frame);
      assert.deepEqual(map.steps, [0, 1, 2]);
      assert.deepEqual(map.ranks, [0, 1]);
      // Wide enough: one column per step and rank, none merged.
      assert.equal(map.columns.length, STEPS * 2, JSON.stringify(map.columns));
      assert.match(await frame.textContent('[data-testid=mapSummary]'), /3 step\(s\) × 2 rank\(s\)/);
      assert.ok(Number(await frame.getAttribute('[data-testid=mapCanvas]', 'data-cells')) > 0);

      // The marked cell of the latest step on rank 1 (elsewhere than the view the file opened on).
      const marked = [];
      map.bands.forEach((b, bi) => b.rows.forEach((r, ri) => r.cells.forEach((c, ci) => {
        if (c.held && c.sources > 0) marked.push({ band: bi, row: ri, column: ci, cell: c, label: r.label });
      })));
      assert.ok(marked.length > 0, 'the map marks the cells holding a source');
      const pick = marked.filter((m) => m.cell.rank === 1).sort((a, b) => b.cell.step - a.cell.step)[0];
      assert.ok(pick && pick.cell.step > 0, JSON.stringify(marked.map((m) => [m.cell.step, m.cell.rank])));
      const inFrame = await frame.evaluate((m) => window.__graphAscend.mapPanel.cellPoint(m.band, m.row, m.column), pick);
      assert.ok(inFrame, 'the marked cell is on the map');
      const point = await onPage(frame, inFrame);

      // Hover: the numbers, the place, the source inside.
      await page.mouse.move(point.x, point.y);
      await frame.waitForSelector('[data-testid=mapTip]:visible');
      const tip = await frame.textContent('[data-testid=mapTip]');
      assert.match(tip, new RegExp(`step ${pick.cell.step} · rank 1`));
      assert.match(tip, /source\(s\) inside/);
      assert.match(tip, /error .* \/ tolerance .* = .*×/);
      await screenshot(page, 'divergence-map');

      // Click: the tooltip closes; that step and the source's rank, the first source inside the module
      // selected with its path expanded on the target side, in the colours "where the error is introduced".
      await page.mouse.click(point.x, point.y);
      assert.equal(await frame.isVisible('[data-testid=mapTip]'), false, 'the tooltip closes');
      const target = { step: pick.cell.step, rank: pick.cell.source_rank ?? pick.cell.rank, node: pick.cell.source };
      assert.ok(target.node, 'the marked cell names its first source');
      await until(frame, (c) => {
        const g = window.__graphAscend;
        return g.meta.step === c.step && g.meta.rank === c.rank && g.selected?.side === 'NPU' && g.selected.key === c.node;
      }, target, 30_000);
      assert.equal(await frame.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), target.node), true, 'its path is expanded');
      assert.equal(await frame.evaluate(() => window.__graphAscend.store.mode), 'diagnosis');
      await until(frame, (k) => window.__graphAscend.panes.NPU.scene.byKey.get(k)?.fill === 'rgb(229,72,77)', target.node, 30_000);
      assert.equal(await frame.inputValue('[data-testid=mapDepth]'), '0', 'the panel stays open on its map');
      await screenshot(page, 'divergence-map-clicked');

      // "sources only": the columns holding a source, every one of them marked somewhere.
      await frame.check('[data-testid=mapSourcesOnly]');
      await until(frame, () => window.__graphAscend.mapPanel.drawn && window.__graphAscend.mapPanel.view.columns > 0);
      const only = await drawnMap(frame);
      const withSources = new Set(marked.map((m) => m.column)).size;
      assert.equal(only.columns.length, withSources, JSON.stringify(only.columns));
      assert.ok(only.columns.every((_, k) => only.bands.some((b) => b.rows.some((r) => r.cells[k]?.sources > 0))));
      await frame.uncheck('[data-testid=mapSourcesOnly]');
      await until(frame, (n) => window.__graphAscend.mapPanel.drawn?.columns.length === n, STEPS * 2);
    }));

  it('opens the first source in one click, and opens a row to the next depth', () =>
    withStackPage(stack, 'divergence-map-first', { width: 1500, height: 950 }, async (page) => {
      const frame = await openMap(page);
      const map = await drawnMap(frame);
      assert.ok(map.first_source, 'the map knows the first source');
      await frame.click('[data-testid=mapFirstSource]');
      await until(frame, (f) => {
        const g = window.__graphAscend;
        return g.meta.step === f.step && g.meta.rank === f.rank && g.selected?.key === f.node;
      }, map.first_source, 30_000);

      // A block's name (layers.0, which holds modules): its modules one level deeper appear under it.
      const before = Number(await frame.getAttribute('[data-testid=mapCanvas]', 'data-lines'));
      const at = await frame.evaluate(() => {
        const panel = window.__graphAscend.mapPanel;
        const s = panel.scrollElement;
        s.scrollTop = 0;
        s.scrollLeft = 0;
        panel.draw();
        const line = panel.lines.findIndex((l) => l.kind === 'row' && l.direction === 'forward' && l.row.label === 'layers.0');
        const r = s.getBoundingClientRect();
        // Below the step headers and rank ticks (32 px), rows of 16 px; the names on the left.
        return { line, x: r.left + 40, y: r.top + 32 + line * 16 + 8 };
      });
      assert.ok(at.line > 0, 'layers.0 is a row of the forward band');
      const label = await onPage(frame, at);
      await page.mouse.click(label.x, label.y);
      await until(frame, (n) => Number(document.querySelector('[data-testid=mapCanvas]')?.dataset.lines || 0) > n, before, 60_000);
      const opened = await frame.evaluate(() => window.__graphAscend.mapPanel.lines.filter((l) => l.kind === 'row' && l.indent === 1).map((l) => l.row.label));
      assert.ok(opened.length > 0 && opened.every((l) => l.startsWith('layers.0.')), JSON.stringify(opened));

      // In Chinese, the panel's words are Chinese.
      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /个 step/.test(document.querySelector('[data-testid=mapSummary]')?.textContent ?? ''));
      await screenshot(page, 'divergence-map-zh');
    }));
});
