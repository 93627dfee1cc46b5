"""tools/check_imports.py on small made-up crates: what it must find, and what it must let pass."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import check_imports


def crate(root: Path, files: dict[str, str]) -> Path:
    """A crate directory with `src/<path>` holding each text."""
    for rel, text in files.items():
        path = root / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "Cargo.toml").write_text('[package]\nname = "x"\n', encoding="utf-8")
    return root


def run(capsys, *args: str) -> tuple[int, str]:
    code = check_imports.main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture
def check(tmp_path, monkeypatch, capsys):
    """Writes crate `c` (in a fresh current folder) and checks it: (exit status, output)."""
    monkeypatch.chdir(tmp_path)

    def write_and_check(files: dict[str, str], *args: str) -> tuple[int, str]:
        crate(tmp_path / "c", files)
        return run(capsys, "--crate", "c", *args)

    return write_and_check


CLEAN = {
    "lib.rs": "//! use crate::b::Y; in a comment\nmod a;\nmod b;\npub use a::X;\npub use b::Y;\n",
    "a.rs": 'use crate::b::Y;\npub struct X(Y);\nconst S: &str = "crate::X";\n',
    "b.rs": "pub struct Y;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::Y as Z;\n}\n",
}


def test_a_clean_crate_passes(check):
    code, out = check(CLEAN)
    assert code == 0, out
    assert "c: 3 imports between 3 pairs of modules; 0 upward" in out  # the root's two re-exports and a -> b
    assert "0 loops" in out


def test_an_import_through_the_root_is_upward(check):
    code, out = check({**CLEAN, "b.rs": "pub struct Y;\nfn f() -> crate::X { todo!() }\n"})
    assert code == 1
    assert "up b -> crate" in out
    assert "c/src/b.rs:2: b uses crate::X" in out


def test_a_child_importing_its_parent_is_upward(check):
    files = {
        "lib.rs": "mod h;\n",
        "h/mod.rs": "mod r;\nmod x;\npub(crate) fn shared() {}\n",
        "h/x.rs": "use super::shared;\nuse super::r::Ok;\n",
        "h/r.rs": "pub struct Ok;\n",
    }
    code, out = check(files)
    assert code == 1
    assert "up h::x -> h" in out
    assert "h::x uses crate::h::shared" in out
    assert "crate::h::r" not in out  # a sibling through `super::` is not upward


def test_a_loop_between_two_modules_is_found(check):
    files = {**CLEAN, "b.rs": "use crate::a::X;\npub struct Y;\n"}
    code, out = check(files)
    assert code == 1
    assert "loop a <-> b" in out


def test_a_loop_through_a_submodule_counts_on_the_parents_level(check):
    files = {
        "lib.rs": "mod a;\nmod b;\nmod c;\n",
        "a/mod.rs": "mod inner;\npub struct Z;\n",
        "a/inner.rs": "use crate::b::Y;\n",
        "b.rs": "pub struct Y;\nfn f() { let _ = crate::c::W; }\n",
        "c.rs": "pub struct W;\nuse crate::a::Z;\n",
    }
    code, out = check(files)
    assert code == 1
    assert "loop a <-> b <-> c" in out
    assert "up" not in out.split("\n", 1)[1]


def test_comments_strings_and_visibility_are_not_imports(check):
    files = {
        "lib.rs": "mod a;\npub struct X;\n",
        "a/inner.rs": "pub(in crate::a) struct P;\n",
        "a.rs": (
            "mod inner;\n"
            "/* use crate::X; /* nested */ crate::X */\n"
            'const T: &str = r#"use crate::X;"#;\n'
            "fn f<'a>(c: char) -> bool { c == '\"' }\n"
            "macro_rules! m { () => { $crate::X }; }\n"
        ),
    }
    code, out = check(files)
    assert code == 0, out


def test_the_allow_list_excuses_a_named_violation_and_must_not_go_stale(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    crate(tmp_path / "c", {**CLEAN, "b.rs": "use crate::X;\npub struct Y;\n"})
    allow = tmp_path / "allow.txt"
    allow.write_text("c: up b -> crate  # the generated code names it so\n", encoding="utf-8")
    assert run(capsys, "--crate", "c", "--allow", str(allow))[0] == 0
    allow.write_text(allow.read_text() + "c: loop a <-> b  # no longer there\n", encoding="utf-8")
    code, out = run(capsys, "--crate", "c", "--allow", str(allow))
    assert code == 1
    assert "matches nothing" in out
    allow.write_text("c: up b -> crate\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        run(capsys, "--crate", "c", "--allow", str(allow))


def test_every_crate_under_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    crate(tmp_path / "plugin" / "good", CLEAN)
    crate(tmp_path / "plugin" / "bad", {**CLEAN, "b.rs": "use crate::a::X;\npub struct Y;\n"})
    code, out = run(capsys, "--all", "plugin")
    assert code == 1
    assert "plugin/good:" in out and "plugin/bad:" in out
    assert run(capsys, "--all", "plugin", "--report")[0] == 0


def test_binaries_are_crates_of_their_own(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    files = {
        "main.rs": "mod cmd;\npub struct Opts;\n",
        "cmd.rs": "use crate::Opts;\n",
        "bin/tool.rs": "mod cmd2;\n",
    }
    crate(tmp_path / "c", files)
    (tmp_path / "c" / "src" / "bin" / "cmd2.rs").write_text("pub fn f() {}\n", encoding="utf-8")
    code, out = run(capsys, "--crate", "c")
    assert code == 1
    assert "main: up cmd -> crate" in out
