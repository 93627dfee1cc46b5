"""Parity with msprobe 26.2's own plugin: replay ``golden_api26/probe.py`` against our TensorBoard, per case.

Each case's ``.vis.db`` (msprobe's own output) goes alone into a logdir as run ``run``, as when the answers
were recorded. Every section must equal msprobe's recorded answer, and every route must answer: one that
the sidecar answers with UNIMPLEMENTED (or any other HTTP error) fails the case, named in the report
(``tests/artifacts/shim/parity.json``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ARTIFACTS, GOLDEN, TensorBoard, decompress_case, golden_cases

# Cases run this many at a time (each: one TensorBoard + one sidecar; mostly waiting, little CPU).
PARALLEL = int(os.environ.get("GRAPH_ASCEND_PARITY_JOBS", "3"))

PARITY_RESULTS: dict = {}


def load_probe():
    spec = importlib.util.spec_from_file_location("golden_probe", GOLDEN / "probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(case: str, root: Path, binary: Path) -> dict:
    """Replays the probe against a fresh TensorBoard over the case's file; what differs, per section."""
    logdir = root / case / "logdir"
    decompress_case(case, logdir / "run")
    tb = TensorBoard(logdir, root / case / "tensorboard.log", env={"GRAPH_ASCEND_BINARY": str(binary)})
    try:
        probe = load_probe()  # a fresh module per case: its `call` is patched below
        unimplemented, failures = set(), {}
        original_call = probe.call

        def call(base, route, body=None, query=None):
            try:
                return original_call(base, route, body, query)
            except urllib.error.HTTPError as exc:
                raw = exc.read()
                try:
                    answer = json.loads(raw.decode("utf-8"))
                except ValueError:
                    answer = {}
                if isinstance(answer, dict) and answer.get("code") == "UNIMPLEMENTED":
                    unimplemented.add(route)
                else:
                    failures.setdefault(route, f"HTTP {exc.code}: {raw[:400]!r}")
                return (answer if isinstance(answer, dict) else {}), 0.0

        probe.call = call
        got, times = probe.run(tb.plugin_base)
    finally:
        tb.stop(signal.SIGTERM)
    want = json.loads((GOLDEN / f"{case}.json").read_text())["answers"]
    differences = {}
    for section in sorted(want):
        problems = probe.diff(got.get(section), want[section], section)
        if problems:
            differences[section] = problems[:8]
    return {
        "checked": sorted(want),
        "unimplemented_routes": sorted(unimplemented),
        "differences": differences,
        "http_failures": failures,
        "times_ms": {k: round(v, 1) for k, v in times.items()},
    }


@pytest.fixture(scope="module")
def parity(binary, tmp_path_factory):
    root = tmp_path_factory.mktemp("parity")
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {case: pool.submit(run_case, case, root, binary) for case in golden_cases()}
    results = {}
    for case, future in futures.items():
        try:
            results[case] = future.result()
        except Exception as exc:  # reported by that case's test
            results[case] = {"error": f"{type(exc).__name__}: {exc}"}
    PARITY_RESULTS.update({k: v for k, v in results.items() if "error" not in v})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "parity.json").write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


@pytest.mark.parametrize("case", golden_cases())
def test_golden_parity(case, parity):
    result = parity[case]
    assert "error" not in result, result.get("error")
    assert not result["unimplemented_routes"], f"routes answered UNIMPLEMENTED: {result['unimplemented_routes']}"
    assert not result["http_failures"], f"routes failed: {result['http_failures']}"
    assert "meta_dir" in result["checked"] and "config" in result["checked"], "the golden answers lack sections"
    assert not result["differences"], json.dumps(result["differences"], indent=1)
