"""Differential driver: msprobe graph_visualize (the oracle) against `graph-ascend convert`.

One long-lived Python process imports msprobe's graph_visualize entry point once and runs many
generated cases (msprobe's start-up costs seconds). For each seed it generates a case
(`gen_case.make_case`), runs msprobe and ours on the same input with the same options, and compares
the two `.vis.db` files with `graph-ascend diff-visdb`. One JSON line per case goes to
`--results` (seed, mode, options, oracle status, our status, diff summary).

Usage:
  python driver.py --bin target/release/graph-ascend --seeds 0:1000 --work /tmp/diff \
      --results results.jsonl [--keep-failing DIR] [--keep-all] [--kinds structure,recompute]

`--kinds` (default: all of `gen_case.KINDS`) chooses the generators; seed N gets kind
`kinds[N % len(kinds)]`. A `--file_type json` case compares the JSON files both tools write
(`step<S>/rank<R>/{construct,dump,stack}.json`) instead of a `.vis.db`. A recompute case that
differs is run through msprobe once more with `_handle_recompute` switched off, and its line says
whether ours equals that run (`equal_without_recompute`: the difference is in the re-parenting).

Run it under coverage.py to measure which lines of msprobe the cases reach:
  coverage run --include='*/msprobe/visualization/*,*/msprobe/core/compare/*' driver.py ...
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_case


def oracle_versions() -> dict:
    from importlib.metadata import version

    out = {}
    for pkg in ("mindstudio-probe", "numpy", "torch"):
        try:
            out[pkg] = version(pkg)
        except Exception:
            out[pkg] = None
    return out


class Oracle:
    """msprobe's graph_visualize, imported once."""

    def __init__(self):
        from msprobe.visualization import graph_service

        self.gs = graph_service
        self.parser = argparse.ArgumentParser()
        graph_service._graph_service_parser(self.parser)
        logging.getLogger().setLevel(logging.ERROR)

    def run(self, argv: list[str], out_dir: str, recompute: bool = True) -> tuple[str | None, str]:
        """Runs one conversion; returns (path of the .vis.db, or of the output folder for
        `--file_type json`, or None; captured log). `recompute=False` runs it with msprobe's
        `_handle_recompute` switched off."""
        os.makedirs(out_dir, exist_ok=True)
        args = self.parser.parse_args([*argv, "-o", out_dir])
        buf = io.StringIO()
        err = None
        from msprobe.visualization.builder.graph_builder import GraphBuilder

        handle_recompute = GraphBuilder.__dict__["_handle_recompute"]
        if not recompute:
            GraphBuilder._handle_recompute = staticmethod(lambda graph, stack_dict: None)
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                self.gs._graph_service_command(args)
            except BaseException as e:  # SystemExit from msprobe's own error paths too
                err = f"{type(e).__name__}: {e}"
            finally:
                GraphBuilder._handle_recompute = handle_recompute
        dbs = [f for f in os.listdir(out_dir) if f.endswith(".vis.db")]
        if not dbs and json_files(out_dir):
            dbs = ["."]
        errors = [x for x in buf.getvalue().splitlines() if "[ERROR]" in x and "CANN environment" not in x]
        log = "\n".join(errors[:20])
        if err or not dbs:
            return None, (err or "no .vis.db written") + "\n" + log
        return os.path.join(out_dir, dbs[0]), log


def json_files(out_dir: str) -> list[str]:
    """The `.json` files of a `--file_type json` output, relative to it."""
    out = []
    for dirpath, _dirs, files in os.walk(out_dir):
        out += [os.path.relpath(os.path.join(dirpath, f), out_dir) for f in files if f.endswith(".json")]
    return sorted(out)


