"""Writes msprobe_csv_rows.json: the rows msprobe 26.2's own `Comparator` writes into
accuracy_checking_result/details for three calls of the faulty fixture dump
(tests/fixtures/replay/tf_small_a_faulty), the bench being torch's float64 result of the same
call on the CPU, as `msprobe acc_check` computes it for an fp32 output. Run in the oracle venv,
outside `make test`:

    .oracle-venv/bin/python plugin/replay/tests/oracle/make_msprobe_csv_rows.py
"""

import csv
import glob
import json
import os
import tempfile

import torch
from msprobe.pytorch.api_accuracy_checker.acc_check.acc_check_utils import UtDataInfo
from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..", "..")
TENSORS = glob.glob(os.path.join(ROOT, "tests/fixtures/replay/tf_small_a_faulty/step0/*/dump_tensor_data"))[0]


def t(name):
    return torch.load(os.path.join(TENSORS, name))


CALLS = {
    "Tensor.__add__.0": lambda: t("Tensor.__add__.0.forward.input.0.pt").double()
    + t("Tensor.__add__.0.forward.input.1.pt").double(),
    "Functional.softmax.0": lambda: torch.softmax(t("Functional.softmax.0.forward.input.0.pt").double(), dim=-1),
    "Functional.gelu.0": lambda: torch.nn.functional.gelu(t("Functional.gelu.0.forward.input.0.pt").double()),
}


def rows(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))[1:]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "r.csv")
        details = os.path.join(tmp, "d.csv")
        c = Comparator(result, details, False)
        for name, bench in CALLS.items():
            device = t(name + ".forward.output.0.pt")
            c.compare_output(name, UtDataInfo(None, None, device, bench(), None, None, None))
        doc = {"accuracy_checking_result": rows(result), "accuracy_checking_details": rows(details)}
    with open(os.path.join(HERE, "msprobe_csv_rows.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
