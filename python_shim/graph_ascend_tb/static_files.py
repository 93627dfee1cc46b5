"""Serving the built frontend (``static/``, written by Vite) under the plugin's route.

Names are joined safely (no absolute paths, no ``..``, no backslashes or NULs, and the resolved path must
stay inside the static root, symlinks included). Every answer carries a Content-Type and
``X-Content-Type-Options: nosniff``; HTML gets a Content-Security-Policy, because it is served outside
TensorBoard's plugin-entry document and its CSP. When the frontend was not built into the package, a
small ``index.js`` still renders a message in the tab instead of a blank frame.
"""

from __future__ import annotations

import os
from typing import Iterator, Optional

from werkzeug.wrappers import Response

STATIC_ENV = "GRAPH_ASCEND_STATIC_DIR"
DEFAULT_STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")

CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".map": "application/json; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".ico": "image/x-icon",
    ".webp": "image/webp",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}

# The page is same-origin with TensorBoard; everything it loads and fetches is relative to it.
HTML_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self'; "
    "object-src 'none'; base-uri 'self'; frame-ancestors 'self'"
)

FALLBACK_INDEX_JS = b"""// graph-ascend: the frontend was not built into this package (graph_ascend_tb/static is empty).
export function render() {
  const p = document.createElement('pre');
  p.style.cssText = 'font: 14px sans-serif; padding: 24px; white-space: pre-wrap; color: #b00020';
  p.textContent = 'GRAPH_ASCEND: the page assets are missing from the installed graph-ascend package ' +
    '(graph_ascend_tb/static/index.js). Build the frontend (make install) and reinstall the package.';
  document.body.appendChild(p);
}
"""

CHUNK = 256 * 1024


def static_root() -> str:
    return os.environ.get(STATIC_ENV) or DEFAULT_STATIC_DIR


def safe_join(root: str, name: str) -> Optional[str]:
    """The file for a URL path below root, or None when the name is unsafe or not a regular file."""
    if not name or "\\" in name or "\x00" in name:
        return None
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):  # also refuses absolute and non-normal names
        return None
    real_root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(real_root, *parts))
    if os.path.commonpath([real_root, path]) != real_root:
        return None
    return path if os.path.isfile(path) else None


def content_type(path: str) -> str:
    _, ext = os.path.splitext(path)
    return CONTENT_TYPES.get(ext.lower(), "application/octet-stream")


def _read_chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            yield chunk


def serve(name: str, method: str = "GET") -> Optional[Response]:
    """The response for a static name, or None when there is no such asset."""
    root = static_root()
    path = safe_join(root, name)
    if path is None:
        if name == "index.js" and not os.path.isfile(os.path.join(root, "index.js")):
            return _response(FALLBACK_INDEX_JS, "text/javascript; charset=utf-8", no_cache=True)
        return None
    ctype = content_type(path)
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    # Hashed bundles under assets/ never change; index.js and index.html must be re-read on upgrade.
    immutable = name.startswith("assets/")
    body = [] if method == "HEAD" else _read_chunks(path)
    resp = Response(body, status=200, content_type=ctype, direct_passthrough=True)
    resp.headers["Content-Length"] = str(size)
    _headers(resp, ctype, no_cache=not immutable)
    return resp


def _response(body: bytes, ctype: str, no_cache: bool) -> Response:
    resp = Response(body, status=200, content_type=ctype)
    _headers(resp, ctype, no_cache)
    return resp


def _headers(resp: Response, ctype: str, no_cache: bool) -> None:
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Cache-Control"] = "no-cache" if no_cache else "public, max-age=31536000, immutable"
    if ctype.startswith("text/html"):
        resp.headers["Content-Security-Policy"] = HTML_CSP
        resp.headers["X-Frame-Options"] = "SAMEORIGIN"
