#!/usr/bin/env python3
"""Benchmark of the hop TensorBoard -> shim -> gRPC -> sidecar, part by part (not a test):

    python tests/shim/bench_shim.py [--vis-db FILE] [-n 200]

For each route, the median over n calls (the same request each time; an expansion toggles, so half
the calls open the module and half close it, both answering every visible box):

- via TensorBoard: real TensorBoard in a subprocess, the request sent as the page sends it (HTTP ->
  werkzeug -> TensorBoard's routing -> the shim -> gRPC -> sidecar -> back);
- in-process: the shim's WSGI app called directly in this process (the shim, gRPC, the sidecar; no
  HTTP, no TensorBoard);
- direct gRPC: the same ``CallJson`` sent by a bare client loop over the sidecar's Unix socket (gRPC's
  Python client, the socket, tonic, the sidecar's handler and JSON rendering);
- shim Python: the in-process call with the gRPC call replaced by the answer's bytes (what the shim's
  own Python costs: request parsing, route lookup, decoding, the answer's headers; CPU time of the calling thread);

and TensorBoard's own ``/data/environment`` as the floor of any TensorBoard route. Differences give
the parts: HTTP and TensorBoard = via TensorBoard - in-process; the shim's Python ~ shim Python;
transport = direct gRPC - the sidecar's own time, which `cargo run --release -p graph-ascend-service
--example read_bench -- <logdir>` prints (handler and JSON rendering, in-process).

Needs GRAPH_ASCEND_BINARY (default target/release/graph-ascend); GRAPH_ASCEND_DESCRIPTOR is honoured.
The machine's load changes every figure: compare runs made back to back.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import UPSTREAM_VIS, TensorBoard, binary_path, decompress_case, meta_for
from graph_ascend_tb.jsonmap import RequestDecoder
from graph_ascend_tb.plugin import GraphAscendPlugin, load_descriptor_bytes
from graph_ascend_tb.schema import Schema, json_answer_bytes
from graph_ascend_tb.sidecar import CHANNEL_OPTIONS

CLIENT = "bench"


def median_ms(fn, n, clock=time.perf_counter):
    fn()
    samples = []
    for _ in range(n):
        t = clock()
        fn()
        samples.append((clock() - t) * 1000)
    return statistics.median(samples)


def http(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "X-Graph-Ascend-Client": CLIENT}
    req = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(req) as r:
        return r.read()


def wsgi_call(plugin: GraphAscendPlugin, route: str, body) -> bytes:
    """The shim's WSGI app, called as TensorBoard's server calls it."""
    raw = json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": f"/data/plugin/graph_ascend/{route}",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "6006",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)),
        "HTTP_HOST": "127.0.0.1:6006",
        "HTTP_X_GRAPH_ASCEND_CLIENT": CLIENT,
        "wsgi.input": io.BytesIO(raw),
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.errors": sys.stderr,
    }
    out = plugin._wsgi(environ, lambda status, headers, exc_info=None: None)
    try:
        return b"".join(out)
    finally:
        if hasattr(out, "close"):
            out.close()


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
            shutil.copyfile(args.vis_db, db)
        else:
            case = max(UPSTREAM_VIS.glob("*/*.vis.db.xz"), key=lambda p: p.stat().st_size).parent.name
            db = decompress_case(case, logdir / "run")
        tag = db.name[: -len(".vis.db")]
        meta = meta_for("run", tag)
        os.environ.setdefault("GRAPH_ASCEND_BINARY", str(binary_path()))
        tb = TensorBoard(logdir, tmp / "tb.log")
        proc, target = start_sidecar(logdir, tmp)
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        plugin = GraphAscendPlugin(types.SimpleNamespace(logdir=str(logdir), flags=None))
        try:
            base = tb.url("data/plugin/graph_ascend/")
            http(base + "load_meta_dir", {})
            names = json.loads(http(base + "loadGraphAllNodeList", {"metaData": meta}))["data"]["npuNodeList"]
            module = next((n for n in reversed(names) if n.startswith("Module.") and ".forward." in n), "root")
            node = names[len(names) // 2] if names else "root"

            def expand(name):
                return {"nodeInfo": {"nodeName": name, "nodeType": "NPU"}, "metaData": meta}

            calls = [
                ("load_meta_dir", {}),
                ("loadGraphConfigInfo", {"metaData": meta}),
                ("getNodeInfo", expand(node)),
                ("loadGraphAllNodeList", {"metaData": meta}),
                ("changeNodeExpandState", expand(module)),
            ]
            # Every side opens the root first: the module's toggles then answer the whole visible graph.
            for call in (
                lambda: http(base + "changeNodeExpandState", expand("root")),
                lambda: wsgi_call(plugin, "changeNodeExpandState", expand("root")),
            ):
                call()
            rpc = channel.unary_unary(
                schema.call_json_method,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=json_answer_bytes,
            )
            root = decoder.request_from_http(
                schema.routes["changeNodeExpandState"].request_class, body=expand("root"), client_id=CLIENT
            )
            rpc(schema.json_call_class(method="ChangeNodeExpandState", request=root.SerializeToString()))

            print(f"latency, median of {args.n} ({db.name}, {db.stat().st_size // 1024} KiB; module {module})")
            floor = median_ms(lambda: http(tb.url("data/environment")), args.n)
            print(f"  TensorBoard /data/environment (floor): {floor:6.2f} ms")
            print(
                f"  {'route':24s} {'via TensorBoard':>16s} {'in-process':>11s} {'direct gRPC':>12s}"
                f" {'shim Python':>12s} {'answer bytes':>13s}"
            )
            for route_name, body in calls:
                route = schema.routes[route_name]
                message = decoder.request_from_http(route.request_class, body=body, client_id=CLIENT)
                request = schema.json_call_class(method=route.rpc, request=message.SerializeToString())
                via = median_ms(lambda r=route_name, b=body: http(base + r, b), args.n)
                inproc = median_ms(lambda r=route_name, b=body: wsgi_call(plugin, r, b), args.n)
                direct = median_ms(lambda rpc=rpc, request=request: rpc(request), args.n)
                answer = rpc(request)
                real_unary = plugin._unary
                plugin._unary = lambda route, call, schema, answer=answer: answer
                try:
                    shim = median_ms(
                        lambda r=route_name, b=body: wsgi_call(plugin, r, b), args.n, clock=time.thread_time
                    )
                finally:
                    plugin._unary = real_unary
                print(
                    f"  {route_name:24s} {via:13.2f} ms {inproc:8.2f} ms {direct:9.2f} ms {shim:9.3f} ms"
                    f" {len(answer):13d}"
                )
        finally:
            plugin.sidecar.stop()
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
