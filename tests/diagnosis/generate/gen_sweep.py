"""Makes the tolerance sweep ONCE (not part of `make test`): real msprobe dumps of the tiny
transformer of gen_cases.py, a bfloat16 target with one fault of a chosen size against a float32
golden, so that the test can draw how often a fault is found against its size in multiples of the
noise (docs/diagnosis.md, "Tolerances from data"). Writes tests/diagnosis/sweep.json.xz:

    {"runs": {RUN: {"step0/proc0/dump.json": TEXT, ...}},
     "noise": {"Functional.linear.forward": P95, ...},          # of the reference, by op kind
     "reference": {"target": RUN, "golden": RUN},
     "cases": [{"name", "target", "golden", "group", "fault": {...} or null,
                "expect": {"step", "rank", "nodes": [API node, its module]} or null}]}

- reference: bfloat16 against float32 on other data and seeds (seed 500), no fault: what the
  rules learn the noise of each op kind from.
- group "forward": one call of `F.linear` (`mlp.fc1`) returns its output times 1 + eps;
  "backward": the gradient that `F.linear`'s backward (`mlp.fc2`) passes back is scaled by
  1 + eps; "weight": noise of eps x RMS added to `attn.qkv`'s weight. Each in layer 0 and
  layer 3 (of 4), eps = k x the reference's p95 error of that op kind, k in KS.
- group "noise": bfloat16 against float32 on other seeds, no fault (each its own golden).
- group "every_call": every `F.gelu` returns its output times 1.3 (an operator bug).
- group "overflow": float16 autocast against float32, `layers.1.mlp.fc1`'s weight scaled by 2e5
  on both sides: its linear's float16 output overflows (the expected first inf/NaN).

Usage: python gen_sweep.py --py /path/to/venv/bin/python [--jobs 2] [--work DIR]
"""
import argparse
import glob
import json
import lzma
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_cases  # noqa: E402  (the model, the dump runner, the expected nodes)

OUT = os.path.join(HERE, "..", "sweep.json.xz")
MODEL = gen_cases.MODEL
SEED = 42
REFERENCE_SEED = 500
NOISE_SEEDS = [601, 602, 603, 604]
KS = [1.5, 2, 3, 4, 6, 10, 15, 30]
LAYERS = [0, 3]
# group -> (fault kind, module relative to layers.L, API, op kind of the noise that sizes it)
FAULTS = {
    "forward": ("forward", "mlp.fc1", "linear", "Functional.linear.forward"),
    "backward": ("backward", "mlp.fc2", "linear", "Functional.linear.backward"),
    "weight": ("weight", "attn.qkv", "linear", "Functional.linear.forward"),
}


def base(seed, bf16, fault=None, **extra):
    return dict({"seed": seed, "model": MODEL, "steps": 1, "world": 1, "bf16": bf16,
                 "fault": fault, "index": 0}, **extra)


def run_all(py, work, runs, jobs):
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(gen_cases.dump, py, work, name, spec, 29900 + i)
                   for i, (name, spec) in enumerate(runs.items())]
        failed = 0
        for fut in futures:
            name, err = fut.result()
            print(("FAILED " if err else "ok ") + name, flush=True)
            if err:
                failed += 1
                print(err, file=sys.stderr)
    if failed:
        raise SystemExit(f"{failed} runs failed")


def dump_of(work, run):
    (path,) = glob.glob(os.path.join(work, run, "step0", "*", "dump.json"))
    with open(path) as fh:
        return json.load(fh)["data"]


def entry_err(n, g):
    """The diagnosis's statistics error of one tensor (docs/diagnosis.md §1)."""
    try:
        x = [float(n[k]) for k in ("Max", "Min", "Mean", "Norm")]
        y = [float(g[k]) for k in ("Max", "Min", "Mean", "Norm")]
    except (KeyError, TypeError, ValueError):
        return None
    scale = max(abs(x[0]), abs(x[1]), abs(y[0]), abs(y[1]))
    errs = [abs(x[3] - y[3]) / abs(y[3]) if y[3] else 0.0]
    errs += [abs(a - b) / scale if scale else 0.0 for a, b in zip(x[:3], y[:3])]
    return max(errs)


