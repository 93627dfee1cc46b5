"""The wheel as a user gets it: dist/graph_ascend-*.whl (from `make wheel`) in fresh venvs.

Each venv gets nothing but what a user would install (`pip install tensorboard <wheel>`), from a folder of
PyPI wheels cached once in tests/artifacts/wheel/pypi (as the README's offline install does), and runs with
PATH set to the venv's bin/ alone, so no cargo, rustc, node or npm is reachable and the plugin must find the
wheel's own binary. TensorBoard is the shim tests' real subprocess (tests/shim/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "shim"))

from conftest import TensorBoard, meta_for  # noqa: E402
from offline import download, run_offline  # noqa: E402
from test_msprobe_coexistence import IMPORT_CHECK, MSPROBE, PLUGIN_DEPS, _pypi_reachable  # noqa: E402

DIST = Path(os.environ.get("GRAPH_ASCEND_DIST", REPO / "dist"))
ARTIFACTS = REPO / "tests" / "artifacts" / "wheel"
PYPI_CACHE = ARTIFACTS / "pypi"
DUMPS = REPO / "tests" / "fixtures" / "dumps"
TOOLCHAIN = ("cargo", "rustc", "rustup", "node", "npm")
MAX_WHEEL_BYTES = 10 * 1024 * 1024
PACKAGE = "graph_ascend_tb"


def workspace_version() -> str:
    """[workspace.package] version in Cargo.toml: the one place the version is written."""
    text = (REPO / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1].split("\n[", 1)[0]
    match = re.search(r'^version\s*=\s*"([^"]+)"', section, re.M)
    assert match, "no version in [workspace.package] of Cargo.toml"
    return match.group(1)


@pytest.fixture(scope="session")
def wheel() -> Path:
    found = sorted(DIST.glob("graph_ascend-*.whl"))
    if len(found) != 1:
        pytest.fail(f"expected one graph_ascend-*.whl in {DIST}, found {[p.name for p in found]}: run `make wheel`")
    return found[0]


# ------------------------------------------------------------------------------------------------
# The file itself


def test_one_py3_wheel_for_glibc_2_17_under_10_mb(wheel):
    name, version, python_tag, abi_tag, platform_tag = wheel.name[: -len(".whl")].split("-")
    assert (name, version) == ("graph_ascend", workspace_version())
    assert (python_tag, abi_tag) == ("py3", "none"), "one wheel per platform, not per Python version"
    platforms = platform_tag.split(".")
    assert any(re.fullmatch(r"manylinux_2_17_(x86_64|aarch64)", p) for p in platforms), platforms
    assert wheel.stat().st_size < MAX_WHEEL_BYTES, f"{wheel.name} is {wheel.stat().st_size} bytes"

    # auditwheel reads the binary's symbol versions: what it needs, not what the file name claims.
    auditwheel = Path(sys.executable).with_name("auditwheel")
    shown = subprocess.run([str(auditwheel), "show", str(wheel)], capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    match = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_\w+"', text)
    assert match, text
    assert (int(match.group(1)), int(match.group(2))) <= (2, 17), text


def test_wheel_carries_binary_plugin_page_and_descriptor(wheel):
    version = workspace_version()
    with zipfile.ZipFile(wheel) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        metadata = zf.read(f"graph_ascend-{version}.dist-info/METADATA").decode()
        entry_points = zf.read(f"graph_ascend-{version}.dist-info/entry_points.txt").decode()
    script = infos.get(f"graph_ascend-{version}.data/scripts/graph-ascend")
    assert script is not None, sorted(infos)
    assert (script.external_attr >> 16) & 0o111, "the binary must keep its executable bit"
    binaries = [n for n in infos if n.endswith("/graph-ascend")]
    assert binaries == [script.filename], f"one binary only: {binaries}"

    sources = sorted(p.name for p in (REPO / "python_shim" / PACKAGE).glob("*.py"))
    assert sources and all(f"{PACKAGE}/{s}" in infos for s in sources)
    for built in ("static/index.js", "static/index.html", "graph_ascend.desc"):
        assert infos.get(f"{PACKAGE}/{built}") and infos[f"{PACKAGE}/{built}"].file_size > 0, built
    assert not [n for n in infos if "__pycache__" in n or n.endswith(".pyc")]

    assert "Name: graph-ascend\n" in metadata and f"Version: {version}\n" in metadata
    assert "graph_ascend_rs=graph_ascend_tb.loader:GraphAscendLoader" in re.sub(r"[ \t]", "", entry_points)


# ------------------------------------------------------------------------------------------------
# Fresh venvs


def _run(cmd: List[str], env: Optional[Dict[str, str]] = None, timeout: float = 900, cwd=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done


def _pip_download(*args: str) -> None:
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "-d",
            str(PYPI_CACHE),
            *args,
        ]
    )


@pytest.fixture(scope="session")
def pypi_cache() -> Path:
    """TensorBoard, msprobe and the modules msprobe's plugins import, as wheels: downloaded once, then reused."""
    marker = PYPI_CACHE / ".complete"
    wanted = f"tensorboard {MSPROBE} {' '.join(PLUGIN_DEPS)}\n"
    if not (marker.exists() and marker.read_text() == wanted):
        reason = _pypi_reachable()
        if reason:
            pytest.fail(f"PyPI is needed once, to cache the wheels a fresh venv installs: {reason}")
        PYPI_CACHE.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        _pip_download("tensorboard", *PLUGIN_DEPS)
        _pip_download("--no-deps", MSPROBE)
        marker.write_text(wanted)
    return PYPI_CACHE


