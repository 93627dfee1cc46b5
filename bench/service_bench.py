#!/usr/bin/env python3
"""Times the GRAPH_ASCEND browser API in real TensorBoard: ours, and msprobe 26.2's side by side.

One TensorBoard process serves both plugins: ours at /data/plugin/graph_ascend, and (when msprobe's
wheel is on PYTHONPATH, see --msprobe) msprobe's own, which our plugin renames to graph_ascend_msprobe
so that both load. Every request is sent as the page sends it; each is repeated and reported as
p50/p99 in milliseconds, with the peak memory of our sidecar and of the TensorBoard process.

usage: service_bench.py --logdir DIR [--msprobe TARGET_DIR] [--repeat N] [--out results.md]
The logdir holds run folders with one .vis.db each (e.g. compare_big/, synth_1m/).

The first answers (node list, root layout, module expansion, on a fresh TensorBoard) are then set
against the goal of issue 11: at least 5x faster than msprobe's, or within 3 ms of TensorBoard's own
smallest request (`/data/environment`, timed right before each first answer, median of 5, so that
both see the same load). Without msprobe (--msprobe), msprobe's figures recorded in issue 11 on the
same 48-layer file stand in, marked as such.
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


# The goal for the first answers: this many times faster than msprobe's, or within this many ms
# of TensorBoard's own request cost.
GOAL_RATIO = 5.0
GOAL_OVER_FLOOR_MS = 3.0
# msprobe 26.2's first answers on the 48-layer compare file (compare_big), fresh start, as issue 11
# recorded them: the stand-in when msprobe's plugin is not installed.
ISSUE_MSPROBE_FIRST_MS = {"first node list": 265.0, "first root layout": 45.0, "first module expansion": 7.9}
FLOOR_SAMPLES = 5


def floor_ms(root: str) -> float:
    """TensorBoard's own smallest request now: the median of a few `/data/environment` calls."""
    return pct([call(root, "data/environment")[1] for _ in range(FLOOR_SAMPLES)], .5)


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
        stop(tb)
        log.close()


def suite(base: str, run: str, tag: str, repeat: int, ours: bool, root: str = ""):
    """Times each operation `repeat` times; returns {operation: [ms...]} and answer sizes."""
    meta = {"run": run, "tag": tag, "type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": 0}
    times: dict = {}
    sizes: dict = {}

    floors: dict = {}

    def timed(name, route, body=None, query=""):
        if name.startswith("first ") and root:
            floors[name] = floor_ms(root)
        answer, ms, size = call(base, route, body, query)
        times.setdefault(name, []).append(ms)
        sizes[name] = size
        return answer

    flat = "&".join(f"{k}={v}" for k, v in meta.items())
    call(base, "load_meta_dir", {})
    # The page's order on opening a file; the first answers are timed once each, as on a fresh
    # start, each from the moment the previous one arrived (ours indexes the file in the
    # background from loadGraphData on; msprobe's loadGraphData reads the whole file first).
    timed("open file (loadGraphData)", "loadGraphData", None, flat)
    cfg = timed("first config", "loadGraphConfigInfo", {"metaData": meta})
    single = bool((cfg.get("data") or {}).get("isSingleGraph"))
    side = "Single" if single else "NPU"
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
    if ours:
        timed("first name search", "searchNodes",
              {"metaData": meta, "graphType": "NPU", "query": "linear.12", "limit": 200})
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
    return times, sizes, floors


def goal_table(results: dict, run: str) -> list:
    """The first answers against the goal, as markdown lines."""
    ours_name = "graph-ascend"
    ours_times, _, floors = results[ours_name]
    other = next((n for n in results if n != ours_name), None)
    source = other or "issue 11's msprobe figures (msprobe not installed here)"
    lines = [f"### First answers against the goal (>= {GOAL_RATIO:.0f}x msprobe, or <= TensorBoard's own "
             f"request + {GOAL_OVER_FLOOR_MS:.0f} ms); msprobe: {source}", "",
             "| first answer | ours ms | msprobe ms | ratio | TB floor ms | ours - floor ms | goal |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for op in ("first node list", "first root layout", "first module expansion"):
        t = ours_times.get(op)
        if not t:
            continue
        ours = t[0]
        if other:
            theirs = (results[other][0].get(op) or [None])[0]
        else:
            theirs = ISSUE_MSPROBE_FIRST_MS.get(op) if run == "compare_big" else None
        floor = floors.get(op, float("nan"))
        ratio = theirs / ours if theirs else None
        met = (ratio is not None and ratio >= GOAL_RATIO) or ours - floor <= GOAL_OVER_FLOOR_MS
        lines.append(f"| {op} | {ours:.1f} | {f'{theirs:.1f}' if theirs else '–'} | "
                     f"{f'{ratio:.1f}x' if ratio else '–'} | {floor:.1f} | {ours - floor:.1f} | "
                     f"{'met' if met else 'NOT met'} |")
    return lines + [""]


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
                results[name] = suite(base, run, tag, args.repeat, ours, root)
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
                for times, _, _ in results.values():
                    t = times.get(op)
                    cells += [f"{pct(t, .5):.1f}", f"{pct(t, .99):.1f}"] if t else ["–", "–"]
                    p50s.append(pct(t, .5) if t else None)
                ratio = ""
                if len(results) == 2:
                    ratio = f" {p50s[1] / p50s[0]:.1f}x |" if all(p50s) else " – |"
                lines.append(f"| {op} | " + " | ".join(cells) + " |" + ratio)
            lines.append("")
            lines += goal_table(results, run)
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


def stop(tb: subprocess.Popen) -> None:
    """Stops TensorBoard (and with it our sidecar), killing it if it does not end in 20 s."""
    tb.terminate()
    try:
        tb.wait(timeout=20)
    except subprocess.TimeoutExpired:
        tb.kill()


if __name__ == "__main__":
    sys.exit(main())
