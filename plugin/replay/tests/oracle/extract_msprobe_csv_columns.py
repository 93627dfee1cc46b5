"""Writes msprobe_csv_columns.json: the header rows of msprobe's pre-check CSV files, as the
installed msprobe (mindstudio-probe 26.2.0) writes them. Run in the oracle venv, outside
`make test`:

    .oracle-venv/bin/python plugin/replay/tests/oracle/extract_msprobe_csv_columns.py

The accuracy_checking_* headers are read back from the files msprobe's own `Comparator` writes
(its `write_csv_title`), so they are exactly what `msprobe acc_check` puts on line 1; the
api_precision_compare_* headers are `ApiPrecisionCompareColumn`'s title functions.
"""

import csv
import json
import os
import sys
import tempfile
from importlib.metadata import version

from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator
from msprobe.pytorch.api_accuracy_checker.compare.compare_utils import ApiPrecisionCompareColumn


def header(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return next(csv.reader(f))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "accuracy_checking_result_00000000000000.csv")
        details = os.path.join(tmp, "accuracy_checking_details_00000000000000.csv")
        Comparator(result, details, False)
        with open(result, "rb") as f:
            raw = f.read()
        doc = {
            "msprobe": version("mindstudio-probe"),
            "encoding": "utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8",
            "line_end": "\\r\\n" if b"\r\n" in raw else "\\n",
            "accuracy_checking_result": header(result),
            "accuracy_checking_details": header(details),
            "api_precision_compare_result": ApiPrecisionCompareColumn.get_result_csv_title(),
            "api_precision_compare_details": ApiPrecisionCompareColumn.get_detail_csv_title(),
        }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msprobe_csv_columns.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
