"""Every answer of the plugin, its page's documents first, carries ``Referrer-Policy: same-origin``: the
page's requests never send its address to another site (docs/security.md, "Who may write", rule 5)."""

from __future__ import annotations

from conftest import meta_for


def test_every_answer_says_same_origin(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)
    answers = {
        "index.html": tb.get("data/plugin/graph_ascend/index.html"),
        "index.js": tb.get("data/plugin/graph_ascend/index.js"),
        "load_meta_dir": tb.plugin("load_meta_dir"),
        "loadGraphConfigInfo": tb.plugin("loadGraphConfigInfo", {"metaData": meta_for(run, tag)}),
        "exportCsv": tb.get("data/plugin/graph_ascend/exportCsv", {"run": run, "tag": tag, "step": 0, "rank": 0}),
        "an unknown route": tb.plugin("noSuchRoute"),
        "a refused write": tb.plugin("saveData", {}, headers={"X-Graph-Ascend-Token": "wrong"}),
    }
    for name, answer in answers.items():
        assert answer.headers.get("Referrer-Policy") == "same-origin", (name, answer.status, dict(answer.headers))
    assert answers["index.html"].status == 200 and answers["exportCsv"].status == 200
    assert answers["an unknown route"].status == 404 and answers["a refused write"].status == 403
