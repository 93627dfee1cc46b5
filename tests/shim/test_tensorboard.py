"""End to end: real TensorBoard + the installed plugin + the real graph-ascend binary + real .vis.db files."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from conftest import decompress_case, meta_for, process_alive, wait_until

CASE = "compare_tf_stats"  # a compare file: both sides, precision colours


def test_plugin_is_listed(tmp_path, tensorboard):
    tb = tensorboard(tmp_path)
    listing = tb.get("data/plugins_listing").json()
    entry = listing["graph_ascend"]
    assert entry["enabled"] is True
    assert entry["tab_name"] == "GRAPH_ASCEND"
    assert entry["disable_reload"] is True
    assert entry["loading_mechanism"] == {"type": "IFRAME", "module_path": "/data/plugin/graph_ascend/index.js"}


def test_core_routes_answer_through_the_proxy(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)

    meta_dir = tb.plugin("load_meta_dir")
    assert meta_dir.status == 200, meta_dir.body
    assert meta_dir.content_type.startswith("application/json")
    assert meta_dir.headers["X-Content-Type-Options"] == "nosniff"
    assert meta_dir.json()["data"] == {run: {"type": "db", "tags": [tag]}}
    assert meta_dir.json()["error"] == []
    # Both methods on every route, as msprobe: GET works as well.
    assert tb.get("data/plugin/graph_ascend/load_meta_dir").json() == meta_dir.json()

    meta = meta_for(run, tag)
    # The browser sends the selection flat in the query string: every value a string.
    loaded = tb.plugin("loadGraphData", params={k: str(v) for k, v in meta.items()})
    assert loaded.status == 200, loaded.body
    assert loaded.json()["success"] is True

    config = tb.plugin("loadGraphConfigInfo", {"metaData": meta})
    assert config.status == 200, config.body
    data = config.json()["data"]
    assert data["isSingleGraph"] is False
    assert isinstance(data["colors"], dict) and data["colors"], "colours are a JSON object keyed by colour"
    assert all(key.startswith("#") for key in data["colors"])

    root = tb.plugin("changeNodeExpandState", {"nodeInfo": {"nodeName": "root", "nodeType": "NPU"}, "metaData": meta})
    assert root.status == 200, root.body
    layout = root.json()["data"]
    assert isinstance(layout, dict) and layout
    first = next(iter(layout.values()))
    for key in ("x", "y", "width", "height", "expand", "isRoot", "label", "name", "precisionIndex", "overflowLevel"):
        assert key in first, f"{key} missing from a render box: {first}"


def test_answers_are_gzipped_when_accepted(one_case_logdir, tensorboard):
    import gzip
    import json

    logdir, _, _ = one_case_logdir
    tb = tensorboard(logdir)
    plain = tb.plugin("load_meta_dir")
    zipped = tb.plugin("load_meta_dir", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers.get("Content-Encoding") == "gzip"
    assert json.loads(gzip.decompress(zipped.body)) == plain.json()


def test_big_answers_come_prerendered_plain_or_gzipped(one_case_logdir, tensorboard):
    import gzip
    import json

    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)
    body = {"metaData": meta_for(run, tag)}
    plain = tb.plugin("loadGraphAllNodeList", body)
    assert plain.headers.get("Content-Length") == str(len(plain.body))
    names = plain.json()["data"]["npuNodeList"]
    assert names
    zipped = tb.plugin("loadGraphAllNodeList", body, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers.get("Content-Encoding") == "gzip"
    assert json.loads(gzip.decompress(zipped.body)) == plain.json()
    assert "rawJson" not in plain.json()


def test_unknown_route_and_bad_json(one_case_logdir, tensorboard):
    logdir, _, _ = one_case_logdir
    tb = tensorboard(logdir)
    missing = tb.plugin("noSuchRoute")
    assert missing.status == 404
    assert missing.json()["success"] is False and "noSuchRoute" in missing.json()["error"]
    bad = tb.request(
        "data/plugin/graph_ascend/loadGraphConfigInfo",
        method="POST",
        body=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status == 400
    assert bad.json()["success"] is False and "not JSON" in bad.json()["error"]
    wrong_type = tb.plugin("loadGraphData", params={"run": "run", "microStep": "seven"})
    assert wrong_type.status == 400
    assert "microStep" in wrong_type.json()["error"]


def test_abusive_request_bodies_are_refused_as_bad_requests(one_case_logdir, tensorboard):
    """Regression: a deeply nested body answered 500, and a 50 MB body was
    parsed (seconds, a gigabyte) before being refused."""
    logdir, _, _ = one_case_logdir
    tb = tensorboard(logdir)

    def post(body):
        return tb.request(
            "data/plugin/graph_ascend/loadGraphConfigInfo",
            method="POST",
            body=body,
            headers={"Content-Type": "application/json"},
        )

    for depth in (100, 100_000):
        nested = post(b'{"metaData": ' + b"[" * depth + b"]" * depth + b"}")
        assert nested.status == 400, (depth, nested.status)
        assert nested.json()["success"] is False
    big = post(b"[" + b"1," * (3 * 1024 * 1024) + b"1]")
    assert big.status == 413
    assert big.json()["success"] is False
    # An ordinary body still works.
    assert post(b'{"metaData": {"run": "run"}}').status != 400


def test_works_under_path_prefix(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, "--path_prefix", "/some/prefix")
    listing = tb.get("data/plugins_listing").json()
    module_path = listing["graph_ascend"]["loading_mechanism"]["module_path"]
    assert module_path == "/some/prefix/data/plugin/graph_ascend/index.js"
    entry = tb.get("data/plugin_entry.html", {"name": "graph_ascend"})
    assert entry.status == 200 and b"index.js" in entry.body
    js = tb.get("data/plugin/graph_ascend/index.js")
    assert js.status == 200 and js.content_type.startswith("text/javascript")
    answer = tb.plugin("load_meta_dir").json()
    assert answer["data"] == {run: {"type": "db", "tags": [tag]}}
    config = tb.plugin("loadGraphConfigInfo", {"metaData": meta_for(run, tag)})
    assert config.status == 200 and config.json()["success"] is True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_sidecar_dies_with_tensorboard(one_case_logdir, tensorboard, sig):
    logdir, _, _ = one_case_logdir
    tb = tensorboard(logdir)
    assert tb.sidecar_pids() == [], "the sidecar starts lazily, on the first request"
    assert tb.plugin("load_meta_dir").status == 200
    pids = tb.sidecar_pids()
    assert len(pids) == 1
    tb.stop(sig)
    assert wait_until(lambda: not process_alive(pids[0]), 15), f"sidecar {pids[0]} outlived TensorBoard ({sig})"


def test_killed_sidecar_is_restarted(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)
    assert tb.plugin("load_meta_dir").status == 200
    (first,) = tb.sidecar_pids()
    os.kill(first, signal.SIGKILL)
    assert wait_until(lambda: not process_alive(first), 10)
    again = tb.plugin("load_meta_dir")
    assert again.status == 200, again.body
    assert again.json()["data"] == {run: {"type": "db", "tags": [tag]}}
    (second,) = tb.sidecar_pids()
    assert second != first


def test_missing_binary_gives_a_clear_error(one_case_logdir, tensorboard, descriptor_file, tmp_path):
    logdir, _, _ = one_case_logdir
    missing = tmp_path / "no-such-graph-ascend"
    tb = tensorboard(logdir, env={"GRAPH_ASCEND_BINARY": str(missing), "GRAPH_ASCEND_DESCRIPTOR": str(descriptor_file)})
    answer = tb.plugin("load_meta_dir")
    assert answer.status == 503
    body = answer.json()
    assert body["success"] is False
    assert str(missing) in body["error"] and "not an executable file" in body["error"]
    # TensorBoard keeps serving, and so does our page (which shows the error).
    assert tb.get("data/plugins_listing").status == 200
    assert tb.get("data/environment").status == 200
    assert tb.get("data/plugin/graph_ascend/index.js").status == 200
    # Without any descriptor either, the answer still says what is wrong.
    tb2 = tensorboard(logdir, env={"GRAPH_ASCEND_BINARY": str(missing), "GRAPH_ASCEND_DESCRIPTOR": ""})
    answer2 = tb2.plugin("load_meta_dir")
    assert answer2.status == 503 and str(missing) in answer2.json()["error"]


def test_sidecar_start_failure_shows_the_error_file(tmp_path, tensorboard):
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x")
    tb = tensorboard(not_a_dir)
    answer = tb.plugin("load_meta_dir")
    assert answer.status == 503
    assert "failed to start" in answer.json()["error"]
    assert str(not_a_dir) in answer.json()["error"] or "logdir" in answer.json()["error"].lower()
    assert tb.get("data/plugins_listing").status == 200


def test_bad_files_are_listed_with_their_names(tmp_path, tensorboard):
    logdir = tmp_path / "logdir"
    good = decompress_case(CASE, logdir / "good")
    data = good.read_bytes()

    (logdir / "truncated").mkdir()
    (logdir / "truncated" / "cut.vis.db").write_bytes(data[: len(data) // 3])
    (logdir / "text").mkdir()
    (logdir / "text" / "notes.vis.db").write_text("this is not SQLite\n" * 50)
    (logdir / "schema").mkdir()
    con = sqlite3.connect(logdir / "schema" / "other.vis.db")
    con.execute("CREATE TABLE something_else (a INTEGER)")
    con.commit()
    con.close()
    (logdir / "unreadable").mkdir()
    unreadable = logdir / "unreadable" / "locked.vis.db"
    if os.geteuid() == 0:
        unreadable.symlink_to(logdir / "unreadable" / "missing-target.vis.db")  # root reads any mode
    else:
        unreadable.write_bytes(data)
        unreadable.chmod(0)

    # A file changed in the last second may still be being copied in, and is held back until its
    # size settles (docs/service.md): these broken files are made old, so they are reported at once.
    settled = time.time() - 300
    for bad in ["truncated/cut.vis.db", "text/notes.vis.db", "schema/other.vis.db"]:
        bad = logdir / bad
        os.utime(bad, (settled, settled))

    tb = tensorboard(logdir)
    answer = tb.plugin("load_meta_dir")
    assert answer.status == 200, answer.body
    body = answer.json()
    assert body["data"] == {"good": {"type": "db", "tags": [good.name[: -len(".vis.db")]]}}
    errors = {(e["run"], e["tag"]): e["info"] for e in body["error"]}
    for run, tag in [("truncated", "cut"), ("text", "notes"), ("schema", "other"), ("unreadable", "locked")]:
        assert (run, tag) in errors, f"{run}/{tag}.vis.db not reported: {body['error']}"
        assert errors[(run, tag)], f"no reason given for {run}/{tag}"
    # The good file still works.
    meta = meta_for("good", good.name[: -len(".vis.db")])
    assert tb.plugin("loadGraphConfigInfo", {"metaData": meta}).json()["success"] is True


def test_view_state_follows_the_client_header(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)
    meta = meta_for(run, tag)

    def expand(name, client):
        body = {"nodeInfo": {"nodeName": name, "nodeType": "NPU"}, "metaData": meta}
        answer = tb.plugin("changeNodeExpandState", body, headers={"X-Graph-Ascend-Client": client})
        assert answer.status == 200, answer.body
        return answer.json()["data"]

    root = expand("root", "tab-a")
    module = sorted(k for k, v in root.items() if v["nodeType"] == 0 and not v["expand"])[0]
    assert expand(module, "tab-a")[module]["expand"] is True
    expand("root", "tab-b")

    def hierarchy(client):
        body = {"graphType": "NPU", "metaData": meta}
        return tb.plugin("updateHierarchyData", body, headers={"X-Graph-Ascend-Client": client}).json()["data"]

    assert hierarchy("tab-a")[module]["expand"] is True
    assert hierarchy("tab-b")[module]["expand"] is False, "one tab's expansion leaked into another's view"


def test_concurrent_requests(one_case_logdir, tensorboard):
    from concurrent.futures import ThreadPoolExecutor

    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)  # the first requests race to start the sidecar: it must start once
    meta = meta_for(run, tag)

    def ask(i):
        route = ["load_meta_dir", "loadGraphConfigInfo", "loadGraphAllNodeList"][i % 3]
        return tb.plugin(route, {"metaData": meta}, headers={"X-Graph-Ascend-Client": f"c{i % 4}"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(48)))
    assert [a.status for a in answers] == [200] * 48
    assert len(tb.sidecar_pids()) == 1


def test_server_sent_events_route(one_case_logdir, tensorboard):
    """An unknown job: the stream opens, says so in one error event, and ends."""
    import json

    logdir, _, _ = one_case_logdir
    tb = tensorboard(logdir)
    answer = tb.get("data/plugin/graph_ascend/getConvertProgress", {"jobId": "no-such-job"}, timeout=30)
    assert answer.status == 200, answer.body
    assert answer.content_type.startswith("text/event-stream")
    assert answer.headers["Cache-Control"] == "no-cache"
    events = [json.loads(c[len(b"data: ") :]) for c in answer.body.split(b"\n\n") if c.startswith(b"data: ")]
    # msprobe's keys, then what was measured (nothing, for a job that does not exist).
    assert events == [
        {
            "progress": 0,
            "status": "error",
            "error": ['No conversion with id "no-such-job".'],
            "jobId": "no-such-job",
            "bytesRead": 0,
            "bytesTotal": 0,
            "rowsWritten": 0,
            "rowsTotal": 0,
            "stage": "",
        }
    ]


def test_loopback_tcp_fallback(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, env={"GRAPH_ASCEND_TRANSPORT": "tcp"})
    answer = tb.plugin("load_meta_dir")
    assert answer.status == 200, answer.body
    assert answer.json()["data"] == {run: {"type": "db", "tags": [tag]}}
    (pid,) = tb.sidecar_pids()
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert b"--tcp-port" in argv


def test_watch_meta_dir_streams_events_through_tensorboard(one_case_logdir, tensorboard):
    """A real server-sent event stream: the listing at once, a new one when a file appears, heartbeats between."""
    import http.client
    import json
    import shutil
    import time

    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, env={"GRAPH_ASCEND_SSE_HEARTBEAT": "0.5"})
    conn = http.client.HTTPConnection("127.0.0.1", tb.port, timeout=30)
    conn.request("GET", "/data/plugin/graph_ascend/watchMetaDir", headers={"Accept": "text/event-stream"})
    resp = conn.getresponse()
    try:
        assert resp.status == 200, resp.read()
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        assert resp.getheader("Cache-Control") == "no-cache"

        def next_event(deadline_s: float):
            """(data JSON or None for a comment, seconds waited)."""
            start = time.monotonic()
            lines = []
            while True:
                line = resp.fp.readline()
                assert line, "the stream ended"
                if line == b"\n":
                    break
                lines.append(line.rstrip(b"\n"))
                assert time.monotonic() - start < deadline_s
            data = [x[len(b"data: ") :] for x in lines if x.startswith(b"data: ")]
            return (json.loads(data[0]) if data else None), time.monotonic() - start

        first = None
        while first is None:
            first, _ = next_event(10)
        assert first["data"] == {run: {"type": "db", "tags": [tag]}}

        heartbeats = 0
        (logdir / "later").mkdir()
        time.sleep(1.6)  # idle: heartbeats flow
        shutil.copy(logdir / run / f"{tag}.vis.db", logdir / "later" / "copy.vis.db.part")
        (logdir / "later" / "copy.vis.db.part").rename(logdir / "later" / "copy.vis.db")
        deadline = time.monotonic() + 20
        while True:
            event, _ = next_event(20)
            if event is None:
                heartbeats += 1
            elif "later" in event.get("data", {}):
                assert event["data"]["later"] == {"type": "db", "tags": ["copy"]}
                break
            assert time.monotonic() < deadline, "the new file was never announced"
        assert heartbeats >= 2, "idle streams carry heartbeat comments"
    finally:
        conn.close()
