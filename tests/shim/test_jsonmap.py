"""JSON <-> protobuf mapping and the route table, on the real API descriptor written by the binary."""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2

from graph_ascend_tb.jsonmap import JsonMapper, RequestError, iter_json_chunks
from graph_ascend_tb.schema import Schema, SchemaError, field_rules_from_options, iter_wire_fields

PKG = "graph_ascend.v1."


@pytest.fixture(scope="module")
def schema(descriptor_file):
    return Schema(descriptor_file.read_bytes(), str(descriptor_file))


@pytest.fixture(scope="module")
def mapper(schema):
    return JsonMapper(schema)


def msg(schema, name, **kwargs):
    return schema.message_class(PKG + name)(**kwargs)


def roundtrip(value):
    """What the browser parses from our bytes."""
    return json.loads(b"".join(iter_json_chunks(value, chunk_size=7)))


# Route table --------------------------------------------------------------------------------------


def test_route_table_comes_from_the_http_options(schema):
    service = schema.pool.FindServiceByName("graph_ascend.v1.GraphAscend")
    assert len(schema.routes) >= len(service.methods)
    assert {r.method.rsplit("/", 1)[1] for r in schema.routes.values()} == {m.name for m in service.methods}
    assert schema.routes["load_meta_dir"].method == "/graph_ascend.v1.GraphAscend/LoadMetaDir"
    assert schema.routes["screen"].method == schema.routes["filterNodes"].method  # alias
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


def test_wire_decoding_of_field_options():
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
    assert [n for n, _, _ in iter_wire_fields(raw)] == [51231, 51233, 1]
    rules = field_rules_from_options(raw)
    assert rules.map_key == "run" and rules.json_null and rules.map_value is None
    with pytest.raises(SchemaError):
        list(iter_wire_fields(tag(51231, 2) + b"\x09ab"))


# Responses ---------------------------------------------------------------------------------------


def test_json_map_key_makes_an_object_in_list_order(schema, mapper):
    r = msg(schema, "LoadMetaDirResponse")
    for run in ["run10", "run2", "alpha"]:
        r.data.add(run=run, type="db", tags=[f"{run}_tag"])
    r.error.add(run="bad", tag="x", info="Error: not SQLite")
    out = roundtrip(mapper.to_json(r))
    assert list(out["data"]) == ["run10", "run2", "alpha"]
    assert out["data"]["run2"] == {"type": "db", "tags": ["run2_tag"]}
    assert out["error"] == [{"run": "bad", "tag": "x", "info": "Error: not SQLite"}]


def test_fields_without_presence_are_printed_and_json_null(schema, mapper):
    r = msg(schema, "HierarchyResponse", success=True)
    r.data.add(key="root", name="N___root", is_root=True, expand=True)
    r.data.add(key="Module.a", name="N___Module.a", precision_index=0.25, overflow_level="medium")
    out = roundtrip(mapper.to_json(r))
    assert "error" not in out  # optional, unset, no json_null
    root = out["data"]["root"]
    assert root["precisionIndex"] is None and root["overflowLevel"] is None  # json_null
    assert root["x"] == 0 and root["label"] == "" and root["matchedNodeLink"] == []  # printed defaults
    assert root["isRoot"] is True and root["name"] == "N___root" and "key" not in root
    assert "children" not in root  # a message field that is unset stays absent
    assert out["data"]["Module.a"]["precisionIndex"] == 0.25
    assert out["data"]["Module.a"]["overflowLevel"] == "medium"


