#!/usr/bin/env python3
"""The import graph of a Rust crate, checked: no module imports from above it, no two import each other.

    python3 tools/check_imports.py --crate plugin/service [--crate plugin/proto ...]
    python3 tools/check_imports.py              # every crate under plugin/
    python3 tools/check_imports.py --report     # counts and violations, exit 0 (for measuring)

Each crate root of `<crate>/src` (lib.rs, main.rs, bin/*.rs) is read with the modules its `mod`
declarations reach (`x.rs` or `x/mod.rs`, `#[path]` honoured). An *import* is a path that names
something of the same crate from another module: a `use` of `crate::`, `super::`, `self::` or a
child module, or a `crate::`/`super::`/`self::` path written in code (comments, strings and
`pub(in ...)` are not imports). It reaches the deepest module the path names; an item re-exported
by the root reached through the root (`crate::State`) reaches the root, whatever defines it.

Two things are reported, and each makes the exit status non-zero:

- an *upward* import: a module importing from one of its ancestors (its parent, ..., the root);
- a *loop*: modules that import each other, directly or round a cycle. Imports are compared
  between siblings: an import from `a::x` of `b::y` is an edge `a -> b` between the children of
  the crate root, so a module and its submodules count as one on their parent's level; a loop
  at any level is reported (as the strongly connected component of that level's graph).

A parent declaring or re-exporting its child is not a violation (that is the way down). Test
modules (`#[cfg(test)] mod tests;` or `mod tests { ... }`) and any inline `mod x { ... }` count
as part of the module they are written in: `use super::*` in a test module imports nothing.

An allow-list (`--allow FILE`) names violations that must stay, one per line, each with its
reason after a `#`: `plugin/x: up a::b -> a` or `plugin/x: loop a <-> b` (the words printed for
the violation). There is none today; a line that matches nothing is itself an error, so the list
cannot go stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = ""  # the crate root's module path


# ---------------------------------------------------------------------------------------------
# Reading Rust: comments and literals blanked (newlines kept, so line numbers hold).


def strip_rust(text: str) -> str:
    """`text` with comments, strings and char literals replaced by spaces (newlines kept)."""
    out: list[str] = []
    i, n = 0, len(text)

    def blank(chunk: str) -> str:
        return "".join("\n" if c == "\n" else " " for c in chunk)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
        elif (m := re.compile(r'b?r(#*)"').match(text, i)) and not _ident_before(text, i):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            out.append(blank(text[i:j]))
            i = j
        elif (c == '"' or text.startswith('b"', i)) and not _ident_before(text, i):
            j = i + (2 if c == "b" else 1)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(blank(text[i:j]))
            i = j
        elif c == "'" or (text.startswith("b'", i) and not _ident_before(text, i)):
            # A char literal ('a', '\n', '\u{1F600}', b'x') or a lifetime ('a, 'static).
            m = re.compile(r"b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'").match(text, i)
            if m:
                out.append(blank(m.group(0)))
                i = m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _ident_before(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


# ---------------------------------------------------------------------------------------------
# The module tree.


@dataclass
class Module:
    path: str  # "a::b", "" for the crate root
    file: Path
    folded_into: str  # the module it counts as (itself, or the module a test/inline module is in)


@dataclass
class Import:
    source: str  # module (folded)
    target: str  # module reached (folded)
    item: str  # the path as resolved, "a::b::Item"
    file: Path
    line: int


@dataclass
class Tree:
    name: str  # "lib", "main", "bin/x"
    modules: dict[str, Module] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)


def join(parent: str, name: str) -> str:
    return f"{parent}::{name}" if parent else name


def parent_of(path: str) -> str:
    return path.rpartition("::")[0]


def is_ancestor(anc: str, mod: str) -> bool:
    """Whether `anc` is a proper ancestor of `mod` (the root is everyone's)."""
    if anc == mod:
        return False
    return anc == ROOT or mod.startswith(anc + "::")


MOD_RE = re.compile(r"\bmod\s+(r#)?([A-Za-z_]\w*)\s*([;{])")
USE_RE = re.compile(r"\buse\s+([^;]*);")
PATH_RE = re.compile(r"(?<![\w$:])(crate|super|self)((?:\s*::\s*[A-Za-z_]\w*)+)")
PUB_IN_RE = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")
PATH_ATTR_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(?:r#)?(\w+)\s*;')
CFG_TEST_RE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\s*\([^)]*\))?\s+)?$")


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def read_tree(name: str, root_file: Path) -> Tree:
    tree = Tree(name)
    # (module path, file, directory its children live in, the module it counts as)
    pending = [(ROOT, root_file, root_file.parent, ROOT)]
    sources: list[tuple[str, Path, str]] = []  # (module, file, stripped text)
    while pending:
        mod, file, child_dir, folded = pending.pop()
        tree.modules[mod] = Module(mod, file, folded)
        raw = file.read_text(encoding="utf-8")
        text = strip_rust(raw)
        sources.append((mod, file, text))
        path_attrs = {m.group(2): m.group(1) for m in PATH_ATTR_RE.finditer(raw)}
        spans = _inline_spans(text, mod, child_dir)
        for inline, _dir, _start, _end, parent, test in spans[1:]:
            # A test module counts as part of the module it tests, and so does all inside it; other
            # inline modules are their own.
            outer = tree.modules[parent]
            folds = test or outer.folded_into != outer.path
            tree.modules[inline] = Module(inline, file, outer.folded_into if folds else inline)
        for inline, inline_dir, start, end, _parent, _test in spans:
            for m in MOD_RE.finditer(text, start, end):
                if m.group(3) != ";" or _inside_nested(text, start, m.start()):
                    continue  # an inline module, or a declaration its own span reads
                child = join(inline, m.group(2))
                if m.group(2) in path_attrs:
                    child_file = (file.parent / path_attrs[m.group(2)]).resolve()
                    child_sub = child_file.parent
                else:
                    child_file, child_sub = _child_file(inline_dir, m.group(2))
                    if child_file is None:
                        continue  # generated at build time, or cfg'd away: nothing to read
                test = bool(CFG_TEST_RE.search(text[max(0, m.start() - 200) : m.start()]))
                outer = tree.modules[inline]
                folds = test or outer.folded_into != outer.path
                pending.append((child, child_file, child_sub, outer.folded_into if folds else child))
    for mod, file, text in sources:
        tree.imports.extend(_imports(tree, mod, file, text))
    return tree


