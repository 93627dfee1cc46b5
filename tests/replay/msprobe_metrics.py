#!/usr/bin/env python3
"""msprobe 26.2's own pre-check metric functions on generated output pairs: the oracle of
plugin/replay/src/msprobe.rs.

    python tests/replay/msprobe_metrics.py --out plugin/replay/tests/oracle/msprobe_metrics.json --seed 38 --cases 27 --large-max 2600
        # the frozen slice `cargo test -p graph-ascend-replay --test msprobe_metrics` replays
    python tests/replay/msprobe_metrics.py --out target/replay-diff/cases.json --seed $RANDOM --cases 300
        # then GA_REPLAY_METRIC_CASES=target/replay-diff/cases.json cargo test ... (make test-differential-replay)

Each case: a device dtype, a bench array (the CPU reference one precision up: fp32 for bf16/fp16,
fp64 for fp32, as acc_check runs it), a device array, and msprobe's numbers for them: the
benchmark standard (BenchmarkCompare), the ULP standard (UlpCompare), and the stage-1 status and
columns of Comparator._compare_float_tensor. Needs torch and mindstudio-probe (the oracle venv).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import tempfile

import numpy as np
import torch
from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator
from msprobe.pytorch.api_accuracy_checker.compare.compare_column import CompareColumn
from msprobe.pytorch.api_accuracy_checker.compare.compare_input import CompareInput
from msprobe.pytorch.api_accuracy_checker.precision_standard.benchmark_compare import BenchmarkCompare
from msprobe.pytorch.api_accuracy_checker.precision_standard.ulp_compare import UlpCompare

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def device_values(exact: np.ndarray, dtype: str) -> np.ndarray:
    """The exact values rounded to the device dtype, as the numpy array msprobe compares."""
    t = torch.from_numpy(exact).to(DTYPES[dtype])
    if dtype == "bf16":
        return t.to(torch.float32).numpy()
    return t.numpy()


def bench_values(exact: np.ndarray, dtype: str) -> np.ndarray:
    return exact.astype(np.float32) if dtype in ("bf16", "fp16") else exact.astype(np.float64)


def gen(rng: np.random.Generator, i: int, large_max: int):
    dtype = ["bf16", "fp16", "fp32"][i % 3]
    kind = ["noise", "small", "fault", "tiny", "nonfinite", "scalar", "zeros", "large", "bias"][(i // 3) % 9]
    n = int(rng.integers(50, 700))
    exact = rng.normal(0, float(rng.choice([0.01, 1.0, 30.0])), n)
    ulps = float(rng.choice([0.5, 2.0, 8.0]))
    if kind == "small":
        exact[: n // 2] *= 1e-4
        exact[: n // 8] = 0.0
    if kind == "tiny":
        exact *= 1e-5
    if kind == "scalar":
        exact = exact[:1]
    if kind == "zeros":
        exact = np.zeros(n)
    if kind == "large":
        exact = rng.normal(0, 1.0, int(rng.integers(large_max // 2, large_max)))
    eps = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": 2.0**-24}[dtype]
    noisy = exact * (1 + rng.normal(0, ulps * eps, exact.size))
    if kind == "bias":
        noisy = exact * (1 + abs(rng.normal(0, ulps * eps, exact.size)))
    if kind == "fault":
        idx = rng.choice(exact.size, max(1, exact.size // 5), replace=False)
        noisy[idx] = rng.normal(0, 1, idx.size)
    bench = bench_values(exact, dtype)
    device = device_values(noisy, dtype)
    if kind == "nonfinite":
        device = device.copy()
        device[0] = np.nan
        device[1] = np.inf
        bench = bench.copy()
        bench[2] = -np.inf
        device[2] = -np.inf
    return dtype, kind, bench, device


def num(v):
    if isinstance(v, str):
        return None if v.strip() == "" else v
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def enc(a: np.ndarray):
    return [num(x) for x in a.astype(np.float64).tolist()]


def oracle(comparator: Comparator, dtype: str, bench: np.ndarray, device: np.ndarray) -> dict:
    td = DTYPES[dtype]
    out = {}
    col = CompareColumn()
    BenchmarkCompare(CompareInput(bench, device, col, td)).compare()
    out.update(small_value_err_ratio=num(col.small_value_err_ratio), rmse=num(col.rmse), eb=num(col.eb),
               max_rel_error=num(col.max_rel_error), mean_rel_error=num(col.mean_rel_error))
    col = CompareColumn()
    UlpCompare(CompareInput(bench, device, col, td)).compare()
    out.update(max_ulp_error=num(col.max_ulp_error), mean_ulp_error=num(col.mean_ulp_error),
               ulp_error_proportion=num(col.ulp_error_proportion))
    col = CompareColumn()
    # _compare_float_tensor's stage 1 (it also runs the benchmark standard into the same column).
    status, col, message = comparator._compare_float_tensor(
        "matmul", bench, device, col, {"dtype": td, "in_dtype": torch.float32})
    out.update(status=status, cosine=num(col.cosine_sim), max_abs_err=num(col.max_abs_err),
               rel_err_hundredth=num(col.rel_err_hundredth), rel_err_thousandth=num(col.rel_err_thousandth),
               rel_err_ten_thousandth=num(col.rel_err_ten_thousandth))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--cases", type=int, default=27)
    p.add_argument("--large-max", type=int, default=40000, help="the 'large' kind's most elements")
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    np.seterr(all="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        comparator = Comparator(f"{tmp}/result.csv", f"{tmp}/details.csv", False)
        cases = []
        for i in range(a.cases):
            dtype, kind, bench, device = gen(rng, i, a.large_max)
            cases.append({"dtype": dtype, "kind": kind, "bench": enc(bench), "device": enc(device),
                          "expected": oracle(comparator, dtype, bench, device)})
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seed": a.seed, "numpy": np.__version__, "cases": cases}) + "\n")
    print(f"{out}: {len(cases)} cases")


if __name__ == "__main__":
    main()