def test_json_name_and_map_value_in_node_info(schema, mapper):
    r = msg(schema, "NodeInfoResponse", success=True)
    npu = r.data.add(side="npu").detail
    npu.id = npu.node_name = "Torch.add.0"
    npu.node_type = 1
    slot = npu.input_data.add(name="Torch.add.0.input.0")
    slot.fields.add(key="dtype").value.string_value = "torch.float32"
    slot.fields.add(key="Max").value.number_value = 1.5
    slot.fields.add(key="MaxRelativeErr").value.string_value = "0.1%"
    npu.data.precision_index = 0.5
    out = roundtrip(mapper.to_json(r))
    node = out["data"]["npu"]
    assert node["node_name"] == "Torch.add.0" and node["node_type"] == 1  # explicit json_name
    assert node["input_data"] == {
        "Torch.add.0.input.0": {"dtype": "torch.float32", "Max": 1.5, "MaxRelativeErr": "0.1%"}
    }
    assert node["output_data"] == {}
    assert node["data"] == {"precision_index": 0.5, "overflow_level": None}
    assert "bench" not in out["data"]

    # A compare file's missing counterpart is an explicit null (json_map_value of an unset message).
    r.data.add(side="bench")
    assert roundtrip(mapper.to_json(r))["data"]["bench"] is None


def test_map_value_pairs_and_colour_legend(schema, mapper):
    rel = msg(schema, "MatchedRelationsResponse", success=True)
    rel.data.npu_match_nodes.add(key="N.a", value="B.a")
    rel.data.npu_un_match_nodes.append("N.b")
    out = roundtrip(mapper.to_json(rel))["data"]
    assert out["npuMatchNodes"] == {"N.a": "B.a"}
    assert out["benchMatchNodes"] == {}
    assert out["npuUnMatchNodes"] == ["N.b"] and out["benchUnMatchNodes"] == []

    cfg = msg(schema, "ConfigInfoResponse", success=True)
    legend = cfg.data.colors.add(color="#FFFFFF", description="pass")
    legend.value.list_value.values.add().number_value = 0
    legend.value.list_value.values.add().number_value = 0.3
    cfg.data.colors.add(color="#C7C7C7", description="unmatched").value.string_value = "No matching nodes"
    out = roundtrip(mapper.to_json(cfg))["data"]
    assert out["colors"] == {
        "#FFFFFF": {"value": [0, 0.3], "description": "pass"},  # accuracy_level: optional, unset
        "#C7C7C7": {"value": "No matching nodes", "description": "unmatched"},
    }
    assert out["microSteps"] == 0 and out["isSingleGraph"] is False


def test_big_answers_stream_in_chunks(schema, mapper):
    r = msg(schema, "NodeListResponse", success=True)
    r.data.add(name="npuNodeList").names.extend(f"Module.layer{i}.Torch.add.{i}" for i in range(20000))
    chunks = list(iter_json_chunks(mapper.to_json(r), chunk_size=65536))
    assert len(chunks) > 5
    assert json.loads(b"".join(chunks))["data"]["npuNodeList"][19999] == "Module.layer19999.Torch.add.19999"


# Requests ----------------------------------------------------------------------------------------


def test_query_strings_are_coerced_to_field_types(schema, mapper):
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
    m = mapper.request_from_http(cls, query=query, client_id="tab-1")
    assert m.run == "run" and m.tag == "007"  # strings stay strings
    assert m.micro_step == -1 and m.HasField("micro_step")
    assert m.step == 0 and m.HasField("step")  # presence kept for an explicit 0
    assert m.rank == 3 and m.client_id == "tab-1"
    m2 = mapper.request_from_http(cls, query=[("rank", "undefined"), ("step", ""), ("microStep", "2.0")])
    assert not m2.HasField("rank") and not m2.HasField("step") and m2.micro_step == 2
    with pytest.raises(RequestError, match="microStep"):
        mapper.request_from_http(cls, query=[("microStep", "seven")])


