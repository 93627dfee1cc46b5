// The diagnosis on the page, in real TensorBoard + Chromium: the demo's compare file (examples/compare_tf_stats),
// the Diagnosis panel lists the injected faults (one line each) with their reasons, a click on the first
// expands its ancestors and selects it in the graph, the colour mode "where the error is introduced"
// paints it as a source, and "Download CSV" saves the sidecar's CSV (text/csv, msprobe's columns).
// Reasons are worded from their parts in the page's language (English as the sidecar words it).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, makeLogdir, repo, screenshot, sharedStack, until, withStackPage, pageAddress } from './harness.mjs';

const RUN = 'compare_tf_stats';
const FIRST = 'Functional.layer_norm.3.forward';
const CSV_HEADER = 'Step,Rank,NPU Node,Bench Node,Role,NPU Name,Bench Name,NPU Dtype,Bench Dtype,';
const SOURCE_COLOR = 'rgb(229,72,77)';

describe('GRAPH_ASCEND diagnosis', () => {
  const stack = sharedStack(before, after, () =>
    makeLogdir([], (dir) => fs.cpSync(path.join(repo, 'examples', RUN), path.join(dir, RUN), { recursive: true })));

  const openDemo = async (page) => {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, (run) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === run
      && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, RUN);
    return frame;
  };

  /** The `diagnosis` requests the page sends from now on: whether each asks for the verdicts. */
  const diagnosisRequests = (page) => {
    const sent = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.endsWith('/diagnosis')) sent.push({ states: u.searchParams.has('states') });
    });
    return sent;
  };
  /** Long enough for a request sent twice to be seen (a duplicate follows within tens of ms). */
  const SETTLE_MS = 1000;

  it('lists the faults, and the first one is one click away', () =>
    withStackPage(stack, 'diagnosis', { width: 1500, height: 950 }, async (page) => {
      const sent = diagnosisRequests(page);
      const frame = await openDemo(page);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagGroup]');
      // A click on the panel asks for the list once.
      await page.waitForTimeout(SETTLE_MS);
      assert.deepEqual(sent, [{ states: false }]);
      const first = frame.locator('[data-testid=diagGroup]').first();
      assert.match(await first.textContent(), new RegExp(FIRST.replace(/\./g, '\\.')));
      assert.match(await first.locator('[data-testid=diagGroupSummary]').textContent(), /^Functional\.layer_norm \(1st call\) in layers\.1\.ln2 — eps differs — rank 0, step 0$/);
      // The names are code (the summary's Markdown backticks rendered, none shown).
      assert.deepEqual(await first.locator('[data-testid=diagGroupSummary] code').allTextContents(), ['Functional.layer_norm', 'layers.1.ln2']);
      assert.match(await first.locator('[data-testid=diagReason]').textContent(), /argument eps differs/);
      assert.equal(await frame.locator('[data-testid=diagGroup]').count(), 2);
      // Not shown yet: it sits inside collapsed modules.
      assert.equal(await frame.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), FIRST), false);

      await first.click();
      await until(frame, (k) => window.__graphAscend.selected?.side === 'NPU' && window.__graphAscend.selected.key === k, FIRST);
      assert.ok(await frame.evaluate((k) => Boolean(window.__graphAscend.panes.NPU.scene.byKey.get(k)), FIRST), 'ancestors expanded');
      assert.equal(await frame.evaluate(() => window.__graphAscend.panes.NPU.selected), FIRST);
      await frame.waitForSelector('[data-testid=detailsTable]');
      assert.ok((await frame.textContent('[data-testid=debugNodeName]')).includes(FIRST));

      // Where the error is introduced: the source red, its golden side white, the legend says so.
      await frame.click('[data-testid=diagModeIntroduced]');
      await until(frame, ([k, c]) => window.__graphAscend.panes.NPU.scene.byKey.get(k)?.fill === c, [FIRST, SOURCE_COLOR]);
      assert.match(await frame.textContent('[data-testid=colorLegend]'), /error introduced here/);
      await screenshot(page, 'issue10-diagnosis');
      await frame.click('[data-testid=diagModeOutput]');
      await until(frame, ([k, c]) => window.__graphAscend.panes.NPU.scene.byKey.get(k)?.fill !== c, [FIRST, SOURCE_COLOR]);
    }));

  /** The demo opened by a link naming the Diagnosis panel (and the colour mode "where the error is
   * introduced" with `colours`), once the list (and the verdicts) are drawn and a duplicate had time
   * to be sent. */
  const openLinked = async (page, colours) => {
    const tag = path.basename(fs.readdirSync(path.join(repo, 'examples', RUN)).find((f) => f.endsWith('.vis.db')), '.vis.db');
    await page.goto(`${pageAddress(stack.tb.base)}&ga_run=${RUN}&ga_tag=${tag}&ga_panel=diagnosis${colours ? '&ga_colors=diagnosis' : ''}`);
    const frame = await appFrame(page);
    await until(frame, (view) => window.__graphAscend.fileLoads === 0 && Boolean(document.querySelector('[data-testid=diagnosisList]'))
      && (view === null || window.__graphAscend.store.diagnosis?.statesKey === view), colours ? `${RUN}|${tag}|0|0|-1` : null);
    await page.waitForTimeout(SETTLE_MS);
    return frame;
  };

  it('asks for the list, then the verdicts, each once, when a link opens the colour mode "where the error is introduced"', () =>
    withStackPage(stack, 'diagnosis-link-colours', { width: 1500, height: 950 }, async (page) => {
      // The graph drawn and the panel opened both ask; the list is drawn as soon as it comes.
      const sent = diagnosisRequests(page);
      const frame = await openLinked(page, true);
      assert.deepEqual(sent, [{ states: false }, { states: true }]);
      assert.ok(await frame.evaluate((k) => window.__graphAscend.store.diagnosis.source.has(k), FIRST));
    }));

  it('asks for the list once when a link opens the Diagnosis panel', () =>
    withStackPage(stack, 'diagnosis-link-panel', { width: 1500, height: 950 }, async (page) => {
      const sent = diagnosisRequests(page);
      await openLinked(page, false);
      assert.deepEqual(sent, [{ states: false }]);
    }));

  it('words the reasons in the page\'s language: the sidecar\'s sentence in English, Chinese on the zh page', () =>
    withStackPage(stack, 'diagnosis-zh', { width: 1500, height: 950 }, async (page) => {
      const frame = await openDemo(page);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagReason]');
      const shown = () => frame.$$eval('[data-testid=diagReason]', (els) => els.map((e) => e.textContent));
      // In English the page words the parts exactly as the sidecar's own sentence (the CLI's).
      const answer = await frame.evaluate(async () => {
        const m = window.__graphAscend.meta;
        const r = await fetch(`diagnosis?run=${encodeURIComponent(m.run)}&tag=${encodeURIComponent(m.tag)}&step=0&rank=0&top=200`);
        return r.json();
      });
      const faults = answer.data.groups;
      assert.ok(faults.every((s) => s.reason_parts.length > 0), JSON.stringify(faults));
      assert.deepEqual(await shown(), faults.map((s) => s.reason));

      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /[\u4e00-\u9fff]/.test(document.querySelector('[data-testid=diagReason]')?.textContent ?? ''));
      const zh = await shown();
      assert.equal(zh.length, faults.length);
      assert.match(zh[0], /^入参 eps 不一致：0\.1，标杆为 1e-0?5；输入完全一致；output\.0 的 (Norm|Max|Min|Mean) 相差 [\d.]+%/);
      assert.match(zh[1], /^权重 weight 不一致/);
      for (const text of zh) assert.doesNotMatch(text, /differs|inputs|golden|agree/, text);
      await screenshot(page, 'issue10-diagnosis-zh');
    }));

  it('downloads the compare as CSV', () =>
    withStackPage(stack, 'diagnosis-csv', { width: 1500, height: 950 }, async (page) => {
      const frame = await openDemo(page);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagDownload]');
      const [download] = await Promise.all([page.waitForEvent('download'), frame.click('[data-testid=diagDownload]')]);
      assert.match(download.suggestedFilename(), /^compare_\d+_step0_rank0\.csv$/);
      const text = fs.readFileSync(await download.path(), 'utf8');
      assert.ok(text.startsWith(CSV_HEADER), text.slice(0, 200));
      assert.ok(text.includes(',Module.layers.2.mlp.fc1.Linear.forward.0,'));
      // The route itself: text/csv, an attachment.
      const head = await frame.evaluate(async () => {
        const m = window.__graphAscend.meta;
        const r = await fetch(`exportCsv?run=${encodeURIComponent(m.run)}&tag=${encodeURIComponent(m.tag)}&step=0&rank=0`);
        return { type: r.headers.get('Content-Type'), disposition: r.headers.get('Content-Disposition'), first: (await r.text()).split('\r\n')[0] };
      });
      assert.equal(head.type, 'text/csv; charset=utf-8');
      assert.match(head.disposition, /^attachment;/);
      assert.ok(head.first.startsWith(CSV_HEADER.slice(0, -1)), head.first);
    }));
});
