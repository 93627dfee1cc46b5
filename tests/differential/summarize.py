"""Summarizes a driver results file: cases per kind, mode and result, differences grouped by rule.

A difference's rule is its signature: the column (or `stack`, `only in left/right`) and, for
`Err_message`, the messages that one side has and the other has not; for node-data fields the
field name. Each rule is shown with its count of cases and a minimal example (the case with the
fewest differing lines).

Usage: python summarize.py [--strict] results.jsonl [more.jsonl ...]
(--strict: exit status 1 when any case does not agree with msprobe; the differences expected
until the converter implements them, `expected_structure` and `expected_recompute`, and the
written departures `departure_root_apis` and `departure_detached_links` (FINDINGS.md) are listed
but do not fail it)
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict

LINE = re.compile(r"^\[(?P<side>\w+) step \d+ rank \d+\] (?P<node>\S+): (?P<rest>.*)$")


def signature(line: str) -> str | None:
    m = LINE.match(line)
    if not m:
        if line.startswith("tb_config"):
            return "tb_config." + line.split(":", 1)[0].split(".", 1)[1]
        return None
    rest = m["rest"]
    side = m["side"]
    if rest.startswith("stack differs"):
        return f"{side}: stack text"
    if rest.startswith("only in"):
        return f"{side}: row {rest}"
    em = re.match(
        r"(?P<col>\w+)(?::\s*|\.)(?P<path>[^:]*?): (?P<what>only in (?:left|right)|left (?P<l>.*) / right (?P<r>.*))$",
        rest,
    )
    if em and em["path"]:
        field = em["path"].rsplit(".", 1)[-1]
        if em["what"].startswith("only in"):
            return f"{side} {em['col']}: keys {em['what']} (ours=left)"
        if field == "Err_message":
            try:
                left = set(json.loads(json.loads(em["l"])))
                right = set(json.loads(json.loads(em["r"])))
                only_ours, only_theirs = sorted(left - right), sorted(right - left)
                return f"{side} {em['col']} Err_message: ours-only {only_ours} msprobe-only {only_theirs}"
            except Exception:
                return f"{side} {em['col']} Err_message"
        return f"{side} {em['col']}.{field}"
    col = rest.split(":", 1)[0]
    return f"{side} {col}"


def main():
    strict = "--strict" in sys.argv[1:]
    recs = []
    for path in [a for a in sys.argv[1:] if a != "--strict"]:
        with open(path) as f:
            recs += [json.loads(line) for line in f if line.strip()]
    by_mode = Counter()
    by_result = Counter()
    by_kind: dict = defaultdict(Counter)
    rules: dict = defaultdict(list)
    for r in recs:
        by_kind[r.get("kind", "default")][r["result"]] += 1
        key = (
            r.get("kind", "default"),
            r.get("mode"),
            "compare" if r.get("compare") else "build",
            r.get("framework_target"),
            r.get("framework_golden") if r.get("compare") else "",
        )
        by_mode[key] += 1
        by_result[r["result"]] += 1
        if r["result"] == "different":
            sigs = {s for s in (signature(x) for x in r.get("diff", [])) if s}
            for s in sigs:
                example = next(x for x in r["diff"] if signature(x) == s)
                rules[s].append((len(r.get("diff", [])), r, example))
        elif r["result"] in ("oracle_failed_ours_ok", "ours_failed_oracle_ok", "harness_error"):
            err = (r.get("oracle_error") or r.get("our_error") or r.get("error") or "").strip()
            errs = [x for x in err.splitlines() if "[ERROR]" in x]
            msg = errs[0].split("[ERROR]", 1)[1].strip()[:140] if errs else err.splitlines()[0][:140] if err else ""
            rules[f"{r['result']}: {msg}"].append((0, r, ""))
    print(f"cases: {len(recs)}")
    print("results:", dict(by_result))
    print("results per kind:")
    for k, v in sorted(by_kind.items()):
        print(f"  {k}: {sum(v.values())} {dict(v)}")
    expected = [r for r in recs if r["result"].startswith(("expected_", "departure_"))]
    if expected:
        print("expected until the converter implements them (re-run these seeds then), and departures:")
        for res in sorted({r["result"] for r in expected}):
            seeds = [r["seed"] for r in expected if r["result"] == res]
            print(f"  {res}: {len(seeds)} seed(s): {','.join(map(str, seeds[:40]))}{' …' if len(seeds) > 40 else ''}")
    print("cases per (generator, mode, compare or build, target framework, golden framework):")
    for k, v in sorted(by_mode.items(), key=lambda kv: -kv[1]):
        print(f"  {k}: {v}")
    print(f"rules ({len(rules)}):")
    for s, items in sorted(rules.items(), key=lambda kv: -len(kv[1])):
        _, ex, line = min(items, key=lambda x: x[0])
        print(f"- {len(items)} case(s): {s}")
        pair = f"{ex.get('framework_target')}->{ex.get('framework_golden')}"
        print(f"    minimal: seed {ex['seed']} mode {ex.get('mode')} {pair} options {ex.get('options')}")
        if line:
            print(f"    e.g. {line[:400]}")
    agreeing = (
        "equal",
        "both_failed",
        "expected_structure",
        "expected_recompute",
        "departure_root_apis",
        "departure_detached_links",
    )
    return 1 if strict and any(r["result"] not in agreeing for r in recs) else 0


if __name__ == "__main__":
    sys.exit(main())
