// The write token leaves no trace outside the owner's browser storage (issue 42 items 5 and 6), in real
// TensorBoard + Chromium: the printed link holds the token in the fragment (`#graph_ascend&graph_ascend_token=…`),
// which no request sends; after it is opened, the page stores the token and takes it out of
// TensorBoard's address (`top.location.href`, the history entry), so that later requests carry no token in
// their URL or `Referer`, the plugin's answers say `Referrer-Policy: same-origin`, and the page can still
// write; the same from the fragment form (`#graph_ascend&graph_ascend_token=…`); and where the browser
// refuses to store it (so that it stays in the address), "Copy link" still leaves it out of the query and
// the fragment. Screenshot: tests/artifacts/token-address.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { appFrame, makeLogdir, pageAddress, screenshot, sharedStack, until, withStackPage } from './harness.mjs';

const COMPARE = 'compare_tf_stats';

/** Every request the page's browser context sends from now on: its URL, `Referer` and frame. */
function recordRequests(page) {
  const seen = [];
  page.on('request', (r) => {
    const headers = r.headers();
    seen.push({ url: r.url(), referer: headers.referer ?? '', frame: r.frame()?.url() ?? '' });
  });
  return seen;
}

const loaded = (frame) => until(frame, (run) => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run === run
  && Number(document.querySelector('[data-testid=benchGraph]')?.dataset.nodes || 0) > 1, COMPARE);

/** Whether the page may write: the match action is enabled (every answer says so for this page's POST). */
async function canWrite(frame) {
  await frame.click('[data-testid=matchSiderButton]');
  await frame.waitForSelector('[data-testid=matchButton]');
  await until(frame, () => !document.querySelector('[data-testid=matchButton]').disabled);
  return frame.$eval('[data-testid=matchButton]', (b) => !b.disabled);
}

/** Selects the NPU graph's first child of the root: a click that sends more requests. */
async function selectANode(frame) {
  await frame.evaluate(() => {
    const h = window.__graphAscend.hier.NPU;
    const root = Object.keys(h).find((k) => h[k].isRoot);
    const key = Object.keys(h).find((k) => h[k].parentNode === root);
    return window.__graphAscend.selectNode('NPU', key);
  });
  await until(frame, () => window.__graphAscend.selected !== null);
}

describe('the write token in addresses and links', () => {
  const stack = sharedStack(before, after, () => makeLogdir([COMPARE]));
  const withPage = (name, fn) => withStackPage(stack, `token-${name}`, { width: 1400, height: 900 }, fn);
  const carries = (text) => text.includes(stack.tb.token) || text.includes('graph_ascend_token');

  it('takes the token out of TensorBoard\'s address once stored; later requests carry it nowhere (item 6)', () =>
    withPage('address', async (page) => {
      const seen = recordRequests(page);
      const pageDocument = page.waitForResponse((r) => /\/data\/plugin\/graph_ascend\/index\.html/.test(r.url()));
      await page.goto(pageAddress(stack.tb.base));
      assert.equal((await pageDocument).headers()['referrer-policy'], 'same-origin');
      const frame = await appFrame(page);
      await loaded(frame);
      await until(frame, () => !window.top.location.href.includes('graph_ascend_token'));
      const top = await frame.evaluate(() => window.top.location.href);
      assert.ok(!carries(top), top);
      assert.ok(!carries(page.url()), page.url());
      assert.match(top, /#graph_ascend/, 'the address still shows the plugin');
      assert.equal(await frame.evaluate(() => localStorage.getItem('graph_ascend.writeToken')), stack.tb.token);
      assert.ok(await canWrite(frame), 'the stored token is sent');
      // Nothing the plugin's own frame asked for carried the token, before the address was cleaned or after.
      const fromPage = seen.filter((r) => /\/data\/plugin\/graph_ascend\/index\.html/.test(r.frame));
      assert.ok(fromPage.length > 3, `requests of the page: ${fromPage.length}`);
      for (const r of fromPage) assert.ok(!carries(r.url) && !carries(r.referer), JSON.stringify(r));
      // What goes on the wire: a request's URL without its fragment (a browser never sends one), its `Referer`.
      // The printed link holds the token in the fragment, so no request of the first load carries it either.
      const onWire = (url) => { const u = new URL(url); u.hash = ''; return u.href; };
      const early = seen.filter((r) => carries(onWire(r.url)) || carries(r.referer));
      console.log(`token-address: ${early.length} of ${seen.length} requests of the first load carried the token`
        + (early.length ? `: ${early.map((r) => new URL(r.url).pathname).join(', ')}` : ''));
      assert.deepEqual(early, [], 'no request carries the token: the printed link holds it in the fragment');

      // From now on no request carries it, whoever sends it.
      const later = seen.length;
      await selectANode(frame);
      await frame.click('[data-testid=dataSiderButton]');
      await page.waitForTimeout(500);
      const moved = await frame.evaluate(() => window.top.location.href);
      assert.ok(!carries(moved) && /ga_node=/.test(moved), `the page rewrote the address, without the token: ${moved}`);
      await page.reload();
      const again = await appFrame(page);
      await loaded(again);
      const after = seen.slice(later);
      assert.ok(after.length > 10, `requests after the clean: ${after.length}`);
      for (const r of after) assert.ok(!carries(r.url) && !carries(r.referer), JSON.stringify(r));
      assert.ok(await canWrite(again), 'a reload still writes: the token is kept');
      // The history entry the link made was replaced: going back leaves the page, never to the token's address.
      await page.goBack();
      assert.ok(!carries(page.url()), page.url());
      await screenshot(page, 'token-address');
    }));

  it('takes the token out of the fragment form too, and never copies it into a link (item 5)', () =>
    withPage('fragment', async (page) => {
      await page.goto(`${stack.tb.base}/#graph_ascend&graph_ascend_token=${stack.tb.token}`);
      const frame = await appFrame(page);
      await loaded(frame);
      await until(frame, () => !window.top.location.href.includes('graph_ascend_token'));
      assert.match(await frame.evaluate(() => window.top.location.hash), /^#graph_ascend/);
      assert.ok(await canWrite(frame), 'the token from the fragment is used');
      await frame.click('[data-testid=copyLinkButton]');
      const link = await frame.inputValue('[data-testid=shareLinkText]');
      assert.ok(link.startsWith(`${stack.tb.base}/#graph_ascend&`) && !carries(link), link);
    }));

  it('leaves the token out of a copied link where the browser cannot store it (item 5)', () =>
    withPage('unstored', async (page) => {
      // A browser whose storage refuses writes (a full quota, a locked-down profile): the token stays in
      // the address, so that a reload keeps it, and "Copy link" must strip it from the query and the fragment.
      await page.addInitScript(() => {
        Storage.prototype.setItem = () => {
          throw new DOMException('storage refused', 'QuotaExceededError');
        };
      });
      await page.goto(`${stack.tb.base}/?graph_ascend_token=${stack.tb.token}#graph_ascend&graph_ascend_token=${stack.tb.token}`);
      const frame = await appFrame(page);
      await loaded(frame);
      assert.ok(await canWrite(frame), 'the token in the address is used');
      assert.ok(carries(await frame.evaluate(() => window.top.location.href)), 'kept in the address: it could not be stored');
      await frame.click('[data-testid=copyLinkButton]');
      const link = await frame.inputValue('[data-testid=shareLinkText]');
      assert.ok(!carries(link), link);
      assert.match(link, /#graph_ascend&.*ga_run=/, link);
    }));
});