def test_json_bodies_with_strings_nulls_and_unknown_keys(schema, mapper):
    cls = schema.routes["addMatchNodes"].request_class
    body = {
        "npuNodeName": "N.a",
        "benchNodeName": "B.a",
        "isMatchChildren": "true",
        "isUnMatchChildren": 0,
        "metaData": {"run": "r", "tag": "t", "type": "db", "lang": "zh", "microStep": "-1", "step": 0, "rank": None},
        "somethingNew": {"x": 1},
    }
    m = mapper.request_from_http(cls, body=body, client_id="c9")
    assert m.npu_node_name == "N.a" and m.is_match_children is True and m.is_un_match_children is False
    assert m.meta_data.micro_step == -1 and m.meta_data.HasField("step") and not m.meta_data.HasField("rank")
    assert m.client_id == "c9"

    convert = schema.routes["convertToGraph"].request_class
    c = mapper.request_from_http(
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
    f = mapper.request_from_http(filt, body={"type": "precision", "values": ["pass", -1], "metaData": {"run": "r"}})
    assert list(f.values.values)[1].number_value == -1

    colors = schema.routes["updateColors"].request_class
    u = mapper.request_from_http(colors, body={"colors": json.dumps({"#FFFFFF": {"value": [0, 1]}})})
    assert json.loads(u.colors) == {"#FFFFFF": {"value": [0, 1]}}


def test_query_and_body_merge_and_client_id_only_where_the_field_exists(schema, mapper):
    cls = schema.routes["getConvertProgress"].request_class
    m = mapper.request_from_http(cls, query=[("jobId", "j7")], body=None, client_id="tab")
    assert m.job_id == "j7" and m.client_id == "tab"
    meta_cls = schema.routes["loadGraphConfigInfo"].request_class
    m = mapper.request_from_http(
        meta_cls, query=[("metaData", json.dumps({"run": "q"}))], body={"metaData": {"run": "b"}}
    )
    assert m.meta_data.run == "b"  # the body wins
    with pytest.raises(RequestError):
        mapper.request_from_http(cls, body={"jobId": {"not": "a string"}})


# The fast response path equals the reference (MessageToDict + field options) -----------------------


def _fill(message, depth: int, variant: int) -> None:
    """Sets every field of a message (variant 0: all set; 1: scalars only; 2: optional ones left unset)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    desc = message.DESCRIPTOR
    if desc.full_name == "google.protobuf.Value":
        message.list_value.values.add().number_value = 0.5 * (depth + 1)
        message.list_value.values.add().string_value = "x"
        return
    if desc.full_name == "google.protobuf.Struct":
        message.fields["a"].number_value = 1
        message.fields["b"].string_value = "N/A"
        return
    if desc.full_name == "google.protobuf.ListValue":
        message.values.add().bool_value = True
        return
    for field in desc.fields:
        repeated = getattr(field, "is_repeated", None)
        repeated = field.label == 3 if repeated is None else repeated
        presence = getattr(field, "has_presence", field.message_type is not None)
        if variant == 2 and presence:
            continue
        if field.message_type is not None:
            if variant == 1 or depth > 3:
                continue
            if repeated:
                for _ in range(3):
                    _fill(getattr(message, field.name).add(), depth + 1, variant)
            else:
                _fill(getattr(message, field.name), depth + 1, variant)
            continue
        samples = {
            F.TYPE_STRING: [f"{field.name}-{depth}", "Module.layers.1", "零"],
            F.TYPE_BOOL: [True, False, True],
            F.TYPE_DOUBLE: [0.25, float("nan"), float("-inf")],
            F.TYPE_FLOAT: [0.1, 2.5, 3.0],
            F.TYPE_INT32: [-1, 7, 0],
            F.TYPE_INT64: [2**40, -3, 0],
            F.TYPE_BYTES: [b'{"success":true}', b"\x00\xff", b""],
        }
        values = samples.get(field.type, [1, 2, 3])
        if repeated:
            getattr(message, field.name).extend(values)
        else:
            setattr(message, field.name, values[depth % 3] if not isinstance(values[0], str) else values[0])


def test_fast_response_path_equals_the_reference(schema, mapper):
    import math

    def same(a, b):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return a == b and type(a) is type(b)

    types = sorted({r.response_class.DESCRIPTOR.full_name for r in schema.routes.values()})
    assert len(types) >= 12
    for full_name in types:
        for variant in (0, 1, 2):
            message = schema.message_class(full_name)()
            _fill(message, 0, variant)
            fast, reference = mapper.to_json(message), mapper.to_json_reference(message)
            assert same(fast, reference), f"{full_name} variant {variant}:\n{fast}\n!=\n{reference}"
            assert same(json.loads(b"".join(iter_json_chunks(fast, chunk_size=5))), reference)


def test_big_containers_are_encoded_in_slices():
    from graph_ascend_tb.jsonmap import _json_pieces

    value = {
        "success": True,
        "data": {"npuNodeList": [f"n{i}" for i in range(10000)], "bench": None},
        "map": {f"k{i}": {"x": i} for i in range(5000)},
    }
    pieces = list(_json_pieces(value))
    assert max(len(p) for p in pieces) < 60000
    assert json.loads("".join(pieces)) == value


def test_fast_path_on_every_scalar_kind():
    """Field kinds the API does not use yet (int64, float, bytes, enums, maps, repeated doubles)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, json_format

    from graph_ascend_tb.fastjson import FastConverter
    from graph_ascend_tb.jsonmap import _PRINT_KWARGS, WELL_KNOWN
    from graph_ascend_tb.schema import get_message_class

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="kinds.proto", package="kinds", syntax="proto3")
    enum = file.enum_type.add(name="Color")
    enum.value.add(name="RED", number=0)
    enum.value.add(name="BLUE", number=1)
    msg = file.message_type.add(name="All")
    entry = msg.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_BOOL, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    kinds = [
        ("i64", F.TYPE_INT64),
        ("u64", F.TYPE_UINT64),
        ("f32", F.TYPE_FLOAT),
        ("f64", F.TYPE_DOUBLE),
        ("raw", F.TYPE_BYTES),
        ("flag", F.TYPE_BOOL),
        ("text", F.TYPE_STRING),
        ("u32", F.TYPE_UINT32),
    ]
    number = 1
    for name, kind in kinds:
        msg.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
        msg.field.add(name=f"many_{name}", number=number + 1, type=kind, label=F.LABEL_REPEATED)
        number += 2
    msg.field.add(name="color", number=50, type=F.TYPE_ENUM, type_name=".kinds.Color", label=F.LABEL_OPTIONAL)
    msg.field.add(name="colors", number=51, type=F.TYPE_ENUM, type_name=".kinds.Color", label=F.LABEL_REPEATED)
    msg.field.add(
        name="counts", number=52, type=F.TYPE_MESSAGE, type_name=".kinds.All.CountsEntry", label=F.LABEL_REPEATED
    )
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(file.SerializeToString())
    cls = get_message_class(pool.FindMessageTypeByName("kinds.All"))
    fast = FastConverter({}, _PRINT_KWARGS, WELL_KNOWN)

    empty = cls()
    assert fast.convert(empty) == json_format.MessageToDict(empty, **_PRINT_KWARGS)
    full = cls(
        i64=2**62,
        u64=2**63,
        f32=0.1,
        f64=float("inf"),
        raw=b"\x00\xff",
        flag=True,
        text="t",
        u32=7,
        color=1,
        colors=[0, 1],
    )
    full.many_i64.extend([1, -2])
    full.many_u64.extend([3])
    full.many_f32.extend([0.2, 1e30])
    full.many_f64.extend([1.5, float("nan"), float("-inf")])
    full.many_raw.extend([b"ab"])
    full.many_flag.extend([True, False])
    full.many_text.extend(["a", "b"])
    full.many_u32.extend([1])
    full.counts[True] = 5
    full.counts[False] = -6
    got, want = fast.convert(full), json_format.MessageToDict(full, **_PRINT_KWARGS)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
