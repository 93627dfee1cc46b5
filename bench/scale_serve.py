#!/usr/bin/env python3
"""Serves one gathered .vis.db in real TensorBoard and times its first answers (scale simulation).

The file holds the graphs of many ranks; the page's first requests are timed once each, as on a
fresh start: the catalog, the config (rank and step lists), the first root layout of the first
and of the last rank, and the node list of the last rank. Prints one line per answer and the
sidecar's peak memory (VmHWM).

usage: scale_serve.py --logdir DIR --last-rank R
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_bench import call, children, free_port, stop, vm_hwm_kb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", required=True, type=Path)
    ap.add_argument("--last-rank", required=True, type=int)
    args = ap.parse_args()
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
        print(f"{'TensorBoard up':<34} {(time.perf_counter() - started) * 1000:9.0f} ms")

        def timed(label, route, body=None, query=""):
            answer, ms, size = call(base, route, body, query)
            print(f"{label:<34} {ms:9.1f} ms  ({size} bytes)")
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
            timed(f"first root layout, rank {rank}", "changeNodeExpandState",
                  {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta})
            timed(f"node list, rank {rank}", "loadGraphAllNodeList", {"metaData": meta})
        sidecars = children(tb.pid)
        peak = max((vm_hwm_kb(p) for p in sidecars), default=0)
        print(f"{'sidecar peak memory (VmHWM)':<34} {peak / 1024:9.0f} MB")
        print(f"{'TensorBoard peak memory (VmHWM)':<34} {vm_hwm_kb(tb.pid) / 1024:9.0f} MB")
    finally:
        stop(tb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
