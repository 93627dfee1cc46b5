// Rough edges a new user hit, each on real files in real TensorBoard + Chromium (the pure logic of
// each is in frontend/tests/polish.test.ts):
// - "Open this file" after converting into a nested folder (`converted/s1`) opens that run; the form
//   then does not offer the folder of converted graphs as a dump folder, and a failed conversion's
//   error names its file relative to the logdir, not by the server's absolute path;
// - the minimap shows white boxes (a build file; the golden pane in light mode);
// - the details table says, in a relative-error cell's tooltip, that it is measured as the diagnosis does;
// - W/S/A/D go to the pane under the pointer, not the one clicked last;
// - the Fit button shows the whole graph, while opening a file keeps its readable top;
// - the diagnosis list: the enclosing module is a link, a cause says weight or argument (also in Chinese);
// - the CSV download: each node's diagnosis in its last columns, and its progress shown while it comes;
// - a shared link carries the colour mode and the open panel (not the write token);
// - a pane's view saved as PNG and SVG: both the pane as drawn (pixels compared with a screenshot of the pane).
// Screenshots: tests/artifacts/polish-*.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, artifacts, makeLogdir, repo, screenshot, sharedStack, until, withStackPage, pageAddress } from './harness.mjs';

const DEMO = 'compare_tf_stats';
const BUILD = 'build_tf_stats';
const DUMP = 'dumps/mlp_stats';
/** A rank folder whose dump.json was cut short: its conversion fails naming the file. */
const BROKEN = 'dumps/broken';

function logdir() {
  return makeLogdir([BUILD], (dir) => {
    fs.cpSync(path.join(repo, 'examples', DEMO), path.join(dir, DEMO), { recursive: true });
    fs.cpSync(path.join(repo, 'tests/fixtures/dumps/mlp_stats'), path.join(dir, DUMP), { recursive: true });
    const good = path.join(dir, DUMP, 'step0');
    const rankDir = path.join(good, fs.readdirSync(good)[0]);
    const bad = path.join(dir, BROKEN, 'step0/rank0');
    fs.mkdirSync(bad, { recursive: true });
    for (const f of ['construct.json', 'stack.json']) fs.copyFileSync(path.join(rankDir, f), path.join(bad, f));
    const dump = fs.readFileSync(path.join(rankDir, 'dump.json'));
    fs.writeFileSync(path.join(bad, 'dump.json'), dump.subarray(0, dump.length >> 1));
  });
}

