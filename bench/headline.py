#!/usr/bin/env python3
"""The benchmarks' headline figures against their goals: one closing table for `make bench`.

Each bench script records the figures it measures as JSON lines in one file (HEADLINE, default
`$BENCH_OUT/headline.jsonl`, BENCH_OUT defaulting to bench/results; `make bench` clears it first), one
line per figure:

  {"row": id, "workload": words, "figure": number, "unit": text, "goal": text, "met": true|false|null,
   "load": 1-minute load average when the figure was taken, "date": UTC time, "vs": what the figure was
   measured against (msprobe's figure when there is one)}

or, for a figure a script could not take, {"row": id, "why": reason}, and for a script that failed,
{"script": path, "why": reason}. The goals are defined here, once (ROWS): a script gives the figure and its
unit, and `met` is worked out from the goal's bound when the units agree (or given by the script when the
goal is not one bound, as for the first answers; null, shown "–", for a figure taken on a smaller shape
than the goal's, which the workload words say). The table has every row of ROWS, in that order, the last
record of each row winning (a script run again replaces its rows); a row with no figure says why.

  headline.py add ROW FIGURE UNIT [--vs TEXT] [--workload TEXT] [--met auto|true|false|null] [--load L]
  headline.py skip ROW [ROW...] --why TEXT
  headline.py failed SCRIPT --why TEXT
  headline.py table [--out FILE]     (default headline.md beside the records; `-` prints only)

Stdlib only: the bench scripts run it with the system's python3.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Row:
    """One headline figure: what is measured, by which script, and its goal (text, and the bound `met` is
    worked out from: at most or at least `bound` in `unit`; no bound when the goal is not one number)."""

    id: str
    workload: str
    script: str
    goal: str
    unit: str = ""
    at_most: float | None = None
    at_least: float | None = None


FIRST_ANSWER_GOAL = "≥ 5× msprobe, or ≤ TensorBoard's own request + 3 ms"
FIRST_ANSWERS = (
    ("first_node_list", "node list (`loadGraphAllNodeList`)"),
    ("first_root_layout", "the root view"),
    ("first_module_expansion", "one module expanded"),
    ("first_pass_filter", "the pass filter"),
    ("first_error_filter", "the error filter"),
    ("first_matched_relations", "`loadGraphMatchedRelations`"),
)
ROWS = (
    Row("convert_ratio", "`convert` of the 48-layer pair (compare), speed", "bench/convert.sh",
        "≥ 20× msprobe", "×", at_least=20),
    Row("convert_memory", "`convert` of the 48-layer pair (compare), peak memory", "bench/convert.sh",
        "≤ ¼ of msprobe's", "× less", at_least=4),
    *(Row(row_id, f"compare_big in real TensorBoard, first answer: {words}", "bench/service.sh",
          FIRST_ANSWER_GOAL, "ms") for row_id, words in FIRST_ANSWERS),
    Row("diagnose_1m_converted_time", "`diagnose` of a 1M-a-side compare made by `gen_dump` and `convert`, wall",
        "bench/diagnose.sh", "≤ 2 s", "s", at_most=2),
    Row("diagnose_1m_converted_memory",
        "`diagnose` of a 1M-a-side compare made by `gen_dump` and `convert`, peak memory", "bench/diagnose.sh",
        "≤ 400 MB", "MB", at_most=400),
    Row("diagnose_1m_ours_time", "`diagnose` of a 1M-a-side compare, our shape, wall", "bench/diagnose.sh",
        "≤ 2 s", "s", at_most=2),
    Row("diagnose_1m_ours_memory", "`diagnose` of a 1M-a-side compare, our shape, peak memory",
        "bench/diagnose.sh", "≤ 400 MB", "MB", at_most=400),
    Row("diagnose_1m_msprobe_time", "`diagnose` of a 1M-a-side compare, msprobe's shape, wall",
        "bench/diagnose.sh", "≤ 5 s", "s", at_most=5),
    Row("diagnose_1m_msprobe_memory", "`diagnose` of a 1M-a-side compare, msprobe's shape, peak memory",
        "bench/diagnose.sh", "≤ 600 MB", "MB", at_most=600),
    Row("map_paint_ours", "the divergence map in the page, our shape: first cells", "bench/map_page.sh",
        "≤ 0.9 s", "s", at_most=0.9),
    Row("map_memory_ours", "the divergence map in the page, our shape: sidecar peak", "bench/map_page.sh",
        "≤ 600 MB", "MB", at_most=600),
    Row("map_paint_msprobe", "the divergence map in the page, msprobe's shape: first cells",
        "bench/map_page.sh", "≤ 0.9 s", "s", at_most=0.9),
    Row("map_memory_msprobe", "the divergence map in the page, msprobe's shape: sidecar peak",
        "bench/map_page.sh", "≤ 600 MB", "MB", at_most=600),
    Row("page_1m_graph", "the page on a 1M-a-side compare: first graph", "bench/diagnosis_page.sh",
        "≤ 3 s", "s", at_most=3),
    Row("page_1m_expand", "the page on a 1M-a-side compare: expand a block", "bench/diagnosis_page.sh",
        "≤ 3 s", "s", at_most=3),
    Row("page_1m_diagnosis_list", "the page on a 1M-a-side compare: the Diagnosis panel's list",
        "bench/diagnosis_page.sh", "≤ 3 s", "s", at_most=3),
    Row("page_1m_diagnosis_click", "the page on a 1M-a-side compare: a click on a Diagnosis line",
        "bench/diagnosis_page.sh", "≤ 3 s", "s", at_most=3),
    Row("report_1m_time", "`graph-ascend report` of a 1M-a-side compare, wall", "bench/report.sh",
        "≤ 60 s, progress shown", "s", at_most=60),
    Row("report_1m_memory", "`graph-ascend report` of a 1M-a-side compare, peak memory", "bench/report.sh",
        "≤ 1 GB", "MB", at_most=1024),
)
BY_ID = {row.id: row for row in ROWS}
# Decimals shown per unit (the figure itself is stored as measured).
DECIMALS = {"s": 2, "ms": 1, "MB": 0, "×": 1, "× less": 1}


def headline_path() -> Path:
    """The JSON-lines file of this run: HEADLINE, else BENCH_OUT/headline.jsonl, else bench/results's."""
    if os.environ.get("HEADLINE"):
        return Path(os.environ["HEADLINE"])
    return Path(os.environ.get("BENCH_OUT") or REPO / "bench" / "results") / "headline.jsonl"