def reference_noise(work, target, golden):
    """p95 of the output error per op kind (API name and direction) of the reference."""
    t, g = dump_of(work, target), dump_of(work, golden)
    errs = {}
    for name, node in t.items():
        parts = name.split(".")
        if name not in g or parts[0] == "Module" or len(parts) < 4:
            continue
        kind = ".".join(parts[:2]) + "." + parts[-1]
        for n, b in zip(node.get("output") or [], g[name].get("output") or []):
            if isinstance(n, dict) and isinstance(b, dict):
                e = entry_err(n, b)
                if e is not None:
                    errs.setdefault(kind, []).append(e)
    noise = {}
    for kind, v in sorted(errs.items()):
        v.sort()
        noise[kind] = v[min(len(v) - 1, int(0.95 * (len(v) - 1) + 0.5))]
    return noise


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "diagnosis_sweep"))
    p.add_argument("--py", default=os.environ.get("PY", sys.executable))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)

    cases = []
    runs = {"golden": base(SEED, False), "ref_golden": base(REFERENCE_SEED, False),
            "ref_target": base(REFERENCE_SEED, True)}
    for seed in NOISE_SEEDS:
        runs[f"noise_golden_{seed}"] = base(seed, False)
        runs[f"noise_{seed}"] = base(seed, True)
        cases.append({"name": f"noise_{seed}", "target": f"noise_{seed}",
                      "golden": f"noise_golden_{seed}", "group": "noise", "fault": None})
    run_all(args.py, args.work, runs, args.jobs)
    noise = reference_noise(args.work, "ref_target", "ref_golden")
    print("reference noise (p95):", json.dumps(noise, indent=1), flush=True)

    faulty = {}
    for group, (kind, module, api, op) in FAULTS.items():
        for layer in LAYERS:
            for k in KS:
                eps = round(k * noise[op], 6)
                fault = {"kind": kind, "api": api, "module": f"layers.{layer}.{module}",
                         "occurrence": 0, "step": 0, "rank": 0, "magnitude": eps,
                         "scale": kind != "weight", "ratio": k}
                name = f"{group}_L{layer}_x{k}"
                faulty[name] = base(SEED, True, fault)
                cases.append({"name": name, "target": name, "golden": "golden", "group": group,
                              "fault": fault})
    every = {"kind": "forward", "api": "gelu", "module": "layers.0.mlp.act", "occurrence": 0,
             "step": 0, "rank": 0, "magnitude": 0.3, "scale": True, "every_call": True}
    faulty["every_call_gelu"] = base(SEED, True, every)
    cases.append({"name": "every_call_gelu", "target": "every_call_gelu", "golden": "golden",
                  "group": "every_call", "fault": every})
    scale = {"layers.1.mlp.fc1": 2e5}
    faulty["overflow_golden"] = base(SEED, False, weight_scale=scale)
    faulty["overflow_fp16"] = base(SEED, True, fp16=True, weight_scale=scale)
    cases.append({"name": "overflow_fp16", "target": "overflow_fp16", "golden": "overflow_golden",
                  "group": "overflow",
                  "fault": {"kind": "forward", "api": "linear", "module": "layers.1.mlp.fc1",
                            "occurrence": 0, "step": 0, "rank": 0}})
    run_all(args.py, args.work, faulty, args.jobs)
    runs.update(faulty)

    stored = {}
    for name in runs:
        files = {}
        for path in sorted(glob.glob(os.path.join(args.work, name, "step*", "*", "*.json"))):
            fname = os.path.basename(path)
            if fname not in ("construct.json", "dump.json"):
                continue
            step_dir = path.split(os.sep)[-3]
            with open(path) as fh:
                files[f"{step_dir}/proc0/{fname}"] = json.dumps(json.load(fh),
                                                                separators=(",", ":"))
        stored[name] = files
    for c in cases:
        c["world"] = 1
        c["expect"] = gen_cases.expect(args.work, c) if c["fault"] else None
        del c["world"]
    blob = json.dumps({"runs": stored, "noise": noise,
                       "reference": {"target": "ref_target", "golden": "ref_golden"},
                       "cases": cases}, separators=(",", ":")).encode()
    with lzma.open(OUT, "wb", preset=9 | lzma.PRESET_EXTREME) as fh:
        fh.write(blob)
    print(f"{OUT}: {len(cases)} cases, {len(stored)} runs, {len(blob)} bytes of JSON, "
          f"{os.path.getsize(OUT)} compressed")


if __name__ == "__main__":
    main()