class Venv:
    """A new venv whose commands see only its own bin/ on PATH."""

    def __init__(self, root: Path):
        self.root = root
        _run([sys.executable, "-m", "venv", str(root)])
        self.bin = root / "bin"
        self.python = str(self.bin / "python")
        self.env: Dict[str, Optional[str]] = {"PATH": str(self.bin)}
        for name in ("HOME", "LANG", "LC_ALL", "TMPDIR"):
            if name in os.environ:
                self.env[name] = os.environ[name]
        found = {tool: shutil.which(tool, path=self.env["PATH"]) for tool in TOOLCHAIN}
        assert not any(found.values()), f"the venv's PATH must not reach a toolchain: {found}"

    def run(self, *cmd: str, timeout: float = 900, cwd=None):
        return _run(list(cmd), env=self.env, timeout=timeout, cwd=cwd)

    def pip_install(self, cache: Path, *args: str) -> float:
        """Installs from the cached wheels only; returns the seconds it took."""
        started = time.monotonic()
        self.run(self.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                 "--find-links", str(cache), *args)  # fmt: skip
        return time.monotonic() - started

    def files(self) -> List[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if not p.is_dir())

    def tensorboard(self, logdir: Path, log_path: Path) -> TensorBoard:
        # Every variable that could point the plugin elsewhere is removed: it must find the wheel's binary.
        env = {**{k: None for k in os.environ}, **self.env}
        return TensorBoard(logdir, log_path, env=env, python=self.python)


def _user_venv(tmp_path_factory, name: str, cache: Path, wheel: Path) -> Venv:
    venv = Venv(tmp_path_factory.mktemp(name) / "venv")
    seconds = venv.pip_install(cache, "tensorboard", str(wheel))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"install_{name}.json").write_text(json.dumps({"wheel": wheel.name, "seconds": round(seconds, 1)}))
    return venv


@pytest.fixture(scope="session")
def user_venv(tmp_path_factory, pypi_cache, wheel) -> Venv:
    """`pip install tensorboard <wheel>` into a new venv."""
    return _user_venv(tmp_path_factory, "user", pypi_cache, wheel)