def load_average() -> float | None:
    """The 1-minute load average now (None where /proc/loadavg cannot be read)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def met_of(row: Row, figure: float, unit: str) -> bool | None:
    """Whether `figure` (in `unit`) meets the row's bound; None when it has none or the units differ."""
    if unit != row.unit:
        return None
    if row.at_most is not None:
        return figure <= row.at_most
    if row.at_least is not None:
        return figure >= row.at_least
    return None


def append(record: dict, path: Path | None = None) -> None:
    path = path or headline_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


AUTO = "auto"


def record(row_id: str, figure: float, unit: str, *, vs: str | None = None, workload: str | None = None,
           met: bool | str | None = AUTO, load: float | None = None, path: Path | None = None) -> dict:
    """Appends one figure of row `row_id` (a KeyError names an unknown row) and returns the line written.
    `met`: AUTO works it out from the row's bound; True or False for goals that are not one bound; None for
    a figure not judged (taken on a smaller shape than the goal's)."""
    row = BY_ID[row_id]
    line = {
        "row": row_id,
        "workload": workload or row.workload,
        "figure": figure,
        "unit": unit,
        "goal": row.goal,
        "met": met_of(row, figure, unit) if met == AUTO else met,
        "load": load if load is not None else load_average(),
        "date": now(),
        "vs": vs,
    }
    append(line, path)
    return line


def skip(row_ids, why: str, path: Path | None = None) -> None:
    """Records that the rows were not measured, and why."""
    for row_id in row_ids:
        if row_id not in BY_ID:
            raise KeyError(row_id)
        append({"row": row_id, "why": why, "date": now()}, path)


def read(path: Path) -> tuple[dict, dict]:
    """({row id: its last record}, {script: why it failed}); lines that are not JSON objects are skipped."""
    rows, failed = {}, {}
    if not path.exists():
        return rows, failed
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        if "row" in line:
            rows[line["row"]] = line
        elif "script" in line:
            failed[line["script"]] = line.get("why", "failed")
    return rows, failed


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def figure_text(line: dict) -> str:
    figure, unit = line["figure"], line.get("unit", "")
    if isinstance(figure, (int, float)):
        digits = DECIMALS.get(unit, 2)
        figure = f"{figure:,.{digits}f}"
    return f"{figure} {unit}".strip() if unit not in ("×", "× less") else f"{figure}{unit}"


