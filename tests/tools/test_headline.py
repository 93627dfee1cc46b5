"""bench/headline.py: the bench scripts' records turned into the closing table of `make bench`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import headline

# The table's signs, as escapes (the lint rules refuse look-alike characters in the source).
TIMES, DASH, AT_LEAST = "\u00d7", "\u2013", "\u2265"


@pytest.fixture
def records(tmp_path, monkeypatch):
    path = tmp_path / "headline.jsonl"
    monkeypatch.setenv("HEADLINE", str(path))
    return path


def table_row(text: str, row_id: str) -> list:
    """The cells of the table's line for row `row_id` (found by the row's workload words)."""
    words = headline.BY_ID[row_id].workload
    for line in text.splitlines():
        if line.startswith("| ") and words in line:
            return [c.strip() for c in line.strip().strip("|").split(" | ")]
    raise AssertionError(f"no line for {row_id} in:\n{text}")


def test_met_is_worked_out_from_the_rows_bound_in_its_unit(records):
    assert headline.record("convert_ratio", 22.4, TIMES, load=1.5)["met"] is True
    assert headline.record("convert_ratio", 13.0, TIMES)["met"] is False
    assert headline.record("diagnose_1m_ours_time", 2.0, "s")["met"] is True
    assert headline.record("diagnose_1m_ours_time", 2.32, "s")["met"] is False
    # another unit (ours alone, msprobe absent): not judged
    assert headline.record("convert_ratio", 1.49, "s")["met"] is None
    # a figure on a smaller shape than the goal's: not judged, whatever the bound says
    assert headline.record("diagnose_1m_ours_memory", 15, "MB", met=None)["met"] is None
    # a goal that is not one bound: the script's verdict
    assert headline.record("first_node_list", 28.6, "ms", met=True)["met"] is True
    lines = [json.loads(t) for t in records.read_text().splitlines()]
    assert lines[0]["load"] == 1.5 and lines[0]["goal"] == f"{AT_LEAST} 20{TIMES} msprobe"
    assert all(set(line) >= {"row", "workload", "figure", "unit", "goal", "met", "load", "date", "vs"}
               for line in lines)


def test_the_last_record_of_a_row_wins_and_unmeasured_rows_say_why(records):
    headline.skip(["convert_ratio"], "the 48-layer pair not found")
    headline.record("convert_ratio", 13.04, TIMES, vs="msprobe 19.4 s, ours 1.49 s", load=2.0)
    headline.record("diagnose_1m_ours_time", 2.65, "s", load=7.25)
    headline.record("diagnose_1m_ours_time", 2.32, "s", load=3.5)
    headline.skip(["map_paint_ours"], "Chromium absent")
    headline.append({"script": "bench/report.sh", "why": "failed (exit 2)"})
    text = headline.table(records)
    assert table_row(text, "convert_ratio")[2:] == [f"13.0{TIMES}", "msprobe 19.4 s, ours 1.49 s", "NO", "2.00"]
    assert table_row(text, "diagnose_1m_ours_time")[2:] == ["2.32 s", DASH, "NO", "3.50"]
    assert table_row(text, "map_paint_ours")[2] == "not measured: Chromium absent"
    assert table_row(text, "report_1m_time")[2] == "not measured: bench/report.sh failed (exit 2)"
    assert table_row(text, "first_node_list")[2].startswith("not measured: bench/service.sh recorded no figure")
    # every row of the issue, in order, once
    body = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| workload")]
    assert len(body) == len(headline.ROWS)
    assert "0 of " in text and "2 measured" in text
    # a failed script is named even when it has no row of its own
    headline.append({"script": "bench/load.sh", "why": "failed (exit 1)"})
    assert "bench/load.sh failed (exit 1)." in headline.table(records).splitlines()


def test_cells_keep_the_table_whole(records):
    headline.record("report_1m_time", 61.5, "s", met=False, vs="FAILED: a | b\nc")
    cells = table_row(headline.table(records), "report_1m_time")
    assert cells[2:4] == ["61.50 s", "FAILED: a \\| b c"]


def test_an_unknown_row_is_refused(records):
    with pytest.raises(KeyError):
        headline.record("convert_speed", 1.0, TIMES)
    with pytest.raises(SystemExit):
        headline.main(["add", "convert_speed", "1", TIMES])
    assert not records.exists()


def test_the_table_command_writes_beside_the_records_and_keeps_the_committed_table_without_them(
        records, capsys):
    table_file = records.with_name("headline.md")
    table_file.write_text("the committed table\n")
    assert headline.main(["table"]) == 0
    assert "the committed table" in capsys.readouterr().out
    assert table_file.read_text() == "the committed table\n"
    assert headline.main(["add", "map_memory_ours", "312", "MB", "--met", "null", "--load", "4"]) == 0
    assert headline.main(["table"]) == 0
    written = table_file.read_text()
    assert written in capsys.readouterr().out
    assert table_row(written, "map_memory_ours")[2:] == ["312 MB", DASH, DASH, "4.00"]
