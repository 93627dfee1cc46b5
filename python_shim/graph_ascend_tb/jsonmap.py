"""The browser's requests -> protobuf request messages, generically, driven by the descriptors.

Query-string values arrive as strings and JSON bodies are whatever the page sent, so values are first
coerced to their field's type (ints, floats, bools; "null"/"undefined" dropped), then set on the
message as ``json_format.ParseDict(..., ignore_unknown_fields=True)`` would.

Setting them is the first cost of every request (ParseDict walks the descriptors for every value, a
fifth of a millisecond for the page's usual ``{nodeInfo, metaData}``), so a plan per message type
(JSON key -> field and kind, made once) sets the plain cases directly: strings, bools, integers,
finite doubles, nested messages given as objects, and ``null`` (left unset). Anything else (lists,
maps, well-known types, enums, a field named twice, a value of another type) is left to ParseDict for
the whole request, so that it decides the result and the error exactly as before; ``test_jsonmap.py`` checks
that both agree on every request message of the API.

Answers are not rendered here: the sidecar renders each answer as the browser's JSON (``CallJson``,
``graph_ascend_proto::json``) and the shim passes the bytes through.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from google.protobuf import descriptor as _descriptor
from google.protobuf import json_format

from .schema import Schema

FD = _descriptor.FieldDescriptor

# Parsed by json_format's own well-known-type rules: values are passed to them as they are.
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


class RequestDecoder:
    """Turns the browser's requests into the API's request messages."""

    def __init__(self, schema: Schema):
        self.schema = schema
        # Message descriptor -> its plan (see `_plan`); filled as request types are first met.
        self._plans: Dict[Any, Dict[str, Tuple[str, int]]] = {}

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
            self._fill(message, merged)
        except _Slow:
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

    # ------------------------------------------------------------------------------------------
    # The direct path (see the module's doc)

    def _plan(self, desc) -> Dict[str, Tuple[str, int]]:
        """JSON key (json name and field name, as ParseDict accepts both) -> (field name, kind)."""
        plan = self._plans.get(desc)
        if plan is None:
            plan = {}
            for field in desc.fields:
                kind = _kind(field)
                plan[field.name] = (field.name, kind)
                plan[field.json_name] = (field.name, kind)
            self._plans[desc] = plan
        return plan

    def _fill(self, message, obj: Mapping[str, Any]) -> None:
        """Sets `obj`'s values on `message` as ParseDict would; `_Slow` for anything it would treat
        otherwise than a plain assignment."""
        plan = self._plan(message.DESCRIPTOR)
        done = set()
        for key, value in obj.items():
            entry = plan.get(key)
            if entry is None:
                if key.startswith("["):  # an extension's name
                    raise _Slow
                continue  # unknown keys are ignored
            name, kind = entry
            if name in done:
                raise _Slow
            done.add(name)
            if value is None:  # ParseDict clears the field: it is not set yet
                if kind == _OTHER:
                    raise _Slow
                continue
            t = type(value)
            if kind == _STRING:
                if t is not str or not (value.isascii() or _encodable(value)):
                    raise _Slow
                setattr(message, name, value)
            elif kind == _BOOL:
                if t is not bool:
                    raise _Slow
                setattr(message, name, value)
            elif kind == _INTEGER:
                if t is not int:
                    raise _Slow
                try:
                    setattr(message, name, value)
                except (ValueError, TypeError):  # out of the field's range
                    raise _Slow from None
            elif kind == _DOUBLE:
                if not (t is int or (t is float and math.isfinite(value))):
                    raise _Slow
                setattr(message, name, float(value))
            elif kind == _MESSAGE:
                if t is not dict:
                    raise _Slow
                sub = getattr(message, name)
                sub.SetInParent()
                self._fill(sub, value)
            else:
                raise _Slow


class _Slow(Exception):
    """A request the direct path leaves to ``json_format.ParseDict``."""


# Field kinds of the direct path; _OTHER: left to ParseDict.
_STRING, _BOOL, _INTEGER, _DOUBLE, _MESSAGE, _OTHER = range(6)


def _kind(field) -> int:
    if _is_repeated(field) or _is_map(field):
        return _OTHER
    mt = field.message_type
    if mt is not None:
        # Well-known types (Struct, Value, wrappers...) have JSON forms of their own.
        return _OTHER if mt.full_name.startswith("google.protobuf.") else _MESSAGE
    t = field.type
    if t == FD.TYPE_STRING:
        return _STRING
    if t == FD.TYPE_BOOL:
        return _BOOL
    if t in _INT_TYPES:
        return _INTEGER
    if t == FD.TYPE_DOUBLE:
        return _DOUBLE
    return _OTHER  # bytes (base64), enums (names), float (range checks)


def _encodable(text: str) -> bool:
    """Whether a string is valid UTF-8 once encoded (no lone surrogates, which ParseDict refuses)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ----------------------------------------------------------------------------------------------
# Coercion of loosely typed input (query strings, hand-written JSON) to the field types.


@functools.cache  # one entry per message type of the API
def _fields_by_key(desc) -> Dict[str, Any]:
    """Field name and JSON name -> field (a field's own name first, as ParseDict has it)."""
    fields = {f.json_name: f for f in desc.fields}
    fields.update(desc.fields_by_name)
    return fields


def _find_field(desc, key: str):
    return _fields_by_key(desc).get(key)


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
