"""A real sidecar that dies after it has applied a chosen call and before the answer reaches the shim.

Run by the shim in place of ``graph-ascend`` (``GRAPH_ASCEND_BINARY`` names a small launcher script that runs
this file). Every command but ``serve`` is handed to the real binary ($DYING_SIDECAR_REAL). For ``serve``,
the real binary serves on its own private socket, and this process sits in front of it on another one:
it writes every call it sees to $DYING_SIDECAR_LOG (one RPC name a line), forwards it, and when a
``CallJson`` for $DYING_SIDECAR_METHOD has been answered by the real sidecar (so the edit is committed),
kills the real sidecar and itself before passing the answer on; only the first time the log shows that
call, so that a sidecar started after the crash serves it. The shim sees the connection drop mid-call,
as after a crash. A download (``DOWNLOADS``: a stream of file chunks) named by $DYING_SIDECAR_METHOD dies
the same way once it has passed on $DYING_SIDECAR_CHUNKS chunks (default 2: the header chunk and the first
of the file's bytes, after which the shim has sent the answer's headers).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

from graph_ascend_tb.schema import iter_wire_fields
from graph_ascend_tb.sidecar import CHANNEL_OPTIONS


def _arg(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def _method_of(json_call: bytes) -> str:
    for number, wire_type, value in iter_wire_fields(json_call):
        if number == 1 and wire_type == 2:
            return bytes(value).decode("utf-8", "replace")
    return ""


# The RPCs called directly (not through CallJson/StreamJson) that stream a file's chunks.
DOWNLOADS = ("ExportCsv", "ExportReport")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def main(argv) -> int:
    real = os.environ["DYING_SIDECAR_REAL"]
    if not argv or argv[0] != "serve":
        os.execv(real, [real, *argv])
    log_path = os.environ["DYING_SIDECAR_LOG"]
    die_on = os.environ.get("DYING_SIDECAR_METHOD", "")
    die_after_chunks = int(os.environ.get("DYING_SIDECAR_CHUNKS", "2"))
    ready = _arg(argv, "--ready-file")
    work = tempfile.mkdtemp(prefix="dying_sidecar_")
    inner_ready = os.path.join(work, "inner_ready")
    child_argv = list(argv)
    child_argv[child_argv.index("--ready-file") + 1] = inner_ready
    child = subprocess.Popen([real, *child_argv], stdin=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not _read(inner_ready).endswith("\n"):
        if time.monotonic() > deadline or child.poll() is not None:
            return 1
        time.sleep(0.01)
    inner = _read(inner_ready).strip()
    channel = grpc.insecure_channel(inner if ":" in inner[:5] else "unix:" + inner, options=CHANNEL_OPTIONS)

    def die():
        child.kill()
        child.wait()
        os.kill(os.getpid(), signal.SIGKILL)

    def log(name) -> bool:
        """Logs a call; True when it is the first of its name."""
        try:
            with open(log_path) as f:
                seen = name in f.read().splitlines()
        except OSError:
            seen = False
        with open(log_path, "a") as f:
            f.write(name + "\n")
        return not seen

    class Forward(grpc.GenericRpcHandler):
        def service(self, details):
            method = details.method
            if method.endswith("/StreamJson"):
                def stream(request, context):
                    log(_method_of(request))
                    yield from channel.unary_stream(method)(request)

                return grpc.unary_stream_rpc_method_handler(stream)
            name = method.rsplit("/", 1)[1]
            if name in DOWNLOADS:
                def download(request, context):
                    first = log(name)
                    for passed, chunk in enumerate(channel.unary_stream(method)(request), start=1):
                        yield chunk
                        if name == die_on and first and passed >= die_after_chunks:
                            time.sleep(1.5)  # lets the chunks reach the shim, even on a busy machine
                            die()

                return grpc.unary_stream_rpc_method_handler(download)

            def unary(request, context):
                name = _method_of(request) if method.endswith("/CallJson") else method.rsplit("/", 1)[1]
                first = log(name)
                answer = channel.unary_unary(method)(request)
                if name == die_on and first:
                    die()
                return answer

            return grpc.unary_unary_rpc_method_handler(unary)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), handlers=[Forward()], options=CHANNEL_OPTIONS)
    outer = os.path.join(work, "outer.sock")
    server.add_insecure_port("unix:" + outer)
    server.start()
    with open(ready + ".tmp", "w") as f:
        f.write(outer + "\n")
    os.replace(ready + ".tmp", ready)

    # The launch contract: stop when standard input closes (TensorBoard went away).
    def watch_stdin():
        while sys.stdin.buffer.read(1024):
            pass
        child.kill()
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
