"""Runs inside `unshare --net` (offline.py starts it): the README's offline install with no network at all.

    offline_install.py venv --wheels W --venv V --dump D --logdir L
        python -m venv V; V/bin/pip install --no-index --find-links W graph-ascend; the installed binary
        converts D into L/run; TensorBoard from V (PATH = V/bin alone) lists the tab and the sidecar answers
        a root layout.
    offline_install.py pip-platform --wheels W --target T --platform P
        pip install --no-index --find-links W --platform P --only-binary=:all: --target T graph-ascend

Prints one JSON line: what was done and how long it took. Any failure exits non-zero with the reason.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def network() -> str:
    """How the outside world answers from here: it must not (an address, so no name lookup is needed)."""
    try:
        socket.create_connection(("151.101.0.223", 443), timeout=5).close()  # pypi.org
    except OSError as exc:
        return f"unreachable ({exc})"
    return "REACHABLE"


def run(cmd, env=None, timeout=900) -> float:
    started = time.monotonic()
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return time.monotonic() - started


def in_venv(args, report: dict) -> None:
    venv = Path(args.venv)
    run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / "bin"
    env = {"PATH": str(bin_dir), **{k: os.environ[k] for k in ("HOME", "LANG", "TMPDIR") if k in os.environ}}
    report["install_seconds"] = round(run([bin_dir / "pip", "install", "--quiet", "--disable-pip-version-check",
                                           "--no-index", "--find-links", args.wheels, "graph-ascend"], env),
                                      1)  # fmt: skip
    logdir = Path(args.logdir)
    run(["graph-ascend", "convert", "--target_path", args.dump, "--output_path", logdir / "run"], env)
    dbs = sorted((logdir / "run").glob("*.vis.db"))
    if len(dbs) != 1:
        sys.exit(f"one .vis.db expected, found {dbs}")
    tag = dbs[0].name[: -len(".vis.db")]

    sys.path.insert(0, str(REPO / "tests" / "shim"))
    from conftest import TensorBoard, meta_for  # the shim tests' TensorBoard subprocess

    # Only the venv: no variable may point the plugin elsewhere, it must find the wheel's binary.
    tb = TensorBoard(logdir, logdir.parent / "tensorboard.log", env={**{k: None for k in os.environ}, **env},
                     python=str(bin_dir / "python"))  # fmt: skip
    try:
        listing = tb.get("data/plugins_listing").json()
        report["tab"] = listing.get("graph_ascend", {}).get("tab_name")
        meta = meta_for("run", tag)
        loaded = tb.plugin("loadGraphData", params={k: str(v) for k, v in meta.items()}).json()
        root = tb.plugin("changeNodeExpandState", {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"},
                                                   "metaData": meta})  # fmt: skip
        report["loaded"] = loaded.get("success") is True
        report["root_layout_boxes"] = len(root.json().get("data") or {}) if root.status == 200 else 0
        sidecars = tb.sidecar_pids()
        report["sidecar"] = [os.path.realpath(f"/proc/{p}/exe") for p in sidecars]
    finally:
        tb.stop()


def pip_platform(args, report: dict) -> None:
    seconds = run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                   "--find-links", args.wheels, "--platform", args.platform, "--only-binary=:all:",
                   "--target", args.target, "graph-ascend"])  # fmt: skip
    report["install_seconds"] = round(seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    venv = sub.add_parser("venv")
    for name in ("--wheels", "--venv", "--dump", "--logdir"):
        venv.add_argument(name, required=True)
    platform = sub.add_parser("pip-platform")
    for name in ("--wheels", "--target", "--platform"):
        platform.add_argument(name, required=True)
    args = parser.parse_args()

    loopback_up()
    report = {"network": network()}
    if report["network"] == "REACHABLE":
        sys.exit("the network namespace reaches the outside: not an offline test")
    (in_venv if args.mode == "venv" else pip_platform)(args, report)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
