// The page's "Download report" (docs/report.md), through real TensorBoard, its sidecar and Chromium:
// the toolbar's menu downloads the shown file's report (one HTML file, its progress shown while the
// sidecar makes it and the bytes come), which then opens from file:// with the network blocked and
// shows the diagnosis and the first source's details; its "without stacks and paths" entry downloads
// one with no stack and no folder in it. Screenshots: tests/artifacts/report-download*.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, pageAddress, repo, screenshot, sharedStack, until, withStackPage } from './harness.mjs';
import { assertFirstSourceShown, assertSelfContained, openReportFromDisk } from './report_view.mjs';

const DEMO = 'compare_tf_stats';

function logdir() {
  return makeLogdir([], (dir) => fs.cpSync(path.join(repo, 'examples', DEMO), path.join(dir, DEMO), { recursive: true }));
}

/** Every stack in a report's data (the details' `stack_info`). */
function stacks(data) {
  return data.points.flatMap((pt) => Object.values(pt.panes)).flatMap((p) => Object.values(p.details).flatMap((d) => d?.stack_info ?? []));
}

describe('GRAPH_ASCEND Download report', () => {
  const stack = sharedStack(before, after, logdir);

  /** Opens the demo, clicks the report menu's `entry`, answers the download and the progress the menu showed. */
  const download = async (page, entry) => {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 0);
    // Every text the progress line shows, however short-lived.
    await frame.evaluate(() => {
      window.__reportProgress = [];
      new MutationObserver(() => {
        const el = document.querySelector('[data-testid=reportProgress]');
        const text = el && !el.hidden ? el.textContent : '';
        if (text && text !== window.__reportProgress.at(-1)) window.__reportProgress.push(text);
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    await frame.click('[data-testid=reportDownload]');
    await frame.waitForSelector(`[data-testid=${entry}]`);
    const [file] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), frame.click(`[data-testid=${entry}]`)]);
    const seen = await frame.evaluate(() => window.__reportProgress);
    // Done: the entries work again and the progress line is gone.
    await until(frame, () => !document.querySelector('[data-testid=reportDownloadWhole]').disabled
      && document.querySelector('[data-testid=reportProgress]').hidden);
    return { file, seen, frame };
  };

  it('downloads the report, showing its progress; it opens from disk with no network', () =>
    withStackPage(stack, 'report-download', { width: 1500, height: 950 }, async (page) => {
      const { file, seen } = await download(page, 'reportDownloadWhole');
      assert.match(file.suggestedFilename(), /^compare_\d+_report\.html$/);
      assert.match(seen[0] ?? '', /Preparing the report/, `progress shown: ${JSON.stringify(seen)}`);
      assert.ok(seen.some((p) => /\d+(\.\d)? (B|kB|MB) received/.test(p)), `bytes received shown: ${JSON.stringify(seen)}`);
      await screenshot(page, 'report-download-page');
      const saved = path.join(stack.logdir, file.suggestedFilename());
      await file.saveAs(saved);
      const data = assertSelfContained(saved);
      assert.equal(data.provenance.noPaths, false);
      assert.ok(stacks(data).length > 0, 'the whole report has the stacks');
      await openReportFromDisk(stack.browser, saved, 'report-download', async (report) => {
        await assertFirstSourceShown(report);
        await screenshot(report, 'report-download');
      });
    }));

  it('downloads a report without stacks and paths from its menu entry', () =>
    withStackPage(stack, 'report-download-no-paths', { width: 1500, height: 950 }, async (page) => {
      const { file, frame } = await download(page, 'reportDownloadNoPaths');
      const saved = path.join(stack.logdir, `no-paths-${file.suggestedFilename()}`);
      await file.saveAs(saved);
      const data = assertSelfContained(saved);
      assert.equal(data.provenance.noPaths, true);
      assert.deepEqual(stacks(data), [], 'no stack');
      assert.ok(!fs.readFileSync(saved, 'utf8').includes(stack.logdir), 'no folder of the server');
      assert.ok(data.leftOut.some((x) => /stacks and paths/.test(x)), 'it says what it left out');
      assert.match(await frame.textContent('[data-testid=reportDownloadNoPaths]'), /Without stacks and paths/);
      await openReportFromDisk(stack.browser, saved, 'report-download-no-paths', assertFirstSourceShown);
    }));
});
