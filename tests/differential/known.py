"""Writes `known_differences.json` from what our binary does on the frozen cases now.

For each `cases/seed_<N>/`: runs `graph-ascend convert` with the case's options, compares with
msprobe's stored output (`diff-visdb --ignore-dump-dir`, as the Rust test does; a `--file_type
json` case's JSON files as `driver.diff_json_documents` compares them, uncapped) and records the
cases that do not agree: outcome, number of differing lines, and the rules they hit (the
signatures of `summarize.py`). An entry's `reason` (why the case may differ: the rule of
FINDINGS.md, written by hand) is kept while the case still differs. Run it after freezing new cases
or fixing a rule, then review the change of the file like any other test expectation.

Usage: python known.py path/to/graph-ascend
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from driver import diff_json_documents, read_json_output  # noqa: E402
from summarize import signature  # noqa: E402


def run(binary: str, case_dir: str) -> dict | None:
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    tmp = tempfile.mkdtemp()
    try:
        argv = [binary, "convert", "-tp", os.path.join(case_dir, case["target"])]
        if case.get("golden"):
            argv += ["-gp", os.path.join(case_dir, case["golden"])]
        options = [os.path.join(case_dir, o) if o.endswith(".yaml") else o for o in case["options"]]
        argv += [*options, "-o", os.path.join(tmp, "ours")]
        p = subprocess.run(argv, capture_output=True, text=True)
        xz = os.path.join(case_dir, "msprobe.vis.db.xz")
        json_xz = os.path.join(case_dir, "msprobe.json.xz")
        if os.path.exists(json_xz):
            xz = json_xz
        if p.returncode != 0:
            if not os.path.exists(xz):
                return None
            return {"outcome": "ours_refused", "differences": 0, "rules": [p.stderr.strip().splitlines()[-1]]}
        if not os.path.exists(xz):
            return {
                "outcome": "ours_accepted_msprobe_refused",
                "differences": 0,
                "rules": [f"msprobe: {case.get('msprobe_error', '')}"],
            }
        ours_dir = os.path.join(tmp, "ours")
        if xz == json_xz:
            with lzma.open(xz, "rt") as src:
                theirs_json = json.load(src)
            lines = diff_json_documents(read_json_output(ours_dir), theirs_json, limit=10**9)
            if not lines:
                return None
            rules = sorted({s for s in (signature(x) for x in lines) if s})
            return {"outcome": "different", "differences": len(lines), "rules": rules}
        ours = next(os.path.join(ours_dir, f) for f in os.listdir(ours_dir) if f.endswith(".vis.db"))
        theirs = os.path.join(tmp, "msprobe.vis.db")
        with lzma.open(xz) as src, open(theirs, "wb") as dst:
            shutil.copyfileobj(src, dst)
        d = subprocess.run(
            [binary, "diff-visdb", ours, theirs, "--ignore-dump-dir", "--max", "100000"], capture_output=True, text=True
        )
        if d.returncode == 0:
            return None
        lines = d.stdout.strip().splitlines()
        total = int(re.match(r"(\d+) difference", lines[-1]).group(1))
        rules = sorted({s for s in (signature(x) for x in lines) if s})
        return {"outcome": "different", "differences": total, "rules": rules}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    binary = os.path.abspath(sys.argv[1])
    cases = os.path.join(HERE, "cases")
    path = os.path.join(HERE, "known_differences.json")
    with open(path) as f:
        reasons = {name: e["reason"] for name, e in json.load(f).items() if "reason" in e}
    known = {}
    for name in sorted(os.listdir(cases)):
        if os.path.exists(os.path.join(cases, name, "case.json")):
            r = run(binary, os.path.join(cases, name))
            if r:
                if name in reasons:
                    r["reason"] = reasons[name]
                known[name] = r
    with open(path, "w") as f:
        json.dump(known, f, indent=1)
        f.write("\n")
    print(f"{len(known)} known difference(s) written")


if __name__ == "__main__":
    main()
