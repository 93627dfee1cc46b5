#!/usr/bin/env python3
"""Serves one gathered .vis.db in real TensorBoard and times its first answers (scale simulation).

The file holds the graphs of many ranks; the page's first requests are timed once each, as on a
fresh start: the catalog, the config (rank and step lists), the first root layout of the first
and of the last rank, and the node list of the last rank. Prints one line per answer and the
sidecar's peak memory (VmHWM). With --steps N, the node list of every step 0..N-1 and rank 0..R is
asked for too (each graph's index built once, under the sidecar's index memory bound; set it with
--max-index-memory-mb), and the sidecar's memory after that (VmRSS) is printed. With
--table-row FILE, the figures are also appended to FILE as one row of docs/scale.md's table.

usage: scale_serve.py --logdir DIR --last-rank R [--steps N [--max-index-memory-mb MB]] [--table-row FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_bench import call, children, free_port, stop, vm_hwm_kb


def vm_kb(pid: int, field: str) -> int:
    """A memory figure of /proc/PID/status, in kB (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", required=True, type=Path)
    ap.add_argument("--last-rank", required=True, type=int)
    ap.add_argument("--steps", type=int, default=0, help="then touch every graph of steps 0..N-1")
    ap.add_argument("--max-index-memory-mb", type=int, help="the sidecar's bound on its indexes")
    ap.add_argument("--table-row", type=Path, help="append the figures to this file as a Markdown table row")
    args = ap.parse_args()
    if args.max_index_memory_mb is not None:
        # The shim adds these flags to the sidecar's command line.
        os.environ["GRAPH_ASCEND_SERVE_FLAGS"] = f"--max-index-memory-mb {args.max_index_memory_mb}"
    port = free_port()
    log = open(args.logdir.parent / "tensorboard-scale.log", "w")  # noqa: SIM115 (open until the end)
    started = time.perf_counter()
    tb = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(args.logdir), "--port", str(port),
         "--host", "127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    root = f"http://127.0.0.1:{port}"
    base = f"{root}/data/plugin/graph_ascend"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{root}/data/plugins_listing", timeout=5).read()
                break
            except OSError:
                if time.time() > deadline or tb.poll() is not None:
                    raise SystemExit("TensorBoard did not start; see tensorboard-scale.log") from None
                time.sleep(0.5)
        up_ms = (time.perf_counter() - started) * 1000
        print(f"{'TensorBoard up':<34} {up_ms:9.0f} ms")
        # (what, time) of each timed answer, for the table row.
        figures = [("TensorBoard up", f"{up_ms / 1000:.1f} s")]

        def timed(label, route, body=None, query=""):
            answer, ms, size = call(base, route, body, query)
            print(f"{label:<34} {ms:9.1f} ms  ({size} bytes)")
            figures.append((label, f"{ms:.0f} ms"))
            return answer

        listing = timed("first catalog (load_meta_dir)", "load_meta_dir", {})
        runs = sorted((listing.get("data") or {}).items())
        if not runs:
            raise SystemExit(f"no run listed: {listing}")
        run, info = runs[0]
        tag = info["tags"][0]
        for rank in (0, args.last_rank):
            meta = {"run": run, "tag": tag, "type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": rank}
            if rank == 0:
                cfg = timed("first config (ranks, steps)", "loadGraphConfigInfo", {"metaData": meta})
                ranks = (cfg.get("data") or {}).get("ranks") or []
                print(f"{'  ranks listed':<34} {len(ranks):9d}")
                figures[-1] = (f"first config ({len(ranks)} ranks)", figures[-1][1])
            timed(f"first root layout, rank {rank}", "changeNodeExpandState",
                  {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta})
            timed(f"node list, rank {rank}", "loadGraphAllNodeList", {"metaData": meta})
        if args.steps:
            started_all = time.perf_counter()
            for step in range(args.steps):
                for rank in range(args.last_rank + 1):
                    meta = {"run": run, "tag": tag, "type": "db", "lang": "en", "microStep": -1,
                            "step": step, "rank": rank}
                    answer, _, _ = call(base, "loadGraphAllNodeList", {"metaData": meta})
                    if not answer.get("success"):
                        raise SystemExit(f"node list of step {step} rank {rank}: {answer}")
            graphs = args.steps * (args.last_rank + 1)
            all_ms = (time.perf_counter() - started_all) * 1000
            print(f"{f'node lists of all {graphs} graphs':<34} {all_ms:9.0f} ms")
            figures.append((f"node lists of all {graphs} graphs", f"{all_ms / 1000:.1f} s"))
            rss = max((vm_kb(p, "VmRSS") for p in children(tb.pid)), default=0)
            print(f"{'sidecar memory after (VmRSS)':<34} {rss / 1024:9.0f} MB")
        sidecars = children(tb.pid)
        peak = max((vm_hwm_kb(p) for p in sidecars), default=0)
        tb_peak = vm_hwm_kb(tb.pid)
        print(f"{'sidecar peak memory (VmHWM)':<34} {peak / 1024:9.0f} MB")
        print(f"{'TensorBoard peak memory (VmHWM)':<34} {tb_peak / 1024:9.0f} MB")
        if args.table_row:
            bound = args.max_index_memory_mb
            memory = f"sidecar {peak / 1024:.0f} MB peak"
            if args.steps:
                memory += f", {rss / 1024:.0f} MB after"
            memory += f" (index bound {f'{bound} MB' if bound is not None else 'default'})"
            memory += f"; TensorBoard {tb_peak / 1024:.0f} MB"
            labels = " / ".join(label for label, _ in figures)
            times = " / ".join(value for _, value in figures)
            with args.table_row.open("a") as table:
                table.write(f"| served: {labels} | {times} | {memory} |\n")
    finally:
        stop(tb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
