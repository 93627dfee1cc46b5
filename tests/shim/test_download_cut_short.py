"""A download the sidecar stops sending fails in the browser; it never ends like a complete file.

The sidecar is the real one behind ``dying_sidecar.py``, killed while a CSV or a report streams: after the
answer's headers and first bytes went out, the HTTP answer is aborted (the chunked encoding never gets its
last chunk), so a client's read of the body fails; before the first bytes, the answer is a JSON error.
The next download, from a restarted sidecar, is whole.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest

from conftest import meta_for

ROUTES = [("exportCsv", "ExportCsv", "text/csv"), ("exportReport", "ExportReport", "text/html")]


def _get(tb, route: str, params) -> tuple:
    """(status, headers, body, complete): the body as far as it came, ``complete`` False when the
    connection closed before the answer's end (http.client's IncompleteRead)."""
    conn = http.client.HTTPConnection("127.0.0.1", tb.port, timeout=300)
    try:
        conn.request("GET", f"/data/plugin/graph_ascend/{route}?{urllib.parse.urlencode(params)}")
        resp = conn.getresponse()
        try:
            return resp.status, resp.headers, resp.read(), True
        except http.client.IncompleteRead as exc:
            return resp.status, resp.headers, exc.partial, False
    finally:
        conn.close()


@pytest.mark.parametrize(("route", "rpc", "content_type"), ROUTES)
def test_a_download_cut_short_is_aborted(one_case_logdir, tensorboard, dying, route, rpc, content_type):
    logdir, run, tag = one_case_logdir
    env, _ = dying(rpc)
    tb = tensorboard(logdir, env=env)
    params = {k: v for k, v in meta_for(run, tag).items() if k in ("run", "tag", "step", "rank", "lang")}

    status, headers, partial, complete = _get(tb, route, params)
    assert status == 200 and headers["Content-Type"].startswith(content_type), (status, headers)
    assert not complete, f"{route}: the answer ended normally after {len(partial)} bytes of a file cut short"
    assert "broke off" in tb.log(), tb.log()

    # A restarted sidecar serves the whole file, longer than the broken answer (of which the CSV is a
    # strict prefix; a report says when it was made).
    status, headers, whole, complete = _get(tb, route, params)
    assert status == 200 and complete, (status, headers, whole[:300])
    assert 0 < len(partial) < len(whole)
    if route == "exportCsv":
        assert whole.startswith(partial)


def test_a_download_that_breaks_before_its_bytes_is_an_error(one_case_logdir, tensorboard, dying):
    """Killed after the header chunk only: nothing was sent yet, so the answer is an error to show."""
    logdir, run, tag = one_case_logdir
    env, _ = dying("ExportCsv", DYING_SIDECAR_CHUNKS="1")
    tb = tensorboard(logdir, env=env)
    params = {"run": run, "tag": tag, "step": 0, "rank": 0, "lang": "en"}
    status, headers, body, complete = _get(tb, "exportCsv", params)
    assert complete and status == 503, (status, body)
    assert headers["Content-Type"].startswith("application/json")
    error = json.loads(body)
    assert error["success"] is False and error["code"] == "CUT_SHORT", error
    assert "broke off" in error["error"], error
    answer = tb.get("data/plugin/graph_ascend/exportCsv", params)  # from a restarted sidecar
    assert answer.status == 200 and answer.content_type.startswith("text/csv"), answer.body[:300]
