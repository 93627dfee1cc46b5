"""The sidecar's API as the shim sees it: message classes and the HTTP route table, from the descriptor.

Why a descriptor and not generated ``_pb2`` modules: generated code pins a protobuf runtime range, and
TensorBoard's own range moves (3.19 .. 7.x). A serialized ``FileDescriptorSet`` loads into a private
``DescriptorPool`` on any of them, and the route table comes from the ``(graph_ascend.v1.http)`` method
option, so a new RPC in ``proto/graph_ascend.proto`` needs no Python change. Answers are called through
the API's ``CallJson``/``StreamJson`` (the route's RPC by name, its answer rendered as the browser's JSON by
the sidecar), so the shim needs no response classes or JSON rules; only ``download`` routes (a file, not
JSON) call their own RPC, whose answer class (``FileChunk``) comes from the descriptor too.

Custom options are read from the raw option bytes (a few lines of wire-format decoding) rather than
through ``Extensions[...]``: extensions declared in a private pool are not registered with the
runtime's own ``descriptor_pb2`` classes, and how that surfaces differs between protobuf backends.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, Iterator, List, Optional, Tuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

logger = logging.getLogger(__name__)

SERVICE = "graph_ascend.v1.GraphAscend"
HTTP_ROUTE_MESSAGE = "graph_ascend.v1.HttpRoute"
JSON_CALL_MESSAGE = "graph_ascend.v1.JsonCall"
JSON_ANSWER_MESSAGE = "graph_ascend.v1.JsonAnswer"

# Field number of the `http` method option in proto/graph_ascend.proto.
OPT_HTTP = 51230


class SchemaError(Exception):
    """The descriptor cannot be used (unreadable, or lacks what the shim needs)."""


@dataclasses.dataclass(frozen=True)
class Route:
    """One browser route: the RPC it calls and how."""

    name: str
    rpc: str  # the RPC's name in the service, "LoadMetaDir"
    request_class: type
    server_streaming: bool
    sse: bool
    # The RPC changes what other users see: accepted only as ``write_access`` allows.
    write: bool = False
    # A file download (``HttpRoute.download``): the typed RPC's ``FileChunk`` stream, passed on as bytes.
    download: bool = False
    response_class: Optional[type] = None


def _read_varint(buf: bytes, pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise SchemaError("truncated varint in option bytes")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise SchemaError("varint too long in option bytes")


def iter_wire_fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """Yields (field number, wire type, value) for each field of a serialized message.

    Values: int for varints, bytes for length-delimited and fixed-width fields.
    """
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _read_varint(buf, pos)
        elif wire_type == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = _read_varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire_type == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise SchemaError(f"unsupported wire type {wire_type} in option bytes")
        if pos > len(buf):
            raise SchemaError("truncated field in option bytes")
        yield number, wire_type, value


def json_answer_bytes(buf: bytes) -> bytes:
    """The ``json`` field of a serialized ``JsonAnswer``: the browser's JSON the sidecar rendered,
    sliced from the wire as it is (the gRPC response deserializer of ``CallJson``/``StreamJson``).

    No message is built: that would copy a node list of megabytes once into the message and once more
    out of it. The sidecar writes exactly one field, so the answer is the tail after its tag and length;
    anything else is read field by field (the last ``json`` wins, as protobuf has it)."""
    if buf[:1] == b"\x0a":  # field 1, length-delimited
        length, pos = _read_varint(buf, 1)
        if pos + length == len(buf):
            return buf[pos:]
    out = b""
    for number, wire_type, value in iter_wire_fields(buf):
        if number == 1 and wire_type == 2:
            out = value
    return out


def get_message_class(desc) -> type:
    """The concrete message class of a descriptor, across protobuf runtime versions."""
    getter = getattr(message_factory, "GetMessageClass", None)
    if getter is not None:
        return getter(desc)
    return message_factory.MessageFactory(desc.file.pool).GetPrototype(desc)  # protobuf < 4.21


def _add_well_known_dependencies(pool, present: set, needed: List[str]) -> None:
    """Adds google/protobuf/*.proto from the runtime when the set was written without its imports."""
    from google.protobuf import struct_pb2

    known = {
        "google/protobuf/descriptor.proto": descriptor_pb2.DESCRIPTOR.serialized_pb,
        "google/protobuf/struct.proto": struct_pb2.DESCRIPTOR.serialized_pb,
    }
    for name in needed:
        if name not in present and name in known:
            pool.AddSerializedFile(known[name])
            present.add(name)


class Schema:
    """Message classes and route table of the sidecar's API."""

    def __init__(self, descriptor_set_bytes: bytes, source: str = "descriptor"):
        self.source = source
        try:
            fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set_bytes)
        except Exception as exc:  # DecodeError and friends differ between runtimes
            raise SchemaError(f"{source}: not a serialized FileDescriptorSet ({exc})") from exc
        if not fds.file:
            raise SchemaError(f"{source}: the FileDescriptorSet holds no files")
        self.pool = descriptor_pool.DescriptorPool()
        present: set = set()
        try:
            for file_proto in fds.file:
                _add_well_known_dependencies(self.pool, present, list(file_proto.dependency))
                self.pool.AddSerializedFile(file_proto.SerializeToString())
                present.add(file_proto.name)
        except Exception as exc:
            raise SchemaError(f"{source}: cannot load the descriptors ({exc})") from exc

        self._classes: Dict[str, type] = {}
        self.routes: Dict[str, Route] = {}
        self._build_routes(fds)
        try:
            self.json_call_class = self.message_class(JSON_CALL_MESSAGE)
            self.json_answer_class = self.message_class(JSON_ANSWER_MESSAGE)
        except KeyError as exc:
            raise SchemaError(f"{source}: no {exc} (a descriptor of an older sidecar?)") from exc
        self.call_json_method = f"/{SERVICE}/CallJson"
        self.stream_json_method = f"/{SERVICE}/StreamJson"

    def message_class(self, full_name: str) -> type:
        cls = self._classes.get(full_name)
        if cls is None:
            cls = get_message_class(self.pool.FindMessageTypeByName(full_name))
            self._classes[full_name] = cls
        return cls

    def _build_routes(self, fds) -> None:
        route_class = None
        service_found = False
        for file_proto in fds.file:
            for service in file_proto.service:
                full = f"{file_proto.package}.{service.name}" if file_proto.package else service.name
                if full != SERVICE:
                    continue
                service_found = True
                for method in service.method:
                    http_bytes = [
                        bytes(v)
                        for n, wt, v in iter_wire_fields(method.options.SerializeToString())
                        if n == OPT_HTTP and wt == 2
                    ]
                    if not http_bytes:
                        continue
                    if route_class is None:
                        route_class = self.message_class(HTTP_ROUTE_MESSAGE)
                    http = route_class()
                    for chunk in http_bytes:
                        http.MergeFromString(chunk)
                    request_class = self.message_class(method.input_type.lstrip("."))
                    download = bool(getattr(http, "download", False))
                    if download and not method.server_streaming:
                        raise SchemaError(f"{self.source}: download route {method.name} is not server-streaming")
                    response_class = self.message_class(method.output_type.lstrip(".")) if download else None
                    for name in http.paths:
                        if name in self.routes:
                            raise SchemaError(f"{self.source}: route {name!r} is declared twice")
                        self.routes[name] = Route(
                            name=name,
                            rpc=method.name,
                            request_class=request_class,
                            server_streaming=bool(method.server_streaming),
                            sse=bool(http.sse),
                            write=bool(http.write),
                            download=download,
                            response_class=response_class,
                        )
        if not service_found:
            raise SchemaError(f"{self.source}: no service {SERVICE}")
        if not self.routes:
            raise SchemaError(
                f"{self.source}: no RPC of {SERVICE} carries the (graph_ascend.v1.http) option; the descriptor "
                "was probably written without custom options (protox: use encode_file_descriptor_set())"
            )
