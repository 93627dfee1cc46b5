"""Starting, watching and restarting the ``graph-ascend serve`` sidecar.

The launch contract copies TensorBoard's own data server (RustBoard): the sidecar writes
``<socket path>\\n`` to a ready file once it serves, writes the reason to an error file when start-up
fails, and exits when its standard input closes. We keep the stdin pipe open for TensorBoard's whole
life, so the sidecar dies with TensorBoard, even on SIGKILL (the kernel closes the pipe).

Start-up is lazy (first request, on a request thread), never on TensorBoard's main thread, and a failure
is remembered as a message for the browser rather than raised into TensorBoard. A dead sidecar is
noticed on the next request and started again.

Over the loopback TCP fallback (``GRAPH_ASCEND_TRANSPORT=tcp``), which every local user can reach, each
launch gets a fresh random token: written as the first line of the sidecar's standard input (never its
command line, which ``ps`` shows to everyone, nor its environment, which ``/proc/<pid>/environ`` keeps for the
life of the process) and sent as gRPC metadata on every call; the sidecar refuses calls without it.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from typing import List, Optional

import grpc

logger = logging.getLogger(__name__)

BINARY_ENV = "GRAPH_ASCEND_BINARY"
EXTRA_FLAGS_ENV = "GRAPH_ASCEND_SERVE_FLAGS"
TRANSPORT_ENV = "GRAPH_ASCEND_TRANSPORT"  # "unix" (default) or "tcp"
START_TIMEOUT_ENV = "GRAPH_ASCEND_START_TIMEOUT"
# The per-launch token over TCP: the metadata key the sidecar checks (it reads the token from stdin's first line).
TOKEN_METADATA = "x-graph-ascend-token"
BINARY_NAME = "graph-ascend"

# Generous limits: a whole node list or a big hierarchy can be one message.
MAX_MESSAGE_BYTES = 2**31 - 1
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.enable_http_proxy", 0),
    # grpc-core derives the HTTP/2 :authority of a unix: target from the socket path, which hyper (tonic)
    # rejects as malformed (RST_STREAM PROTOCOL_ERROR). The sidecar does not look at it; any host will do.
    ("grpc.default_authority", "localhost"),
    # Whole-graph answers are tens of MB: a big initial flow-control window and big frames halve the
    # time they take through the socket (grpc-core starts at 64 KB windows and 16 KB frames).
    ("grpc.http2.lookahead_bytes", 16 * 1024 * 1024),
    ("grpc.http2.max_frame_size", 4 * 1024 * 1024),
]
# Between two failed start attempts, requests get the remembered error instead of a new attempt.
RETRY_AFTER_FAILURE_S = 1.0


class SidecarError(Exception):
    """The sidecar is not available; the message is meant for the user."""


def installed_binary_candidates() -> List[str]:
    """Where the wheel puts ``graph-ascend``: the environment's scripts folder, then beside the interpreter.

    pip installs the wheel's binary into ``sysconfig.get_path("scripts")`` of the scheme it installed into
    (``<venv>/bin``, ``/usr/local/bin``, ``~/.local/bin`` for ``--user``). TensorBoard started as
    ``<venv>/bin/tensorboard`` without the venv activated has no such folder on PATH, so it is looked up
    directly. Duplicates are dropped; the order is the lookup order.
    """
    dirs = [sysconfig.get_path("scripts")]
    user_scheme = f"{os.name}_user"  # `pip install --user`
    if user_scheme in sysconfig.get_scheme_names():
        dirs.append(sysconfig.get_path("scripts", user_scheme))
    dirs.append(os.path.dirname(os.path.abspath(sys.executable)))
    seen, out = set(), []
    for d in dirs:
        if d and d not in seen:
            seen.add(d)
            out.append(os.path.join(d, BINARY_NAME))
    return out


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_binary() -> str:
    """The sidecar binary: $GRAPH_ASCEND_BINARY, else the one the wheel installed, else PATH."""
    env = os.environ.get(BINARY_ENV)
    if env:
        if _is_executable(env):
            return env
        raise SidecarError(f"{BINARY_ENV}={env} is not an executable file")
    installed = installed_binary_candidates()
    for candidate in installed:
        if _is_executable(candidate):
            return candidate
    found = shutil.which(BINARY_NAME)
    if found:
        return found
    raise SidecarError(
        f"the {BINARY_NAME} binary was not found (looked at ${BINARY_ENV}, {', '.join(installed)} and PATH); "
        "reinstall the graph-ascend wheel (pip install graph-ascend) or set " + BINARY_ENV
    )


def _read_text(path: str, limit: int = 64 * 1024) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit).strip()
    except OSError:
        return ""


def _target_from_ready(text: str) -> str:
    """The gRPC target for what the sidecar wrote to its ready file."""
    if text.startswith(("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:")):
        return text
    if text.startswith("/"):
        return "unix:" + text
    if text.isdigit():
        return f"127.0.0.1:{text}"
    return text  # host:port


_CALL_FIELDS = ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")


class _CallDetails(collections.namedtuple("_CallDetails", _CALL_FIELDS), grpc.ClientCallDetails):
    pass


class TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds the per-launch token to every call's metadata."""

    def __init__(self, token: str):
        self._pair = (TOKEN_METADATA, token)

    def _details(self, details):
        metadata = [*(details.metadata or ()), self._pair]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)


