"""Server-sent events from a server-streaming RPC: framing, no buffering, heartbeats, errors, cancellation.

The stream comes from a real gRPC server (grpcio, in this process, on a Unix socket) that serves the
API's StreamJson for GetConvertProgress with controlled timing, so the timing properties can be checked
exactly.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures

import grpc
import pytest

from graph_ascend_tb.plugin import sse_events
from graph_ascend_tb.schema import Schema, json_answer_bytes


@pytest.fixture(scope="module")
def schema(descriptor_file):
    return Schema(descriptor_file.read_bytes(), str(descriptor_file))


class ProgressServer:
    def __init__(self, schema, tmp_path, script):
        self.schema = schema
        self.route = schema.routes["getConvertProgress"]
        self.cancelled = threading.Event()
        self.script = script
        handler = grpc.unary_stream_rpc_method_handler(
            self._serve,
            request_deserializer=schema.json_call_class.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        service, method = schema.stream_json_method.strip("/").split("/")
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, {method: handler})])
        self.target = f"unix:{tmp_path / 'progress.sock'}"
        self.server.add_insecure_port(self.target)
        self.server.start()
        self.channel = grpc.insecure_channel(self.target)

    def _serve(self, call, context):
        assert call.method == self.route.rpc
        request = self.route.request_class.FromString(call.request)
        context.add_callback(self.cancelled.set)
        for delay, progress, status in self.script:
            time.sleep(delay)
            if status == "ABORT":
                context.abort(grpc.StatusCode.INTERNAL, "dump folder vanished")
            answer = {"progress": progress, "status": status, "error": [], "jobId": request.job_id}
            yield self.schema.json_answer_class(json=json.dumps(answer).encode())

    def call(self, job_id="j1"):
        method = self.channel.unary_stream(
            self.schema.stream_json_method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=json_answer_bytes,
        )
        request = self.route.request_class(job_id=job_id)
        return method(self.schema.json_call_class(method=self.route.rpc, request=request.SerializeToString()))

    def close(self):
        self.channel.close()
        self.server.stop(0)


def collect(events):
    out = []
    for chunk in events:
        out.append((time.monotonic(), chunk))
    return out


def data_events(chunks):
    return [json.loads(c[len(b"data: ") :]) for _, c in chunks if c.startswith(b"data: ")]


def test_events_flow_as_they_come_with_heartbeats(schema, tmp_path):
    server = ProgressServer(schema, tmp_path, [(0.0, 0, "building"), (0.6, 50, "building"), (0.6, 100, "done")])
    try:
        start = time.monotonic()
        chunks = collect(sse_events(server.call(), heartbeat_s=0.2))
    finally:
        server.close()
    assert all(c.endswith(b"\n\n") for _, c in chunks)
    events = data_events(chunks)
    assert [e["progress"] for e in events] == [0, 50, 100]
    assert events[-1]["status"] == "done" and events[0]["jobId"] == "j1"
    times = [t - start for t, c in chunks if c.startswith(b"data: ")]
    assert times[0] < 0.5, "the first event is not held back"
    assert times[1] - times[0] > 0.45 and times[2] - times[1] > 0.45
    heartbeats = [c for _, c in chunks if c == b": heartbeat\n\n"]
    assert len(heartbeats) >= 4, "an idle stream sends comment lines"


def test_an_error_mid_stream_becomes_an_error_event(schema, tmp_path):
    server = ProgressServer(schema, tmp_path, [(0.0, 10, "building"), (0.1, 0, "ABORT")])
    try:
        events = data_events(collect(sse_events(server.call(), heartbeat_s=5)))
    finally:
        server.close()
    assert events[0]["progress"] == 10
    assert events[-1] == {"success": False, "status": "error", "error": ["dump folder vanished"]}


def test_closing_the_stream_cancels_the_rpc(schema, tmp_path):
    server = ProgressServer(schema, tmp_path, [(0.0, 1, "building"), (30.0, 2, "building")])
    try:
        events = sse_events(server.call(), heartbeat_s=5)
        assert next(events) == b": stream open\n\n"
        assert next(events).startswith(b"data: ")
        events.close()  # what werkzeug does when the browser goes away
        assert server.cancelled.wait(5), "the sidecar's stream was not cancelled"
    finally:
        server.close()