@pytest.fixture(scope="session")
def converted(tmp_path_factory, user_venv) -> Path:
    """A logdir with one run converted by the wheel's binary, found on PATH by name."""
    logdir = tmp_path_factory.mktemp("converted") / "logdir"
    user_venv.run("graph-ascend", "convert", "--target_path", str(DUMPS / "mlp_stats"),
                  "--output_path", str(logdir / "run"), timeout=300)  # fmt: skip
    return logdir


def _the_db(logdir: Path) -> Path:
    dbs = sorted((logdir / "run").glob("*.vis.db"))
    assert len(dbs) == 1, f"one .vis.db expected in {logdir / 'run'}: {dbs}"
    return dbs[0]


def test_binary_on_path_and_one_version_everywhere(user_venv):
    assert "convert" in user_venv.run("graph-ascend", "--help").stdout
    version = workspace_version()
    assert user_venv.run("graph-ascend", "--version").stdout.split() == ["graph-ascend", version]
    probe = "import importlib.metadata as m, graph_ascend_tb as p; print(p.__version__, m.version('graph-ascend'))"
    assert user_venv.run(user_venv.python, "-c", probe).stdout.split() == [version, version]
    find = "from graph_ascend_tb.sidecar import find_binary; print(find_binary())"
    assert user_venv.run(user_venv.python, "-c", find).stdout.strip() == str(user_venv.bin / "graph-ascend")


def test_conversion_writes_a_vis_db(converted):
    db = _the_db(converted)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "tb_nodes" in tables, tables
        assert conn.execute("SELECT COUNT(*) FROM tb_nodes").fetchone()[0] > 0


def _assert_tab_and_layout(tb: TensorBoard, venv: Venv, logdir: Path) -> None:
    listing = tb.get("data/plugins_listing").json()
    assert listing.get("graph_ascend", {}).get("tab_name") == "GRAPH_ASCEND", sorted(listing)
    page = tb.get("data/plugin/graph_ascend/index.js")
    assert page.status == 200 and page.body, page.status

    tag = _the_db(logdir).name[: -len(".vis.db")]
    assert tb.plugin("load_meta_dir").json()["data"] == {"run": {"type": "db", "tags": [tag]}}
    meta = meta_for("run", tag)
    assert tb.plugin("loadGraphData", params={k: str(v) for k, v in meta.items()}).json()["success"] is True
    root = tb.plugin("changeNodeExpandState", {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta})
    assert root.status == 200, root.body
    layout = root.json()["data"]
    assert isinstance(layout, dict) and layout, root.body[:2000]
    assert all({"x", "y", "width", "height"} <= set(box) for box in layout.values())

    # The sidecar that answered is the wheel's binary, found by the plugin itself.
    sidecars = tb.sidecar_pids()
    assert len(sidecars) == 1, sidecars
    assert os.path.realpath(f"/proc/{sidecars[0]}/exe") == os.path.realpath(venv.bin / "graph-ascend")


def test_tensorboard_lists_the_tab_and_the_sidecar_answers(user_venv, converted, tmp_path):
    tb = user_venv.tensorboard(converted, tmp_path / "tensorboard.log")
    try:
        _assert_tab_and_layout(tb, user_venv, converted)
    finally:
        tb.stop()


def test_next_to_mindstudio_probe_in_the_same_venv(tmp_path_factory, pypi_cache, wheel, converted, tmp_path):
    venv = _user_venv(tmp_path_factory, "with_msprobe", pypi_cache, wheel)
    venv.pip_install(pypi_cache, "--no-deps", MSPROBE)
    venv.pip_install(pypi_cache, *PLUGIN_DEPS)
    venv.run(venv.python, "-c", IMPORT_CHECK)

    tb = venv.tensorboard(converted, tmp_path / "tensorboard.log")
    try:
        _assert_tab_and_layout(tb, venv, converted)
        listing = tb.get("data/plugins_listing").json()
        theirs = listing.get("graph_ascend_msprobe")
        assert theirs is not None, sorted(listing)
        assert theirs["loading_mechanism"]["module_path"] == "/data/plugin/graph_ascend_msprobe/index.js"
        assert tb.get("data/plugin/graph_ascend_msprobe/index.js").status == 200
        assert "renamed it to 'graph_ascend_msprobe'" in tb.log()
    finally:
        tb.stop()


