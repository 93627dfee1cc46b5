"""The route table and the browser's requests -> protobuf, on the real API descriptor written by the binary.

(Answers are rendered by the sidecar, `graph_ascend_proto::json`; their rules are tested there.)"""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2

from graph_ascend_tb.jsonmap import RequestDecoder, RequestError
from graph_ascend_tb.schema import Schema, SchemaError, iter_wire_fields, json_answer_bytes

PKG = "graph_ascend.v1."


@pytest.fixture(scope="module")
def schema(descriptor_file):
    return Schema(descriptor_file.read_bytes(), str(descriptor_file))


@pytest.fixture(scope="module")
def decoder(schema):
    return RequestDecoder(schema)


# Route table --------------------------------------------------------------------------------------


def test_route_table_comes_from_the_http_options(schema):
    service = schema.pool.FindServiceByName("graph_ascend.v1.GraphAscend")
    assert len(schema.routes) >= len(service.methods) - 2
    # Every RPC is a route except the browser's path itself (CallJson, StreamJson).
    assert {r.rpc for r in schema.routes.values()} == {m.name for m in service.methods} - {"CallJson", "StreamJson"}
    assert schema.routes["load_meta_dir"].rpc == "LoadMetaDir"
    assert schema.routes["screen"].rpc == schema.routes["filterNodes"].rpc  # alias
    assert schema.call_json_method == "/graph_ascend.v1.GraphAscend/CallJson"
    assert schema.json_call_class.DESCRIPTOR.full_name == PKG + "JsonCall"
    progress = schema.routes["getConvertProgress"]
    assert progress.sse and progress.server_streaming
    assert not schema.routes["loadGraphData"].sse
    assert schema.routes["changeNodeExpandState"].request_class.DESCRIPTOR.full_name == PKG + "NodeRequest"


def test_descriptor_without_custom_options_is_rejected_clearly(descriptor_file):
    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_file.read_bytes())
    for f in fds.file:
        for service in f.service:
            for method in service.method:
                method.ClearField("options")
    with pytest.raises(SchemaError, match="encode_file_descriptor_set"):
        Schema(fds.SerializeToString(), "stripped")
    with pytest.raises(SchemaError, match="not a serialized FileDescriptorSet"):
        Schema(b"\xff\xff\xff garbage", "garbage")


def test_wire_decoding_of_options():
    # json_map_key = "run" (51231, length-delimited), json_null = true (51233, varint).
    def tag(number, wire_type):
        value, out = (number << 3) | wire_type, bytearray()
        while True:
            byte = value & 0x7F
            value >>= 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                return bytes(out)

    raw = tag(51231, 2) + b"\x03run" + tag(51233, 0) + b"\x01" + tag(1, 0) + b"\x01"
    assert list(iter_wire_fields(raw)) == [(51231, 2, b"run"), (51233, 0, 1), (1, 0, 1)]
    with pytest.raises(SchemaError):
        list(iter_wire_fields(tag(51231, 2) + b"\x09ab"))


def test_answers_are_sliced_from_the_wire_as_the_message_has_them(schema):
    # The shim's response deserializer reads JsonAnswer.json without building a message: the same
    # bytes as the message's own parser, for answers of every size (one- to three-byte lengths).
    for payload in [b"", b"{}", '{"a": "ü"}'.encode(), b"[" + b"1," * 70_000 + b"1]"]:
        wire = schema.json_answer_class(json=payload).SerializeToString()
        assert json_answer_bytes(wire) == schema.json_answer_class.FromString(wire).json == payload
    # Other writers: an unknown field beside it, or the field twice (the last one wins).
    first = schema.json_answer_class(json=b"[1]").SerializeToString()
    last = schema.json_answer_class(json=b"[2]").SerializeToString()
    for wire in (first + b"\x10\x05" + last, first + last):
        assert json_answer_bytes(wire) == schema.json_answer_class.FromString(wire).json == b"[2]"
    with pytest.raises(SchemaError):
        json_answer_bytes(b"\x0a\x09ab")


# Requests ----------------------------------------------------------------------------------------


def test_query_strings_are_coerced_to_field_types(schema, decoder):
    cls = schema.routes["loadGraphData"].request_class
    query = [
        ("run", "run"),
        ("tag", "007"),
        ("type", "db"),
        ("lang", "en"),
        ("microStep", "-1"),
        ("step", "0"),
        ("rank", "3"),
        ("unknownThing", "x"),
    ]
    m = decoder.request_from_http(cls, query=query, client_id="tab-1")
    assert m.run == "run" and m.tag == "007"  # strings stay strings
    assert m.micro_step == -1 and m.HasField("micro_step")
    assert m.step == 0 and m.HasField("step")  # presence kept for an explicit 0
    assert m.rank == 3 and m.client_id == "tab-1"
    m2 = decoder.request_from_http(cls, query=[("rank", "undefined"), ("step", ""), ("microStep", "2.0")])
    assert not m2.HasField("rank") and not m2.HasField("step") and m2.micro_step == 2
    with pytest.raises(RequestError, match="microStep"):
        decoder.request_from_http(cls, query=[("microStep", "seven")])


