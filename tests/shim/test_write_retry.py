"""After a sidecar crash the shim repeats only what is safe to repeat.

The sidecar here is the real one behind ``dying_sidecar.py``, which kills it (and itself) once a chosen
call has been applied and before its answer reaches the shim, as a crash at the worst moment would.
"""

from __future__ import annotations

from pathlib import Path

from conftest import MATCHED_LEAF, meta_for

LEAF = MATCHED_LEAF


def _calls(log: Path, name: str) -> int:
    return log.read_text().splitlines().count(name) if log.exists() else 0


def test_an_applied_edit_is_not_repeated_after_a_crash(one_case_logdir, tensorboard, dying):
    logdir, run, tag = one_case_logdir
    env, log = dying("DeleteMatchNodes")
    tb = tensorboard(logdir, env=env)
    meta = meta_for(run, tag)
    assert tb.plugin("load_meta_dir").status == 200
    first_sidecar = tb.sidecar_pids()

    answer = tb.plugin("deleteMatchNodes", {"npuNodeName": LEAF, "benchNodeName": LEAF, "metaData": meta})
    assert answer.status == 503, answer.body
    body = answer.json()
    assert body["success"] is False and body["code"] == "UNAVAILABLE"
    assert "may or may not have been applied" in body["error"], body
    assert _calls(log, "DeleteMatchNodes") == 1, "the edit was sent again to the restarted sidecar"

    # The edit was committed, and a fresh sidecar (restarted for the next request) shows it.
    info = tb.plugin("getNodeInfo", {"nodeInfo": {"nodeName": LEAF, "nodeType": "NPU"}, "metaData": meta})
    assert info.status == 200, info.body
    assert info.json()["data"]["npu"]["matched_node_link"] == []
    assert tb.sidecar_pids() != first_sidecar


def test_a_read_is_repeated_after_a_crash(one_case_logdir, tensorboard, dying):
    """The same crash on a read: answered from a fresh sidecar, invisibly to the page."""
    logdir, run, tag = one_case_logdir
    env, log = dying("LoadGraphConfigInfo")
    tb = tensorboard(logdir, env=env)
    answer = tb.plugin("loadGraphConfigInfo", {"metaData": meta_for(run, tag)})
    assert answer.status == 200, answer.body
    assert answer.json()["success"] is True
    assert _calls(log, "LoadGraphConfigInfo") == 2
