"""Who may write: the rule that guards the routes whose RPC carries ``write: true`` in the API's ``http`` option.

TensorBoard has no authentication and msprobe's docs tell users to start it with ``--bind_all``, so anyone
who reaches the port could start conversions and edit matches, and any web page open in the user's own
browser could POST to ``localhost:6006``. Reads stay open, as TensorBoard's are; a write is accepted only
when all of these hold:

- it comes from the loopback interface (127.0.0.0/8 or ::1): a browser on this machine, or VS Code's and
  SSH's port forwarding, which connect locally — and not through a proxy on this machine (no ``Forwarded``,
  ``X-Forwarded-For``, ``X-Forwarded-Host`` or ``X-Real-IP`` header), which would relay other machines;
- its ``Host`` names a loopback host (``localhost``, ``127.x.y.z``, ``[::1]``, any port): a page of another
  site whose name resolves to 127.0.0.1 (DNS rebinding) sends its own name;
- its ``Origin``, when present (browsers send one on every POST), is the origin ``Host`` names: a page of
  another site posting to localhost sends its own origin;
- it is a POST: a cross-site ``<img>`` or link is a GET without an ``Origin``.

Those rules keep out other machines and other sites' pages, but not another user of this machine: they can
send the same loopback request as the page. So a write must also carry this launch's secret token in
``X-Graph-Ascend-Token`` (compared in constant time). The plugin makes a fresh one at start and prints, in
TensorBoard's console, the link that gives it to the page (``#graph_ascend&graph_ascend_token=...``: in the
fragment, which a browser never sends to a server nor puts in a ``Referer``); the page keeps it and sends it
with every request. Anyone holding the link can write: it is a password, as Jupyter's is.

Teams behind a proxy they trust opt in with ``GRAPH_ASCEND_ALLOW_REMOTE_WRITES=1`` or TensorBoard's
``--graph_ascend_allow_remote_writes`` flag. Every API answer says in ``X-Graph-Ascend-Writes`` whether
writes would be accepted for that request, so that the page can show its read-only state.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import os
import secrets
from typing import Optional
from urllib.parse import urlsplit

ALLOW_ENV = "GRAPH_ASCEND_ALLOW_REMOTE_WRITES"
ALLOW_FLAG = "graph_ascend_allow_remote_writes"
STATE_HEADER = "X-Graph-Ascend-Writes"
HOW_TO_ALLOW = (
    f"to accept changes from other machines (a team behind a proxy it trusts), start TensorBoard with "
    f"{ALLOW_ENV}=1 or --{ALLOW_FLAG}"
)
# The per-launch write token: the request header that carries it, the page's URL parameter that hands it to
# the page, and the variable that fixes it (a launcher or a script that needs to know it in advance).
TOKEN_HEADER = "X-Graph-Ascend-Token"
TOKEN_PARAM = "graph_ascend_token"
TOKEN_ENV = "GRAPH_ASCEND_WRITE_TOKEN"
MIN_TOKEN_CHARS = 32
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Headers a reverse proxy adds: a request carrying one was relayed, whatever its peer address.
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP")


def allowed_by_env() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def loopback_address(address: Optional[str]) -> bool:
    """Whether a peer address (WSGI ``REMOTE_ADDR``) is on the loopback interface (IPv4-mapped too)."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def split_host(host: str) -> Optional[tuple]:
    """``Host`` header → (lowercase name without brackets, port or None); None when malformed."""
    try:
        parts = urlsplit("//" + host.strip())
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return name.lower().rstrip("."), port