def _child_file(directory: Path, name: str) -> tuple[Path | None, Path]:
    flat, nested = directory / f"{name}.rs", directory / name / "mod.rs"
    if flat.is_file():
        return flat, directory / name
    if nested.is_file():
        return nested, directory / name
    return None, directory / name


def _matching_brace(text: str, open_pos: int) -> int:
    depth = 0
    for j in range(open_pos, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def _inline_spans(text: str, mod: str, child_dir: Path):
    """The file's own module and every inline `mod x { ... }` in it, outer ones first:
    (module, child dir, start, end, enclosing module, whether it is a test module)."""
    spans = [(mod, child_dir, 0, len(text), None, False)]
    stack = [spans[0]]
    while stack:
        cur, cur_dir, start, end, _parent, _test = stack.pop()
        for m in MOD_RE.finditer(text, start, end):
            if m.group(3) != "{" or _inside_nested(text, start, m.start()):
                continue
            close = _matching_brace(text, m.end() - 1)
            test = bool(CFG_TEST_RE.search(text[max(0, m.start() - 200) : m.start()]))
            span = (join(cur, m.group(2)), cur_dir / m.group(2), m.end(), close, cur, test)
            spans.append(span)
            stack.append(span)
    return spans


def _inside_nested(text: str, start: int, pos: int) -> bool:
    """Whether `pos` is inside an inline module opened after `start` (that module reads it)."""
    depth_mods = 0
    for m in MOD_RE.finditer(text, start, pos):
        if m.group(3) == "{" and _matching_brace(text, m.end() - 1) > pos:
            depth_mods += 1
    return depth_mods > 0


def _module_at(tree: Tree, mod: str, text: str, pos: int, spans) -> str:
    """The innermost (inline) module whose span holds `pos`."""
    best, best_len = mod, len(text) + 1
    for name, _dir, start, end, _parent, _test in spans:
        if start <= pos < end and end - start < best_len:
            best, best_len = name, end - start
    return best


def _use_paths(tree_text: str) -> list[list[str]]:
    """The leaf paths of a use tree: `a::{b, c::{self, D}}` -> [a,b], [a,c], [a,c,D]; `*` ends a glob."""
    tokens = re.findall(r"::|[{},*]|[A-Za-z_]\w*", tree_text)
    pos = 0

    def parse(prefix: list[str]) -> list[list[str]]:
        nonlocal pos
        paths: list[list[str]] = []
        cur = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "::":
                pos += 1
            elif tok == "{":
                pos += 1
                paths.extend(parse_group(cur))
                return paths
            elif tok in ("}", ","):
                break
            elif tok == "*":
                pos += 1
                paths.append(cur)
                return paths
            elif tok == "as":
                pos += 2  # the alias
            elif tok == "self" and prefix and cur == prefix:
                pos += 1  # `{self, ...}`: the prefix itself
            else:
                cur.append(tok)
                pos += 1
        paths.append(cur)
        return paths

    def parse_group(prefix: list[str]) -> list[list[str]]:
        nonlocal pos
        paths: list[list[str]] = []
        while pos < len(tokens) and tokens[pos] != "}":
            if tokens[pos] == ",":
                pos += 1
                continue
            paths.extend(parse(prefix))
        pos += 1
        return paths

    return [p for p in parse([]) if p]


def _resolve(tree: Tree, mod: str, segs: list[str], relative_ok: bool) -> tuple[str, str] | None:
    """(module reached, item path) for a path written in `mod`, or None when not of this crate."""
    first = segs[0]
    if first == "crate":
        base, rest = ROOT, segs[1:]
    elif first in ("super", "self"):
        base, rest = mod, list(segs)
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = parent_of(base)
            rest = rest[1:]
    elif relative_ok and join(mod, first) in tree.modules:
        base, rest = mod, list(segs)
    else:
        return None  # another crate, the prelude, or an item of this module
    target = base
    for seg in rest:
        if join(target, seg) in tree.modules:
            target = join(target, seg)
        else:
            break
    # The item is named down to its first segment below the module (not an enum's variants).
    below = target[len(base) :].strip(":").split("::") if target != base else []
    item_segs = rest[: len([x for x in below if x]) + 1]
    item = "::".join(["crate", *([base] if base else []), *item_segs])
    return target, item


def _imports(tree: Tree, mod: str, file: Path, text: str) -> list[Import]:
    spans = _inline_spans(text, mod, Path())
    found: list[Import] = []
    skip: list[tuple[int, int]] = [(m.start(), m.end()) for m in PUB_IN_RE.finditer(text)]

    def add(where: str, pos: int, segs: list[str], relative_ok: bool) -> None:
        resolved = _resolve(tree, where, segs, relative_ok)
        if resolved is None:
            return
        target, item = resolved
        source = tree.modules[where].folded_into
        target = tree.modules[target].folded_into
        if source != target:
            found.append(Import(source, target, item, file, line_of(text, pos)))

    for m in USE_RE.finditer(text):
        if any(s <= m.start() < e for s, e in skip):
            continue
        skip.append((m.start(), m.end()))
        where = _module_at(tree, mod, text, m.start(), spans)
        body = re.sub(r"^\s*::", "", m.group(1))
        for segs in _use_paths(body):
            add(where, m.start(), segs, relative_ok=True)
    for m in PATH_RE.finditer(text):
        if any(s <= m.start() < e for s, e in skip):
            continue
        segs = [m.group(1), *re.findall(r"[A-Za-z_]\w*", m.group(2))]
        where = _module_at(tree, mod, text, m.start(), spans)
        add(where, m.start(), segs, relative_ok=False)
    return found


# ---------------------------------------------------------------------------------------------
# The checks.


@dataclass
class Report:
    crate: str
    imports: int = 0
    edges: int = 0
    upward: list[str] = field(default_factory=list)  # "up a::b -> a"
    upward_lines: dict[str, list[str]] = field(default_factory=dict)
    upward_imports: int = 0
    loops: list[str] = field(default_factory=list)  # "loop a <-> b"
    loop_lines: dict[str, list[str]] = field(default_factory=dict)


def sibling_edge(source: str, target: str) -> tuple[str, str, str] | None:
    """(parent, child on the source's side, child on the target's side), or None when one is the
    other's ancestor (a way down, or an upward import reported as such)."""
    if source == target or is_ancestor(source, target) or is_ancestor(target, source):
        return None
    s, t = source.split("::"), target.split("::")
    k = 0
    while s[k] == t[k]:
        k += 1
    parent = "::".join(s[:k])
    return parent, join(parent, s[k]), join(parent, t[k])


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def name(mod: str) -> str:
    return mod or "crate"


def rel(path: Path, base: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def check_tree(tree: Tree, report: Report, base: Path) -> None:
    prefix = "" if tree.name == "lib" else f"{tree.name}: "
    seen: set[tuple[str, str]] = set()
    edges: set[tuple[str, str]] = set()
    levels: dict[str, dict[str, set[str]]] = {}
    why: dict[tuple[str, str], list[Import]] = {}
    for imp in tree.imports:
        if (imp.source, imp.item) in seen:
            continue
        seen.add((imp.source, imp.item))
        report.imports += 1
        edges.add((imp.source, imp.target))
        where = f"{rel(imp.file, base)}:{imp.line}: {name(imp.source)} uses {imp.item}"
        if is_ancestor(imp.target, imp.source):
            key = f"{prefix}up {name(imp.source)} -> {name(imp.target)}"
            if key not in report.upward_lines:
                report.upward.append(key)
                report.upward_lines[key] = []
            report.upward_lines[key].append(where)
            report.upward_imports += 1
            continue
        sib = sibling_edge(imp.source, imp.target)
        if sib:
            parent, a, b = sib
            levels.setdefault(parent, {}).setdefault(a, set()).add(b)
            why.setdefault((a, b), []).append(imp)
    report.edges += len(edges)
    for _parent, graph in sorted(levels.items()):
        nodes = set(graph) | {b for bs in graph.values() for b in bs}
        for comp in strongly_connected(nodes, graph):
            key = f"{prefix}loop " + " <-> ".join(comp)
            report.loops.append(key)
            lines = []
            for a in comp:
                for b in comp:
                    for imp in why.get((a, b), []):
                        lines.append(f"{rel(imp.file, base)}:{imp.line}: {name(imp.source)} uses {imp.item}")
            report.loop_lines[key] = lines


def crate_roots(crate: Path) -> list[tuple[str, Path]]:
    src = crate / "src"
    roots = []
    for name_, file in (("lib", src / "lib.rs"), ("main", src / "main.rs")):
        if file.is_file():
            roots.append((name_, file))
    bins = src / "bin"
    if bins.is_dir():
        for f in sorted(bins.glob("*.rs")):
            roots.append((f"bin/{f.stem}", f))
        for f in sorted(bins.glob("*/main.rs")):
            roots.append((f"bin/{f.parent.name}", f))
    return roots


def check_crate(crate: Path, base: Path) -> Report:
    report = Report(rel(crate, base))
    for tree_name, root_file in crate_roots(crate):
        check_tree(read_tree(tree_name, root_file), report, base)
    return report


def read_allow(path: Path) -> dict[str, str]:
    """`crate: violation  # reason` lines; the reason is required."""
    allowed: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        body, _, reason = line.partition("#")
        if not body.strip():
            continue
        if not reason.strip():
            raise SystemExit(f"{path}:{n}: an allowed violation needs its reason after '#'")
        allowed[" ".join(body.split())] = reason.strip()
    return allowed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crate", action="append", type=Path, help="a crate directory (repeatable)")
    ap.add_argument("--all", type=Path, metavar="DIR", help="every crate under DIR (default plugin/)")
    ap.add_argument("--allow", type=Path, help="allow-list of violations that must stay")
    ap.add_argument("--report", action="store_true", help="print counts and violations, exit 0")
    ap.add_argument("--quiet", action="store_true", help="only the violations")
    args = ap.parse_args(argv)
    base = Path.cwd().resolve()
    crates: list[Path] = list(args.crate or [])
    if args.all or not crates:
        top = args.all or Path("plugin")
        crates += sorted(p for p in top.iterdir() if (p / "Cargo.toml").is_file() and (p / "src").is_dir())
    allowed = read_allow(args.allow) if args.allow else {}
    used: set[str] = set()
    failed = False
    for crate in crates:
        if not crate_roots(crate):
            print(f"{crate}: no src/lib.rs, src/main.rs or src/bin/", file=sys.stderr)
            return 2
        report = check_crate(crate, base)
        upward = [k for k in report.upward if f"{report.crate}: {k}" not in allowed]
        loops = [k for k in report.loops if f"{report.crate}: {k}" not in allowed]
        used |= {f"{report.crate}: {k}" for k in report.upward + report.loops} & set(allowed)
        if not args.quiet or upward or loops:
            print(
                f"{report.crate}: {report.imports} imports between {report.edges} pairs of modules; "
                f"{report.upward_imports} upward (from {len(report.upward)} modules to an ancestor), "
                f"{len(report.loops)} loops"
            )
        for key in upward:
            print(f"  {key}")
            for where in report.upward_lines[key]:
                print(f"    {where}")
        for key in loops:
            print(f"  {key}")
            for where in report.loop_lines[key]:
                print(f"    {where}")
        failed |= bool(upward or loops)
    stale = set(allowed) - used
    for key in sorted(stale):
        print(f"allow-list entry matches nothing (remove it): {key}")
    if args.report:
        return 0
    return 1 if failed or stale else 0


if __name__ == "__main__":
    sys.exit(main())
