"""The built frontend under the plugin route: safe names, content types, security headers."""

from __future__ import annotations

import pytest

from graph_ascend_tb import static_files


@pytest.fixture
def static_dir(tmp_path):
    root = tmp_path / "static"
    (root / "assets").mkdir(parents=True)
    (root / "index.js").write_text("export function render() { location.href = 'index.html'; }\n")
    (root / "index.html").write_text("<!doctype html><script type=module src=assets/app-1a2b.js></script>\n")
    (root / "assets" / "app-1a2b.js").write_text("console.log('app');\n")
    (root / "assets" / "app-1a2b.css").write_text("body { margin: 0 }\n")
    (root / "assets" / "font.woff2").write_bytes(b"wOF2\0\0")
    (tmp_path / "secret.txt").write_text("outside the static root")
    (root / "assets" / "escape.js").symlink_to(tmp_path / "secret.txt")
    return root


def test_safe_join_refuses_everything_outside(static_dir):
    assert static_files.safe_join(str(static_dir), "assets/app-1a2b.js") == str(static_dir / "assets" / "app-1a2b.js")
    for name in [
        "../secret.txt",
        "assets/../../secret.txt",
        "/etc/passwd",
        "assets\\app-1a2b.js",
        "assets/escape.js",
        "",
        ".",
        "assets",
        "index.js\x00.png",
        "assets//app-1a2b.js",
        "./index.js",
    ]:
        assert static_files.safe_join(str(static_dir), name) is None, name


def test_static_files_through_tensorboard(static_dir, tmp_path, tensorboard):
    tb = tensorboard(tmp_path, env={"GRAPH_ASCEND_STATIC_DIR": str(static_dir)})
    base = "data/plugin/graph_ascend/"
    expected = {
        "index.js": "text/javascript",
        "index.html": "text/html",
        "assets/app-1a2b.js": "text/javascript",
        "assets/app-1a2b.css": "text/css",
        "assets/font.woff2": "font/woff2",
    }
    for name, ctype in expected.items():
        answer = tb.get(base + name)
        assert answer.status == 200, name
        assert answer.content_type.startswith(ctype), (name, answer.content_type)
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.body == (static_dir / name).read_bytes()
    html = tb.get(base + "index.html")
    assert "default-src 'self'" in html.headers["Content-Security-Policy"]
    assert html.headers["Cache-Control"] == "no-cache"
    assert "immutable" in tb.get(base + "assets/app-1a2b.js").headers["Cache-Control"]
    for name in ["assets/escape.js", "..%2Fsecret.txt", "assets/%2e%2e/%2e%2e/secret.txt", "assets/missing.js"]:
        answer = tb.get(base + name)
        assert answer.status == 404, name
        assert b"outside the static root" not in answer.body


def test_index_js_without_a_built_frontend(tmp_path, tensorboard):
    empty = tmp_path / "empty-static"
    empty.mkdir()
    tb = tensorboard(tmp_path, env={"GRAPH_ASCEND_STATIC_DIR": str(empty)})
    answer = tb.get("data/plugin/graph_ascend/index.js")
    assert answer.status == 200 and answer.content_type.startswith("text/javascript")
    assert b"export function render()" in answer.body and b"make install" in answer.body
