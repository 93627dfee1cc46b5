// Who may write (docs/security.md), as a user sees it in real TensorBoard + Chromium: TensorBoard
// bound to every interface (msprobe's --bind_all advice) and opened from this host's non-loopback
// address is read-only: the conversion and matching controls are disabled with the reason as their
// tooltip, and the conversion form says so. The same TensorBoard opened on loopback can change things.
// Screenshot: tests/artifacts/readonly-convert.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { appFrame, makeLogdir, pageAddress, screenshot, sharedStack, until, withStackPage } from './harness.mjs';

const COMPARE = 'compare_tf_stats';

/** This host's first non-loopback IPv4 address, or '' when it has none. */
function outsideAddress() {
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '';
}

const address = outsideAddress();

describe('read-only page from another address', { skip: address ? false : 'this host has no non-loopback IPv4 address' }, () => {
  const stack = sharedStack(before, after, () => makeLogdir([COMPARE]), { host: '0.0.0.0' });

  async function open(page, host) {
    await page.goto(`http://${host}:${stack.tb.port}/?graph_ascend_token=${stack.tb.token}#graph_ascend`);
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
    return frame;
  }

  const state = (frame, id) => frame.$eval(`[data-testid=${id}]`, (b) => ({ disabled: b.disabled, title: b.title }));

  it('disables conversion and matching, saying why, when opened from another address', () =>
    withStackPage(stack, 'readonly-remote', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, address);
      await frame.click('[data-testid=matchSiderButton]');
      await frame.waitForSelector('[data-testid=matchButton]');
      for (const id of ['matchButton', 'unmatchButton']) {
        const s = await state(frame, id);
        assert.equal(s.disabled, true, id);
        assert.match(s.title, /GRAPH_ASCEND_ALLOW_REMOTE_WRITES/, id);
      }
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      assert.equal((await state(frame, 'startConversionButton')).disabled, true);
      assert.match(await frame.textContent('[data-testid=conversionReadOnly]'), /read-only/i);
      await screenshot(page, 'readonly-convert');
    }));

  it('keeps them usable on loopback', () =>
    withStackPage(stack, 'readonly-local', { width: 1280, height: 720 }, async (page) => {
      const frame = await open(page, '127.0.0.1');
      await frame.click('[data-testid=matchSiderButton]');
      await frame.waitForSelector('[data-testid=matchButton]');
      const s = await state(frame, 'matchButton');
      assert.equal(s.disabled, false);
      assert.doesNotMatch(s.title, /GRAPH_ASCEND_ALLOW_REMOTE_WRITES/);
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      assert.equal((await state(frame, 'startConversionButton')).disabled, false);
      assert.equal(await frame.$('[data-testid=conversionReadOnly]'), null);
    }));
});

describe('read-only page without the write token', () => {
  const stack = sharedStack(before, after, () => makeLogdir([COMPARE]));

  async function open(page, address) {
    await page.goto(address);
    const frame = await appFrame(page);
    await until(frame, () => window.__graphAscend.fileLoads === 0 && window.__graphAscend.meta.run !== '');
    return frame;
  }

  const state = (frame, id) => frame.$eval(`[data-testid=${id}]`, (b) => ({ disabled: b.disabled, title: b.title }));

  it('says how to get the link when opened without it, and writes once opened with it', () =>
    withStackPage(stack, 'readonly-token', { width: 1280, height: 720 }, async (page) => {
      let frame = await open(page, `${stack.tb.base}/#graph_ascend`);
      await frame.click('[data-testid=matchSiderButton]');
      await frame.waitForSelector('[data-testid=matchButton]');
      const s = await state(frame, 'matchButton');
      assert.equal(s.disabled, true);
      assert.match(s.title, /graph_ascend_token/);
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      assert.match(await frame.textContent('[data-testid=conversionReadOnly]'), /graph_ascend_token/);
      await screenshot(page, 'readonly-token');

      // The printed link differs from this address in its fragment only, so a new document (as a user who
      // opens it in a new tab) rather than a jump within this one.
      await page.goto('about:blank');
      frame = await open(page, pageAddress(stack.tb.base));
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      assert.equal((await state(frame, 'startConversionButton')).disabled, false);
      assert.equal(await frame.$('[data-testid=conversionReadOnly]'), null);
      // TensorBoard's own address no longer carries it (the page took it out once stored, so this is a
      // new document, not a jump within the same one): the page kept it.
      await page.goto('about:blank');
      frame = await open(page, `${stack.tb.base}/#graph_ascend`);
      await frame.click('[data-testid=conversionSiderButton]');
      await frame.waitForSelector('[data-testid=conversionForm]');
      assert.equal((await state(frame, 'startConversionButton')).disabled, false);
    }));
});
