"""JSON <-> protobuf for the browser routes, generically, driven by the descriptors.

Requests: query-string values arrive as strings and JSON bodies are whatever the page sent, so values are
first coerced to their field's type (ints, floats, bools; "null"/"undefined" dropped), then parsed with
``json_format.ParseDict(..., ignore_unknown_fields=True)``.

Responses: ``json_format.MessageToDict`` (fields without presence printed, json_name keys), then the
field options of ``proto/graph_ascend.proto`` are applied by walking the descriptors:
``json_map_key``/``json_map_value`` turn a repeated message field into a JSON object (in list order) and
``json_null`` prints an unset field with presence as ``null``. Only message types that can reach such a
field are walked, so big plain lists (node names) cost nothing extra.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional

from google.protobuf import descriptor as _descriptor
from google.protobuf import json_format

from .fastjson import FastConverter
from .schema import FieldRules, Schema, SchemaError

FD = _descriptor.FieldDescriptor

# Rendered by json_format's own well-known-type rules; never walked.
WELL_KNOWN = {
    "google.protobuf.Struct",
    "google.protobuf.Value",
    "google.protobuf.ListValue",
    "google.protobuf.Any",
    "google.protobuf.Timestamp",
    "google.protobuf.Duration",
    "google.protobuf.FieldMask",
}

_INT_TYPES = {
    FD.TYPE_INT32,
    FD.TYPE_INT64,
    FD.TYPE_UINT32,
    FD.TYPE_UINT64,
    FD.TYPE_SINT32,
    FD.TYPE_SINT64,
    FD.TYPE_FIXED32,
    FD.TYPE_FIXED64,
    FD.TYPE_SFIXED32,
    FD.TYPE_SFIXED64,
}
_FLOAT_TYPES = {FD.TYPE_FLOAT, FD.TYPE_DOUBLE}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}
_ABSENT = {"null", "undefined", "none"}

_REPEATED = getattr(FD, "LABEL_REPEATED", 3)


class RequestError(ValueError):
    """The browser's request does not fit the RPC's request message."""


def _is_repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 6.30; `label` is gone in 7
    if repeated is not None:
        return bool(repeated)
    return field.label == _REPEATED


def _is_map(field) -> bool:
    mt = field.message_type
    return mt is not None and mt.GetOptions().map_entry


def _message_to_dict_kwargs() -> Dict[str, Any]:
    params = json_format.MessageToDict.__code__.co_varnames
    if "always_print_fields_with_no_presence" in params:
        return {"always_print_fields_with_no_presence": True, "preserving_proto_field_name": False}
    # protobuf < 5.26: the same meaning under the old name (proto3 optional fields are not printed).
    return {"including_default_value_fields": True, "preserving_proto_field_name": False}


_PRINT_KWARGS = _message_to_dict_kwargs()


class JsonMapper:
    """Converts between the browser's JSON and the API's messages."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self._walk_cache: Dict[str, bool] = {}
        self._fast = FastConverter(schema.field_rules, _PRINT_KWARGS, WELL_KNOWN)

    # ------------------------------------------------------------------------------------------
    # Responses

    def to_json(self, message) -> Any:
        """The JSON value (dicts, lists, scalars) the browser sees for a response message.

        Computed by ``fastjson`` in one pass; equal to ``to_json_reference`` (tested on every response type).
        """
        return self._fast.convert(message)

    def to_json_reference(self, message) -> Any:
        """The definition: ``MessageToDict`` (fields without presence printed, JSON names), then the options."""
        data = json_format.MessageToDict(message, **_PRINT_KWARGS)
        return self._apply(message.DESCRIPTOR, data)

    def _rules(self, desc) -> Mapping[str, FieldRules]:
        return self.schema.field_rules.get(desc.full_name, {})

    def _needs_walk(self, desc) -> bool:
        """Whether any field option applies at or below this message type (a fixed point, so cycles are fine)."""
        cached = self._walk_cache.get(desc.full_name)
        if cached is not None:
            return cached
        reachable = {}
        stack = [desc]
        while stack:
            d = stack.pop()
            if d.full_name in reachable or d.full_name in WELL_KNOWN:
                continue
            reachable[d.full_name] = d
            stack.extend(f.message_type for f in d.fields if f.message_type is not None and not _is_map(f))
        needs = {name: bool(self._rules(d)) for name, d in reachable.items()}
        changed = True
        while changed:
            changed = False
            for name, d in reachable.items():
                if needs[name]:
                    continue
                if any(
                    needs.get(f.message_type.full_name, False)
                    for f in d.fields
                    if f.message_type is not None and not _is_map(f)
                ):
                    needs[name] = changed = True
        for name, value in needs.items():
            self._walk_cache.setdefault(name, value)
        self._walk_cache.setdefault(desc.full_name, False)
        return self._walk_cache[desc.full_name]

    def _apply(self, desc, data: Any) -> Any:
        if not isinstance(data, dict) or not self._needs_walk(desc):
            return data
        rules = self._rules(desc)
        for field in desc.fields:
            key = field.json_name
            rule = rules.get(field.name)
            mt = field.message_type
            if mt is not None and not _is_map(field) and key in data and self._needs_walk(mt):
                value = data[key]
                if _is_repeated(field) and isinstance(value, list):
                    data[key] = [self._apply(mt, item) for item in value]
                else:
                    data[key] = self._apply(mt, value)
            if rule is None:
                continue
            if rule.json_null and key not in data and not _is_repeated(field):
                data[key] = None
            if rule.map_key and mt is not None and _is_repeated(field):
                data[key] = _list_to_object(mt, data.get(key) or [], rule)
        return data

    # ------------------------------------------------------------------------------------------
    # Requests

    def request_from_http(
        self,
        message_class: type,
        query: Optional[Iterable] = None,
        body: Any = None,
        client_id: Optional[str] = None,
    ):
        """Builds a request message from query parameters (string pairs) and a JSON body.

        Body fields win over query fields of the same name. ``client_id`` is set when the message has it.
        """
        desc = message_class.DESCRIPTOR
        merged: Dict[str, Any] = {}
        if query is not None:
            merged.update(query_to_dict(desc, query))
        if isinstance(body, dict):
            merged.update(coerce_object(desc, body))
        message = message_class()
        try:
            json_format.ParseDict(merged, message, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise RequestError(str(exc)) from exc
        if client_id is not None and "client_id" in desc.fields_by_name:
            field = desc.fields_by_name["client_id"]
            if field.type == FD.TYPE_STRING and not _is_repeated(field):
                message.client_id = client_id
        return message


def _list_to_object(entry_desc, items: list, rule: FieldRules) -> Dict[str, Any]:
    key_field = entry_desc.fields_by_name.get(rule.map_key)
    if key_field is None:
        raise SchemaError(f"{entry_desc.full_name} has no field {rule.map_key!r} (json_map_key)")
    key_json = key_field.json_name
    value_json = None
    if rule.map_value:
        value_field = entry_desc.fields_by_name.get(rule.map_value)
        if value_field is None:
            raise SchemaError(f"{entry_desc.full_name} has no field {rule.map_value!r} (json_map_value)")
        value_json = value_field.json_name
    out: Dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        k = item.pop(key_json, "")
        if not isinstance(k, str):
            k = json.dumps(k) if isinstance(k, (dict, list)) else str(k)
        out[k] = item.get(value_json) if value_json is not None else item
    return out


# ----------------------------------------------------------------------------------------------
# Coercion of loosely typed input (query strings, hand-written JSON) to the field types.


def _find_field(desc, key: str):
    field = desc.fields_by_name.get(key)
    if field is not None:
        return field
    for f in desc.fields:
        if f.json_name == key:
            return f
    return None


_SKIP = object()


def _coerce_scalar(field, value: Any) -> Any:
    """One value for a non-message field; _SKIP to leave the field unset."""
    t = field.type
    if isinstance(value, str):
        text = value.strip()
        if t == FD.TYPE_STRING or t == FD.TYPE_BYTES:
            return value
        if text.lower() in _ABSENT:
            return _SKIP
        if t in _INT_TYPES:
            if text == "":
                return _SKIP
            try:
                return int(text)
            except ValueError:
                try:
                    f = float(text)
                except ValueError:
                    raise RequestError(f"field {field.json_name!r}: {value!r} is not an integer") from None
                if math.isfinite(f) and f.is_integer():
                    return int(f)
                raise RequestError(f"field {field.json_name!r}: {value!r} is not an integer") from None
        if t in _FLOAT_TYPES:
            if text == "":
                return _SKIP
            try:
                return float(text)
            except ValueError:
                raise RequestError(f"field {field.json_name!r}: {value!r} is not a number") from None
        if t == FD.TYPE_BOOL:
            low = text.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise RequestError(f"field {field.json_name!r}: {value!r} is not a boolean")
        if t == FD.TYPE_ENUM:
            return int(text) if text.lstrip("-").isdigit() else text
        return value
    if t == FD.TYPE_BOOL and isinstance(value, (int, float)) and not isinstance(value, bool):
        return bool(value)
    if t in _INT_TYPES and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if t == FD.TYPE_STRING and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def _coerce_value(field, value: Any) -> Any:
    mt = field.message_type
    if value is None:
        return None
    if mt is not None:
        if mt.full_name in WELL_KNOWN or _is_map(field):
            if isinstance(value, str) and mt.full_name != "google.protobuf.Value":
                try:
                    return json.loads(value)
                except ValueError:
                    raise RequestError(f"field {field.json_name!r}: not JSON") from None
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise RequestError(f"field {field.json_name!r}: expected a JSON object") from None
        if isinstance(value, dict):
            return coerce_object(mt, value)
        return value
    return _coerce_scalar(field, value)


def coerce_object(desc, obj: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of a JSON object with its values coerced to the fields' types (unknown keys kept)."""
    out: Dict[str, Any] = {}
    for key, value in obj.items():
        field = _find_field(desc, key)
        if field is None:
            out[key] = value
            continue
        if _is_repeated(field) and not _is_map(field):
            if isinstance(value, str) and field.type != FD.TYPE_STRING:
                value = [value]
            if isinstance(value, list):
                items = [_coerce_value(field, v) for v in value]
                out[key] = [v for v in items if v is not _SKIP]
                continue
        coerced = _coerce_value(field, value)
        if coerced is not _SKIP:
            out[key] = coerced
    return out


def query_to_dict(desc, pairs: Iterable) -> Dict[str, Any]:
    """Query-string pairs -> a JSON object for ``desc`` (repeated fields collect every value)."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        field = _find_field(desc, key)
        if field is None:
            continue
        name = field.json_name
        if _is_repeated(field) and not _is_map(field):
            text = value.strip()
            if text.startswith("["):
                try:
                    values = json.loads(text)
                except ValueError:
                    values = [value]
            else:
                values = [value]
            items = [_coerce_value(field, v) for v in values]
            out.setdefault(name, []).extend(v for v in items if v is not _SKIP)
            continue
        coerced = _coerce_value(field, value)
        if coerced is not _SKIP:
            out[name] = coerced
    return out


_SLICE = 2048  # elements of a big container encoded per C-encoder call


def _is_big(value: Any) -> bool:
    return isinstance(value, (dict, list)) and len(value) > _SLICE


def _holds_big(value: dict, depth: int) -> bool:
    """Whether an object holds a big container within the next levels of objects."""
    for item in value.values():
        if _is_big(item) or (isinstance(item, dict) and depth < 3 and _holds_big(item, depth + 1)):
            return True
    return False


def _json_pieces(value: Any, depth: int = 0) -> Iterator[str]:
    """Pieces of the JSON text of value, none much bigger than _SLICE elements' worth.

    ``JSONEncoder.iterencode`` would stream too, but only through the pure-Python encoder (several times
    slower). Here every piece is one call of the C encoder: a small value whole, a big list or object in
    slices of _SLICE elements, and an object holding a big container (``{"data": [...]}``) key by key.
    """
    if isinstance(value, dict):
        if depth < 4 and _holds_big(value, depth):
            yield "{"
            first = True
            for key, item in value.items():
                yield ("" if first else ",") + _dumps(str(key)) + ":"
                first = False
                yield from _json_pieces(item, depth + 1)
            yield "}"
        elif len(value) > _SLICE:
            items = list(value.items())
            yield "{"
            for start in range(0, len(items), _SLICE):
                text = _dumps(dict(items[start : start + _SLICE]))[1:-1]
                yield ("," if start else "") + text
            yield "}"
        else:
            yield _dumps(value)
    elif isinstance(value, list) and len(value) > _SLICE:
        yield "["
        for start in range(0, len(value), _SLICE):
            yield ("," if start else "") + _dumps(value[start : start + _SLICE])[1:-1]
        yield "]"
    else:
        yield _dumps(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True, separators=(",", ":"))


def iter_json_chunks(value: Any, chunk_size: int = 65536) -> Iterator[bytes]:
    """Encodes a JSON value piece by piece (no second full-size copy), in chunks of about chunk_size."""
    buffer = []
    size = 0
    for piece in _json_pieces(value):
        buffer.append(piece)
        size += len(piece)
        if size >= chunk_size:
            yield "".join(buffer).encode("utf-8")
            buffer = []
            size = 0
    if buffer:
        yield "".join(buffer).encode("utf-8")
