#!/usr/bin/env python3
"""Benchmark of the shim's cost (not a test): python tests/shim/bench_shim.py [--vis-db FILE] [-n 200]

Latency per route, median over n calls: through real TensorBoard (HTTP -> shim -> gRPC -> sidecar) vs.
the same call (CallJson: the RPC, its answer rendered as JSON by the sidecar) straight to a sidecar over
its Unix socket, and TensorBoard's own /data/environment as the floor of any TensorBoard route. (The
sidecar's side alone, JSON rendering included: `cargo run --release -p graph-ascend-service --example
read_bench`.)

Needs GRAPH_ASCEND_BINARY (default target/release/graph-ascend); GRAPH_ASCEND_DESCRIPTOR is honoured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import UPSTREAM_VIS, TensorBoard, binary_path, decompress_case, meta_for
from graph_ascend_tb.jsonmap import RequestDecoder
from graph_ascend_tb.plugin import load_descriptor_bytes
from graph_ascend_tb.schema import Schema, json_answer_bytes
from graph_ascend_tb.sidecar import CHANNEL_OPTIONS


def median_ms(fn, n):
    fn()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def http(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.read()


def start_sidecar(logdir: Path, tmp: Path):
    ready = tmp / "ready"
    proc = subprocess.Popen(
        [str(binary_path()), "serve", "--logdir", str(logdir), "--ready-file", str(ready), "--die-after-stdin"],
        stdin=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.read_text().endswith("\n")):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("the sidecar did not start")
        time.sleep(0.01)
    return proc, "unix:" + ready.read_text().strip()


def latency(args, schema, decoder):
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        logdir = tmp / "logdir"
        if args.vis_db:
            (logdir / "run").mkdir(parents=True)
            db = logdir / "run" / Path(args.vis_db).name
            db.write_bytes(Path(args.vis_db).read_bytes())
        else:
            case = max(UPSTREAM_VIS.glob("*/*.vis.db.xz"), key=lambda p: p.stat().st_size).parent.name
            db = decompress_case(case, logdir / "run")
        tag = db.name[: -len(".vis.db")]
        meta = meta_for("run", tag)
        os.environ.setdefault("GRAPH_ASCEND_BINARY", str(binary_path()))
        tb = TensorBoard(logdir, tmp / "tb.log")
        proc, target = start_sidecar(logdir, tmp)
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        try:
            base = tb.url("data/plugin/graph_ascend/")
            http(base + "load_meta_dir", {})
            root = json.loads(
                http(
                    base + "changeNodeExpandState",
                    {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta},
                )
            )
            node = sorted(root.get("data", {}) or {"root": 0})[-1]
            calls = [
                ("load_meta_dir", {}),
                ("loadGraphConfigInfo", {"metaData": meta}),
                ("loadGraphAllNodeList", {"metaData": meta}),
                ("changeNodeExpandState", {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta}),
                ("getNodeInfo", {"nodeInfo": {"nodeName": node, "nodeType": "NPU"}, "metaData": meta}),
            ]
            print(f"latency, median of {args.n} ({db.name}, {db.stat().st_size // 1024} KiB)")
            floor = median_ms(lambda: http(tb.url("data/environment")), args.n)
            print(f"  TensorBoard /data/environment (floor): {floor:6.2f} ms")
            print(f"  {'route':24s} {'via TensorBoard':>16s} {'direct gRPC':>12s} {'answer bytes':>13s}")
            for route_name, body in calls:
                route = schema.routes[route_name]
                message = decoder.request_from_http(route.request_class, body=body)
                request = schema.json_call_class(method=route.rpc, request=message.SerializeToString())
                rpc = channel.unary_unary(
                    schema.call_json_method,
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=json_answer_bytes,
                )
                via = median_ms(lambda r=route_name, b=body: http(base + r, b), args.n)
                direct = median_ms(lambda rpc=rpc, request=request: rpc(request), args.n)
                size = len(http(base + route_name, body))
                print(f"  {route_name:24s} {via:13.2f} ms {direct:9.2f} ms {size:13d}")
        finally:
            channel.close()
            proc.stdin.close()
            proc.wait(10)
            tb.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vis-db", help="a .vis.db to serve (default: the largest fixture)")
    parser.add_argument("-n", type=int, default=200)
    args = parser.parse_args()
    schema = Schema(*load_descriptor_bytes())
    latency(args, schema, RequestDecoder(schema))


if __name__ == "__main__":
    main()