def ours(binary: str, argv: list[str], out_dir: str) -> tuple[str | None, str]:
    os.makedirs(out_dir, exist_ok=True)
    p = subprocess.run([binary, "convert", *argv, "-o", out_dir], capture_output=True, text=True, timeout=300)
    dbs = [f for f in os.listdir(out_dir) if f.endswith(".vis.db")]
    if not dbs and p.returncode == 0 and json_files(out_dir):
        dbs = ["."]
    if p.returncode != 0 or not dbs:
        return None, (p.stderr or p.stdout)[-2000:]
    return os.path.join(out_dir, dbs[0]), ""


def diff(binary: str, a: str, b: str) -> tuple[bool, list[str]]:
    if os.path.isdir(a) and os.path.isdir(b):
        return diff_json_outputs(a, b)
    p = subprocess.run([binary, "diff-visdb", a, b, "--max", "200"], capture_output=True, text=True, timeout=300)
    lines = p.stdout.strip().splitlines()
    return p.returncode == 0, lines


def json_value_diff(path: str, a, b, out: list[str], tol: float = 1e-6, limit: int = 200):
    """Differences between two JSON values (numbers within a relative tolerance), as lines (at most
    about `limit`). The Rust test `plugin/cli/tests/differential.rs` counts them the same way."""
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b) and set(a) == set(b):
            out.append(f"{path}: key order differs")
        for k in a:
            if k not in b:
                out.append(f"{path}.{k}: only in left (ours)")
            else:
                json_value_diff(f"{path}.{k}", a[k], b[k], out, tol, limit)
        out += [f"{path}.{k}: only in right (msprobe)" for k in b if k not in a]
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} / {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            json_value_diff(f"{path}[{i}]", x, y, out, tol, limit)
    elif (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and type(a) is type(b)
    ):
        if a != b and not (a != a and b != b) and abs(a - b) > tol * max(abs(a), abs(b)):
            out.append(f"{path}: left {a!r} / right {b!r}")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: left {json.dumps(a)[:200]} / right {json.dumps(b)[:200]}")


def read_json_output(out_dir: str) -> dict:
    """The `.json` files of a `--file_type json` output: path in it -> the file's JSON."""
    files = {}
    for f in json_files(out_dir):
        with open(os.path.join(out_dir, f)) as a:
            files[f] = json.load(a)
    return files


def diff_json_documents(mine: dict, theirs: dict, limit: int = 200) -> list[str]:
    """The differences of two `--file_type json` outputs (path -> JSON), as lines."""
    lines: list[str] = []
    lines += [f"{f}: only in left (ours)" for f in mine if f not in theirs]
    lines += [f"{f}: only in right (msprobe)" for f in theirs if f not in mine]
    for f in mine:
        if f in theirs:
            json_value_diff(f, mine[f], theirs[f], lines, limit=limit)
    return lines


def diff_json_outputs(ours_dir: str, theirs_dir: str) -> tuple[bool, list[str]]:
    """Compares the `--file_type json` outputs: the same files, each the same JSON."""
    lines = diff_json_documents(read_json_output(ours_dir), read_json_output(theirs_dir))
    return not lines, lines[:200]


def full_merger_sides(case: dict) -> bool:
    """Whether a side of a parallel case merges through msprobe's FullMerger (tp > 1, pp > 1 and
    data parallel > 1): the merge of departure 21 in FINDINGS.md."""
    for side in (case.get("layouts") or {}).values():
        rank_size, tp, pp, _vpp = side["layout"]
        if tp > 1 and pp > 1 and tp * pp != rank_size:
            return True
    return False


def departure_root_apis(case: dict, lines: list[str], ours_db: str) -> bool:
    """Departure 21 (FINDINGS.md): after a FullMerger merge msprobe matches a root-level API of an
    `Apis_Between_Modules_Rank<k>` collection through another TP rank's node of the same id.
    True when every differing node is such a collection or an API in one (in our file), and
    nothing else differs but a structure file's tb_config."""
    import re
    import sqlite3

    if not full_merger_sides(case):
        return False
    if os.path.isdir(ours_db):
        return departure_root_apis_json(lines, ours_db)
    with contextlib.closing(sqlite3.connect(ours_db)) as db:
        in_collections = {
            (src, step, rank, name)
            for src, step, rank, name, up in db.execute(
                "SELECT data_source, step, rank, node_name, up_node FROM tb_nodes"
            )
            if name.startswith("Apis_Between_Modules_Rank") or (up or "").startswith("Apis_Between_Modules_Rank")
        }
    node_line = re.compile(r"^\[(\w+) step (\d+) rank (\d+)\] (\S+): ")
    seen = False
    for x in lines:
        m = node_line.match(x)
        if m:
            if (m[1], int(m[2]), int(m[3]), m[4]) not in in_collections:
                return False
            seen = True
        elif not (x.startswith("tb_config") and case.get("mode") == "structure") and "difference" not in x:
            return False
    return seen


def departure_root_apis_json(lines: list[str], ours_dir: str) -> bool:
    """Departure 21 in a `--file_type json` output: every differing line is about an API that our
    construct.json puts in an `Apis_Between_Modules_Rank<k>` collection."""
    prefixes = []
    for f in json_files(ours_dir):
        if f.endswith("construct.json"):
            with open(os.path.join(ours_dir, f)) as c:
                construct = json.load(c)
            folder = os.path.dirname(f)
            prefixes += [
                f"{folder}/{name}.data.{node}."
                for node, up in construct.items()
                if (up or "").startswith("Apis_Between_Modules_Rank")
                for name in ("dump.json", "stack.json")
            ]
    return bool(lines) and all(x.startswith(tuple(prefixes)) for x in lines)


def departure_detached_links(lines: list[str], ours_db: str, theirs_db: str) -> bool:
    """Departure 32 (FINDINGS.md): msprobe links target nodes to golden nodes that its VPP chunk
    fold detached from the golden graph (left in `node_map`, never written). True when every
    differing line is a target `matched_node_link` that ours leaves empty and whose msprobe link
    ends in an id that is no golden node of that step and rank in msprobe's own file."""
    import re
    import sqlite3

    if os.path.isdir(ours_db) or not lines:
        return False
    total = re.match(r"(\d+) difference", lines[-1])
    if not total or int(total[1]) != len(lines) - 1:
        return False  # the lines shown are not all of them
    link_line = re.compile(r'^\[NPU step (\d+) rank (\d+)\] \S+: matched_node_link: left "\[\]" / right (".*")$')
    with contextlib.closing(sqlite3.connect(theirs_db)) as db:
        for x in lines[:-1]:
            m = link_line.match(x)
            if not m:
                return False
            link = json.loads(json.loads(m[3]))
            if not link:
                return False
            held = db.execute(
                "SELECT 1 FROM tb_nodes WHERE data_source = 'Bench' AND step = ? AND rank = ? AND node_name = ?",
                (int(m[1]), int(m[2]), link[-1]),
            ).fetchone()
            if held:
                return False
    return True


def case_argv(case: dict, root: str) -> list[str]:
    argv = ["-tp", os.path.join(root, case["target"])]
    if case.get("golden"):
        argv += ["-gp", os.path.join(root, case["golden"])]
    # a -lm YAML mapping is written inside the case folder
    return argv + [os.path.join(root, o) if o.endswith(".yaml") else o for o in case["options"]]


def run_seed(oracle: Oracle, binary: str, seed: int, work: str, torch_ok: bool, kind: str = "default") -> dict:
    root = os.path.join(work, f"case_{seed}")
    shutil.rmtree(root, ignore_errors=True)
    case = gen_case.make_case(seed, root, torch_ok=torch_ok, kind=kind)
    argv = case_argv(case, root)
    t0 = time.time()
    theirs, log_t = oracle.run(argv, os.path.join(root, "out_msprobe"))
    t1 = time.time()
    mine, log_o = ours(binary, argv, os.path.join(root, "out_ours"))
    t2 = time.time()
    rec = dict(case)
    rec.update({"oracle_s": round(t1 - t0, 3), "ours_s": round(t2 - t1, 3)})
    if theirs is None and mine is None:
        rec["result"] = "both_failed"
        rec["oracle_error"] = log_t[:1500]
        rec["our_error"] = log_o.strip().splitlines()[-1] if log_o.strip() else ""
    elif theirs is None:
        rec["result"] = "oracle_failed_ours_ok"
        rec["oracle_error"] = log_t[:1500]
    elif mine is None:
        rec["result"] = "ours_failed_oracle_ok"
        rec["our_error"] = log_o[-1500:]
    else:
        equal, lines = diff(binary, mine, theirs)
        rec["result"] = "equal" if equal else "different"
        if not equal:
            rec["diff"] = lines[:60]
            if kind == "parallel" and departure_root_apis(case, lines, mine):
                rec["result"] = "departure_root_apis"
            elif kind == "parallel" and departure_detached_links(lines, mine, theirs):
                rec["result"] = "departure_detached_links"
            elif kind == "recompute":
                # a hint for the reader: is it the re-parenting that differs?
                plain, _ = oracle.run(argv, os.path.join(root, "out_msprobe_no_recompute"), recompute=False)
                if plain is not None:
                    rec["equal_without_recompute"] = diff(binary, mine, plain)[0]
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seeds", required=True, help="A:B (half-open range) or comma list")
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--keep-failing", help="copy every case that is not equal here")
    ap.add_argument("--keep-all", action="store_true", help="leave every case folder in --work")
    ap.add_argument("--no-torch", action="store_true", help="never generate PyTorch tensor-mode cases")
    ap.add_argument(
        "--until", help="stop starting new cases at this UTC time (HH:MM), e.g. to end a coverage run cleanly"
    )
    ap.add_argument(
        "--kinds",
        default=",".join(gen_case.KINDS),
        help=f"comma list of generators among {', '.join(gen_case.KINDS)}; seed N gets kinds[N %% len(kinds)]",
    )
    args = ap.parse_args()
    if ":" in args.seeds:
        a, b = args.seeds.split(":")
        seeds = range(int(a), int(b))
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in gen_case.KINDS]
    if unknown:
        ap.error(f"unknown kind(s) {unknown}: choose among {gen_case.KINDS}")
    torch_ok = gen_case.torch is not None and not args.no_torch
    oracle = Oracle()
    versions = oracle_versions()
    binary = os.path.abspath(args.bin)
    os.makedirs(args.work, exist_ok=True)
    counts: dict = {}
    with open(args.results, "a") as out:
        for seed in seeds:
            if args.until and time.strftime("%H:%M", time.gmtime()) >= args.until:
                break
            kind = kinds[seed % len(kinds)]
            try:
                rec = run_seed(oracle, binary, seed, args.work, torch_ok, kind)
            except Exception as e:  # a generator bug must not stop the run
                rec = {"seed": seed, "result": "harness_error", "error": f"{type(e).__name__}: {e}"}
            rec["kind"] = kind
            rec["oracle"] = versions
            out.write(json.dumps(rec) + "\n")
            out.flush()
            counts[rec["result"]] = counts.get(rec["result"], 0) + 1
            root = os.path.join(args.work, f"case_{seed}")
            if args.keep_failing and rec["result"] not in (
                "equal",
                "both_failed",
                "departure_root_apis",
                "departure_detached_links",
            ):
                dst = os.path.join(args.keep_failing, f"case_{seed}")
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(root, dst)
            if not args.keep_all:
                shutil.rmtree(root, ignore_errors=True)
            print(f"seed {seed}: {rec['result']}", file=sys.__stderr__, flush=True)
    print(json.dumps(counts), file=sys.__stderr__)


if __name__ == "__main__":
    main()
