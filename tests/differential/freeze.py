"""Freezes generated cases with msprobe's output, for the offline test (`make test`).

For each seed: generates the case into `cases/seed_<N>/` (dump folders and `case.json`), points
`dump_data_dir` at a neutral path (both tools then read `<folder>/dump_tensor_data`, as msprobe does
for moved dumps), runs msprobe graph_visualize (the oracle, imported once) and stores its output as
`msprobe.vis.db.xz`, or, for `--file_type json`, its JSON files as one document
`msprobe.json.xz` (`{"<path in the output folder>": <the file's JSON>, ...}`, in path order);
when msprobe refuses the input, its error goes into `case.json` instead.
The Rust test `plugin/cli/tests/differential.rs` runs ours on every frozen case and compares.

Usage: python freeze.py SEED [SEED ...]   (run with the oracle venv's python)
A seed of another generator than `default` is written KIND:SEED (e.g. `parallel:200003`) and
frozen as `cases/<kind>_<N>/`.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import shutil
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import driver  # noqa: E402
import gen_case  # noqa: E402

CASES = os.path.join(HERE, "cases")


def neutral_dump_dirs(root: str):
    for dirpath, _dirs, files in os.walk(root):
        if "dump.json" in files:
            p = os.path.join(dirpath, "dump.json")
            with open(p) as f:
                d = json.load(f)
            if d.get("dump_data_dir"):
                rel = os.path.relpath(dirpath, root)
                d["dump_data_dir"] = f"/data/dumps/{os.path.basename(root)}/{rel}/dump_tensor_data"
                with open(p, "w") as f:
                    json.dump(d, f, indent=1)


def settle_wal(db: str):
    """Writes what is still in the `.vis.db`'s write-ahead log into the file itself: msprobe's
    database is in WAL mode, and the connection that wrote the communication links
    (`distributed_analyse`) may still be open, so that a copy of the file alone would lack them."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def store_json_output(out_dir: str, xz: str):
    """The `.json` files of a `--file_type json` output as one JSON document, compressed."""
    with lzma.open(xz, "wt", preset=9) as dst:
        json.dump(driver.read_json_output(out_dir), dst)


def freeze(oracle: driver.Oracle, seed: int, versions: dict, torch_ok: bool, kind: str = "default"):
    name = f"seed_{seed}" if kind == "default" else f"{kind}_{seed}"
    root = os.path.join(CASES, name)
    shutil.rmtree(root, ignore_errors=True)
    case = gen_case.make_case(seed, root, torch_ok=torch_ok, kind=kind)
    neutral_dump_dirs(root)
    argv = driver.case_argv(case, root)
    out = os.path.join("/tmp", f"freeze_{name}")
    shutil.rmtree(out, ignore_errors=True)
    db, log = oracle.run(argv, out)
    case["oracle"] = versions
    if db is None:
        errors = [line for line in log.splitlines() if "[ERROR]" in line and "CANN" not in line]
        case["msprobe_error"] = errors[0].split("[ERROR]", 1)[1].strip() if errors else log.splitlines()[0]
    elif os.path.isdir(db):
        store_json_output(db, os.path.join(root, "msprobe.json.xz"))
    else:
        settle_wal(db)
        with open(db, "rb") as src, lzma.open(os.path.join(root, "msprobe.vis.db.xz"), "wb", preset=9) as dst:
            shutil.copyfileobj(src, dst)
    shutil.rmtree(out, ignore_errors=True)
    with open(os.path.join(root, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(name, case["mode"], case["options"], "refused" if db is None else "ok")


def main():
    oracle = driver.Oracle()
    versions = driver.oracle_versions()
    torch_ok = gen_case.torch is not None
    for s in sys.argv[1:]:
        kind, _, seed = s.rpartition(":")
        freeze(oracle, int(seed), versions, torch_ok, kind or "default")


if __name__ == "__main__":
    main()
