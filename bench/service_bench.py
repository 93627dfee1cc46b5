#!/usr/bin/env python3
"""Times the GRAPH_ASCEND browser API in real TensorBoard: ours, and msprobe 26.2's side by side.

One TensorBoard process serves both plugins: ours at /data/plugin/graph_ascend, and (when msprobe's
wheel is on PYTHONPATH, see --msprobe) msprobe's own, which our plugin renames to graph_ascend_msprobe
so that both load. Every request is sent as the page sends it; each is repeated and reported as
p50/p99 in milliseconds, with the peak memory of our sidecar and of the TensorBoard process.

usage: service_bench.py --logdir DIR [--msprobe TARGET_DIR] [--repeat N] [--out results.md]
The logdir holds run folders with one .vis.db each (e.g. compare_big/, synth_1m/).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, route: str, body=None, query: str = "", client: str = "bench"):
    url = f"{base}/{route}" + (f"?{query}" if query else "")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url,
        data=data,
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", "X-Graph-Ascend-Client": client},
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    ms = (time.perf_counter() - t0) * 1000
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text.replace("NaN", "null")), ms, len(raw)
    except ValueError:
        return {"__raw__": text[:200]}, ms, len(raw)


def vm_hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(p.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def pct(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[k]


def report(lines: list, out) -> None:
    """Prints the result table and writes it to `out` (a path, or None)."""
    text = "\n".join(lines)
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


@contextlib.contextmanager
def tensorboard(logdir: Path, log_path: Path, env: dict):
    """Real TensorBoard on a free loopback port serving `logdir`, its output in `log_path`:
    yields (process, root URL, plugins listing); stopped on exit."""
    port = free_port()
    log = open(log_path, "w")  # noqa: SIM115 (TensorBoard's output, open until the end)
    tb = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--port", str(port),
         "--host", "127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                listing = json.loads(urllib.request.urlopen(f"{root}/data/plugins_listing", timeout=5).read())
                break
            except OSError:
                if time.time() > deadline or tb.poll() is not None:
                    raise SystemExit(f"TensorBoard did not start; see {log_path}") from None
                time.sleep(0.5)
        yield tb, root, listing
    finally:
        tb.terminate()
        try:
            tb.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tb.kill()
        log.close()


def suite(base: str, run: str, tag: str, repeat: int, ours: bool):
    """Times each operation `repeat` times; returns {operation: [ms...]} and answer sizes."""
    meta = {"run": run, "tag": tag, "type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": 0}
    times: dict = {}
    sizes: dict = {}

    def timed(name, route, body=None, query=""):
        answer, ms, size = call(base, route, body, query)
        times.setdefault(name, []).append(ms)
        sizes[name] = size
        return answer

    flat = "&".join(f"{k}={v}" for k, v in meta.items())
    call(base, "load_meta_dir", {})
    call(base, "loadGraphData", None, flat)
    cfg, _, _ = call(base, "loadGraphConfigInfo", {"metaData": meta})
    single = bool((cfg.get("data") or {}).get("isSingleGraph"))
    side = "Single" if single else "NPU"
    if ours:  # the first search right after the page loads the file (once: it may wait for the index)
        timed("first name search (once, at load)", "searchNodes",
              {"metaData": meta, "graphType": "NPU", "query": "linear.12", "limit": 200})
    # The first answers the page asks for, once each, as on a fresh start.
    names_answer = timed("first node list", "loadGraphAllNodeList", {"metaData": meta})
    names = (names_answer.get("data") or {}).get("npuNodeList") or []
    leaves = [n for n in names if n.startswith(("Functional.", "Torch.", "Tensor."))]
    deep = leaves[len(leaves) // 2] if leaves else (names[len(names) // 2] if names else "root")
    module = next((n for n in reversed(names) if n.startswith("Module.") and ".forward." in n), None)
    timed("first root layout", "changeNodeExpandState",
          {"nodeInfo": {"nodeName": "root", "nodeType": side}, "metaData": meta})
    if module:
        timed("first module expansion", "changeNodeExpandState",
              {"nodeInfo": {"nodeName": module, "nodeType": side}, "metaData": meta})
    for _ in range(repeat):
        timed("list catalog", "load_meta_dir", {})
        timed("load config", "loadGraphConfigInfo", {"metaData": meta})
        timed("root expansion", "changeNodeExpandState",
              {"nodeInfo": {"nodeName": "root", "nodeType": side}, "metaData": meta})
        if module:
            timed("module expansion", "changeNodeExpandState",
                  {"nodeInfo": {"nodeName": module, "nodeType": side}, "metaData": meta})
        timed("expand to deep node", "changeNodeExpandState",
              {"nodeInfo": {"nodeName": deep, "nodeType": side}, "metaData": meta})
        timed("node info", "getNodeInfo", {"nodeInfo": {"nodeName": deep, "nodeType": side}, "metaData": meta})
        timed("full node list", "loadGraphAllNodeList", {"metaData": meta})
        if ours:
            timed("name search", "searchNodes",
                  {"metaData": meta, "graphType": "NPU", "query": "linear.12", "limit": 200})
        if not single:
            timed("precision filter", "filterNodes",
                  {"metaData": meta, "type": "precision", "values": ["pass", "warning", "error", -1]})
            timed("matched relations", "loadGraphMatchedRelations", {"metaData": meta})
    return times, sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logdir", required=True, type=Path)
    ap.add_argument("--msprobe", type=Path, help="pip --target folder holding mindstudio-probe 26.2 and its plugin deps")
    ap.add_argument("--msprobe-runs", default="", help="comma-separated runs msprobe is timed on (default: all)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    env = dict(os.environ)
    if args.msprobe:
        env["PYTHONPATH"] = str(args.msprobe) + os.pathsep + env.get("PYTHONPATH", "")
    log_path = args.logdir.parent / "tensorboard-bench.log"
    with tensorboard(args.logdir, log_path, env) as (tb, root, listing):
        backends = [("graph-ascend", f"{root}/data/plugin/graph_ascend", True)]
        if "graph_ascend_msprobe" in listing:
            backends.append(("msprobe 26.2", f"{root}/data/plugin/graph_ascend_msprobe", False))
        meta_dir, _, _ = call(backends[0][1], "load_meta_dir", {})
        runs = sorted((meta_dir.get("data") or {}).items())
        msprobe_runs = set(filter(None, args.msprobe_runs.split(",")))
        lines = [f"# GRAPH_ASCEND API timings (real TensorBoard, {args.repeat} repetitions, ms)", ""]
        for run, info in runs:
            tag = info["tags"][0]
            results = {}
            for name, base, ours in backends:
                if not ours and msprobe_runs and run not in msprobe_runs:
                    continue
                if not ours:
                    call(base, "load_meta_dir", {})
                results[name] = suite(base, run, tag, args.repeat, ours)
            lines += [f"## {run}/{tag}", "",
                      "| operation | " + " | ".join(f"{n} p50 | {n} p99" for n in results) +
                      (" | ratio (p50) |" if len(results) == 2 else " |"),
                      "|---|" + "---:|" * (2 * len(results) + (1 if len(results) == 2 else 0))]
            ops = list(next(iter(results.values()))[0].keys())
            for other in list(results.values())[1:]:
                ops += [o for o in other[0] if o not in ops]
            for op in ops:
                cells = []
                p50s = []
                for times, _ in results.values():
                    t = times.get(op)
                    cells += [f"{pct(t, .5):.1f}", f"{pct(t, .99):.1f}"] if t else ["–", "–"]
                    p50s.append(pct(t, .5) if t else None)
                ratio = ""
                if len(results) == 2:
                    ratio = f" {p50s[1] / p50s[0]:.1f}x |" if all(p50s) else " – |"
                lines.append(f"| {op} | " + " | ".join(cells) + " |" + ratio)
            lines.append("")
        # TensorBoard's own smallest request: the floor of any plugin route.
        floor = [call(root, "data/environment")[1] for _ in range(args.repeat)]
        lines += [f"TensorBoard's own request (/data/environment): p50 {pct(floor, .5):.1f} ms, "
                  f"p99 {pct(floor, .99):.1f} ms.", ""]
        sidecars = [p for p in children(tb.pid)]
        side_kb = max((vm_hwm_kb(p) for p in sidecars), default=0)
        lines += [(f"Peak memory: graph-ascend sidecar {side_kb / 1024:.0f} MB; TensorBoard process (with msprobe's "
                   f"plugin state when loaded) {vm_hwm_kb(tb.pid) / 1024:.0f} MB."), ""]
        report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