def test_offline_recipe_with_the_network_cut(pypi_cache, wheel, tmp_path):
    """The README's offline install: `pip download -d wheels <wheel>` (here from the PyPI cache), then in a network
    namespace with nothing but its loopback `pip install --no-index --find-links wheels graph-ascend` into a new
    venv; the installed binary converts, TensorBoard lists the tab and the wheel's sidecar answers."""
    wheels = tmp_path / "wheels"
    download(wheel, pypi_cache, wheels)
    assert (wheels / wheel.name).is_file() and any(wheels.glob("tensorboard-*.whl")), sorted(wheels.iterdir())
    venv = tmp_path / "venv"
    report = run_offline(["venv", "--wheels", str(wheels), "--venv", str(venv), "--dump", str(DUMPS / "mlp_stats"),
                          "--logdir", str(tmp_path / "logdir")])  # fmt: skip
    assert report["tab"] == "GRAPH_ASCEND", report
    assert report["loaded"] and report["root_layout_boxes"] > 0, report
    assert report["sidecar"] == [os.path.realpath(venv / "bin" / "graph-ascend")], report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "install_offline_unshare.json").write_text(json.dumps({"wheel": wheel.name, **report}))


def test_uninstall_leaves_nothing_behind(tmp_path, wheel):
    venv = Venv(tmp_path / "venv")
    # pip's own byte code may appear while pip runs; it is pip's, not ours.
    before = set(venv.files())
    venv.pip_install(wheel.parent, "--no-deps", str(wheel))
    venv.run("graph-ascend", "--version")
    venv.run(venv.python, "-c", "import graph_ascend_tb")  # writes __pycache__ beside the package
    installed = set(venv.files()) - before
    assert "bin/graph-ascend" in installed and any(PACKAGE in f for f in installed), sorted(installed)

    venv.run(venv.python, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check", "graph-ascend")
    left = sorted(f for f in set(venv.files()) - before if "/site-packages/pip/" not in f)
    assert left == [], left
    leftover_dirs = [str(p) for p in venv.root.rglob("*") if "graph_ascend" in p.name or p.name == "graph-ascend"]
    assert leftover_dirs == [], leftover_dirs


def test_make_install_honours_cargo_target_dir(tmp_path, pypi_cache):
    """`make install` in a checkout without target/, with CARGO_TARGET_DIR naming this repository's."""
    target_dir = json.loads(
        _run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"], cwd=REPO).stdout
    )["target_directory"]
    checkout = tmp_path / "checkout"
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO).stdout
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, checkout / rel)  # keeps mtimes: Cargo and make see the sources unchanged
    (checkout / "frontend" / "node_modules").symlink_to(REPO / "frontend" / "node_modules")

    venv = Venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "GRAPH_ASCEND_BINARY"}
    env.update(
        CARGO_TARGET_DIR=target_dir,
        # `python` on PATH is the environment `make install` installs into; the build tools stay in ours.
        PATH=f"{venv.bin}{os.pathsep}{env['PATH']}",
        VIRTUAL_ENV=str(venv.root),
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(pypi_cache),
    )
    tools_venv = Path(sys.executable).parent.parent
    done = subprocess.run(
        ["make", "-C", str(checkout), "install", f"VENV={tools_venv}"],
        capture_output=True, text=True, env=env, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, f"make install failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert not (checkout / "target").exists(), "Cargo wrote into the checkout despite CARGO_TARGET_DIR"
    assert len(list((checkout / "dist").glob("graph_ascend-*.whl"))) == 1
    assert venv.run("graph-ascend", "--version").stdout.split() == ["graph-ascend", workspace_version()]
