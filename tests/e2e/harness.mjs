// End-to-end harness: real fixture .vis.db files in a temp logdir, real TensorBoard with the
// graph_ascend plugin (and its real Rust sidecar), real Debian Chromium driven by playwright-core.
// Nothing here is mocked; the tests fail when any part of the stack does.
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '../..');
export const artifacts = path.join(repo, 'tests/artifacts');
const require = createRequire(path.join(repo, 'frontend/package.json'));
const { chromium } = require('playwright-core');

export const PYTHON = process.env.GA_PYTHON || path.join(repo, '.venv/bin/python');
export const CHROMIUM = process.env.GA_CHROMIUM || '/usr/bin/chromium';

/** A temp logdir holding `<case>/<file>.vis.db` for each fixture case (decompressed with xz). */
export function makeLogdir(cases, extra = () => {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ga-e2e-'));
  for (const c of cases) {
    const src = path.join(repo, 'tests/fixtures/upstream_vis', c);
    const dst = path.join(dir, c);
    fs.mkdirSync(dst, { mode: 0o755 });
    for (const f of fs.readdirSync(src).filter((x) => x.endsWith('.vis.db.xz'))) {
      const out = fs.openSync(path.join(dst, f.slice(0, -3)), 'w', 0o644);
      const { status, stderr } = spawnSyncXz(path.join(src, f), out);
      fs.closeSync(out);
      if (status !== 0) throw new Error(`xz -dc ${f}: ${stderr}`);
    }
  }
  extra(dir);
  return dir;
}

function spawnSyncXz(file, fd) {
  const r = spawnSync('xz', ['-dc', file], { stdio: ['ignore', fd, 'pipe'] });
  return { status: r.status, stderr: String(r.stderr ?? '') };
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Start TensorBoard on a free port (bound to `host`); resolves when the plugin answers on loopback. */
/** The test-support crate's program `name` (`gen_dump`, `copy_steps`), built first if missing. */
export function testkitBinary(name) {
  const bin = path.join(repo, 'target/release', name);
  if (!fs.existsSync(bin)) {
    const b = spawnSync('cargo', ['build', '--release', '--locked', '-q', '-p', 'graph-ascend-testkit', '--bin', name], { cwd: repo, stdio: 'inherit' });
    if (b.status !== 0) throw new Error(`cannot build ${name}`);
  }
  return bin;
}

export async function startTensorBoard(logdir, { pathPrefix = '', env: extraEnv = {}, host = '127.0.0.1' } = {}) {
  const port = await freePort();
  const args = ['-m', 'tensorboard.main', '--logdir', logdir, '--port', String(port), '--host', host];
  if (pathPrefix) args.push('--path_prefix', pathPrefix);
  const env = { ...process.env };
  const built = path.join(repo, 'target/release/graph-ascend');
  if (!env.GRAPH_ASCEND_BINARY && fs.existsSync(built)) env.GRAPH_ASCEND_BINARY = built;
  Object.assign(env, extraEnv);
  const proc = spawn(PYTHON, args, { cwd: repo, env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  let log = '';
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  const base = `http://127.0.0.1:${port}${pathPrefix}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`TensorBoard exited (${proc.exitCode}):\n${log}`);
    try {
      const r = await fetch(`${base}/data/plugin/graph_ascend/index.js`);
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) {
      stopProcess(proc);
      throw new Error(`TensorBoard did not come up on ${base}:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  const printed = () => /#graph_ascend&graph_ascend_token=([A-Za-z0-9_-]+)/.exec(log)?.[1];
  while (!printed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (!printed()) {
    stopProcess(proc);
    throw new Error(`TensorBoard printed no link with the write token:\n${log}`);
  }
  writeTokens.set(base, printed());
  return {
    base,
    port,
    token: printed(),
    log: () => log,
    stop: () => stopProcess(proc),
  };
}

function stopProcess(proc) {
  if (proc.exitCode !== null) return;
  try {
    process.kill(-proc.pid, 'SIGTERM');
  } catch {
    /* already gone */
  }
}

// Each TensorBoard's write token, by its base address: read from the link the plugin prints at start.
const writeTokens = new Map();

/**
 * The address a user opens: the page with the write token, as TensorBoard's console printed it (`token`:
 * for another address of that TensorBoard, a forwarded port or a proxy).
 */
export function pageAddress(base, token = writeTokens.get(base)) {
  return token ? `${base}/#graph_ascend&graph_ascend_token=${token}` : `${base}/#graph_ascend`;
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** The app's frame inside TensorBoard's plugin iframe, once it has navigated to index.html. */
export async function appFrame(page, timeout = 30_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const f = page.frames().find((x) => /\/data\/plugin\/graph_ascend\/index\.html/.test(x.url()));
    if (f) {
      await f.waitForSelector('[data-testid=sider]', { timeout: Math.max(1000, deadline - Date.now()) });
      return f;
    }
    if (Date.now() > deadline) throw new Error(`the GRAPH_ASCEND frame never loaded; frames: ${page.frames().map((x) => x.url()).join(', ')}`);
    await page.waitForTimeout(100);
  }
}

export async function screenshot(page, name) {
  fs.mkdirSync(artifacts, { recursive: true });
  const file = path.join(artifacts, `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}

/** Poll fn() in the frame until it returns a truthy value. */
export async function until(frame, fn, arg, timeout = 15_000) {
  const h = await frame.waitForFunction(fn, arg, { timeout, polling: 100 });
  return h.jsonValue();
}

/**
 * One TensorBoard over a fresh logdir and one browser for a `describe` block: registers its
 * before/after hooks and returns the object they fill ({ logdir, tb, browser }). `tbOptions` go to
 * `startTensorBoard` (`pathPrefix`, `env`, `host`).
 */
export function sharedStack(before, after, makeDir, tbOptions = {}) {
  const stack = { logdir: null, tb: null, browser: null };
  before(async () => {
    stack.logdir = makeDir();
    stack.tb = await startTensorBoard(stack.logdir, tbOptions);
    stack.browser = await launchBrowser();
  });
  after(async () => {
    await stack.browser?.close();
    stack.tb?.stop();
    if (stack.logdir) fs.rmSync(stack.logdir, { recursive: true, force: true });
  });
  return stack;
}

/**
 * Run `fn(page)` in a new page of the stack's browser: uncaught page errors fail the test; on a
 * failure the page is kept as `<name>-failure.png` and the message gets the errors the page showed
 * and the end of TensorBoard's log.
 */
export async function withStackPage(stack, name, viewport, fn) {
  const page = await stack.browser.newPage({ viewport });
  page.setDefaultTimeout(15_000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  try {
    await fn(page);
    if (errors.length) throw new Error(`errors in the page: ${errors.join('\n')}`);
  } catch (e) {
    await screenshot(page, `${name}-failure`).catch(() => {});
    const shown = await page.frames().find((f) => /graph_ascend\/index\.html/.test(f.url()))?.evaluate(() => window.__graphAscend?.errors ?? []).catch(() => []);
    if (shown?.length) e.message += `\n--- errors the page showed ---\n${shown.join('\n')}`;
    e.message += `\n--- TensorBoard log ---\n${stack.tb.log().slice(-1500)}`;
    throw e;
  } finally {
    await page.close();
  }
}
