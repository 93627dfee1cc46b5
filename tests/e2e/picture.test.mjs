// The whole-graph picture, on a real compare file in real TensorBoard + Chromium: modules expanded, the
// pane zoomed in so that most boxes are out of view, then "whole graph" saved as SVG and as PNG. Both
// hold every laid-out box (labels of boxes outside the view are in the SVG; the PNG is the scene at
// two pixels a unit, taller than the pane), under a title that names the file, step, rank,
// micro-batch and colour mode, and the toolbar's colour legend and the shapes' legend; in Chinese, the title's words are
// Chinese. A scene too tall for one canvas at that scale gives a PNG scaled down to the browser's
// limit (16 384 px a side), the SVG unscaled. The "view" choice still saves the pane as drawn
// (tests/e2e/polish.test.mjs). Pictures: tests/artifacts/picture-whole.{svg,png}, picture-capped.png;
// the menu: picture-menu.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { appFrame, artifacts, makeLogdir, pageAddress, screenshot, sharedStack, until, withStackPage } from './harness.mjs';

const CASE = 'compare_tf_stats';
const PNG_MAX_SIDE = 16_384;
const PNG_MAX_AREA = 100_000_000;
/** Text as the SVG writes it (the page's xmlText: markup characters as numeric references). */
const xml = (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

describe('GRAPH_ASCEND whole-graph picture', () => {
  const stack = sharedStack(before, after, () => makeLogdir([CASE]));

  const save = async (page, frame, id) => {
    if (!(await frame.isVisible('[data-testid=pictureList]'))) await frame.click('[data-testid=pictureButton]');
    const [d] = await Promise.all([page.waitForEvent('download'), frame.click(`[data-testid=${id}]`)]);
    return { name: d.suggestedFilename(), bytes: fs.readFileSync(await d.path()) };
  };

  /**
   * An image's size, and how much of each band of it is inked (not the light background; with `dark`,
   * dark as text is): a band is `{ px: [y0, y1] }` (its pixels) or `{ share: [y0, y1] }` (shares of its height).
   */
  const decode = (frame, url, bands = []) => frame.evaluate(async ([src, rows]) => {
    const img = new Image();
    await new Promise((ok, fail) => {
      img.onload = ok;
      img.onerror = () => fail(new Error('the picture does not decode'));
      img.src = src;
    });
    const w = img.naturalWidth, h = img.naturalHeight;
    const c = document.createElement('canvas');
    c.width = w;
    c.height = h;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const inked = rows.map((band) => {
      const [y0, y1] = band.px ?? band.share.map((v) => v * h);
      const top = Math.max(0, Math.floor(y0)), bottom = Math.min(h, Math.ceil(y1));
      if (bottom <= top) return 0;
      const d = g.getImageData(0, top, w, bottom - top).data;
      let n = 0;
      const below = band.dark ? 300 : 3 * 235;
      for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < below) n++;
      return n / (w * (bottom - top));
    });
    return { w, h, inked };
  }, [url, bands]);

  it('saves every expanded box as SVG and PNG, under a title and the legend', () =>
    withStackPage(stack, 'picture-whole', { width: 1400, height: 900 }, async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 0);
      if (await frame.evaluate(() => document.documentElement.classList.contains('dark'))) await frame.click('[data-testid=themeSiderButton]');
      // Expand modules two levels down (on the debug side only), then zoom in on the top left.
      await frame.evaluate(async () => {
        const a = window.__graphAscend;
        for (let round = 0; round < 2; round++) {
          const closed = Object.entries(a.hier.NPU).filter(([, n]) => n.nodeType !== 1 && !n.isRoot && !n.expand).map(([k]) => k).slice(0, 20);
          for (const k of closed) await a.toggleNode('NPU', k, false);
        }
        const pane = a.panes.NPU;
        pane.fit();
        pane.zoom(3, 0, 0);
        pane.draw();
      });
      const seen = await frame.evaluate(() => {
        const pane = window.__graphAscend.panes.NPU;
        const m = document.createElement('canvas').getContext('2d');
        // Boxes out of view whose whole label fits at the font the graph draws it in (no "…" cut).
        const fits = (b) => {
          m.font = `${b.node.nodeType === 1 ? 6 : 8}px Arial, Helvetica, sans-serif`;
          return b.w >= 24 && m.measureText(b.node.label).width <= b.w - 4;
        };
        const boxes = [...pane.scene.byKey.values()];
        const hidden = boxes.filter((b) => !pane.isVisible(b.key));
        const b = pane.scene.bounds;
        return {
          boxes: boxes.length,
          hidden: hidden.length,
          hiddenLabels: hidden.filter(fits).map((x) => x.node.label),
          bounds: { w: b.x1 - b.x0, h: b.y1 - b.y0 },
          pane: pane.size(),
          meta: window.__graphAscend.meta,
          legend: [...document.querySelectorAll('[data-testid=colorLegend] .legend-item')].map((e) => e.textContent),
          where: document.querySelector('[data-testid=wherePoint]')?.textContent ?? '',
        };
      });
      assert.ok(seen.hidden > 10 && seen.hiddenLabels.length > 5, `most boxes out of view: ${JSON.stringify({ ...seen, hiddenLabels: seen.hiddenLabels.slice(0, 5) })}`);
      assert.ok(seen.legend.length >= 2, `the toolbar shows a colour legend: ${seen.legend}`);
      assert.match(seen.where, /step 0 · rank 0 · all micro-batches/);

      const svg = await save(page, frame, 'exportWholeSvgNPU');
      await screenshot(page, 'picture-menu');
      const text = svg.bytes.toString('utf8');
      fs.mkdirSync(artifacts, { recursive: true });
      fs.writeFileSync(path.join(artifacts, 'picture-whole.svg'), text);
      assert.match(svg.name, /^compare_\d+_debug_whole\.svg$/);
      const [, sw, sh] = /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="([\d.]+)" height="([\d.]+)"/.exec(text) ?? [];
      assert.ok(sw && sh, text.slice(0, 200));
      // The scene at one pixel a unit, the header above it.
      assert.ok(Number(sw) >= seen.bounds.w && Number(sh) > seen.bounds.h + 40, `SVG ${sw}×${sh} for a scene of ${JSON.stringify(seen.bounds)}`);
      assert.ok(Number(sh) > seen.pane.height, 'the SVG is taller than the pane: not only its view');
      const title = `${seen.meta.run}/${seen.meta.tag} · Debug`;
      for (const words of [title, seen.where, 'Colours: output error (msprobe)', ...seen.legend, 'Module or operator', 'Unexpandable node', 'API list', 'Fused operators']) assert.ok(text.includes(`>${xml(words)}</text>`), `the SVG says "${words}"`);
      const missing = seen.hiddenLabels.filter((l) => !text.includes(`>${xml(l)}</text>`));
      assert.deepEqual(missing, [], 'every box out of view is drawn, its label with it');
      const svgImage = await decode(frame, `data:image/svg+xml;base64,${svg.bytes.toString('base64')}`);
      assert.deepEqual([svgImage.w, svgImage.h], [Math.round(Number(sw)), Math.round(Number(sh))]);

      const png = await save(page, frame, 'exportWholePngNPU');
      fs.writeFileSync(path.join(artifacts, 'picture-whole.png'), png.bytes);
      assert.match(png.name, /^compare_\d+_debug_whole\.png$/);
      assert.equal(png.bytes.subarray(1, 4).toString(), 'PNG');
      // Top 40 px: the title's text; the lower half: boxes (drawn out of the pane's view).
      // The legend's row (under the title and its two lines): its words in the text's colour, not a swatch's.
      const image = await decode(frame, `data:image/png;base64,${png.bytes.toString('base64')}`, [{ px: [0, 40] }, { share: [0.5, 1] }, { px: [80, 96], dark: true }]);
      assert.ok(image.w <= PNG_MAX_SIDE && image.h <= PNG_MAX_SIDE && image.w * image.h <= PNG_MAX_AREA, `${image.w}×${image.h}`);
      // Two pixels a unit: twice the SVG's graph (its header is the same size in both).
      assert.ok(image.w >= 2 * seen.bounds.w && image.h >= 2 * seen.bounds.h, `PNG ${image.w}×${image.h} for a scene of ${JSON.stringify(seen.bounds)}`);
      assert.ok(image.h > seen.pane.height, `the PNG is taller than the pane: ${image.h}`);
      assert.ok(image.inked[0] > 0.005, `the title is drawn: ${JSON.stringify(image)}`);
      assert.ok(image.inked[1] > 0.005, `the lower half holds boxes: ${JSON.stringify(image)}`);
      const svgLegend = await decode(frame, `data:image/svg+xml;base64,${svg.bytes.toString('base64')}`, [{ px: [80, 96], dark: true }]);
      assert.ok(image.inked[2] > 0.3 * svgLegend.inked[0] * (svgLegend.w / image.w) && svgLegend.inked[0] > 0.01, `the legend's words are dark, as in the SVG: ${JSON.stringify({ png: image.inked, svg: svgLegend.inked })}`);

      // In Chinese, the title's words are Chinese.
      await frame.click('[data-testid=languageSiderButton]');
      await until(frame, () => /全部 micro-batch/.test(document.querySelector('[data-testid=whereLine]')?.textContent ?? ''));
      const zh = (await save(page, frame, 'exportWholeSvgNPU')).bytes.toString('utf8');
      assert.ok(zh.includes(`>${seen.meta.run}/${seen.meta.tag} · 调试侧</text>`), zh.slice(0, 1500));
      assert.ok(zh.includes('>着色：输出误差（msprobe）</text>'), zh.slice(0, 1500));
      await frame.click('[data-testid=languageSiderButton]');
    }));

  it('scales a PNG that would pass a browser\'s canvas limits down to them; the SVG keeps its size', () =>
    withStackPage(stack, 'picture-capped', { width: 1400, height: 900 }, async (page) => {
      await page.goto(pageAddress(stack.tb.base));
      const frame = await appFrame(page);
      await until(frame, () => window.__graphAscend.fileLoads === 0 && Number(document.querySelector('[data-testid=debugGraph]')?.dataset.nodes || 0) > 0);
      // The pane's scene made 60 000 units tall: 4 000 boxes in a column (the page's own Scene class).
      const bounds = await frame.evaluate(() => {
        const pane = window.__graphAscend.panes.NPU;
        const data = { root: { name: 'root', label: 'root', x: 0, y: 0, width: 300, height: 60_000, nodeType: 0, expand: true, isRoot: true, parentNode: '', matchedNodeLink: [] } };
        for (let i = 0; i < 4000; i++) data[`n${i}`] = { name: `n${i}`, label: `n${i}`, x: 20, y: 20 + 15 * i, width: 260, height: 15, nodeType: 0, expand: false, isRoot: false, parentNode: 'root', matchedNodeLink: [] };
        pane.scene = new pane.scene.constructor(data, (n) => (n.name.endsWith('7') ? '#ff704d' : '#ffffff'));
        const b = pane.scene.bounds;
        return { w: b.x1 - b.x0, h: b.y1 - b.y0 };
      });
      const png = await save(page, frame, 'exportWholePngNPU');
      fs.mkdirSync(artifacts, { recursive: true });
      fs.writeFileSync(path.join(artifacts, 'picture-capped.png'), png.bytes);
      const image = await decode(frame, `data:image/png;base64,${png.bytes.toString('base64')}`, [{ px: [0, 40] }, { share: [0.9, 1] }]);
      // At two pixels a unit it would be 120 000 px tall: scaled down to the side limit, not below it.
      assert.ok(image.h <= PNG_MAX_SIDE && image.h > PNG_MAX_SIDE - 200 && image.w * image.h <= PNG_MAX_AREA, `${image.w}×${image.h}`);
      assert.ok(image.inked[0] > 0.005 && image.inked[1] > 0.005, `the title and the last boxes are drawn: ${JSON.stringify(image)}`);
      const svg = (await save(page, frame, 'exportWholeSvgNPU')).bytes.toString('utf8');
      const [, sh] = /^<svg [^>]*height="([\d.]+)"/.exec(svg) ?? [];
      assert.ok(Number(sh) > bounds.h, `the SVG is not scaled: ${sh} for ${bounds.h}`);
      assert.ok(svg.includes('>n3999</text>') && !svg.includes('Scaled down'), 'the SVG holds the last box and no scaling note');
      assert.equal(await frame.evaluate(() => window.__graphAscend.errors.length), 0);
    }));
});
