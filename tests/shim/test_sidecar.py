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
