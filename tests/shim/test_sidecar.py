"""The sidecar supervisor on its own (no TensorBoard): the real binary, real processes, real signals."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import wait_until
from graph_ascend_tb.sidecar import Sidecar


@pytest.fixture
def sidecar(tmp_path, binary, monkeypatch):
    monkeypatch.setenv("GRAPH_ASCEND_BINARY", str(binary))
    car = Sidecar(str(tmp_path))
    yield car
    car.stop()


def _leader_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs procfs")
def test_dying_sidecar_is_not_alive(sidecar):
    """Regression: after SIGKILL the leader thread is a zombie a few ms before the process can be reaped,
    and poll() still says running; the old channel was then reused and the request failed (CI, stop 8)."""
    for _ in range(5):
        sidecar.channel()
        pid = sidecar.pid
        os.kill(pid, signal.SIGKILL)
        while _leader_state(pid) not in ("Z", "X", "gone"):
            pass
        assert not sidecar.alive(), "a killed sidecar whose leader is a zombie must not count as alive"
        with sidecar._lock:  # the per-request check, through the status file kept open
            assert not sidecar._alive_locked()
        assert wait_until(lambda: sidecar._proc.poll() is not None, 10)


def test_killed_sidecar_gets_a_new_channel(sidecar):
    first_channel = sidecar.channel()
    first = sidecar.pid
    os.kill(first, signal.SIGKILL)
    while _leader_state(first) not in ("Z", "X", "gone"):
        pass
    second_channel = sidecar.channel()
    assert sidecar.pid != first
    assert second_channel is not first_channel
    assert sidecar.starts == 2


def test_tcp_fallback_requires_the_per_launch_token(tmp_path, binary, monkeypatch):
    """Over loopback TCP, which every local user can reach, a call without this launch's token is refused;
    the token is neither on the sidecar's command line (which ps shows to everyone) nor in its environment
    (which /proc/<pid>/environ keeps for the life of the process): the shim writes it to its stdin."""
    import grpc

    from graph_ascend_tb import sidecar as sidecar_module

    monkeypatch.setenv("GRAPH_ASCEND_BINARY", str(binary))
    monkeypatch.setenv(sidecar_module.TRANSPORT_ENV, "tcp")
    car = Sidecar(str(tmp_path))
    try:
        car.channel()
        target = car._target
        assert target.startswith("127.0.0.1:"), target
        with open(f"/proc/{car.pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{car.pid}/environ", "rb") as f:
            environ = f.read()
        token = car._token.encode()
        assert len(token) >= 32
        assert not any(token in arg for arg in argv), "the token is on the command line"
        assert token not in environ, "the token is readable in /proc/<pid>/environ"
        assert b"GRAPH_ASCEND_SIDECAR_TOKEN" not in environ

        method = "/graph_ascend.v1.GraphAscend/LoadMetaDir"
        outsider = grpc.insecure_channel(target)
        try:
            for metadata in (None, [(sidecar_module.TOKEN_METADATA, "x" * 43)]):
                with pytest.raises(grpc.RpcError) as refused:
                    outsider.unary_unary(method)(b"", timeout=30, metadata=metadata)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
            answer = outsider.unary_unary(method)(
                b"", timeout=30, metadata=[(sidecar_module.TOKEN_METADATA, token.decode())]
            )
            assert isinstance(answer, bytes)
        finally:
            outsider.close()
        # The shim's own channel sends it on every call.
        assert car.channel().unary_unary(method)(b"", timeout=30) is not None
    finally:
        car.stop()


def test_tcp_sidecar_refuses_to_start_without_a_token(tmp_path, binary):
    import subprocess

    proc = subprocess.run(
        [str(binary), "serve", "--logdir", str(tmp_path), "--tcp-port", "0"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )
    assert proc.returncode != 0
    assert b"first line of standard input" in proc.stderr, proc.stderr
    weak = subprocess.run(
        [str(binary), "serve", "--logdir", str(tmp_path), "--tcp-port", "0"],
        input=b"short\n", capture_output=True, timeout=60,
    )
    assert weak.returncode != 0
    assert b"at least 32" in weak.stderr, weak.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs procfs")
def test_a_sidecar_start_removes_what_killed_processes_left(tmp_path, binary, monkeypatch):
    """Regression: a killed TensorBoard left its temporary folder for good, and a killed page conversion its
    staging folder in the output folder until that folder was used again. A starting sidecar removes those of
    processes of this host that are gone, and keeps those of live ones."""
    import tempfile

    from graph_ascend_tb.sidecar import temp_prefix

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    monkeypatch.setenv("GRAPH_ASCEND_BINARY", str(binary))
    with open("/proc/sys/kernel/pid_max") as f:
        dead_pid = int(f.read()) + 1
    live_prefix = temp_prefix()  # graph_ascend_tb_<host>.<this pid>.
    host = live_prefix[len("graph_ascend_tb_"):].rsplit(".", 2)[0]
    dead_shim = temp / f"graph_ascend_tb_{host}.{dead_pid}.x1y2"
    live_shim = temp / f"{live_prefix}keep"
    logdir = tmp_path / "logdir"
    dead_staging = logdir / "run" / f".graph-ascend-staging-{host}.{dead_pid}.7"
    for folder in (dead_shim, live_shim, dead_staging):
        (folder / "inner").mkdir(parents=True)
        (folder / "inner" / "file").write_bytes(b"x")
    car = Sidecar(str(logdir))
    try:
        car.channel()
        assert car._tmpdir.startswith(str(temp / live_prefix)), car._tmpdir
        assert wait_until(lambda: not dead_shim.exists() and not dead_staging.exists(), 20)
        assert live_shim.exists(), "a live TensorBoard's folder is kept"
        assert os.path.isdir(car._tmpdir), "this launch's own folder is kept"
    finally:
        car.stop()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs procfs")
def test_serve_flags_from_the_environment_reach_the_sidecar(sidecar, monkeypatch):
    """$GRAPH_ASCEND_SERVE_FLAGS is how the sidecar's own settings (--max-index-memory-mb,
    --no-diagnosis-prefetch) reach it from TensorBoard: they are on its command line, and it knows them
    (it starts and serves)."""
    monkeypatch.setenv("GRAPH_ASCEND_SERVE_FLAGS", "--no-diagnosis-prefetch --max-index-memory-mb 64")
    sidecar.channel()
    with open(f"/proc/{sidecar.pid}/cmdline", "rb") as f:
        args = f.read().split(b"\0")
    assert b"--no-diagnosis-prefetch" in args
    assert args[args.index(b"--max-index-memory-mb") + 1] == b"64"
    assert sidecar.alive()
