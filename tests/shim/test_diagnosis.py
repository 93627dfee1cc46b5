"""The diagnosis routes through real TensorBoard and the real sidecar: the JSON answer, and the CSV download
(a ``download`` route: bytes passed on with the file's content type and name, not JSON)."""

from __future__ import annotations

import pytest

from conftest import decompress_case

CASE = "compare_tf_stats"
CSV_HEADER = "Step,Rank,NPU Node,Bench Node,Role,NPU Name,Bench Name,NPU Dtype,Bench Dtype,"


@pytest.fixture
def compare_logdir(tmp_path):
    logdir = tmp_path / "logdir"
    db = decompress_case(CASE, logdir / "run")
    decompress_case("build_tf_stats", logdir / "build")
    return logdir, db.name[: -len(".vis.db")]


def build_tag(logdir) -> str:
    return next((logdir / "build").glob("*.vis.db")).name[: -len(".vis.db")]


def test_diagnosis_answers_the_ranked_sources(compare_logdir, tensorboard):
    logdir, tag = compare_logdir
    tb = tensorboard(logdir)
    answer = tb.plugin("diagnosis", params={"run": "run", "tag": tag, "step": "0", "rank": "0", "states": "true"})
    assert answer.status == 200, answer.body
    assert answer.content_type.startswith("application/json")
    body = answer.json()
    assert body["success"] is True, body
    assert body["data"]["sources"][0]["node"] == "Functional.layer_norm.3.forward"
    assert "Functional.layer_norm.3.forward" in body["states"]["source"]
    # A build file: a clear error answer, not a crash.
    bad = tb.plugin("diagnosis", params={"run": "build", "tag": build_tag(logdir), "lang": "en"}).json()
    assert bad["success"] is False
    assert "not a compare file" in bad["error"]


def test_the_csv_download_is_text_csv_as_an_attachment(compare_logdir, tensorboard):
    logdir, tag = compare_logdir
    tb = tensorboard(logdir)
    answer = tb.plugin("exportCsv", params={"run": "run", "tag": tag, "step": "0", "rank": "0"})
    assert answer.status == 200, answer.body
    assert answer.content_type == "text/csv; charset=utf-8"
    disposition = answer.headers["Content-Disposition"]
    assert disposition.startswith("attachment;")
    assert f'filename="{tag}_step0_rank0.csv"' in disposition
    text = answer.body.decode("utf-8")
    assert text.startswith(CSV_HEADER)
    assert ",Module.layers.2.mlp.fc1.Linear.forward.0," in text
    # Every row, as the sidecar wrote it (the shim passes the bytes on unchanged).
    assert text.count("\r\n") > 100

    # Failures are the usual JSON answer.
    bad_step = tb.plugin("exportCsv", params={"run": "run", "tag": tag, "step": "9"})
    assert bad_step.content_type.startswith("application/json")
    assert bad_step.json()["success"] is False
    assert "no step 9" in bad_step.json()["error"]
    build = tb.plugin("exportCsv", params={"run": "build", "tag": build_tag(logdir)}).json()
    assert build["success"] is False and "not a compare file" in build["error"]
