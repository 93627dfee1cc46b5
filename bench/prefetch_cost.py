#!/usr/bin/env python3
"""What the diagnosis prefetched on opening a compare costs itself, in real TensorBoard: its wall time
from its start to its verdicts kept, with the page idle after opening the file ("idle": loadGraphData
and the config only) and with the page busy (the opening sequence of bench/service_bench.py, then its
steady-state round again and again until the prefetch is done). The background work runs at the idle
priority (plugin/service/src/background.rs), so the busy figure says how much the page's own requests
delay it, and that it finishes.

Each sample is a fresh TensorBoard (its sidecar started with `--log ...=debug`, whose line
"diagnosis of ... (Prefetch) done in N ms" is read from TensorBoard's output); the two ways alternate.

usage: prefetch_cost.py --logdir DIR [--runs N] [--out FILE]   (DIR: as for service_bench.py)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import service_bench as sb  # noqa: E402

DONE = re.compile(r"diagnosis of .* \(Prefetch\) done in ([0-9.]+) ms")
LOG_FLAGS = "--log info,graph_ascend_service::handlers::diagnosis=debug"


def prefetch_ms(log: Path) -> float | None:
    found = DONE.findall(log.read_text(errors="replace")) if log.exists() else []
    return float(found[-1]) if found else None


def one(logdir: Path, env: dict, target: sb.Target, busy: bool) -> tuple:
    """(prefetch ms, requests answered meanwhile) for one fresh TensorBoard."""
    log = logdir.parent / "tensorboard-prefetch.log"
    with sb.tensorboard(logdir, log, env) as (_, root, _):
        base = sb.plugin_base(root, sb.OURS)
        sb.call(base, "load_meta_dir", {})
        ops = target.first_answers(sb.OURS)
        answered = 0
        for _, route, body, query in ops if busy else ops[:2]:
            sb.call(base, route, body, query)
            answered += 1
        deadline = time.time() + 300
        while (ms := prefetch_ms(log)) is None:
            if time.time() > deadline:
                raise SystemExit(f"the prefetch did not finish in 300 s; see {log}")
            if busy:
                for _, route, body in target.steady(sb.OURS):
                    sb.call(base, route, body)
                    answered += 1
            else:
                time.sleep(0.01)
        return ms, answered


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=5, help="samples of each way")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    env = dict(os.environ)
    env["GRAPH_ASCEND_SERVE_FLAGS"] = (env.get("GRAPH_ASCEND_SERVE_FLAGS", "") + " " + LOG_FLAGS).strip()
    with sb.tensorboard(args.logdir, args.logdir.parent / "tensorboard-prefetch.log", env) as (_, root, _):
        meta_dir, _, _ = sb.call(sb.plugin_base(root, sb.OURS), "load_meta_dir", {})
        run, info = sorted((meta_dir.get("data") or {}).items())[0]
        target = sb.Target.discover(sb.plugin_base(root, sb.OURS), run, info["tags"][0])
    before = sb.load_average()
    samples = {"idle": [], "busy": []}
    requests = []
    for i in range(args.runs):
        for way in (("idle", "busy") if i % 2 == 0 else ("busy", "idle")):
            ms, answered = one(args.logdir, env, target, way == "busy")
            samples[way].append(ms)
            if way == "busy":
                requests.append(answered)
    after = sb.load_average()
    idle, busy = statistics.median(samples["idle"]), statistics.median(samples["busy"])
    lines = [f"# The prefetched diagnosis's own time ({run}, {os.cpu_count()} cores, {args.runs} fresh starts a way)",
             "", f"Load average (1, 5, 15 min): {before} → {after}.", "",
             "| page | prefetch wall ms, median (min–max) | requests answered meanwhile |", "|---|---:|---:|",
             f"| idle after opening | {sb.spread(samples['idle'])} | 2 |",
             f"| busy (opening sequence, then steady rounds) | {sb.spread(samples['busy'])} | "
             f"{statistics.median(requests):.0f} |", "",
             f"Busy / idle: {busy / idle:.2f}x.", ""]
    sb.report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
