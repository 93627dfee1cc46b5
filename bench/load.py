#!/usr/bin/env python3
"""Load test (not a test): many concurrent browser clients through real TensorBoard with the plugin.

For each client count (default 20 and 100), that many threads, each its own client id (as separate
browser tabs are), send the page's read requests in a loop for a fixed time: catalog, config, root
and module expansions, node details, node lists, name search, precision filter. Reported per phase:
requests, errors (transport errors, HTTP status >= 400, or an answer with success false), requests
per second, p50/p99 latency, and the peak memory (VmHWM) of TensorBoard and of the sidecar so far.

usage: load.py --logdir DIR [--clients 20,100] [--seconds 30] [--out results.md]
The logdir holds one run folder with one compare .vis.db (bench/load.sh makes it).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
import urllib.error
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_bench import call, children, pct, report, tensorboard, vm_hwm_kb


def client_loop(base: str, client: str, meta: dict, names: list, module: str, until: float, out: list) -> None:
    """One client's requests until `until`; appends (ms, ok) per request to `out`."""
    rng = random.Random(client)
    side = "NPU"
    ops = [
        ("load_meta_dir", lambda: {}),
        ("loadGraphConfigInfo", lambda: {"metaData": meta}),
        ("changeNodeExpandState", lambda: {"nodeInfo": {"nodeName": "root", "nodeType": side}, "metaData": meta}),
        ("changeNodeExpandState", lambda: {"nodeInfo": {"nodeName": module, "nodeType": side}, "metaData": meta}),
        ("getNodeInfo", lambda: {"nodeInfo": {"nodeName": rng.choice(names), "nodeType": side}, "metaData": meta}),
        ("loadGraphAllNodeList", lambda: {"metaData": meta}),
        ("searchNodes", lambda: {"metaData": meta, "graphType": "NPU", "query": "linear", "limit": 50}),
        ("filterNodes", lambda: {"metaData": meta, "type": "precision", "values": ["pass", "warning", "error", -1]}),
    ]
    while time.time() < until:
        route, body = rng.choice(ops)
        t0 = time.perf_counter()
        try:
            answer, ms, _ = call(base, route, body(), client=client)
            ok = answer.get("success", True) is not False and "__raw__" not in answer
        except (OSError, urllib.error.HTTPError, ValueError):
            ms, ok = (time.perf_counter() - t0) * 1000, False
        out.append((ms, ok))


def phase(base: str, clients: int, seconds: float, meta: dict, names: list, module: str) -> dict:
    results: list = [[] for _ in range(clients)]
    until = time.time() + seconds
    threads = [
        threading.Thread(target=client_loop, args=(base, f"load-{clients}-{i}", meta, names, module, until, results[i]))
        for i in range(clients)
    ]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0
    flat = [r for rs in results for r in rs]
    times = [ms for ms, _ in flat]
    return {
        "requests": len(flat),
        "errors": sum(1 for _, ok in flat if not ok),
        "rps": len(flat) / elapsed,
        "p50": pct(times, 0.5),
        "p99": pct(times, 0.99),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", required=True, type=Path)
    ap.add_argument("--clients", default="20,100")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    with tensorboard(args.logdir, args.logdir.parent / "tensorboard-load.log", dict(os.environ)) as (tb, root, _):
        base = f"{root}/data/plugin/graph_ascend"
        meta_dir, _, _ = call(base, "load_meta_dir", {})
        run, info = sorted((meta_dir.get("data") or {}).items())[0]
        meta = {"run": run, "tag": info["tags"][0], "type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": 0}
        call(base, "loadGraphConfigInfo", {"metaData": meta})
        names = (call(base, "loadGraphAllNodeList", {"metaData": meta})[0].get("data") or {}).get("npuNodeList") or []
        if not names:
            raise SystemExit(f"{run}: no nodes")
        module = next((n for n in names if n.startswith("Module.") and ".forward." in n), names[0])
        lines = [f"# Load test: concurrent clients through real TensorBoard ({os.cpu_count()} cores, "
                 f"{args.seconds:.0f} s a phase, {run}/{meta['tag']}, {len(names)} nodes a side)", "",
                 "| clients | requests | errors | req/s | p50 ms | p99 ms | TensorBoard peak MB | sidecar peak MB |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for clients in [int(c) for c in args.clients.split(",") if c]:
            r = phase(base, clients, args.seconds, meta, names, module)
            side_kb = max((vm_hwm_kb(p) for p in children(tb.pid)), default=0)
            lines.append(f"| {clients} | {r['requests']} | {r['errors']} | {r['rps']:.0f} | {r['p50']:.1f} | "
                         f"{r['p99']:.1f} | {vm_hwm_kb(tb.pid) / 1024:.0f} | {side_kb / 1024:.0f} |")
            print(lines[-1], flush=True)
        lines += ["", "Peak memory is the high-water mark since start (VmHWM), so a later phase includes the "
                  "earlier ones. Clients are Python threads in one process: on a small machine they share "
                  "the cores with TensorBoard and the sidecar.", ""]
        report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
