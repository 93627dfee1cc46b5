// First paint of a self-contained report (bench/report.sh): the HTML opened from file:// in headless
// Chromium, every request that is not file:// aborted; the time from navigation to both graphs drawn
// (the page's own clock, performance.now()), best and median of RUNS fresh pages.
import { pathToFileURL } from 'node:url';
import { launchBrowser } from './page_harness.mjs';

const file = process.argv[2];
const runs = Number(process.env.RUNS || 5);
const browser = await launchBrowser();
const times = [];
let shown = '';
try {
  for (let i = 0; i < runs; i++) {
    const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
    await page.route('**/*', (r) => (r.request().url().startsWith('file://') ? r.continue() : r.abort()));
    await page.goto(pathToFileURL(file).href);
    await page.waitForFunction(() => {
      const app = window.__graphAscend;
      const drawn = (id) => Number(document.querySelector(`[data-testid=${id}]`)?.dataset.nodes || 0) > 0;
      return app && app.fileLoads === 0 && app.meta.run && drawn('debugGraph') && (app.store.single || drawn('benchGraph'));
    }, undefined, { polling: 'raf', timeout: 60_000 });
    times.push(await page.evaluate(() => performance.now()));
    shown = await page.evaluate(() => `${document.querySelector('[data-testid=debugGraph]').dataset.nodes} boxes drawn, ${window.__graphAscend.errors.length} errors shown`);
    await page.close();
  }
} finally {
  await browser.close();
}
times.sort((a, b) => a - b);
const ms = (v) => `${(v / 1000).toFixed(2)} s`;
console.log(`first paint (file://, network blocked): best ${ms(times[0])}, median ${ms(times[Math.floor(times.length / 2)])} of ${runs}; ${shown}`);
