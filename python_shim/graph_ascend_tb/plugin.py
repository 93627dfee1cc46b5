"""The ``graph_ascend`` TensorBoard plugin: one prefix route that serves the page and proxies the API.

``/data/plugin/graph_ascend/<name>``: a file of the built frontend when ``static/<name>`` exists, else the
browser route ``<name>`` of the route table derived from the API descriptor (``schema.Route``): the
request (query string and/or JSON body; both methods accepted on every route, as msprobe does) becomes
the RPC's request message (``jsonmap``), which goes to the sidecar's ``CallJson`` with the RPC's name;
the answer comes back as msprobe's JSON, rendered by the sidecar (``graph_ascend_proto::json``, the one
definition of it), and is passed through, gzip when the browser accepts it. Server-streaming RPCs go to
``StreamJson``; those marked ``sse`` become ``text/event-stream``. Routes marked ``download`` (a file such
as the compare CSV) call their own RPC and pass its ``FileChunk`` bytes on as an attachment with the
content type and file name of its first chunk; a failure there is the usual JSON error, and one after it
aborts the answer (``DownloadCutShort``): the browser sees a broken download, never a short file.

Errors keep one shape, ``{"success": false, "error": "..."}``: 503 when the sidecar cannot be reached
(a broken connection is retried once on a fresh sidecar), 500 for other gRPC statuses, 400 for a request
that does not fit, 404 for an unknown name, 403 for a change this request may not make (``write_access``:
routes whose RPC is marked ``write``; every API answer carries the request's write state in a header).
A write is never retried after the sidecar went away mid-call (it may have been applied): the answer
says so instead. Nothing here raises into TensorBoard, but for a download or stream whose source broke
after its headers were sent: raising from the body is how a WSGI answer is aborted.
Every answer carries ``Referrer-Policy: same-origin`` (``REFERRER_POLICY``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import tempfile
import threading
import zlib
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import quote

import grpc
from tensorboard.plugins import base_plugin
from werkzeug.wrappers import Request, Response

from . import allocator, static_files, write_access
from .jsonmap import RequestDecoder, RequestError
from .schema import SERVICE, Route, Schema, SchemaError, json_answer_bytes
from .sidecar import Sidecar, SidecarError, find_binary

logger = logging.getLogger(__name__)

PLUGIN_NAME = "graph_ascend"
TAB_NAME = "GRAPH_ASCEND"
CLIENT_HEADER = "X-Graph-Ascend-Client"
DESCRIPTOR_ENV = "GRAPH_ASCEND_DESCRIPTOR"
PACKAGE_DESCRIPTOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graph_ascend.desc")

UNARY_TIMEOUT_S = 900.0
HEARTBEAT_S = float(os.environ.get("GRAPH_ASCEND_SSE_HEARTBEAT", "15"))
# The page's request bodies are a few hundred bytes (a selection, names, a colour map): the size is
# refused before anything is read or parsed, so that no request costs seconds or a gigabyte in
# TensorBoard's process; nesting past the parser's recursion limit, or past MAX_BODY_DEPTH once
# parsed (the page never nests deeper than 4), is a 400, never a 500.
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_BODY_DEPTH = 64
# Answers up to this size go out as one body with Content-Length (one write); bigger ones are streamed.
INLINE_BODY_BYTES = 1024 * 1024
# Big answers are gzip-compressed in slices of this size.
CHUNK_BYTES = 256 * 1024
# On every answer, so on the page's own documents: requests the page makes send their address (which
# never holds the write token once the page has stored it) to this TensorBoard only, never to another
# site. Not ``no-referrer``: under it the Fetch standard has browsers send ``Origin: null`` with the
# page's POSTs, which ``write_access`` refuses as another origin (docs/security.md, rule 5).
REFERRER_POLICY = "same-origin"


class ShimError(Exception):
    """A failure with an HTTP status and a message for the browser."""

    def __init__(self, status: int, message: str, code: Optional[str] = None):
        super().__init__(message)
        self.status = status
        self.code = code


def json_depth(value: Any) -> int:
    """How deep lists and dicts nest in a parsed JSON value (0 for a scalar), walked without
    recursion and stopping as soon as the depth passes ``MAX_BODY_DEPTH``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_BODY_DEPTH:
            break
        stack.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def load_descriptor_bytes() -> tuple:
    """(bytes, source): $GRAPH_ASCEND_DESCRIPTOR, the packaged file, or the binary's proto-descriptor."""
    for path in (os.environ.get(DESCRIPTOR_ENV), PACKAGE_DESCRIPTOR):
        if path and os.path.isfile(path):
            with open(path, "rb") as f:
                return f.read(), path
    binary = find_binary()
    with tempfile.TemporaryDirectory(prefix="graph_ascend_desc_") as tmp:
        out = os.path.join(tmp, "graph_ascend.desc")
        try:
            proc = subprocess.run(
                [binary, "proto-descriptor", "--out", out],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SidecarError(f"cannot run {binary} proto-descriptor: {exc}") from exc
        if proc.returncode != 0 or not os.path.isfile(out):
            detail = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
            raise SidecarError(f"{binary} proto-descriptor failed: {detail}")
        with open(out, "rb") as f:
            return f.read(), f"{binary} proto-descriptor"


class GraphAscendPlugin(base_plugin.TBPlugin):
    """GRAPH_ASCEND: msprobe's model-hierarchy precision graphs, served by the graph-ascend sidecar."""

    plugin_name = PLUGIN_NAME

    def __init__(self, context):
        logdir = getattr(context, "logdir", "") or ""
        self._logdir = os.path.abspath(os.path.expanduser(logdir.rstrip("/"))) if logdir else ""
        self.sidecar = Sidecar(self._logdir)
        self._schema: Optional[Schema] = None
        self._decoder: Optional[RequestDecoder] = None
        self._schema_lock = threading.Lock()
        self._callables: tuple = (None, None)
        flags = getattr(context, "flags", None)
        self.allow_remote_writes = write_access.allowed_by_env() or bool(
            getattr(flags, write_access.ALLOW_FLAG, False)
        )
        self.write_token, token_problem = write_access.launch_token()
        link = write_access.page_link(
            self.write_token, getattr(flags, "port", None), getattr(flags, "path_prefix", "") or ""
        )
        # TensorBoard's console: where the user who started it (and only they) sees the link.
        if token_problem:
            print(f"GRAPH_ASCEND: {token_problem}", file=sys.stderr)
        print(
            f"GRAPH_ASCEND: to make changes (conversions, matching, colours) open the page with this launch's "
            f"token: {link}",
            file=sys.stderr,
            flush=True,
        )
        allocator.tune_for_large_answers()

    # TBPlugin --------------------------------------------------------------------------------------

    def get_plugin_apps(self):
        return {"/*": self._wsgi}

    def is_active(self):
        return True

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name=TAB_NAME, disable_reload=True)

    # Routing ---------------------------------------------------------------------------------------

    def _wsgi(self, environ, start_response):
        request = Request(environ)
        try:
            response = self._dispatch(request)
        except ShimError as exc:
            response = error_response(exc.status, str(exc), exc.code)
        except Exception as exc:  # a bug here must not take TensorBoard's request thread down silently
            logger.exception("graph_ascend: %s %s failed", request.method, request.path)
            response = error_response(500, f"internal error in the graph_ascend plugin: {exc}")
        # What a POST from this page would be told, so that it can show its read-only state.
        refused = write_access.environ_refusal(environ, self.allow_remote_writes, method="POST")
        if refused:
            state = "refused"
        elif self._token_refusal(environ):
            state = "token"
        else:
            state = "allowed"
        response.headers[write_access.STATE_HEADER] = state
        response.headers["Referrer-Policy"] = REFERRER_POLICY
        return response(environ, start_response)

    def _token_refusal(self, environ) -> Optional[str]:
        sent = environ.get("HTTP_" + write_access.TOKEN_HEADER.upper().replace("-", "_"))
        return write_access.token_refusal(sent, self.write_token)

    def route_name(self, path: str) -> Optional[str]:
        marker = f"/data/plugin/{self.plugin_name}/"
        index = path.find(marker)
        if index < 0:
            return None
        return path[index + len(marker) :]

    def _dispatch(self, request: Request):
        name = self.route_name(request.path)
        if name is None:
            raise ShimError(404, f"not a graph_ascend path: {request.path}")
        if request.method in ("GET", "HEAD"):
            static = static_files.serve(name, request.method)
            if static is not None:
                return static
        schema, decoder = self._api()
        route = schema.routes.get(name)
        if route is None:
            raise ShimError(404, f"unknown graph_ascend route: {name!r}")
        if route.write:
            refusal = write_access.environ_refusal(request.environ, self.allow_remote_writes)
            if refusal is not None:
                status = 405 if request.method != "POST" else 403
                raise ShimError(status, f"{route.name}: {refusal}", "READ_ONLY")
            refusal = self._token_refusal(request.environ)
            if refusal is not None:
                raise ShimError(403, f"{route.name}: {refusal}", "TOKEN")
        message = self._request_message(request, route, decoder)
        if route.download:
            return self._download(route, message)
        call = schema.json_call_class(method=route.rpc, request=message.SerializeToString())
        if route.server_streaming:
            return self._stream(route, call, schema)
        return json_response(self._unary(route, call, schema), request)

    def _api(self):
        with self._schema_lock:
            if self._schema is None:
                try:
                    data, source = load_descriptor_bytes()
                    schema = Schema(data, source)
                except (SidecarError, SchemaError, OSError) as exc:
                    raise ShimError(503, f"GRAPH_ASCEND cannot load its API description: {exc}") from exc
                self._schema = schema
                self._decoder = RequestDecoder(schema)
            return self._schema, self._decoder

    def _request_message(self, request: Request, route: Route, decoder: RequestDecoder):
        body: Any = None
        if request.method not in ("GET", "HEAD"):
            length = request.content_length
            if length is not None and length > MAX_BODY_BYTES:
                raise ShimError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
            raw = request.get_data(cache=False)
            if len(raw) > MAX_BODY_BYTES:
                raise ShimError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
            if raw.strip():
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                    raise ShimError(400, f"{route.name}: the request body is not JSON ({exc})") from exc
                if json_depth(body) > MAX_BODY_DEPTH:
                    raise ShimError(400, f"{route.name}: the request body nests deeper than {MAX_BODY_DEPTH} levels")
        try:
            return decoder.request_from_http(
                route.request_class,
                query=request.args.items(multi=True),
                body=body,
                client_id=request.headers.get(CLIENT_HEADER),
            )
        except RequestError as exc:
            raise ShimError(400, f"{route.name}: {exc}") from exc

    # gRPC ------------------------------------------------------------------------------------------

    def _channel(self) -> grpc.Channel:
        try:
            return self.sidecar.channel()
        except SidecarError as exc:
            raise ShimError(503, str(exc), "UNAVAILABLE") from exc

    def _retry_unavailable(self, exc: grpc.RpcError, attempt: int, route: Route) -> bool:
        """On a first UNAVAILABLE, True to retry a read once: after a restart if the sidecar is dead or
        its socket does not answer, else on the same channel (a dropped connection that has recovered).
        The sidecar itself never answers UNAVAILABLE, so the code always means the transport.

        A write is never repeated: the sidecar may have applied it before it went away (an edit is
        committed before it is answered), and a second try would apply it twice or report a change that
        was made as failed. The sidecar is still restarted, and the answer says the outcome is unknown."""
        if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt > 0:
            return False
        if self.sidecar.connection_broken():
            try:
                self.sidecar.restart(f"{route.name}: {exc.details()}")
            except SidecarError as err:
                raise ShimError(503, str(err), "UNAVAILABLE") from err
        if route.write:
            raise ShimError(503, unknown_outcome(route, exc.details() or ""), "UNAVAILABLE")
        return True

    def _call_json(self, channel: grpc.Channel, schema: Schema):
        """The channel's ``CallJson`` callable, made once per channel (the pair is swapped atomically)."""
        owner, call = self._callables
        if owner is not channel:
            call = channel.unary_unary(
                schema.call_json_method,
                request_serializer=_serialize,
                response_deserializer=json_answer_bytes,
            )
            self._callables = (channel, call)
        return call

    def _attempts(self, route: Route, start):
        """``start(channel)``'s result; once more after a first UNAVAILABLE (see ``_retry_unavailable``) or a
        channel closed by a restart on another thread."""
        for attempt in range(2):
            channel = self._channel()
            try:
                return start(channel)
            except grpc.RpcError as exc:
                if self._retry_unavailable(exc, attempt, route):
                    continue
                raise rpc_error(route, exc) from exc
            except ValueError as exc:  # the channel was closed by a restart on another thread
                if attempt == 0:
                    continue
                raise ShimError(503, f"{route.name}: the graph-ascend sidecar restarted: {exc}", "UNAVAILABLE") from exc
        raise ShimError(503, "the graph-ascend sidecar is unavailable", "UNAVAILABLE")

    def _unary(self, route: Route, call, schema: Schema) -> bytes:
        """The route's answer, as the browser's JSON (the bytes the sidecar wrote)."""
        return self._attempts(route, lambda channel: self._call_json(channel, schema)(call, timeout=UNARY_TIMEOUT_S))

    def _stream(self, route: Route, json_call, schema: Schema) -> Response:
        for attempt in range(2):
            channel = self._channel()
            try:
                call = channel.unary_stream(
                    schema.stream_json_method,
                    request_serializer=_serialize,
                    response_deserializer=json_answer_bytes,
                )(json_call)
            except ValueError as exc:  # the channel was closed by a restart on another thread
                if attempt == 0:
                    continue
                raise ShimError(503, f"{route.name}: the graph-ascend sidecar restarted: {exc}", "UNAVAILABLE") from exc
            call.initial_metadata()  # waits for the answer's headers, or for an immediate error
            if call.done() and call.code() != grpc.StatusCode.OK:
                if self._retry_unavailable(call, attempt, route):
                    continue
                raise rpc_error(route, call)
            if route.sse:
                return sse_response(call)
            return lines_response(_ndjson_lines(call))
        raise ShimError(503, "the graph-ascend sidecar is unavailable", "UNAVAILABLE")

    def _download(self, route: Route, message) -> Response:
        """A file: the first chunk says whether it can be had, its type and name; the rest is its bytes."""

        def start(channel):
            call = channel.unary_stream(
                f"/{SERVICE}/{route.rpc}",
                request_serializer=_serialize,
                response_deserializer=route.response_class.FromString,
            )(message, timeout=UNARY_TIMEOUT_S)
            try:
                return call, next(call)
            except StopIteration:
                raise ShimError(500, f"{route.name}: the sidecar sent no answer") from None

        call, head = self._attempts(route, start)
        if not head.success:
            call.cancel()
            return error_response(200, head.error)
        # The first bytes are had before the headers go out, so that a break there is an error answer.
        body = _download_bytes(head, call)
        try:
            first = [next(body)]
        except StopIteration:
            first = []
        except DownloadCutShort as exc:
            return error_response(503, f"{route.name}: {exc.reason}", "CUT_SHORT")
        return download_response(head, _chain(first, body))


