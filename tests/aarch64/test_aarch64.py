"""The aarch64 wheel (`make wheel-aarch64`) against the x86_64 one, its binary run under qemu-user.

`make test-aarch64` runs this with AARCH64_BIN (the aarch64 binary the wheel was packed from), X86_BIN (the
x86_64 wheel's binary, installed into .venv) and AARCH64_DIST (the folder holding the aarch64 wheel). Every
aarch64 run goes through tools/aarch64/qemu.sh (qemu-aarch64 -L <toolchain root>); no binfmt handler. The
sidecar under TensorBoard is the shim's golden API suite, run by the same make target. What was compared and
how (byte-equal or not, strictly equal or within diff-visdb's tolerance) is written to
tests/artifacts/aarch64/compare.json.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from elftools.elf.elffile import ELFFile

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "wheel"))

from offline import PYPI_AARCH64, download_for_platform, run_offline  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
DUMPS = FIXTURES / "dumps"
LAYER_MAPPING = FIXTURES / "layer_mapping"
QEMU = REPO / "tools" / "aarch64" / "qemu.sh"
ARTIFACTS = REPO / "tests" / "artifacts" / "aarch64"
EM_AARCH64 = 183
COMPARED: Dict[str, dict] = {}


def _env_path(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"${name} is not set: run this through `make test-aarch64`")
    return Path(value)


@pytest.fixture(scope="session")
def arm_bin() -> Path:
    return _env_path("AARCH64_BIN")


@pytest.fixture(scope="session")
def x86_bin() -> Path:
    return _env_path("X86_BIN")


@pytest.fixture(scope="session")
def arm_wheel() -> Path:
    found = sorted(_env_path("AARCH64_DIST").glob("graph_ascend-*manylinux_2_17_aarch64.whl"))
    assert len(found) == 1, f"one aarch64 wheel expected: {found}"
    return found[0]


def run(cmd: List[str], timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    return done


def on_arm(arm_bin: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    return run([QEMU, arm_bin, *args], check=check)


def on_x86(x86_bin: Path, *args, check: bool = True) -> subprocess.CompletedProcess:
    return run([x86_bin, *args], check=check)


# ------------------------------------------------------------------------------------------------
# The binary itself


def test_binary_is_aarch64_and_needs_glibc_2_17_at_most(arm_bin, arm_wheel):
    """The same check as for x86_64 (auditwheel, in `make wheel-aarch64`), here from the symbol versions."""
    with open(arm_bin, "rb") as f:
        elf = ELFFile(f)
        assert elf["e_machine"] == "EM_AARCH64", elf["e_machine"]
        needed = set()
        for section in elf.iter_sections():
            if section.name == ".gnu.version_r":
                for _, auxiliaries in section.iter_versions():
                    needed.update(a.name for a in auxiliaries)
    glibc = sorted(tuple(int(x) for x in v.split("_", 1)[1].split(".")) for v in needed if v.startswith("GLIBC_2"))
    assert glibc, needed
    assert glibc[-1] <= (2, 17), f"newest glibc symbol version needed: GLIBC_{'.'.join(map(str, glibc[-1]))}"
    COMPARED["newest_glibc_symbol"] = "GLIBC_" + ".".join(map(str, glibc[-1]))
    with zipfile.ZipFile(arm_wheel) as zf:
        script = next(n for n in zf.namelist() if n.endswith(".data/scripts/graph-ascend"))
        assert zf.read(script)[18] == EM_AARCH64, "the wheel's binary is not aarch64"


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["convert", "--help"], ["serve", "--help"],
                                  ["diagnose", "--help"], ["diff-visdb", "--help"]])  # fmt: skip
def test_version_and_help_are_the_same(arm_bin, x86_bin, args):
    arm, x86 = on_arm(arm_bin, *args), on_x86(x86_bin, *args)
    assert arm.stdout == x86.stdout
    assert arm.stdout.strip()


# ------------------------------------------------------------------------------------------------
# Every real fixture pair converted by both: the cases of plugin/convert/tests/upstream.rs and merge.rs


def rank_dir(dump: str) -> Path:
    step = DUMPS / dump / "step0"
    return sorted(p for p in step.iterdir() if p.is_dir())[0]


def dump(name: str) -> Path:
    return DUMPS / name


def dist(name: str) -> Path:
    return DUMPS / name / "step0"


def lm(name: str) -> List[str]:
    return ["--layer_mapping", str(LAYER_MAPPING / name)]


# case: (target, golden or None, extra flags), with msprobe's own file in tests/fixtures/upstream_vis/<case>/.
# The old-stack case rewrites stack.json, the unusable-mapping case writes its YAML: both made in the test.
CASES: Dict[str, Tuple[Path, Optional[Path], List[str]]] = {
    "build_mlp_step0": (rank_dir("mlp_stats"), None, []),
    "build_mlp_steps": (dump("mlp_stats"), None, []),
    "build_mlp_overflow_oc": (rank_dir("mlp_overflow"), None, ["--overflow_check"]),
    "compare_mlp_overflow_oc": (rank_dir("mlp_overflow"), rank_dir("mlp_stats"), ["--overflow_check"]),
    "build_tf_stats": (rank_dir("tf_stats_a"), None, []),
    "build_tf_L0": (rank_dir("tf_L0_a"), None, []),
    "compare_tf_stats": (rank_dir("tf_stats_b"), rank_dir("tf_stats_a"), []),
    "compare_tf_stats_steps": (dump("tf_stats_b"), dump("tf_stats_a"), []),
    "compare_tf_stats_oc": (rank_dir("tf_stats_b"), rank_dir("tf_stats_a"), ["--overflow_check"]),
    "compare_tf_stats_fm": (rank_dir("tf_stats_b"), rank_dir("tf_stats_a"), ["--fuzzy_match"]),
    "compare_tf_stats_lm_bare": (rank_dir("tf_stats_b"), rank_dir("tf_stats_a"), ["--layer_mapping"]),
    "compare_tf_renamed_nolm": (rank_dir("tf_renamed_stats_b"), rank_dir("tf_stats_a"), []),
    "compare_tf_renamed_lm_bare": (rank_dir("tf_renamed_stats_b"), rank_dir("tf_stats_a"), ["--layer_mapping"]),
    "compare_tf_md5": (rank_dir("tf_md5_b"), rank_dir("tf_md5_a"), []),
    "build_dist_ranks": (dist("dist_stats_a"), None, []),
    "compare_dist_ranks": (dist("dist_stats_b"), dist("dist_stats_a"), []),
    "compare_dist_ranks_oc": (dist("dist_stats_b"), dist("dist_stats_a"), ["--overflow_check"]),
    "build_tf_small_tensor": (rank_dir("tf_small_tensor_a"), None, []),
    "compare_tf_small_tensor": (rank_dir("tf_small_tensor_b"), rank_dir("tf_small_tensor_a"), []),
    "build_ms_stats": (rank_dir("ms_stats_a"), None, []),
    "build_ms_stats_steps": (dump("ms_stats_a"), None, []),
    "build_ms_L0": (rank_dir("ms_L0_a"), None, []),
    "compare_ms_stats": (rank_dir("ms_stats_b"), rank_dir("ms_stats_a"), []),
    "compare_ms_stats_fm": (rank_dir("ms_stats_b"), rank_dir("ms_stats_a"), ["--fuzzy_match"]),
    "compare_ms_vs_pt_lm_bare": (rank_dir("ms_stats_a"), rank_dir("tf_stats_a"), ["--layer_mapping"]),
    "compare_ms_vs_pt_md5_lm_bare": (rank_dir("ms_md5_a"), rank_dir("tf_md5_a"), ["--layer_mapping"]),
    "compare_ms_vs_pt_renamed_lm_bare": (rank_dir("ms_stats_a"), rank_dir("tf_renamed_stats_b"), ["--layer_mapping"]),
    "compare_tf_renamed_lm_yaml": (
        rank_dir("tf_renamed_stats_b"), rank_dir("tf_stats_a"), lm("layer_mapping_renamed.yaml")),
    "compare_ms_vs_pt_renamed_lm_yaml": (
        rank_dir("ms_stats_a"), rank_dir("tf_renamed_stats_b"), lm("layer_mapping_ms_to_pt_renamed.yaml")),
    "compare_tf_renamed_lm_yaml_multilevel": (
        rank_dir("tf_renamed_stats_b"), rank_dir("tf_stats_a"), lm("layer_mapping_multilevel.yaml")),
    "compare_ms_vs_pt_renamed_oldstack_lm_yaml": (
        rank_dir("ms_stats_a"), rank_dir("tf_renamed_stats_b"), lm("layer_mapping_ms_to_pt_renamed.yaml")),
    # A mapping file that maps nothing (a warning, then the same graph as with no mapping).
    "compare_tf_renamed_lm_yaml_unusable": (rank_dir("tf_renamed_stats_b"), rank_dir("tf_stats_a"), []),
    "build_dist_merge_tp2": (dist("dist_stats_a"), None, ["--rank_size", "2", "--tp", "2", "--pp", "1"]),
    "build_dist_merge_pp2": (dist("dist_stats_a"), None, ["--rank_size", "2", "--tp", "1", "--pp", "2"]),
    "compare_dist_merge_tp2": (dist("dist_stats_b"), dist("dist_stats_a"),
                               ["--rank_size", "2", "2", "--tp", "2", "2", "--pp", "1", "1"]),
}  # fmt: skip


def with_old_stack(rank: Path, into: Path) -> Path:
    """A copy of a rank folder with stack.json in the old form {node: [frames]} (as upstream.rs makes it)."""
    dst = into / rank.name
    dst.mkdir(parents=True)
    for name in ("dump.json", "construct.json"):
        (dst / name).write_bytes((rank / name).read_bytes())
    new = json.loads((rank / "stack.json").read_text())
    old = {name: entry[1] for entry in new.values() for name in entry[0]}
    (dst / "stack.json").write_text(json.dumps(old))
    return dst


def the_db(folder: Path) -> Path:
    dbs = sorted(folder.glob("*.vis.db"))
    assert len(dbs) == 1, f"one .vis.db expected in {folder}: {dbs}"
    return dbs[0]


@pytest.fixture(scope="module")
def converted(tmp_path_factory, arm_bin, x86_bin):
    """case -> (x86_64's file, aarch64's file, seconds under qemu, seconds native): converted once, on demand."""
    done: Dict[str, Tuple[Path, Path, float, float]] = {}

    def get(case: str) -> Tuple[Path, Path, float, float]:
        if case not in done:
            root = tmp_path_factory.mktemp(case)
            target, golden, flags = CASES[case]
            if "oldstack" in case:
                target, golden = with_old_stack(target, root / "t"), with_old_stack(golden, root / "g")
            if case.endswith("_unusable"):
                (root / "mapping.yaml").write_text("Block: null\n")
                flags = [*flags, "--layer_mapping", str(root / "mapping.yaml")]
            args = ["convert", "--target_path", target, *(["--golden_path", golden] if golden else []), *flags]
            started = time.monotonic()
            on_x86(x86_bin, *args, "--output_path", root / "x86")
            native = time.monotonic() - started
            started = time.monotonic()
            on_arm(arm_bin, *args, "--output_path", root / "arm")
            emulated = time.monotonic() - started
            done[case] = (the_db(root / "x86"), the_db(root / "arm"), emulated, native)
        return done[case]

    return get


@pytest.mark.parametrize("case", sorted(CASES))
def test_convert_gives_the_same_vis_db(case, converted, x86_bin):
    x86_db, arm_db, emulated, native = converted(case)
    # The acceptance tool (default tolerance), then strictly: a last-bit difference would show in the second.
    equal = on_x86(x86_bin, "diff-visdb", x86_db, arm_db, "--max", "20", check=False)
    assert equal.returncode == 0, equal.stdout
    strict = on_x86(x86_bin, "diff-visdb", x86_db, arm_db, "--tolerance", "0", "--max", "20", check=False)
    # And both equal to msprobe's own output (upstream.rs checks the x86_64 library; this, the aarch64 binary).
    with lzma.open(next((FIXTURES / "upstream_vis" / case).glob("*.vis.db.xz"))) as src:
        msprobe_db = arm_db.parent.parent / "msprobe.vis.db"
        msprobe_db.write_bytes(src.read())
    theirs = on_x86(x86_bin, "diff-visdb", arm_db, msprobe_db, "--ignore-dump-dir", "--max", "20", check=False)
    assert theirs.returncode == 0, theirs.stdout
    COMPARED.setdefault("convert", {})[case] = {
        "rows": equal.stdout.strip().splitlines()[-1],
        "strictly_equal": strict.returncode == 0,
        "strict_differences": strict.stdout.strip().splitlines()[:20] if strict.returncode else [],
        "bytes_equal": x86_db.read_bytes() == arm_db.read_bytes(),
        "seconds_qemu": round(emulated, 2),
        "seconds_native": round(native, 2),
    }


def test_json_output_and_refusals_are_the_same(arm_bin, x86_bin, tmp_path):
    """The merged JSON output (build_dist_merge_tp2_json) file by file, and msprobe's refusals (an L1 dump, a
    MindSpore-PyTorch compare without a mapping): the same exit status and message."""
    merge = ["convert", "--target_path", dist("dist_stats_a"), "--rank_size", "2", "--tp", "2", "--pp", "1",
             "--file_type", "json"]  # fmt: skip
    on_x86(x86_bin, *merge, "--output_path", tmp_path / "x86")
    on_arm(arm_bin, *merge, "--output_path", tmp_path / "arm")
    x86_files = sorted(p.relative_to(tmp_path / "x86") for p in (tmp_path / "x86").rglob("*") if p.is_file())
    arm_files = sorted(p.relative_to(tmp_path / "arm") for p in (tmp_path / "arm").rglob("*") if p.is_file())
    assert x86_files == arm_files and x86_files, (x86_files, arm_files)
    for rel in x86_files:
        assert (tmp_path / "arm" / rel).read_bytes() == (tmp_path / "x86" / rel).read_bytes(), rel

    for name, args in {
        "build_ms_L1": ["--target_path", rank_dir("ms_L1_a")],
        "build_tf_L1": ["--target_path", rank_dir("tf_L1_a")],
        "compare_ms_vs_pt_nolm": ["--target_path", rank_dir("ms_stats_a"), "--golden_path", rank_dir("tf_stats_a")],
    }.items():
        x86 = on_x86(x86_bin, "convert", *args, "--output_path", tmp_path / f"{name}_x86", check=False)
        arm = on_arm(arm_bin, "convert", *args, "--output_path", tmp_path / f"{name}_arm", check=False)
        assert x86.returncode != 0 and arm.returncode == x86.returncode, (name, x86.returncode, arm.returncode)
        assert arm.stderr.replace("_arm", "") == x86.stderr.replace("_x86", ""), name


# Every compare case has precision data to diagnose; one of each kind of input is enough beyond that.
DIAGNOSED = sorted(c for c in CASES if c.startswith("compare_"))


@pytest.mark.parametrize("case", DIAGNOSED)
def test_diagnose_gives_the_same_json(case, converted, arm_bin, x86_bin):
    x86_db, arm_db, _, _ = converted(case)
    # The same file for both (x86_64's), so any difference is the diagnosis', not the conversion's.
    # Exit status 0 (no source found) or 1 (sources found), the same on both; 2 would be an error.
    x86 = on_x86(x86_bin, "diagnose", x86_db, "--format", "json", check=False)
    arm = on_arm(arm_bin, "diagnose", x86_db, "--format", "json", check=False)
    assert x86.returncode in (0, 1) and arm.returncode == x86.returncode, (x86.stderr, arm.stderr)
    assert json.loads(arm.stdout) == json.loads(x86.stdout)
    COMPARED.setdefault("diagnose", {})[case] = {"text_equal": arm.stdout == x86.stdout, "status": x86.returncode}
    # And on each one's own conversion.
    own = on_arm(arm_bin, "diagnose", arm_db, "--format", "json", check=False)
    assert own.returncode == x86.returncode and json.loads(own.stdout) == json.loads(x86.stdout)


# ------------------------------------------------------------------------------------------------
# The wheel for a pip told the aarch64 platform, and the offline recipe for aarch64


EXPECTED_FILES = ("bin/graph-ascend", "graph_ascend_tb/__init__.py", "graph_ascend_tb/loader.py",
                  "graph_ascend_tb/sidecar.py", "graph_ascend_tb/static/index.js", "graph_ascend_tb/static/index.html",
                  "graph_ascend_tb/graph_ascend.desc")  # fmt: skip


def check_installed(target: Path, arm_bin: Path) -> None:
    missing = [f for f in EXPECTED_FILES if not (target / f).is_file()]
    assert not missing, f"missing in {target}: {missing}"
    assert any(target.glob("graph_ascend-*.dist-info/entry_points.txt"))
    installed = target / "bin" / "graph-ascend"
    assert os.access(installed, os.X_OK)
    with open(installed, "rb") as f:
        assert ELFFile(f)["e_machine"] == "EM_AARCH64"
    assert on_arm(installed, "--version").stdout == on_arm(arm_bin, "--version").stdout


def test_pip_told_aarch64_installs_the_wheel(arm_wheel, arm_bin, tmp_path):
    target = tmp_path / "target"
    run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--platform", "manylinux2014_aarch64", "--only-binary=:all:", "--target", target, arm_wheel])  # fmt: skip
    check_installed(target, arm_bin)


def test_offline_recipe_for_aarch64(arm_wheel, arm_bin, tmp_path):
    """`pip download --platform manylinux2014_aarch64` of the wheel and its dependencies (from a cache made once
    from PyPI), then, with the network cut, pip resolves and installs all of it for aarch64 from that folder."""
    wheels = tmp_path / "wheels"
    download_for_platform(arm_wheel, wheels, "manylinux2014_aarch64")
    target = tmp_path / "target"
    result = run_offline(["pip-platform", "--wheels", str(wheels), "--target", str(target),
                          "--platform", "manylinux2014_aarch64"])  # fmt: skip
    assert result["install_seconds"] > 0, result
    check_installed(target, arm_bin)
    names = {p.name.split("-")[0].lower() for p in (target).glob("*.dist-info")}
    assert {"graph_ascend", "tensorboard", "grpcio", "protobuf", "numpy"} <= names, sorted(names)
    assert PYPI_AARCH64.is_dir()


def pytest_sessionfinish_write() -> None:
    if COMPARED:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "compare.json").write_text(json.dumps(COMPARED, indent=1, sort_keys=True))


@pytest.fixture(scope="session", autouse=True)
def _write_comparison():
    yield
    pytest_sessionfinish_write()


def test_wheel_names_the_aarch64_platform(arm_wheel):
    assert re.search(r"-py3-none-manylinux2014_aarch64\.manylinux_2_17_aarch64\.whl$", arm_wheel.name), arm_wheel
