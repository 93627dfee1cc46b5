"""Shared helpers for the shim tests: the real binary, real fixtures, real TensorBoard in a subprocess.

The binary comes from $GRAPH_ASCEND_BINARY (default: target/release/graph-ascend in the repository);
TensorBoard is the one installed for the current Python (``python -m tensorboard.main``).
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
UPSTREAM_VIS = FIXTURES / "upstream_vis"
GOLDEN = FIXTURES / "golden_api26"
ARTIFACTS = REPO / "tests" / "artifacts" / "shim"


def binary_path() -> Path:
    return Path(os.environ.get("GRAPH_ASCEND_BINARY") or REPO / "target" / "release" / "graph-ascend")


@pytest.fixture(scope="session")
def binary() -> Path:
    path = binary_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"graph-ascend binary not found at {path}: build it (cargo build --release) or set GRAPH_ASCEND_BINARY"
        )
    return path


@pytest.fixture(scope="session")
def descriptor_file(binary, tmp_path_factory) -> Path:
    """The API descriptor, written by the real binary ($GRAPH_ASCEND_DESCRIPTOR overrides, for development)."""
    override = os.environ.get("GRAPH_ASCEND_DESCRIPTOR")
    if override:
        return Path(override)
    out = tmp_path_factory.mktemp("desc") / "graph_ascend.desc"
    subprocess.run([str(binary), "proto-descriptor", "--out", str(out)], check=True, timeout=60)
    return out


def vis_db_cases() -> List[str]:
    return sorted(p.name for p in UPSTREAM_VIS.iterdir() if p.is_dir() and list(p.glob("*.vis.db.xz")))


def golden_cases() -> List[str]:
    return sorted(p.stem for p in GOLDEN.glob("*.json") if (UPSTREAM_VIS / p.stem).is_dir())


def decompress_case(case: str, run_dir: Path) -> Path:
    """Decompresses the case's .vis.db into run_dir; returns the file."""
    run_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted((UPSTREAM_VIS / case).glob("*.vis.db.xz"))
    assert sources, f"no .vis.db.xz in {UPSTREAM_VIS / case}"
    src = sources[0]
    dest = run_dir / src.name[: -len(".xz")]
    with lzma.open(src, "rb") as fin, open(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dest


COMPARE_CASE = "compare_tf_stats"  # a compare file: both sides, precision colours, matches to edit
MATCHED_LEAF = "Functional.linear.10.forward"  # matched with its twin in COMPARE_CASE


@pytest.fixture
def one_case_logdir(tmp_path):
    """(logdir, run, tag): COMPARE_CASE's .vis.db as the only run of a fresh logdir."""
    logdir = tmp_path / "logdir"
    db = decompress_case(COMPARE_CASE, logdir / "run")
    return logdir, "run", db.name[: -len(".vis.db")]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_pids(pid: int) -> List[int]:
    """Direct children of a process (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class HttpAnswer:
    def __init__(self, status: int, headers, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "")


class TensorBoard:
    """A real TensorBoard subprocess on a free port."""

    def __init__(
        self,
        logdir: Path,
        log_path: Path,
        extra_args=(),
        env: Optional[Dict[str, Optional[str]]] = None,
        python: Optional[str] = None,
    ):
        """``env`` is laid over this process's environment (a None value removes the variable); ``python``
        is the interpreter whose TensorBoard runs (default: this one)."""
        self.logdir = logdir
        self.path_prefix = ""
        args = list(extra_args)
        if "--path_prefix" in args:
            self.path_prefix = args[args.index("--path_prefix") + 1].rstrip("/")
        self.port = free_port()
        cmd = [
            python or sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(logdir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--load_fast",
            "false",
            *args,
        ]
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env = {k: v for k, v in full_env.items() if v is not None}
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the process it logs
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=full_env)
        self._wait_ready()
        self.write_token = self._printed_token()

    def _printed_token(self) -> str:
        """This launch's write token, taken from the link the plugin printed in the console, as a user would;
        every request sends it unless its headers give ``X-Graph-Ascend-Token`` (None: send none)."""
        deadline = time.monotonic() + 30
        while True:
            found = re.search(r"#graph_ascend&graph_ascend_token=([A-Za-z0-9_\-]+)", self.log())
            if found:
                return found.group(1)
            if time.monotonic() > deadline:
                raise AssertionError(f"TensorBoard printed no link with the write token:\n{self.log()}")
            time.sleep(0.2)

    def _wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"TensorBoard exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("data/plugins_listing", timeout=2).status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"TensorBoard did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-8000:]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{self.path_prefix}/{path.lstrip('/')}"

    @property
    def plugin_base(self) -> str:
        return self.url("data/plugin/graph_ascend")

    def request(self, path: str, method="GET", body: Optional[bytes] = None, headers=None, timeout=120.0):
        sent = {"X-Graph-Ascend-Token": getattr(self, "write_token", None)}
        sent.update(headers or {})
        sent = {k: v for k, v in sent.items() if v is not None}
        req = urllib.request.Request(self.url(path), data=body, method=method, headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return HttpAnswer(r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            return HttpAnswer(e.code, e.headers, e.read())

    def get(self, path: str, params=None, headers=None, timeout=120.0) -> HttpAnswer:
        if params:
            path += "?" + urllib.parse.urlencode(params)
        return self.request(path, headers=headers, timeout=timeout)

    def post(self, path: str, body=None, headers=None, timeout=120.0) -> HttpAnswer:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = b"" if body is None else json.dumps(body).encode("utf-8")
        return self.request(path, method="POST", body=data, headers=h, timeout=timeout)

    def plugin(self, route: str, body=None, params=None, headers=None) -> HttpAnswer:
        if params is not None:
            return self.get(f"data/plugin/graph_ascend/{route}", params, headers)
        return self.post(f"data/plugin/graph_ascend/{route}", body if body is not None else {}, headers)

    def sidecar_pids(self) -> List[int]:
        return [p for p in child_pids(self.proc.pid) if process_alive(p) and _is_sidecar(p)]

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _is_sidecar(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return b"serve" in argv and b"--die-after-stdin" in argv


@pytest.fixture
def tensorboard(tmp_path, binary):
    """Starts TensorBoards: tensorboard(logdir, *extra_args, env={...}); all are stopped afterwards."""
    started: List[TensorBoard] = []

    def start(logdir: Path, *extra_args, env: Optional[Dict[str, str]] = None) -> TensorBoard:
        merged = {"GRAPH_ASCEND_BINARY": str(binary)}
        merged.update(env or {})
        tb = TensorBoard(logdir, tmp_path / f"tensorboard{len(started)}.log", extra_args, merged)
        started.append(tb)
        return tb

    yield start
    for tb in started:
        sidecars = tb.sidecar_pids()
        tb.stop(signal.SIGKILL)
        for pid in sidecars:
            wait_until(lambda p=pid: not process_alive(p), 10)


@pytest.fixture
def dying(tmp_path, binary):
    """dying(method, **env): (env for TensorBoard, the call log) for a real sidecar behind
    ``dying_sidecar.py``, which dies once it has applied ``method`` (a download: once it has passed on
    some of its chunks); ``env`` adds its other variables (``DYING_SIDECAR_CHUNKS``)."""

    def make(method: str, **extra: str):
        launcher = tmp_path / "graph-ascend-dying"
        here = Path(__file__).resolve().parent
        launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{here / "dying_sidecar.py"}" "$@"\n')
        launcher.chmod(0o755)
        log = tmp_path / "calls.log"
        env = {
            "GRAPH_ASCEND_BINARY": str(launcher),
            "DYING_SIDECAR_REAL": str(binary),
            "DYING_SIDECAR_LOG": str(log),
            "DYING_SIDECAR_METHOD": method,
            **extra,
        }
        return env, log

    return make


META = {"type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": 0}


def meta_for(run: str, tag: str) -> Dict:
    return {"run": run, "tag": tag, **META}


def pytest_terminal_summary(terminalreporter):
    """How many golden sections were checked and differ, and any route answered UNIMPLEMENTED."""
    module = sys.modules.get("test_golden_parity")
    results = getattr(module, "PARITY_RESULTS", None)
    if not results:
        return
    unimplemented = sorted({r for v in results.values() for r in v["unimplemented_routes"]})
    checked = sum(len(v["checked"]) for v in results.values())
    differing = sum(len(v["differences"]) for v in results.values())
    terminalreporter.section("graph-ascend API parity with msprobe 26.2")
    terminalreporter.write_line(
        f"{len(results)} cases: {checked} sections checked ({differing} differ)"
    )
    terminalreporter.write_line("routes answered UNIMPLEMENTED: " + (", ".join(unimplemented) or "none"))
    terminalreporter.write_line(f"details: {ARTIFACTS / 'parity.json'}")


def pytest_configure(config):
    config.addinivalue_line("markers", "pypi: needs packages from PyPI (skipped with a message when unreachable)")