def table(path: Path) -> str:
    """The closing table (markdown) of the records in `path`."""
    rows, failed = read(path)
    dates = sorted(line["date"] for line in rows.values() if "date" in line)
    span = f"{dates[0]} – {dates[-1]}" if dates else "no figure recorded"
    lines = [
        "# Headline figures against their goals",
        "",
        f"Figures taken {span}, {os.cpu_count()} cores. Load: the 1-minute load average when the figure was "
        "taken. Written by bench/headline.py from the records of the last `make bench` (or of the benches run "
        "since); a row a change slows shows in this file's diff (docs/benchmarks.md).",
        "",
        "| workload | goal | figure | vs msprobe | met | load |",
        "|---|---|---:|---|---|---:|",
    ]
    met_count = measured = 0
    for row in ROWS:
        line = rows.get(row.id)
        if line is None or "figure" not in line:
            why = (line or {}).get("why")
            if not why and row.script in failed:
                why = f"{row.script} {failed[row.script]}"
            why = why or f"{row.script} recorded no figure (not run, or stopped before it)"
            lines.append(f"| {cell(row.workload)} | {cell(row.goal)} | not measured: {cell(why)} | – | – | – |")
            continue
        measured += 1
        met = line.get("met")
        met_count += met is True
        load = line.get("load")
        lines.append(
            f"| {cell(line.get('workload') or row.workload)} | {cell(row.goal)} | "
            f"{cell(figure_text(line))} | {cell(line.get('vs') or '–')} | "
            f"{'yes' if met is True else 'NO' if met is False else '–'} | "
            f"{f'{load:.2f}' if isinstance(load, (int, float)) else '?'} |"
        )
    lines += ["", f"{met_count} of {len(ROWS)} rows met; {measured} measured."]
    # every failed script named, those without a row of their own too
    lines += [f"{script} {why}." for script, why in sorted(failed.items())]
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="record one figure")
    add.add_argument("row", choices=sorted(BY_ID))
    add.add_argument("figure", type=float)
    add.add_argument("unit")
    add.add_argument("--vs", help="what the figure was measured against (msprobe's figure)")
    add.add_argument("--workload", help="what exactly was measured (default: the row's words)")
    add.add_argument("--met", choices=("auto", "true", "false", "null"), default=AUTO,
                     help="auto: from the row's bound; true/false when the goal is not one bound; null: not judged")
    add.add_argument("--load", type=float, help="the 1-minute load average when it was taken (default: now)")
    skipped = sub.add_parser("skip", help="record rows not measured, and why")
    skipped.add_argument("rows", nargs="+", choices=sorted(BY_ID))
    skipped.add_argument("--why", required=True)
    failed = sub.add_parser("failed", help="record a script that failed")
    failed.add_argument("script")
    failed.add_argument("--why", required=True)
    show = sub.add_parser("table", help="print the closing table and write it")
    show.add_argument("--out", help="the table's file (default headline.md beside the records; `-`: print only)")
    args = ap.parse_args(argv)
    if args.command == "add":
        met = {"true": True, "false": False, "null": None}.get(args.met, AUTO)
        record(args.row, args.figure, args.unit, vs=args.vs, workload=args.workload, met=met, load=args.load)
    elif args.command == "skip":
        skip(args.rows, args.why)
    elif args.command == "failed":
        append({"script": args.script, "why": args.why, "date": now()})
    else:
        records = headline_path()
        out = Path(args.out) if args.out and args.out != "-" else records.with_name("headline.md")
        if not records.exists():
            # No run here yet (a fresh clone): the table kept in the repository, untouched.
            if not out.exists():
                print(f"headline.py: no records at {records} and no table at {out}: run `make bench`",
                      file=sys.stderr)
                return 1
            print(f"(no records at {records}: the table of the last recorded run, {out})\n", file=sys.stderr)
            print(out.read_text(encoding="utf-8"))
            return 0
        text = table(records)
        print(text)
        if args.out != "-":
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