def loopback_host(host: Optional[str]) -> bool:
    """Whether a ``Host`` header names this machine's loopback: localhost, 127.x.y.z or [::1]."""
    parsed = split_host(host or "")
    if parsed is None:
        return False
    name = parsed[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def same_origin(origin: str, host: str) -> bool:
    """Whether an ``Origin`` header names the host and port of a ``Host`` header.

    Schemes are not compared: behind a TLS-terminating forwarder the browser says https while TensorBoard
    sees http. A ``Host`` without a port means the origin scheme's default port."""
    try:
        parts = urlsplit(origin.strip())
        origin_port = parts.port
    except ValueError:
        return False
    wanted = split_host(host)
    if wanted is None or not parts.hostname or parts.scheme not in _DEFAULT_PORTS:
        return False
    if parts.path not in ("", "/") or parts.query or parts.username is not None:
        return False
    default = _DEFAULT_PORTS[parts.scheme]
    origin_port = origin_port or default
    host_port = wanted[1] or default
    return parts.hostname.lower().rstrip(".") == wanted[0] and origin_port == host_port


# Asked on every API request (its answer carries the write state): the same few peers and hosts come back
# again and again, and parsing their addresses was a sixth of the shim's own time per request.
# A pure function of its arguments; 64 entries of at most a few header lines each.
@functools.lru_cache(maxsize=64)
def write_refusal(
    remote_addr: Optional[str],
    host: Optional[str],
    origin: Optional[str],
    method: str,
    allow_remote: bool = False,
    forwarded: Optional[str] = None,
) -> Optional[str]:
    """Why a write request is refused (a sentence for the user), or None when it is accepted.

    ``forwarded`` is the first proxy header of the request ("X-Forwarded-For: 10.0.0.7"), if any."""
    if method != "POST":
        return f"changes are made with POST requests only (this was a {method})"
    if allow_remote:
        return None
    if not loopback_address(remote_addr):
        return (
            f"this TensorBoard accepts changes only from its own machine, and this request came from "
            f"{remote_addr or 'an unknown address'}; view from there, or through VS Code or SSH port "
            f"forwarding (ssh -L 6006:localhost:6006), or {HOW_TO_ALLOW}"
        )
    if forwarded:
        return (
            f"this TensorBoard accepts changes only from its own machine, and this request was relayed by a "
            f"proxy ({forwarded}); {HOW_TO_ALLOW}"
        )
    if not loopback_host(host):
        return (
            f"changes are accepted only for a loopback host name (localhost, 127.0.0.1, [::1]), and this "
            f"request names {host or 'no host'!r}; open the page as http://localhost:<port>/, or {HOW_TO_ALLOW}"
        )
    if origin is not None and not same_origin(origin, host or ""):
        return (
            f"changes are accepted only from this TensorBoard's own page, and this request came from a page "
            f"of {origin!r}; {HOW_TO_ALLOW}"
        )
    return None


def environ_refusal(environ, allow_remote: bool, method: Optional[str] = None) -> Optional[str]:
    """:func:`write_refusal` for a WSGI request (as if it were a ``method`` request, when given)."""
    return write_refusal(
        environ.get("REMOTE_ADDR"),
        environ.get("HTTP_HOST"),
        environ.get("HTTP_ORIGIN"),
        method or environ.get("REQUEST_METHOD", "GET"),
        allow_remote,
        proxy_header(environ),
    )


def proxy_header(environ) -> Optional[str]:
    """The first of ``PROXY_HEADERS`` a WSGI request carries, as ``"Name: value"``, or None."""
    for name in PROXY_HEADERS:
        value = environ.get("HTTP_" + name.upper().replace("-", "_"))
        if value is not None:
            return f"{name}: {value[:200]}"
    return None


def launch_token() -> tuple:
    """This launch's write token and, when ``$GRAPH_ASCEND_WRITE_TOKEN`` was unusable, why it was not used.

    A fresh 43-character secret (32 random bytes) unless the variable holds one of at least 32 characters."""
    fixed = os.environ.get(TOKEN_ENV, "").strip()
    if len(fixed) >= MIN_TOKEN_CHARS and fixed.isascii() and fixed.isprintable() and " " not in fixed:
        return fixed, None
    problem = None
    if fixed:
        problem = f"${TOKEN_ENV} is ignored: a token needs at least {MIN_TOKEN_CHARS} printable characters"
    return secrets.token_urlsafe(32), problem


def page_link(token: str, port, path_prefix: str) -> str:
    """The address that opens the page with the token (the port and prefix of TensorBoard's flags)."""
    prefix = "/" + (path_prefix or "").strip("/") if (path_prefix or "").strip("/") else ""
    return f"http://localhost:{port or '<port>'}{prefix}/#graph_ascend&{TOKEN_PARAM}={token}"


def token_refusal(sent: Optional[str], token: str) -> Optional[str]:
    """Why a write with the ``X-Graph-Ascend-Token`` value ``sent`` is refused, or None (constant time)."""
    how = (
        f"open the page through the link TensorBoard printed at start (its console shows "
        f"\"...#graph_ascend&{TOKEN_PARAM}=...\"); only who started TensorBoard can see it"
    )
    if not sent:
        return f"changes need this TensorBoard's access token, and this request carries none: {how}"
    if not hmac.compare_digest(sent.encode("utf-8", "replace"), token.encode("utf-8")):
        return f"the access token of this request is not this TensorBoard's (was it restarted?): {how}"
    return None
