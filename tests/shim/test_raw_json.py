"""The sidecar's pre-rendered JSON (``raw_json``) equals what the shim makes of the same answer's fields.

For every fixture file, each route with a ``raw_json`` field (node lists, layouts, filters, matched
relations) is asked twice of one sidecar: with the ``graph-ascend-json`` metadata (the shim's way) and
without it; the parsed JSON of the first must equal ``JsonMapper.to_json`` of the second, keys in the same
order. Expanding a node is a toggle, so the plain and raw requests use different clients.
"""

from __future__ import annotations

import json
import types

import pytest

from conftest import decompress_case, golden_cases, meta_for
from graph_ascend_tb import plugin as plugin_module


@pytest.fixture(scope="module")
def api(binary, descriptor_file, tmp_path_factory):
    import os

    os.environ.setdefault("GRAPH_ASCEND_BINARY", str(binary))
    os.environ.setdefault("GRAPH_ASCEND_DESCRIPTOR", str(descriptor_file))
    logdir = tmp_path_factory.mktemp("raw_json")
    cases = golden_cases()
    for case in cases:
        decompress_case(case, logdir / case)
    p = plugin_module.GraphAscendPlugin(types.SimpleNamespace(logdir=str(logdir)))
    schema, mapper = p._api()
    yield p, schema, mapper, cases
    p.sidecar.stop()


def ask(api, route_name, body, client, raw):
    p, schema, mapper, _ = api
    route = schema.routes[route_name]
    message = mapper.request_from_http(route.request_class, query=[], body=body, client_id=client)
    call = p._multicallable(p._channel(), route)
    answer = call(message, timeout=120, metadata=plugin_module.RAW_JSON_METADATA if raw else ())
    return answer, mapper


def test_raw_json_equals_the_rendered_fields(api):
    _, _, mapper, cases = api
    listing = mapper.to_json(ask(api, "load_meta_dir", {}, "x", False)[0])["data"]
    checked = 0
    for case in cases:
        tag = listing[case]["tags"][0]
        meta = dict(meta_for(case, tag), step=0, rank=0)
        names, _ = ask(api, "loadGraphAllNodeList", {"metaData": meta}, "x", False)
        names = mapper.to_json(names)["data"]
        npu = names.get("npuNodeList") or []
        side = "NPU" if "benchNodeList" in names else "Single"
        module = next((n for n in npu if n.startswith("Module.")), npu[0] if npu else "root")
        leaf = npu[len(npu) // 2] if npu else "root"
        requests = [
            ("loadGraphAllNodeList", {"metaData": meta}),
            ("changeNodeExpandState", {"nodeInfo": {"nodeName": "root", "nodeType": side}, "metaData": meta}),
            ("changeNodeExpandState", {"nodeInfo": {"nodeName": module, "nodeType": side}, "metaData": meta}),
            ("changeNodeExpandState", {"nodeInfo": {"nodeName": leaf, "nodeType": side}, "metaData": meta}),
            ("filterNodes", {"metaData": meta, "type": "precision", "values": ["pass", "warning", "error", -1]}),
            ("filterNodes", {"metaData": meta, "type": "overflow", "values": ["medium", "high", "critical"]}),
            ("filterNodes", {"metaData": meta, "type": "nonsense", "values": []}),
            ("loadGraphMatchedRelations", {"metaData": meta}),
            ("loadGraphAllNodeList", {"metaData": dict(meta, step=12345)}),
        ]
        for route, body in requests:
            plain, _ = ask(api, route, body, f"plain-{case}", False)
            raw, _ = ask(api, route, body, f"raw-{case}", True)
            assert not plain.HasField("raw_json"), route
            want = mapper.to_json(plain)
            if raw.HasField("raw_json"):
                assert plain.success
                got = json.loads(raw.raw_json.decode("utf-8"))
                checked += 1
            else:
                assert not plain.success, f"{case} {route}: a successful answer without raw_json"
                got = mapper.to_json(raw)
            assert got == want, f"{case} {route} {body}"
            assert json.dumps(got) == json.dumps(want), f"{case} {route}: key order differs"
    assert checked > 4 * len(cases)