def test_json_bodies_with_strings_nulls_and_unknown_keys(schema, decoder):
    cls = schema.routes["addMatchNodes"].request_class
    body = {
        "npuNodeName": "N.a",
        "benchNodeName": "B.a",
        "isMatchChildren": "true",
        "isUnMatchChildren": 0,
        "metaData": {"run": "r", "tag": "t", "type": "db", "lang": "zh", "microStep": "-1", "step": 0, "rank": None},
        "somethingNew": {"x": 1},
    }
    m = decoder.request_from_http(cls, body=body, client_id="c9")
    assert m.npu_node_name == "N.a" and m.is_match_children is True and m.is_un_match_children is False
    assert m.meta_data.micro_step == -1 and m.meta_data.HasField("step") and not m.meta_data.HasField("rank")
    assert m.client_id == "c9"

    convert = schema.routes["convertToGraph"].request_class
    c = decoder.request_from_http(
        convert,
        body={
            "npu_path": "dump/npu",
            "bench_path": None,
            "output_path": "build_1",
            "layer_mapping": None,
            "parallel_merge": {"npu": {"rank_size": 1, "tp": "2", "pp": 1, "vpp": 1, "order": "tp-cp-ep-dp-pp"}},
            "overflow_check": False,
        },
    )
    assert c.npu_path == "dump/npu" and c.bench_path == "" and c.parallel_merge.npu.tp == 2

    filt = schema.routes["filterNodes"].request_class
    f = decoder.request_from_http(filt, body={"type": "precision", "values": ["pass", -1], "metaData": {"run": "r"}})
    assert list(f.values.values)[1].number_value == -1

    colors = schema.routes["updateColors"].request_class
    u = decoder.request_from_http(colors, body={"colors": json.dumps({"#FFFFFF": {"value": [0, 1]}})})
    assert json.loads(u.colors) == {"#FFFFFF": {"value": [0, 1]}}


def test_query_and_body_merge_and_client_id_only_where_the_field_exists(schema, decoder):
    cls = schema.routes["getConvertProgress"].request_class
    m = decoder.request_from_http(cls, query=[("jobId", "j7")], body=None, client_id="tab")
    assert m.job_id == "j7" and m.client_id == "tab"
    meta_cls = schema.routes["loadGraphConfigInfo"].request_class
    m = decoder.request_from_http(
        meta_cls, query=[("metaData", json.dumps({"run": "q"}))], body={"metaData": {"run": "b"}}
    )
    assert m.meta_data.run == "b"  # the body wins
    with pytest.raises(RequestError):
        decoder.request_from_http(cls, body={"jobId": {"not": "a string"}})


def _sample_value(rng, field, depth):
    """A value the page or a hand-written client might send for `field`, of its type or not."""
    pool = [None, "", "x", "ü", "\ud800", "1", True, False, 0, 1, -1, 2**31, 2**63, 1.0, 1.5, float("nan")]
    pool += [[], ["a"], {}]
    if field is not None and field.message_type is not None and depth < 3 and rng.random() < 0.7:
        return _sample_body(rng, field.message_type, depth + 1)
    return rng.choice(pool)


def _sample_body(rng, desc, depth=0):
    keys = [(f.json_name, f) for f in desc.fields] + [(f.name, f) for f in desc.fields] + [("unknownKey", None)]
    return {key: _sample_value(rng, field, depth) for key, field in rng.sample(keys, rng.randint(0, len(keys)))}


def test_direct_path_sets_what_parse_dict_sets(schema, decoder, monkeypatch):
    """The decoder's direct path (plain values set by a plan per message type) and json_format.ParseDict
    agree on every request message of the API: the same message, or both refuse the request."""
    import random
    import types

    from google.protobuf import json_format

    from graph_ascend_tb import jsonmap

    fallbacks = []

    def counted(*args, **kwargs):
        fallbacks.append(args[1].DESCRIPTOR.full_name)
        return json_format.ParseDict(*args, **kwargs)

    counting = types.SimpleNamespace(ParseDict=counted, ParseError=json_format.ParseError)
    monkeypatch.setattr(jsonmap, "json_format", counting)
    rng = random.Random(11)
    classes = sorted({route.request_class for route in schema.routes.values()}, key=lambda c: c.DESCRIPTOR.full_name)
    rounds, accepted = 0, 0
    for cls in classes:
        for _ in range(300):
            body = _sample_body(rng, cls.DESCRIPTOR)
            try:
                expected = cls()
                json_format.ParseDict(jsonmap.coerce_object(cls.DESCRIPTOR, body), expected, ignore_unknown_fields=True)
            except (json_format.ParseError, RequestError):
                expected = None
            try:
                got = decoder.request_from_http(cls, body=body)
            except RequestError:
                got = None
            assert (got is None) == (expected is None), (cls.DESCRIPTOR.full_name, body)
            assert got == expected, (cls.DESCRIPTOR.full_name, body)
            rounds += 1
            accepted += got is not None
    # Both paths were exercised, on accepted and refused requests alike.
    assert 0.1 * rounds < len(fallbacks) < 0.9 * rounds, (len(fallbacks), rounds)
    assert 0.1 * rounds < accepted < 0.9 * rounds, (accepted, rounds)
    # The page's usual request takes the direct path.
    fallbacks.clear()
    meta = {"run": "r", "tag": "t", "type": "db", "lang": "en", "microStep": -1, "step": 0, "rank": None}
    body = {"nodeInfo": {"nodeName": "Module.layers.0", "nodeType": "NPU"}, "metaData": meta}
    m = decoder.request_from_http(schema.routes["changeNodeExpandState"].request_class, body=body, client_id="c")
    assert m.node_info.node_name == "Module.layers.0" and m.meta_data.HasField("step") and m.meta_data.micro_step == -1
    assert not m.meta_data.HasField("rank") and m.client_id == "c"
    assert fallbacks == []
