"""The shim's malloc thresholds in TensorBoard's process (``graph_ascend_tb.allocator``).

Each case runs in a fresh interpreter: the thresholds are process-wide and set once per process.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[2] / "python_shim"

# Receives a 2 MB answer 50 times on the main thread as the shim does (a buffer, then the JSON sliced
# out of it) and counts the page faults per answer.
PROBE = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from graph_ascend_tb import allocator
outcome = [allocator.tune_for_large_answers(), allocator.tune_for_large_answers()]
for _ in range(3):
    b = bytes(2_000_000); del b
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    buf = bytes(2_000_000)
    answer = buf[6:]
    del buf, answer
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50
print(json.dumps({"outcome": outcome, "faults": faults}))
"""

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's"
)


def probe(setting: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GRAPH_ASCEND_TB_MALLOC"}
    if setting is not None:
        env["GRAPH_ASCEND_TB_MALLOC"] = setting
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(SHIM)], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_set_once_and_answers_are_not_faulted_in_anew():
    tuned = probe(None)
    assert tuned["outcome"] == ["tuned", "tuned"]
    default = probe("default")
    assert default["outcome"] == ["off", "off"]
    # A 2 MB buffer is ~490 pages: glibc's defaults map and unmap it for every answer; the thresholds
    # keep it on the heap.
    assert tuned["faults"] < 100, tuned
    assert default["faults"] > 4 * max(tuned["faults"], 1), (tuned, default)


def test_turned_off_by_the_environment():
    assert probe("default")["outcome"] == ["off", "off"]
