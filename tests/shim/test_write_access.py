"""Who may write (docs/security.md): the rule on made-up requests, the routes it guards (from the API's
descriptor), and the rule in real TensorBoard, from loopback and from this host's non-loopback address."""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import MATCHED_LEAF, HttpAnswer, meta_for
from graph_ascend_tb import write_access
from graph_ascend_tb.schema import Schema
from graph_ascend_tb.write_access import loopback_address, loopback_host, same_origin, write_refusal

LEAF = MATCHED_LEAF


# The rule on its own ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address, expected",
    [
        ("127.0.0.1", True),
        ("127.45.6.7", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.1.2.3", False),
        ("192.0.2.2", False),
        ("::ffff:10.0.0.1", False),
        ("fe80::1%eth0", False),
        ("", False),
        (None, False),
        ("localhost", False),  # a peer address is never a name
    ],
)
def test_loopback_address(address, expected):
    assert loopback_address(address) is expected


@pytest.mark.parametrize(
    "host, expected",
    [
        ("localhost:6006", True),
        ("LOCALHOST", True),
        ("127.0.0.1:6006", True),
        ("127.1.2.3", True),
        ("[::1]:6006", True),
        ("localhost.:6006", True),
        ("evil.example:6006", False),
        ("localhost.evil.example", False),
        ("127.0.0.1.nip.io:6006", False),
        ("192.0.2.2:6006", False),
        ("[::2]:6006", False),
        ("user@localhost:6006", False),
        ("localhost:6006/x", False),
        ("localhost:notaport", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_host(host, expected):
    assert loopback_host(host) is expected


@pytest.mark.parametrize(
    "origin, host, expected",
    [
        ("http://localhost:6006", "localhost:6006", True),
        ("https://localhost:6006", "localhost:6006", True),  # a TLS-terminating forwarder
        ("http://127.0.0.1:6006", "127.0.0.1:6006", True),
        ("http://[::1]:6006", "[::1]:6006", True),
        ("http://localhost", "localhost", True),
        ("http://localhost:80", "localhost", True),
        ("http://localhost:6007", "localhost:6006", False),
        ("http://127.0.0.1:6006", "localhost:6006", False),
        ("http://evil.example", "localhost:6006", False),
        ("null", "localhost:6006", False),
        ("file://", "localhost:6006", False),
        ("http://localhost:6006/page", "localhost:6006", False),
    ],
)
def test_same_origin(origin, host, expected):
    assert same_origin(origin, host) is expected


def test_write_refusal_decides_on_address_host_origin_and_method():
    local = dict(remote_addr="127.0.0.1", host="localhost:6006", origin="http://localhost:6006", method="POST")
    assert write_refusal(**local) is None
    assert write_refusal(**{**local, "origin": None}) is None, "no Origin: a non-browser client on this machine"
    assert write_refusal(**{**local, "remote_addr": "::1", "host": "[::1]:6006", "origin": "http://[::1]:6006"}) is None

    remote = write_refusal(**{**local, "remote_addr": "10.1.2.3"})
    assert "10.1.2.3" in remote and write_access.ALLOW_ENV in remote and "port forwarding" in remote
    rebinding = write_refusal(**{**local, "host": "evil.example:6006", "origin": "http://evil.example:6006"})
    assert "evil.example" in rebinding and write_access.ALLOW_ENV in rebinding
    cross_site = write_refusal(**{**local, "origin": "http://evil.example"})
    assert "evil.example" in cross_site and write_access.ALLOW_ENV in cross_site
    assert "POST" in write_refusal(**{**local, "method": "GET"})
    relayed = write_refusal(**local, forwarded="X-Forwarded-For: 10.0.0.7")
    assert "proxy" in relayed and "10.0.0.7" in relayed and write_access.ALLOW_ENV in relayed

    # The opt-in lifts the origin rules, never the POST rule.
    assert write_refusal(**{**local, "remote_addr": "10.1.2.3", "host": "graphs.corp:443"}, allow_remote=True) is None
    assert write_refusal(**{**local, "method": "GET"}, allow_remote=True) is not None
    assert write_refusal(**local, forwarded="X-Real-IP: 10.0.0.7", allow_remote=True) is None


def test_write_routes_are_marked_in_the_api_descriptor(descriptor_file):
    schema = Schema(descriptor_file.read_bytes(), str(descriptor_file))
    writes = {name for name, route in schema.routes.items() if route.write}
    # Everything that changes files, shared settings or conversion jobs...
    for name in ("convertToGraph", "cancelConvert", "addMatchNodes", "deleteMatchNodes", "addMatchNodesByConfig",
                 "saveMatchedRelations", "saveData", "updateColors"):
        assert name in writes, name
    # ...and nothing that only reads or changes the caller's own view.
    for name in ("load_meta_dir", "loadGraphData", "loadGraphConfigInfo", "changeNodeExpandState", "getNodeInfo",
                 "filterNodes", "screen", "searchNodes", "loadGraphMatchedRelations", "getConvertProgress",
                 "loadConvertedGraphData", "watchMetaDir", "updateHierarchyData"):
        assert name in schema.routes and name not in writes, name


# Through real TensorBoard ------------------------------------------------------------------------


def _unmatch_body(run, tag):
    return {"npuNodeName": LEAF, "benchNodeName": LEAF, "metaData": meta_for(run, tag)}


def _still_matched(tb, run, tag) -> bool:
    node = {"nodeInfo": {"nodeName": LEAF, "nodeType": "NPU"}, "metaData": meta_for(run, tag)}
    answer = tb.plugin("getNodeInfo", node)
    assert answer.status == 200, answer.body
    return bool(answer.json()["data"]["npu"]["matched_node_link"])


def _assert_refused(answer, status, *words):
    assert answer.status == status, answer.body
    body = answer.json()
    assert body["success"] is False
    assert body["code"] == "READ_ONLY"
    assert write_access.ALLOW_ENV in body["error"] or status == 405, body
    for word in words:
        assert word in body["error"], body
    assert answer.headers[write_access.STATE_HEADER] == ("allowed" if status == 405 else "refused")


def test_foreign_host_and_origin_are_refused_through_tensorboard(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir)
    own = f"http://127.0.0.1:{tb.port}"
    reads = tb.plugin("load_meta_dir", headers={"Host": "evil.example"})
    assert reads.status == 200, "reads stay open, whatever the Host"
    assert reads.headers[write_access.STATE_HEADER] == "refused"
    assert tb.plugin("load_meta_dir").headers[write_access.STATE_HEADER] == "allowed"

    body = _unmatch_body(run, tag)
    foreign_host = {"Host": f"evil.example:{tb.port}"}
    _assert_refused(tb.plugin("deleteMatchNodes", body, headers=foreign_host), 403, "evil.example")
    _assert_refused(tb.plugin("deleteMatchNodes", body, headers={"Origin": "http://evil.example"}), 403, "evil.example")
    _assert_refused(tb.plugin("convertToGraph", {"npu_path": "x"}, headers={"Origin": "null"}), 403)
    relayed = {"X-Forwarded-For": "10.0.0.7", "Origin": own}  # a proxy on this machine relaying another one
    _assert_refused(tb.plugin("deleteMatchNodes", body, headers=relayed), 403, "proxy", "10.0.0.7")
    query = {"npuNodeName": LEAF, "benchNodeName": LEAF}
    _assert_refused(tb.plugin("deleteMatchNodes", params=query), 405, "POST")
    assert _still_matched(tb, run, tag), "a refused edit changed the file"

    done = tb.plugin("deleteMatchNodes", body, headers={"Origin": own})
    assert done.status == 200 and done.json()["success"] is True, done.body
    assert not _still_matched(tb, run, tag)


def test_remote_writes_can_be_allowed(one_case_logdir, tensorboard):
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, env={write_access.ALLOW_ENV: "1"})
    headers = {"Host": "graphs.corp.example", "Origin": "https://graphs.corp.example"}
    answer = tb.plugin("deleteMatchNodes", _unmatch_body(run, tag), headers=headers)
    assert answer.status == 200 and answer.json()["success"] is True, answer.body
    assert answer.headers[write_access.STATE_HEADER] == "allowed"
    flagged = tensorboard(logdir, f"--{write_access.ALLOW_FLAG}")
    assert flagged.plugin("load_meta_dir", headers=headers).headers[write_access.STATE_HEADER] == "allowed"


def _assert_token_refused(answer, *words):
    assert answer.status == 403, answer.body
    body = answer.json()
    assert body["success"] is False and body["code"] == "TOKEN", body
    assert write_access.TOKEN_PARAM in body["error"], body  # says how to get the link with the token
    for word in words:
        assert word in body["error"], body
    assert answer.headers[write_access.STATE_HEADER] == "token"


@pytest.mark.parametrize("prefix", ["", "/tb/x"])
def test_writes_need_the_launch_token_through_tensorboard(one_case_logdir, tensorboard, prefix):
    """Another user of this machine sends the same loopback request as the page: without this launch's token
    (printed in TensorBoard's console, which only its owner sees) or with another one, a write is refused and
    the file unchanged; reads stay open; the token the console printed is accepted, under --path_prefix too."""
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, *(["--path_prefix", prefix] if prefix else []))
    own = {"Origin": f"http://127.0.0.1:{tb.port}"}
    assert len(tb.write_token) >= write_access.MIN_TOKEN_CHARS
    assert f"{prefix}/#graph_ascend&{write_access.TOKEN_PARAM}={tb.write_token}" in tb.log()
    no_token = {write_access.TOKEN_HEADER: None}
    reads = tb.plugin("load_meta_dir", headers=no_token)
    assert reads.status == 200, "reads stay open without the token"
    assert reads.headers[write_access.STATE_HEADER] == "token"
    assert tb.plugin("load_meta_dir").headers[write_access.STATE_HEADER] == "allowed"

    body = _unmatch_body(run, tag)
    _assert_token_refused(tb.plugin("deleteMatchNodes", body, headers=no_token), "carries none")
    _assert_token_refused(tb.plugin("deleteMatchNodes", body, headers={**no_token, **own}), "carries none")
    wrong = "x" * len(tb.write_token)
    _assert_token_refused(tb.plugin("deleteMatchNodes", body, headers={write_access.TOKEN_HEADER: wrong}), "not")
    near = tb.write_token[:-1] + ("A" if tb.write_token[-1] != "A" else "B")
    _assert_token_refused(tb.plugin("deleteMatchNodes", body, headers={write_access.TOKEN_HEADER: near}), "not")
    _assert_token_refused(tb.plugin("convertToGraph", {"npu_path": "x"}, headers=no_token))
    assert _still_matched(tb, run, tag), "an edit without the token changed the file"

    done = tb.plugin("deleteMatchNodes", body, headers=own)
    assert done.status == 200 and done.json()["success"] is True, done.body
    assert not _still_matched(tb, run, tag)


def test_a_fixed_token_is_taken_from_the_environment(one_case_logdir, tensorboard):
    logdir, _run, _tag = one_case_logdir
    fixed = "f" * 40
    tb = tensorboard(logdir, env={write_access.TOKEN_ENV: fixed})
    assert tb.write_token == fixed
    weak = tensorboard(logdir, env={write_access.TOKEN_ENV: "short"})
    assert weak.write_token != "short" and "is ignored" in weak.log()


def test_the_token_rule_on_its_own():
    token = "t" * 43
    assert write_access.token_refusal(token, token) is None
    assert "carries none" in write_access.token_refusal(None, token)
    assert "carries none" in write_access.token_refusal("", token)
    assert "not this TensorBoard's" in write_access.token_refusal("t" * 42, token)
    assert "not this TensorBoard's" in write_access.token_refusal("é" * 43, token)
    link = write_access.page_link(token, 6006, "/tb/")
    assert link == f"http://localhost:6006/tb/#graph_ascend&graph_ascend_token={token}"
    assert write_access.page_link(token, None, "").startswith("http://localhost:<port>/#graph_ascend&")


def _non_loopback_ipv4() -> str:
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    for address in out:
        if "." in address and not loopback_address(address):
            return address
    return ""


def _post_to(address: str, port: int, route: str, body) -> HttpAnswer:
    req = urllib.request.Request(
        f"http://{address}:{port}/data/plugin/graph_ascend/{route}",
        data=json.dumps(body).encode("utf-8"),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return HttpAnswer(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return HttpAnswer(e.code, e.headers, e.read())


@pytest.mark.skipif(not _non_loopback_ipv4(), reason="this host has no non-loopback IPv4 address")
def test_writes_from_another_address_are_refused(one_case_logdir, tensorboard):
    """TensorBoard bound to every interface (msprobe's --bind_all advice), reached at this host's own
    non-loopback address: the peer is that address, not loopback."""
    address = _non_loopback_ipv4()
    logdir, run, tag = one_case_logdir
    tb = tensorboard(logdir, "--host", "0.0.0.0")
    with socket.create_connection((address, tb.port), timeout=10):
        pass
    listing = _post_to(address, tb.port, "load_meta_dir", {})
    assert listing.status == 200, listing.body
    assert listing.headers[write_access.STATE_HEADER] == "refused"
    refused = _post_to(address, tb.port, "deleteMatchNodes", _unmatch_body(run, tag))
    _assert_refused(refused, 403, address, "port forwarding")
    assert _still_matched(tb, run, tag)