# The temporary folder of the ready and error files: ``graph_ascend_tb_<host>.<pid>.<random>``, the pid
# being TensorBoard's. A killed TensorBoard leaves it; the next sidecar of this host removes it once no
# process of that id exists here (``graph-ascend serve``, ``SHIM_TEMP_PREFIX``; the rule of
# ``graph_ascend_visdb::stale``, whose host part this spells the same way).
TEMP_PREFIX = "graph_ascend_tb_"
MAX_HOST_CHARS = 32


def temp_prefix() -> str:
    """``graph_ascend_tb_<host>.<pid>.``: the host name as ``stale::host`` writes it (letters, digits and
    ``-``, anything else ``_``, at most 32 characters), or ``unknown-host``."""
    try:
        with open("/proc/sys/kernel/hostname", encoding="utf-8", errors="replace") as f:
            raw = f.read().strip()
    except OSError:
        raw = ""
    host = "".join(c if (c.isascii() and c.isalnum()) or c == "-" else "_" for c in raw)[:MAX_HOST_CHARS]
    return f"{TEMP_PREFIX}{host or 'unknown-host'}.{os.getpid()}."


def uses_tcp() -> bool:
    return os.environ.get(TRANSPORT_ENV, "unix" if os.name == "posix" else "tcp") == "tcp"


