"""msprobe 26.2 (``mindstudio-probe``) registers its own plugin named ``graph_ascend``; both must load.

The real wheel comes from PyPI into a ``pip install --target`` folder (cached in tests/artifacts/shim)
with just the dependencies its two TensorBoard plugins import; TensorBoard runs with it on PYTHONPATH
next to our installed package. Skipped, with a message, only when PyPI cannot be reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from conftest import ARTIFACTS, decompress_case, meta_for

MSPROBE = "mindstudio-probe==26.2.0"
# What `hierarchy_plugin.server.plugin` and `trend_analyzer.server.app` import beyond TensorBoard's own
# dependencies (numpy is TensorBoard's); the rest of msprobe's requirements are not needed to load them.
PLUGIN_DEPS = ["pandas", "pyyaml", "tqdm", "python-dateutil", "six", "pytz", "tzdata"]
IMPORT_CHECK = "import hierarchy_plugin.server.plugin, trend_analyzer.server.app"

pytestmark = pytest.mark.pypi


def _pypi_reachable() -> str:
    """'' when the package index answers, else the reason."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    try:
        with urllib.request.urlopen(f"{index}/mindstudio-probe/", timeout=20) as r:
            r.read(1)
        return ""
    except (urllib.error.URLError, OSError) as exc:
        return f"{index} is unreachable ({exc})"


@pytest.fixture(scope="session")
def msprobe_target():
    target = ARTIFACTS / f"msprobe-26.2.0-py{sys.version_info.major}{sys.version_info.minor}"
    marker = target / ".complete"
    if not marker.exists():
        reason = _pypi_reachable()
        if reason:
            pytest.skip(f"PyPI needed for {MSPROBE}: {reason}")
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(staging),
            MSPROBE,
            *PLUGIN_DEPS,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}"
        env = dict(os.environ, PYTHONPATH=str(staging))
        check = subprocess.run([sys.executable, "-c", IMPORT_CHECK], capture_output=True, text=True, env=env)
        assert check.returncode == 0, f"msprobe's plugins do not import:\n{check.stderr[-4000:]}"
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        marker.write_text(MSPROBE + "\n")
    return target


def test_both_plugins_load_next_to_msprobe(msprobe_target, tmp_path, tensorboard):
    logdir = tmp_path / "logdir"
    db = decompress_case("compare_tf_stats", logdir / "run")
    tag = db.name[: -len(".vis.db")]
    tb = tensorboard(logdir, env={"PYTHONPATH": str(msprobe_target)})

    listing = tb.get("data/plugins_listing").json()
    ours, theirs = listing.get("graph_ascend"), listing.get("graph_ascend_msprobe")
    assert ours is not None and theirs is not None, sorted(listing)
    assert ours["tab_name"] == "GRAPH_ASCEND"
    assert ours["loading_mechanism"]["module_path"] == "/data/plugin/graph_ascend/index.js"
    assert theirs["loading_mechanism"]["module_path"] == "/data/plugin/graph_ascend_msprobe/index.js"
    assert "TrendVis" in listing  # msprobe's other plugin is untouched
    assert "renamed it to 'graph_ascend_msprobe'" in tb.log()

    # Our routes answer (from the sidecar).
    meta_dir = tb.plugin("load_meta_dir")
    assert meta_dir.status == 200 and meta_dir.json()["data"] == {"run": {"type": "db", "tags": [tag]}}
    config = tb.plugin("loadGraphConfigInfo", {"metaData": meta_for("run", tag)})
    assert config.status == 200 and config.json()["success"] is True
    assert tb.get("data/plugin/graph_ascend/index.js").status == 200

    # msprobe's page and API keep working under the new name (its page uses relative URLs).
    assert tb.get("data/plugin/graph_ascend_msprobe/index.js").status == 200
    assert tb.get("data/plugin/graph_ascend_msprobe/index.html").status == 200
    their_meta = tb.post("data/plugin/graph_ascend_msprobe/load_meta_dir", {})
    assert their_meta.status == 200 and their_meta.json()["data"] == {"run": {"type": "db", "tags": [tag]}}
