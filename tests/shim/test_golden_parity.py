"""Parity with msprobe 26.2's own plugin: replay ``golden_api26/probe.py`` against our TensorBoard, per case.

Each case's ``.vis.db`` (msprobe's own output) goes alone into a logdir as run ``run``, as when the answers
were recorded. A route the sidecar answers with UNIMPLEMENTED is not asked for yet: the sections that need
it are left out and reported (terminal summary and ``tests/artifacts/shim/parity.json``); every other
section must equal msprobe's recorded answer.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.error

import pytest

from conftest import ARTIFACTS, GOLDEN, decompress_case, golden_cases

# Routes every section relies on (the probe reads the selection and the config first).
BASE_ROUTES = {"load_meta_dir", "loadGraphData", "loadGraphConfigInfo"}
SECTION_ROUTES = {
    "meta_dir": set(),
    "config": set(),
    "node_lists": {"loadGraphAllNodeList"},
    "expand_root": {"changeNodeExpandState"},
    "expand_module": {"changeNodeExpandState"},
    "node_info": {"loadGraphAllNodeList", "getNodeInfo"},
    "matched": {"loadGraphMatchedRelations"},
    "filter_overflow": {"filterNodes"},
}

PARITY_RESULTS: dict = {}


def routes_for(section: str) -> set:
    if section == "meta_dir":
        return {"load_meta_dir"}
    if section == "config":
        return {"load_meta_dir", "loadGraphData", "loadGraphConfigInfo"}
    if section.startswith("filter_precision_"):
        return BASE_ROUTES | {"filterNodes"}
    if section not in SECTION_ROUTES:
        raise AssertionError(f"golden section {section!r} is not mapped to routes in this test")
    return BASE_ROUTES | SECTION_ROUTES[section]


def load_probe():
    spec = importlib.util.spec_from_file_location("golden_probe", GOLDEN / "probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", golden_cases())
def test_golden_parity(case, tmp_path, tensorboard):
    logdir = tmp_path / "logdir"
    decompress_case(case, logdir / "run")
    tb = tensorboard(logdir)

    probe = load_probe()
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
    want = json.loads((GOLDEN / f"{case}.json").read_text())["answers"]

    checked, skipped, differences = [], [], {}
    for section in sorted(want):
        if routes_for(section) & unimplemented:
            skipped.append(section)
            continue
        checked.append(section)
        problems = probe.diff(got.get(section), want[section], section)
        if problems:
            differences[section] = problems[:8]

    PARITY_RESULTS[case] = {
        "checked": checked,
        "skipped": skipped,
        "unimplemented_routes": sorted(unimplemented),
        "differences": differences,
        "http_failures": failures,
        "times_ms": {k: round(v, 1) for k, v in times.items()},
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "parity.json").write_text(json.dumps(PARITY_RESULTS, indent=1, sort_keys=True))

    assert not failures, f"routes failed (not UNIMPLEMENTED): {failures}"
    assert "meta_dir" in checked and "config" in checked, (
        "load_meta_dir, loadGraphData, loadGraphConfigInfo are required"
    )
    assert not differences, json.dumps(differences, indent=1)