class DownloadCutShort(Exception):
    """A download whose stream broke after its headers went out: raised from the body, so that the HTTP
    server aborts the answer (no last chunk of the chunked encoding, the connection closed) and the
    browser sees a failed download instead of a complete-looking file cut short."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def _download_bytes(head, call) -> Iterator[bytes]:
    """The bytes of a download. A failure after the first chunk (headers and status are sent by then)
    raises ``DownloadCutShort`` into the HTTP server, which then ends the answer without its last chunk:
    the only way a WSGI application can tell the client that a body is incomplete."""
    try:
        if head.data:
            yield head.data
        for chunk in call:
            if not chunk.success:
                raise _cut_short(head, chunk.error or "the sidecar reported an error")
            if chunk.data:
                yield chunk.data
    except grpc.RpcError as exc:
        raise _cut_short(head, exc.details() or exc.code().name) from None
    finally:
        call.cancel()


def _cut_short(head, reason: str) -> DownloadCutShort:
    reason = f"the download of {head.file_name or 'the file'} broke off: {reason}"
    logger.warning("graph_ascend: %s (the answer is aborted)", reason)
    return DownloadCutShort(f"graph_ascend: {reason}", reason)


def content_disposition(file_name: str) -> str:
    """``attachment`` with an ASCII fallback name and the exact name as RFC 5987 UTF-8."""
    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\/;' else "_" for c in file_name)
    return f"attachment; filename=\"{ascii_name or 'download'}\"; filename*=UTF-8''{quote(file_name, safe='')}"


def download_response(head, body: Iterable[bytes]) -> Response:
    content_type = head.content_type or "application/octet-stream"
    resp = Response(body, status=200, content_type=content_type, direct_passthrough=True)
    resp.headers["Content-Disposition"] = content_disposition(head.file_name or "download")
    _common_headers(resp)
    return resp


def _serialize(message) -> bytes:
    return message.SerializeToString()


def unknown_outcome(route: Route, details: str) -> str:
    return (
        f"{route.name}: the graph-ascend sidecar stopped before answering ({details}), so this change may or may "
        "not have been applied; it was not sent again, so that it cannot be applied twice. Reload the graph to "
        "see the current state before trying again."
    )


def rpc_error(route: Route, exc) -> ShimError:
    code = exc.code()
    details = exc.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        return ShimError(503, f"{route.name}: the graph-ascend sidecar is unavailable: {details}", code.name)
    return ShimError(500, f"{route.name}: {details}", code.name)


# Responses ---------------------------------------------------------------------------------------


def _common_headers(resp: Response) -> None:
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Cache-Control"] = "no-cache"


def error_response(status: int, message: str, code: Optional[str] = None) -> Response:
    body = {"success": False, "error": message}
    if code:
        body["code"] = code
    resp = Response(
        json.dumps(body, ensure_ascii=False).encode("utf-8"),
        status=status,
        content_type="application/json; charset=utf-8",
    )
    _common_headers(resp)
    return resp


def _accepts_gzip(request: Optional[Request]) -> bool:
    if request is None:
        return False
    return "gzip" in request.headers.get("Accept-Encoding", "").lower()


# zlib level 1: three to four times faster than the default 6 on our answers (a 1.9 MB node list: 7 ms
# instead of 20 ms) for a third more bytes, which on the usual local or LAN link is the better trade.
GZIP_LEVEL = 1


def _gzip(chunks: Iterable[bytes]) -> Iterator[bytes]:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    for chunk in chunks:
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()


class PlainAnswer:
    """A 200 answer of one body, sent as it is: the WSGI call without werkzeug's ``Response``, whose
    header handling was a fifth of the shim's own time per request. The same headers as the other
    answers (``headers`` takes more, such as the write state, before it is called)."""

    __slots__ = ("body", "headers")

    def __init__(self, body: bytes, content_type: str):
        self.body = body
        self.headers = {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "Vary": "Accept-Encoding",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        }

    def __call__(self, environ, start_response):
        start_response("200 OK", list(self.headers.items()))
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.body]


def json_response(body: bytes, request: Optional[Request]):
    """A JSON answer the sidecar rendered: sent as it is (one body), or gzip-compressed in chunks."""
    if not _accepts_gzip(request):
        return PlainAnswer(body, "application/json; charset=utf-8")
    view = memoryview(body)
    chunks = (bytes(view[i : i + CHUNK_BYTES]) for i in range(0, len(body), CHUNK_BYTES))
    return _chunked_response(chunks, request, lines=False)


def lines_response(lines: Iterable[bytes]) -> Response:
    """An NDJSON answer, passed on line by line as the sidecar sends them."""
    return _chunked_response(lines, None, lines=True)


def _chunked_response(chunks: Iterable[bytes], request: Optional[Request], lines: bool) -> Response:
    gzipped = _accepts_gzip(request)
    if gzipped:
        chunks = _gzip(chunks)
    # A stream of lines is passed on as it comes; a JSON document is held back while it is small.
    head, rest = ([], iter(chunks)) if lines else _buffer_head(iter(chunks), INLINE_BODY_BYTES)
    resp = Response(
        head if rest is None else _chain(head, rest),
        status=200,
        content_type="application/x-ndjson" if lines else "application/json; charset=utf-8",
        direct_passthrough=True,
    )
    if rest is None:
        resp.headers["Content-Length"] = str(len(head[0]) if head else 0)
    if gzipped:
        resp.headers["Content-Encoding"] = "gzip"
    resp.headers["Vary"] = "Accept-Encoding"
    _common_headers(resp)
    return resp


def _buffer_head(chunks: Iterator[bytes], limit: int):
    """([joined first chunks], None) when everything fits in limit bytes, else ([first chunks], the rest)."""
    head = []
    size = 0
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > limit:
            return head, chunks
    return [b"".join(head)], None


def _chain(head, rest) -> Iterator[bytes]:
    yield from head
    yield from rest


def _ndjson_lines(call) -> Iterator[bytes]:
    try:
        for answer in call:
            yield answer + b"\n"
    finally:
        call.cancel()


def _pump(call, sink: queue.Queue) -> None:
    try:
        for message in call:
            sink.put(("message", message))
        sink.put(("end", None))
    except grpc.RpcError as exc:
        sink.put(("error", exc))
    except Exception as exc:  # deserialization problems end the stream with an error event
        sink.put(("error", exc))


def sse_events(call, heartbeat_s: float = HEARTBEAT_S) -> Iterator[bytes]:
    """One ``data: <json>`` event per message, as they come; a comment line when idle for heartbeat_s."""
    sink: queue.Queue = queue.Queue()
    pump = threading.Thread(target=_pump, args=(call, sink), name="graph-ascend-sse", daemon=True)
    pump.start()
    try:
        yield b": stream open\n\n"
        while True:
            try:
                kind, item = sink.get(timeout=heartbeat_s)
            except queue.Empty:
                yield b": heartbeat\n\n"
                continue
            if kind == "message":
                yield b"data: " + item + b"\n\n"
            elif kind == "error":
                if isinstance(item, grpc.RpcError) and item.code() == grpc.StatusCode.CANCELLED:
                    return
                detail = item.details() if isinstance(item, grpc.RpcError) else str(item)
                event = {"success": False, "status": "error", "error": [detail]}
                yield b"data: " + json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n\n"
                return
            else:
                return
    finally:
        call.cancel()


def sse_response(call) -> Response:
    resp = Response(sse_events(call), status=200, mimetype="text/event-stream", direct_passthrough=True)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["X-Accel-Buffering"] = "no"
    return resp