class Sidecar:
    """One sidecar process for one logdir; thread-safe."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._stdin = None  # kept referenced: closing it stops the sidecar
        self._token: Optional[str] = None  # this launch's token over TCP (None over the Unix socket)
        self._tmpdir: Optional[str] = None
        self._channel: Optional[grpc.Channel] = None
        self._target: Optional[str] = None
        self._last_error: Optional[str] = None
        self._last_failure_at = 0.0
        # /proc/<pid>/stat of the running sidecar, open (None without procfs); see `_alive_locked`.
        self._stat_fd: Optional[int] = None
        self.starts = 0
        _LIVE.add(self)

    # --------------------------------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        proc = self._proc
        return proc.pid if proc is not None else None

    def alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None and not _exiting(proc.pid)

    def _alive_locked(self) -> bool:
        """:meth:`alive`, asked on every request: through the status file kept open since the start
        (opening ``/proc/<pid>/stat`` anew cost more than the rest of the shim's own work on a
        request). Under the lock, which the file is closed under too."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return False
        if self._stat_fd is None:
            return not _exiting(proc.pid)
        return not _state_exiting(_pread_state(self._stat_fd))

    def channel(self) -> grpc.Channel:
        """A channel to a running sidecar, starting (or restarting) it when needed."""
        with self._lock:
            if self._channel is not None and self._alive_locked():
                return self._channel
            if self._proc is not None:
                code = self._proc.poll()
                logger.warning(
                    "graph-ascend sidecar (pid %s) exited with status %s; restarting it", self._proc.pid, code
                )
                self._stop_locked()
            if self._last_error and time.monotonic() - self._last_failure_at < RETRY_AFTER_FAILURE_S:
                raise SidecarError(self._last_error)
            try:
                return self._start_locked()
            except SidecarError as exc:
                self._last_error = str(exc)
                self._last_failure_at = time.monotonic()
                self._stop_locked()
                raise

    def restart(self, reason: str) -> grpc.Channel:
        """Stops the sidecar and starts a fresh one."""
        with self._lock:
            logger.warning("restarting the graph-ascend sidecar: %s", reason)
            self._stop_locked()
            self._last_error = None
        return self.channel()

    def connection_broken(self, timeout: float = 1.0) -> bool:
        """Whether the sidecar is gone or its socket no longer answers (vs. an application-level error)."""
        if not self.alive():
            return True
        channel = self._channel
        if channel is None:
            return True
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return True
        return False

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    # --------------------------------------------------------------------------------------------

    def _command(self, binary: str, ready: str, error: str) -> List[str]:
        cmd = [
            binary,
            "serve",
            "--logdir",
            self.logdir,
            "--ready-file",
            ready,
            "--error-file",
            error,
            "--die-after-stdin",
        ]
        if uses_tcp():
            cmd += ["--tcp-port", "0"]
        extra = os.environ.get(EXTRA_FLAGS_ENV)
        if extra:
            cmd += shlex.split(extra)
        return cmd

    def _start_locked(self) -> grpc.Channel:
        if not self.logdir:
            raise SidecarError("TensorBoard was started without --logdir; GRAPH_ASCEND needs one")
        binary = find_binary()
        self._tmpdir = tempfile.mkdtemp(prefix=temp_prefix())
        ready = os.path.join(self._tmpdir, "ready")
        error = os.path.join(self._tmpdir, "startup_error")
        cmd = self._command(binary, ready, error)
        logger.info("starting the graph-ascend sidecar: %s", " ".join(shlex.quote(c) for c in cmd))
        token = secrets.token_urlsafe(32) if uses_tcp() else None
        self._token = token
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, close_fds=True)
        except OSError as exc:
            raise SidecarError(f"cannot run {binary}: {exc}") from exc
        if token is not None and proc.stdin is not None:
            try:
                proc.stdin.write(token.encode("ascii") + b"\n")
                proc.stdin.flush()
            except OSError:
                pass  # it died at once: reported below from its error file or status
        self._proc = proc
        self._stat_fd = _open_stat(proc.pid)
        self._stdin = proc.stdin
        self.starts += 1

        timeout = float(os.environ.get(START_TIMEOUT_ENV, "30"))
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            raw = _read_bytes(ready)
            if raw.endswith(b"\n") and raw.strip():
                break
            code = proc.poll()
            if code is not None:
                reason = _read_text(error) or f"exited with status {code} (see TensorBoard's stderr)"
                raise SidecarError(f"the graph-ascend sidecar failed to start: {reason}")
            if time.monotonic() > deadline:
                raise SidecarError(f"the graph-ascend sidecar did not become ready within {timeout:.0f} s")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

        target = _target_from_ready(raw.decode("utf-8", "replace").strip().splitlines()[0].strip())
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        try:
            grpc.channel_ready_future(channel).result(timeout=max(1.0, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            channel.close()
            raise SidecarError(f"the graph-ascend sidecar is not answering at {target}") from None
        if token is not None:
            channel = grpc.intercept_channel(channel, TokenInterceptor(token))
        self._channel = channel
        self._target = target
        self._last_error = None
        logger.info("graph-ascend sidecar (pid %s) serving at %s", proc.pid, target)
        return channel

    def _stop_locked(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            try:
                channel.close()
            except Exception:  # closing a broken channel must not stop the restart
                logger.debug("closing the sidecar channel failed", exc_info=True)
        proc, self._proc = self._proc, None
        stat_fd, self._stat_fd = self._stat_fd, None
        if stat_fd is not None:
            os.close(stat_fd)
        stdin, self._stdin = self._stdin, None
        if stdin is not None:
            try:
                stdin.close()
            except OSError:
                pass
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self._target = None


def _exiting(pid: int) -> bool:
    """Whether a child that ``poll()`` still reports running is already dying (Linux only).

    After SIGKILL the thread-group leader shows as a zombie a few milliseconds before the process can
    be reaped, while its other threads finish exiting; its socket is already closed by then. Without
    procfs this is False, and ``poll()`` alone decides.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _state_exiting(f.read())
    except OSError:
        return False


def _open_stat(pid: int) -> Optional[int]:
    """``/proc/<pid>/stat`` opened for :func:`_pread_state`, or None without procfs. The descriptor stays
    bound to that process: once it is reaped, reads fail, even if its pid is reused."""
    try:
        return os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _pread_state(fd: int) -> bytes:
    """The status line read afresh through a kept descriptor; empty once the process is gone."""
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return b""


def _state_exiting(stat: bytes) -> bool:
    """Whether a ``/proc/<pid>/stat`` line shows a zombie or dead process."""
    try:
        state = stat.rsplit(b")", 1)[1].split()[0]
    except IndexError:
        return False
    return state in (b"Z", b"X")


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(64 * 1024)
    except OSError:
        return b""


_LIVE: weakref.WeakSet[Sidecar] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for sidecar in list(_LIVE):
        try:
            sidecar.stop()
        except Exception:  # never turn interpreter exit into a traceback
            pass
