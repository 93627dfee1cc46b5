// A download that breaks off fails on the page (issue 42 item 3), in real TensorBoard + Chromium: the
// sidecar (the real one behind tests/shim/dying_sidecar.py) is killed after the CSV's first bytes went
// out; the plugin aborts the answer, so the page saves nothing and says the download failed. The next
// click, answered by a restarted sidecar, saves the whole file. Screenshot: tests/artifacts/download-failed.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PYTHON, appFrame, makeLogdir, pageAddress, repo, screenshot, sharedStack, until, withStackPage } from './harness.mjs';

const RUN = 'compare_tf_stats';
const CSV_HEADER = 'Step,Rank,NPU Node,Bench Node,';

/** TensorBoard's environment for a sidecar that dies once it has passed on part of its first CSV. */
function dyingSidecar() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-dying-'));
  const launcher = path.join(dir, 'graph-ascend-dying');
  fs.writeFileSync(launcher, `#!/bin/sh\nexec "${PYTHON}" "${path.join(repo, 'tests/shim/dying_sidecar.py')}" "$@"\n`, { mode: 0o755 });
  const real = process.env.GRAPH_ASCEND_BINARY || path.join(repo, 'target/release/graph-ascend');
  return { GRAPH_ASCEND_BINARY: launcher, DYING_SIDECAR_REAL: real, DYING_SIDECAR_LOG: path.join(dir, 'calls.log'), DYING_SIDECAR_METHOD: 'ExportCsv' };
}

describe('GRAPH_ASCEND download cut short', () => {
  const stack = sharedStack(before, after,
    () => makeLogdir([], (dir) => fs.cpSync(path.join(repo, 'examples', RUN), path.join(dir, RUN), { recursive: true })),
    { env: dyingSidecar() });

  it('says the CSV download failed and saves nothing, then saves it whole', () =>
    withStackPage(stack, 'download-failed', { width: 1500, height: 950 }, async (page) => {
      const saved = [];
      page.on('download', (d) => saved.push(d));
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await until(frame, (run) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === run
        && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, RUN);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagDownload]');
      await frame.click('[data-testid=diagDownload]');
      const toast = await frame.waitForSelector('[data-testid=errorToast]', { timeout: 60_000 });
      const text = await toast.textContent();
      assert.match(text, /exportCsv: the download failed: the connection closed after \d+(\.\d)? (B|kB|MB), before the end of the file; nothing was saved/, text);
      await screenshot(page, 'download-failed');
      await until(frame, () => !document.querySelector('[data-testid=csvProgress]'));
      assert.equal(saved.length, 0, 'nothing was saved');
      assert.match(stack.tb.log(), /broke off/);

      const [download] = await Promise.all([page.waitForEvent('download', { timeout: 60_000 }), frame.click('[data-testid=diagDownload]')]);
      const csv = fs.readFileSync(await download.path(), 'utf8');
      assert.ok(csv.startsWith(CSV_HEADER), csv.slice(0, 200));
      assert.ok(csv.endsWith('\r\n') || csv.endsWith('\n'), 'the file ends with a whole row');
    }));
});
