#!/usr/bin/env python3
"""Writes tests/fixtures/replay/: small slices of the real msprobe tensor dumps tf_small_tensor_a and
_b (../shared/fixtures/dumps, msprobe 26.2 on torch 2.6, fp32), and a faulty variant of the
target: the output of one call (Tensor.__add__.0, a residual add) moved +4 ULPs of fp32 on 5 % of
its elements with numpy, its dump.json statistics recomputed. Never run by `make test`.

    .oracle-venv/bin/python tests/replay/make_replay_fixtures.py [SHARED_DUMPS]
"""

from __future__ import annotations

import json
import pathlib
import shutil
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT.parent.parent / "shared/fixtures/dumps")
OUT = ROOT / "tests/fixtures/replay"
FAULTY_CALL = "Tensor.__add__.0.forward"

# One call of each kind the fixture model runs, and records that are not replayed.
TARGET_CALLS = [
    "Functional.embedding.0.forward", "Tensor.__add__.0.forward", "Functional.layer_norm.0.forward",
    "Functional.linear.0.forward", "Torch.matmul.0.forward", "Tensor.__truediv__.0.forward",
    "Functional.softmax.0.forward", "Functional.gelu.0.forward", "Functional.cross_entropy.0.forward",
    "Module.embed.Embedding.forward.0", "Functional.linear.0.backward", "Module.head.Linear.parameters_grad.0",
]
GOLDEN_CALLS = ["Tensor.__add__.0.forward", "Functional.linear.0.forward", "Functional.softmax.0.forward",
                "Functional.gelu.0.forward"]


def rank_dir(run: pathlib.Path) -> pathlib.Path:
    (d,) = [p.parent for p in run.glob("step0/*/dump.json")]
    return d


def data_names(v):
    if isinstance(v, dict):
        if "data_name" in v:
            yield v["data_name"]
        for x in v.values():
            yield from data_names(x)
    elif isinstance(v, list):
        for x in v:
            yield from data_names(x)


def copy_slice(src_run: str, dst_name: str, calls: list[str]) -> pathlib.Path:
    src = rank_dir(SHARED / src_run)
    dump = json.loads((src / "dump.json").read_text())
    dst = OUT / dst_name / "step0" / src.name
    if dst.exists():
        shutil.rmtree(OUT / dst_name)
    (dst / "dump_tensor_data").mkdir(parents=True)
    data = {k: dump["data"][k] for k in calls}
    for k, entry in data.items():
        # Records that are not replayed (modules, backward) keep their statistics only.
        if k.endswith(".forward") and not k.startswith("Module."):
            for name in data_names(entry):
                shutil.copy(src / "dump_tensor_data" / name, dst / "dump_tensor_data" / name)
    dump["data"] = data
    (dst / "dump.json").write_text(json.dumps(dump, indent=1))
    return dst


def perturb(dst: pathlib.Path) -> None:
    dump_path = dst / "dump.json"
    dump = json.loads(dump_path.read_text())
    rec = dump["data"][FAULTY_CALL]["output"][0]
    path = dst / "dump_tensor_data" / rec["data_name"]
    t = torch.load(path)
    a = t.numpy().copy()
    rng = np.random.default_rng(38)
    flat = a.reshape(-1)
    idx = rng.choice(flat.size, max(1, flat.size // 20), replace=False)
    ulp = np.spacing(np.abs(flat[idx])).astype(np.float32)
    flat[idx] = flat[idx] + 4 * ulp
    torch.save(torch.from_numpy(a), path)
    rec.update(Max=float(a.max()), Min=float(a.min()), Mean=float(a.mean()),
               Norm=float(np.linalg.norm(a.astype(np.float64))))
    dump_path.write_text(json.dumps(dump, indent=1))
    print(f"{path}: {idx.size} of {flat.size} elements moved +4 ULP")


copy_slice("tf_small_tensor_a", "tf_small_a", TARGET_CALLS)
copy_slice("tf_small_tensor_b", "tf_small_b", GOLDEN_CALLS)
perturb(copy_slice("tf_small_tensor_a", "tf_small_a_faulty", TARGET_CALLS))
print(f"{OUT}: written")
