"""A faster equivalent of ``MessageToDict`` + the field options, for big answers.

Why: ``json_format.MessageToDict`` is pure Python and generic; it walks every field of every message
(about 50 us per layout box, 1 us per name of a node list) and the field options then need a second
walk. A graph of 100,000 boxes took half a minute. This module compiles, once per message type, a plan:
the defaults that are printed for unset fields without presence (and ``null`` for ``json_null``), and one
converter per field; a message then costs one ``ListFields()`` call plus the set fields. Repeated
scalars are copied at C speed. Well-known types (Struct, Value, ListValue, ...) still go through
``MessageToDict``.

The output must equal the reference ``JsonMapper.to_json_reference`` (``MessageToDict`` with fields
without presence printed and JSON names, then the field options applied): the unit tests compare both on
every response type of the API.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from google.protobuf import descriptor as _descriptor
from google.protobuf import json_format

from .schema import FieldRules, SchemaError

FD = _descriptor.FieldDescriptor

_INT64 = {FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_SINT64, FD.TYPE_FIXED64, FD.TYPE_SFIXED64}
_INT32 = {FD.TYPE_INT32, FD.TYPE_UINT32, FD.TYPE_SINT32, FD.TYPE_FIXED32, FD.TYPE_SFIXED32}
_REPEATED = getattr(FD, "LABEL_REPEATED", 3)

try:  # the rounding json_format applies to 32-bit floats
    from google.protobuf.internal.type_checkers import ToShortestFloat as _shortest_float
except ImportError:  # pragma: no cover - very old runtimes

    def _shortest_float(value: float) -> float:
        return float(f"{value:.7g}")


def _is_repeated(field) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return field.label == _REPEATED


def _is_map(field) -> bool:
    mt = field.message_type
    return mt is not None and mt.GetOptions().map_entry


def _has_presence(field) -> bool:
    presence = getattr(field, "has_presence", None)
    if presence is not None:
        return bool(presence)
    if _is_repeated(field):
        return False
    return field.message_type is not None or field.containing_oneof is not None


def _double(value: float) -> Any:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _float(value: float) -> Any:
    if math.isfinite(value):
        return _shortest_float(value)
    return _double(value)


def _scalar_converter(field) -> Optional[Callable[[Any], Any]]:
    """None for values that are already their JSON form."""
    t = field.type
    if t in _INT64:
        return str
    if t == FD.TYPE_DOUBLE:
        return _double
    if t == FD.TYPE_FLOAT:
        return _float
    if t == FD.TYPE_BYTES:
        return lambda v: base64.b64encode(v).decode("utf-8")
    if t == FD.TYPE_ENUM:
        enum = field.enum_type
        if enum.full_name == "google.protobuf.NullValue":
            return lambda v: None
        return lambda v: enum.values_by_number[v].name if v in enum.values_by_number else v
    return None


class _Plan:
    __slots__ = ("by_number", "defaults", "fresh_dicts", "fresh_lists")

    def __init__(self):
        self.defaults: Dict[str, Any] = {}
        self.fresh_lists: List[str] = []
        self.fresh_dicts: List[str] = []
        # field number -> (JSON key, converter or None when the value is already its JSON form)
        self.by_number: Dict[int, Tuple[str, Optional[Callable[[Any], Any]]]] = {}


class FastConverter:
    """Message -> JSON value, with json_map_key / json_map_value / json_null applied."""

    def __init__(self, field_rules: Dict[str, Dict[str, FieldRules]], print_kwargs: Dict[str, Any], well_known: set):
        self._rules = field_rules
        self._print_kwargs = print_kwargs
        self._well_known = well_known
        self._plans: Dict[str, _Plan] = {}

    def convert(self, message) -> Any:
        desc = message.DESCRIPTOR
        if desc.full_name in self._well_known:
            return json_format.MessageToDict(message, **self._print_kwargs)
        return self._message(message, self._plan(desc))

    # ------------------------------------------------------------------------------------------

    def _message(self, message, plan: _Plan) -> Dict[str, Any]:
        out = dict(plan.defaults)
        for key in plan.fresh_lists:
            out[key] = []
        for key in plan.fresh_dicts:
            out[key] = {}
        by_number = plan.by_number
        for field, value in message.ListFields():
            entry = by_number.get(field.number)
            if entry is not None:  # extensions are not printed
                key, conv = entry
                out[key] = value if conv is None else conv(value)
        return out

    def _plan(self, desc) -> _Plan:
        plan = self._plans.get(desc.full_name)
        if plan is not None:
            return plan
        plan = _Plan()
        self._plans[desc.full_name] = plan  # registered first: recursive types refer to it
        rules = self._rules.get(desc.full_name, {})
        for field in desc.fields:
            key = field.json_name
            rule = rules.get(field.name) or FieldRules()
            repeated = _is_repeated(field)
            if _is_map(field):
                plan.fresh_dicts.append(key)
                plan.by_number[field.number] = (key, self._map_converter(field))
            elif repeated:
                if rule.map_key:
                    plan.fresh_dicts.append(key)
                    plan.by_number[field.number] = (key, self._keyed_converter(field, rule))
                else:
                    plan.fresh_lists.append(key)
                    plan.by_number[field.number] = (key, self._list_converter(field))
            else:
                plan.by_number[field.number] = (key, self._single_converter(field))
                if not _has_presence(field):
                    default = field.default_value
                    conv = _scalar_converter(field)
                    plan.defaults[key] = conv(default) if conv is not None else default
                elif rule.json_null:
                    plan.defaults[key] = None
        return plan

    def _single_converter(self, field) -> Optional[Callable[[Any], Any]]:
        if field.message_type is not None:
            return self._message_converter(field.message_type)
        return _scalar_converter(field)

    def _message_converter(self, desc) -> Callable[[Any], Any]:
        if desc.full_name in self._well_known:
            kwargs = self._print_kwargs
            return lambda m: json_format.MessageToDict(m, **kwargs)
        return lambda m: self._message(m, self._plan(desc))

    def _list_converter(self, field) -> Callable[[Any], Any]:
        if field.message_type is not None:
            conv = self._message_converter(field.message_type)
            return lambda values: [conv(v) for v in values]
        conv = _scalar_converter(field)
        if conv is None:
            return list
        if field.type == FD.TYPE_DOUBLE:
            return lambda values: list(values) if all(map(math.isfinite, values)) else [conv(v) for v in values]
        return lambda values: [conv(v) for v in values]

    def _keyed_converter(self, field, rule: FieldRules) -> Callable[[Any], Any]:
        entry_desc = field.message_type
        if entry_desc is None:
            raise SchemaError(f"{field.full_name}: json_map_key on a field that is not a message")
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

        def convert(values) -> Dict[str, Any]:
            plan = self._plan(entry_desc)
            out: Dict[str, Any] = {}
            for item in values:
                obj = self._message(item, plan)
                k = obj.pop(key_json, "")
                if not isinstance(k, str):
                    k = str(k)
                out[k] = obj.get(value_json) if value_json is not None else obj
            return out

        return convert

    def _map_converter(self, field) -> Callable[[Any], Any]:
        entry = field.message_type
        value_field = entry.fields_by_name["value"]
        key_type = entry.fields_by_name["key"].type
        value_conv = self._single_converter(value_field) or _identity

        def key_text(k) -> str:
            if key_type == FD.TYPE_BOOL:
                return "true" if k else "false"
            return str(k)

        return lambda mapping: {key_text(k): value_conv(mapping[k]) for k in mapping}


def _identity(value: Any) -> Any:
    return value