describe('GRAPH_ASCEND rough edges', () => {
  const stack = sharedStack(before, after, logdir);

  const openRun = async (page, run) => {
    await page.goto(pageAddress(stack.tb.base));
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 0);
    if ((await frame.evaluate(() => window.__graphAscend.meta.run)) !== run) {
      await frame.click('[data-testid=dataSiderButton]');
      await frame.selectOption('[data-testid=runSelect]', run);
    }
    await until(frame, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r
      && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 0, run);
    return frame;
  };

  const convert = async (frame, npu, output) => {
    if (!(await frame.isVisible('[data-testid=conversionForm]'))) await frame.click('[data-testid=conversionSiderButton]');
    await frame.waitForSelector(`[data-testid=npuPathSelect] option[value="${npu}"]`, { state: 'attached' });
    await frame.selectOption('[data-testid=npuPathSelect]', npu);
    await frame.fill('[data-testid=outputPathInput]', output);
    await frame.click('[data-testid=startConversionButton]');
    return frame.waitForSelector('[data-testid=conversionResult]', { timeout: 60_000 });
  };

  it('opens a file converted into a nested folder, offers only dump folders, and names paths relative to the logdir', () =>
    withStackPage(stack, 'polish-convert', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await convert(frame, DUMP, 'converted/s1');
      await frame.click('[data-testid=loadConvertedFileButton]');
      await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === 'converted/s1', undefined, 30_000);
      assert.deepEqual(await frame.evaluate(() => window.__graphAscend.errors), []);

      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector(`[data-testid=npuPathSelect] option[value="${DUMP}"]`, { state: 'attached' });
      const offered = await frame.$$eval('[data-testid=npuPathSelect] option', (os) => os.map((o) => o.value));
      for (const graphs of ['converted/s1', DEMO, BUILD]) assert.ok(!offered.includes(graphs), `${graphs} holds graphs, not a dump: ${offered}`);

      await convert(frame, BROKEN, 'broken_out');
      const log = await frame.textContent('[data-testid=conversionErrorLog]');
      const root = fs.realpathSync(stack.logdir);
      assert.match(log, /broken\/step0\/rank0\/dump\.json/, `the error names the file: ${log}`);
      assert.ok(!log.includes(root) && !log.includes(stack.logdir), `no absolute path of the server: ${log}`);
      await screenshot(page, 'polish-convert-error');
    }));

  /** Pixels of a pane's minimap (without the viewport box) that are neither background nor the frame of the root. */
  const minimapInk = (frame, side) => frame.evaluate((s) => {
    const pane = window.__graphAscend.panes[s];
    pane.draw();
    const c = pane.miniBase;
    const { data, width, height } = c.getContext('2d').getImageData(0, 0, c.width, c.height);
    const bg = data.slice(0, 3);
    const edge = 3 * (window.devicePixelRatio || 1);
    let ink = 0;
    for (let y = edge; y < height - edge; y++)
      for (let x = edge; x < width - edge; x++) {
        const i = 4 * (y * width + x);
        if (Math.abs(data[i] - bg[0]) + Math.abs(data[i + 1] - bg[1]) + Math.abs(data[i + 2] - bg[2]) > 12) ink++;
      }
    return ink;
  }, side);

  const lightMode = async (frame) => {
    if (await frame.evaluate(() => document.documentElement.classList.contains('dark'))) await frame.click('[data-testid=themeSiderButton]');
  };

  it('shows white boxes in the minimap: a build file, and the golden pane in light mode', () =>
    withStackPage(stack, 'polish-minimap', { width: 1500, height: 950 }, async (page) => {
      let frame = await openRun(page, BUILD);
      await lightMode(frame);
      const fills = await frame.evaluate(() => [...new Set([...window.__graphAscend.panes.NPU.scene.byKey.values()].map((b) => b.fill))]);
      assert.deepEqual(fills, ['#ffffff'], 'every box of a build file is white');
      assert.ok((await minimapInk(frame, 'NPU')) > 50, 'the build file\'s boxes show in its minimap');
      frame = await openRun(page, DEMO);
      await lightMode(frame);
      assert.ok((await minimapInk(frame, 'Bench')) > 50, 'the golden pane\'s white boxes show in its minimap');
      await screenshot(page, 'polish-minimap');
    }));

  it('says in a relative-error cell\'s tooltip that it is measured against the tensor\'s scale', () =>
    withStackPage(stack, 'polish-details', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await frame.evaluate(() => window.__graphAscend.jumpTo('NPU', 'Functional.layer_norm.3.forward'));
      await frame.waitForSelector('[data-testid=detailsTable] [data-testid=scaleRelativeCell]');
      const tips = await frame.$$eval('[data-testid=scaleRelativeCell]', (tds) => tds.map((td) => td.title));
      assert.ok(tips.every((tip) => /max\(\|Max\|, \|Min\|\)/.test(tip)), tips.join('\n'));
      const heads = await frame.$$eval('[data-testid=detailsTable] thead th', (ths) => ths.map((th) => th.textContent));
      assert.ok(heads.includes('MeanRelativeErr'), heads.join(','));
    }));

  it('gives W/S/A/D to the pane under the pointer, not the one clicked last', () =>
    withStackPage(stack, 'polish-keys', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      const box = async (id) => (await frame.$(`[data-testid=${id}]`)).boundingBox();
      const [npu, bench] = [await box('debugGraph'), await box('benchGraph')];
      const scales = () => frame.evaluate(() => [window.__graphAscend.panes.NPU.view.scale, window.__graphAscend.panes.Bench.view.scale]);
      // Click the golden pane (its canvas takes the focus), then point at the target's.
      await page.mouse.click(bench.x + 30, bench.y + bench.height - 30);
      assert.equal(await frame.evaluate(() => document.activeElement?.dataset.testid), 'benchCanvas');
      await page.mouse.move(npu.x + npu.width / 3, npu.y + npu.height / 2);
      const [n0, b0] = await scales();
      await page.keyboard.press('w');
      const [n1, b1] = await scales();
      assert.ok(n1 > n0 && b1 === b0, `W zooms the pane under the pointer: NPU ${n0} -> ${n1}, Bench ${b0} -> ${b1}`);
      await page.mouse.move(bench.x + bench.width / 3, bench.y + bench.height / 2);
      await page.keyboard.press('s');
      const [n2, b2] = await scales();
      assert.ok(n2 === n1 && b2 < b1, `S zooms the golden pane once the pointer is there: NPU ${n1} -> ${n2}, Bench ${b1} -> ${b2}`);
    }));

  it('shows the whole graph on Fit, while a file opens on its readable top', () =>
    withStackPage(stack, 'polish-fit', { width: 1400, height: 800 }, async (page) => {
      const frame = await openRun(page, DEMO);
      // Tall: every block and its modules expanded.
      await frame.evaluate(async () => {
        const a = window.__graphAscend;
        const modules = () => Object.entries(a.hier.NPU).filter(([, n]) => n.nodeType === 0 && !n.expand && !n.isRoot).map(([k]) => k);
        for (let round = 0; round < 2; round++) for (const k of modules()) await a.toggleNode('NPU', k, false);
      });
      const onScreen = () => frame.evaluate(() => {
        const p = window.__graphAscend.panes.NPU;
        const b = p.scene.bounds, v = p.view, size = p.size();
        return { top: b.y0 * v.scale + v.ty, bottom: b.y1 * v.scale + v.ty, left: b.x0 * v.scale + v.tx, right: b.x1 * v.scale + v.tx, height: size.height, width: size.width, scale: v.scale };
      });
      // A file opens on the top of its graph, its width fitted (readable): the bottom is out of sight.
      await frame.evaluate(() => window.__graphAscend.panes.NPU.fit());
      const opened = await onScreen();
      assert.ok(Math.abs(opened.top - 16) < 1 && opened.bottom > opened.height, `top view: ${JSON.stringify(opened)}`);
      await frame.click('[data-testid=fitScreenButton]');
      const whole = await onScreen();
      assert.ok(whole.top >= 0 && whole.bottom <= whole.height && whole.left >= 0 && whole.right <= whole.width, `the whole graph in view: ${JSON.stringify(whole)}`);
      assert.ok(whole.scale < opened.scale, `zoomed out to fit: ${opened.scale} -> ${whole.scale}`);
      await screenshot(page, 'polish-fit');
    }));

  it('links the enclosing module of a fault and says whether a weight or an argument differs', () =>
    withStackPage(stack, 'polish-diagnosis', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagGroup]');
      const kinds = () => frame.$$eval('[data-testid=diagGroup] .diag-kind', (els) => els.map((e) => e.textContent));
      assert.deepEqual(await kinds(), ['argument differs', 'weight differs']);
      // The summary reads as before, its module now a link.
      const first = frame.locator('[data-testid=diagGroup]').first();
      assert.match(await first.locator('[data-testid=diagGroupSummary]').textContent(), /^Functional\.layer_norm \(1st call\) in layers\.1\.ln2 — eps differs/);
      assert.equal(await first.locator('[data-testid=diagModuleLink]').textContent(), 'layers.1.ln2');
      await first.locator('[data-testid=diagModuleLink]').click();
      await until(frame, () => window.__graphAscend.selected?.key === 'Module.layers.1.ln2.LayerNorm.forward.0');
      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /入参/.test(document.querySelector('[data-testid=diagGroup] .diag-kind')?.textContent ?? ''));
      assert.deepEqual(await kinds(), ['入参不一致', '权重不一致']);
      await screenshot(page, 'polish-diagnosis-zh');
    }));

  it('carries the colour mode and the open panel in a shared link, without the write token', () =>
    withStackPage(stack, 'polish-link', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.click('[data-testid=diagModeIntroduced]');
      await frame.click('[data-testid=searchSiderButton]');
      await frame.click('[data-testid=copyLinkButton]');
      await until(frame, () => document.querySelector('[data-testid=shareLinkNote]')?.textContent);
      const link = await frame.inputValue('[data-testid=shareLinkText]');
      assert.match(link, /ga_colors=diagnosis/, link);
      assert.match(link, /ga_panel=search/, link);
      assert.ok(!link.includes('graph_ascend_token'), link);
      const other = await stack.browser.newPage({ viewport: { width: 1500, height: 950 } });
      try {
        await other.goto(link);
        const f = await appFrame(other);
        await until(f, (r) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === r, DEMO);
        await until(f, () => window.__graphAscend.store.mode === 'diagnosis' && window.__graphAscend.store.tab === 'search');
        assert.ok(await f.isVisible('[data-testid=controlPanel]'));
        // The boxes are painted in that mode once its verdicts are in.
        await until(f, () => [...window.__graphAscend.panes.NPU.scene.byKey.values()].some((b) => b.fill === 'rgb(226,241,226)'));
        await screenshot(other, 'polish-link-opened');
      } finally {
        await other.close();
      }
    }));

  /** How far two images (data: URLs) differ: the share of pixels off by more than 48 in a channel, and the sizes. */
  const imageDiff = (frame, a, b) => frame.evaluate(async ([x, y]) => {
    const load = (src) => new Promise((ok, no) => {
      const img = new Image();
      img.onload = () => ok(img);
      img.onerror = () => no(new Error(`cannot load ${src.slice(0, 40)}`));
      img.src = src;
    });
    const [ia, ib] = [await load(x), await load(y)];
    const pixels = (img, w, h) => {
      const c = document.createElement('canvas');
      c.width = w;
      c.height = h;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0, w, h);
      return g.getImageData(0, 0, w, h).data;
    };
    const w = ia.naturalWidth, h = ia.naturalHeight;
    const [pa, pb] = [pixels(ia, w, h), pixels(ib, w, h)];
    let off = 0, inked = 0;
    for (let i = 0; i < pa.length; i += 4) {
      if (Math.max(Math.abs(pa[i] - pb[i]), Math.abs(pa[i + 1] - pb[i + 1]), Math.abs(pa[i + 2] - pb[i + 2])) > 48) off++;
      if (pa[i] + pa[i + 1] + pa[i + 2] < 3 * 235) inked++;
    }
    return { off: off / (w * h), inked: inked / (w * h), a: [w, h], b: [ib.naturalWidth, ib.naturalHeight] };
  }, [a, b]);

  it('saves a pane\'s view as PNG and SVG, both as drawn', () =>
    withStackPage(stack, 'polish-pictures', { width: 1400, height: 900 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await lightMode(frame);
      await frame.evaluate(async () => {
        const a = window.__graphAscend;
        await a.toggleNode('NPU', 'Module.layers.0.Block.forward.0', false);
        await a.selectNode('NPU', 'Module.layers.0.Block.forward.0');
      });
      // The minimap sits over the canvas: out of the way, so that a screenshot shows the canvas alone.
      await frame.click('[data-testid=npuMiniMapToggle]');
      await page.waitForTimeout(300);
      const shot = `data:image/png;base64,${(await frame.locator('[data-testid=debugCanvas]').screenshot()).toString('base64')}`;
      const save = async (id) => {
        if (!(await frame.isVisible('[data-testid=pictureList]'))) await frame.click('[data-testid=pictureButton]');
        const [d] = await Promise.all([page.waitForEvent('download'), frame.click(`[data-testid=${id}]`)]);
        return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
      };
      const png = await save('exportPngNPU');
      assert.match(png.name, /^compare_\d+_debug\.png$/);
      assert.ok(png.bytes.length > 1000 && png.bytes.subarray(1, 4).toString() === 'PNG', `a PNG: ${png.bytes.length} bytes`);
      const pngDiff = await imageDiff(frame, `data:image/png;base64,${png.bytes.toString('base64')}`, shot);
      assert.deepEqual(pngDiff.a, pngDiff.b, 'the PNG is the pane\'s size');
      assert.ok(pngDiff.inked > 0.02, `the PNG shows boxes: ${JSON.stringify(pngDiff)}`);
      assert.ok(pngDiff.off < 0.01, `the PNG is the pane as drawn: ${JSON.stringify(pngDiff)}`);

      const svg = await save('exportSvgNPU');
      const text = svg.bytes.toString('utf8');
      fs.mkdirSync(artifacts, { recursive: true });
      fs.writeFileSync(path.join(artifacts, 'polish-pane.svg'), text);
      fs.writeFileSync(path.join(artifacts, 'polish-pane.png'), png.bytes);
      assert.match(svg.name, /^compare_\d+_debug\.svg$/);
      assert.ok(text.startsWith('<svg xmlns="http://www.w3.org/2000/svg"') && text.includes('<path') && text.includes('>Module.layers.0.Block.forward.0<'), text.slice(0, 300));
      const svgDiff = await imageDiff(frame, `data:image/svg+xml;base64,${svg.bytes.toString('base64')}`, shot);
      assert.deepEqual(svgDiff.a, svgDiff.b, 'the SVG is the pane\'s size');
      // The same boxes in the same places and colours; text is rasterized apart, so a little differs.
      assert.ok(svgDiff.off < 0.03, `the SVG is the pane as drawn: ${JSON.stringify(svgDiff)}`);
      await screenshot(page, 'polish-pictures');
    }));

  it('downloads the CSV with each node\'s diagnosis, showing its progress', () =>
    withStackPage(stack, 'polish-csv', { width: 1500, height: 950 }, async (page) => {
      const frame = await openRun(page, DEMO);
      await frame.click('[data-testid=diagnosisSiderButton]');
      await frame.waitForSelector('[data-testid=diagDownload]');
      // Every text the progress line shows, however short-lived.
      await frame.evaluate(() => {
        window.__csvProgress = [];
        new MutationObserver(() => {
          const el = document.querySelector('[data-testid=csvProgress]');
          if (el && el.textContent !== window.__csvProgress.at(-1)) window.__csvProgress.push(el.textContent);
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      const [download] = await Promise.all([page.waitForEvent('download'), frame.click('[data-testid=diagDownload]')]);
      const text = fs.readFileSync(await download.path(), 'utf8');
      const seen = await frame.evaluate(() => window.__csvProgress);
      assert.match(seen[0] ?? '', /Preparing the CSV/, `progress shown: ${JSON.stringify(seen)}`);
      assert.ok(seen.some((p) => /\d+(\.\d)? (B|kB|MB) received/.test(p)), `bytes received shown: ${JSON.stringify(seen)}`);
      await until(frame, () => !document.querySelector('[data-testid=csvProgress]'));
      const [header, ...rows] = text.trim().split('\r\n');
      assert.ok(header.endsWith(',Result,Err_message,Diagnosis,Diagnosis Score,Diagnosis Reason'), header);
      const source = rows.filter((r) => r.includes(',Functional.linear.10.forward,'));
      assert.ok(source.length && source.every((r) => /,cause,[^,]*,"?parameter weight differs/.test(r)), source.join('\n'));
    }));
});
