"""The README's offline install, run with the network cut: helpers shared by tests/wheel and tests/aarch64.

The folder the recipe installs from is made the recipe's way (`pip download -d wheels <wheel>`), resolved
from a cache of PyPI's wheels filled once (so only the first run needs PyPI); the install itself runs in a
new network namespace (`unshare --net`) whose only interface is its loopback, brought up so that TensorBoard
and its sidecar can talk (offline_install.py, run inside it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts" / "wheel"
PYPI_AARCH64 = ARTIFACTS / "pypi-aarch64"
INSIDE = Path(__file__).with_name("offline_install.py")


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-4000:]}"


def download(wheel: Path, cache: Path, into: Path, *platform: str) -> None:
    """`pip download -d <into> <wheel>` (the README's first step), resolved from `cache` alone."""
    _pip("download", "--quiet", "--no-index", "--find-links", str(cache), *platform, "-d", str(into), str(wheel))


def download_for_platform(wheel: Path, into: Path, platform: str) -> None:
    """The recipe for another platform (`--platform <p> --only-binary=:all:`); its PyPI wheels cached once."""
    flags = ["--platform", platform, "--only-binary=:all:"]
    marker = PYPI_AARCH64 / ".complete"
    if not (marker.exists() and marker.read_text() == wheel.name):
        PYPI_AARCH64.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        try:
            _pip("download", "--quiet", *flags, "-d", str(PYPI_AARCH64), str(wheel))
        except AssertionError as exc:
            pytest.fail(f"PyPI is needed once, to cache the {platform} wheels the offline folder holds: {exc}")
        for ours in PYPI_AARCH64.glob("graph_ascend-*.whl"):
            ours.unlink()  # the wheel under test comes from dist/, never from the cache
        marker.write_text(wheel.name)
    download(wheel, PYPI_AARCH64, into, *flags)


def unshare_unavailable() -> str:
    """'' when a new network namespace can be made here, else why not."""
    try:
        done = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"unshare cannot run: {exc}"
    return "" if done.returncode == 0 else f"`unshare --net` fails here: {done.stderr.strip()}"


def run_offline(args: List[str]) -> dict:
    """Runs offline_install.py with `args` in a new network namespace; its JSON report."""
    reason = unshare_unavailable()
    if reason:
        pytest.skip(f"the offline install needs a network namespace: {reason}")
    cmd = ["unshare", "--net", "--", sys.executable, str(INSIDE), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    output = f"{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, f"offline install failed ({done.returncode}):\n{output}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["network"].startswith("unreachable"), report
    return report
