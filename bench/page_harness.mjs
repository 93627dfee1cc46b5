// What the page benchmarks share (bench/diagnosis_page.mjs, bench/map_page.mjs): real TensorBoard with the
// shim and its real sidecar over a logdir, headless Chromium, and the sidecar's own figures (CPU time, peak
// memory) read from /proc. Start-up and teardown only; each bench measures its own way.
//   const stack = await startStack(logdir);   // TensorBoard (and, on the first request, its sidecar)
//   stack.sidecar()                          // the sidecar's pid once it runs (null before)
//   await stack.stop();                      // TensorBoard stopped, its sidecar waited for
import fs from 'node:fs';
import { launchBrowser, startTensorBoard } from '../tests/e2e/harness.mjs';

export { appFrame, launchBrowser, pageAddress, until } from '../tests/e2e/harness.mjs';

/** The load average (1, 5, 15 minutes), as /proc/loadavg gives it. */
export const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const TICK = 100; // clock ticks a second (USER_HZ) on Linux

/** The sidecars serving `logdir` (their command lines name it). */
export function sidecarPids(logdir) {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (cmd.includes('serve') && cmd.some((a) => a.includes(logdir)) && /graph-ascend$/.test(cmd[0])) out.push(Number(pid));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** A process's peak resident memory (MB, VmHWM) and CPU time so far (s, user + system); nulls once it is gone. */
export function usage(pid) {
  try {
    const hwm = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { peak_rss_mb: hwm ? Math.round(Number(hwm[1]) / 1024) : null, cpu_s: (Number(fields[11]) + Number(fields[12])) / TICK };
  } catch {
    return { peak_rss_mb: null, cpu_s: null };
  }
}

/**
 * A fresh TensorBoard over `logdir` (so a fresh sidecar once the page asks: nothing cached). `sidecar()` is
 * ours: the one serving `logdir` that was not there before. `stop()` stops TensorBoard and waits (up to
 * 30 s) for its sidecar to end (it reads its stdin), so that the next stack's is alone.
 */
export async function startStack(logdir) {
  const before = new Set(sidecarPids(logdir));
  const tb = await startTensorBoard(logdir);
  const ours = () => sidecarPids(logdir).filter((p) => !before.has(p));
  return {
    tb,
    base: tb.base,
    sidecar: () => ours()[0] ?? null,
    async stop() {
      tb.stop();
      const deadline = Date.now() + 30_000;
      while (ours().length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    },
  };
}

/** Headless Chromium for `run(browser)`, closed after it whatever happens. */
export async function withBrowser(run) {
  const browser = await launchBrowser();
  try {
    return await run(browser);
  } finally {
    await browser.close();
  }
}
