"""Makes the second sweep ONCE (not part of `make test`): what the statistics can still tell
(docs/diagnosis.md §14). The tiny transformer of gen_cases.py, a bfloat16 autocast target with one
fault of a chosen size against a float32 golden, as gen_sweep.py, with the families the first
sweep lacks. Writes tests/diagnosis/unseen.json.xz in gen_sweep.py's shape:

    {"runs": {RUN: {"step0/proc0/dump.json": TEXT, ...}},
     "noise": {"Functional.linear.forward": P95, "Module.Linear.backward": P95, ...},
     "reference": {"target": RUN, "golden": RUN},
     "cases": [{"name", "target", "golden", "group", "fault", "expect"}]}

Computation the dump does not see, in `layers.L.mlp` (a `FeedForward`), L = 0 and 3 of 4:
- "module_forward": a forward hook on the module multiplies its output by 1 + eps;
- "module_backward": a full backward hook on it multiplies its input gradient by 1 + eps;
- "function_forward": a custom autograd Function inside its forward scales its output;
- "function_backward": a custom autograd Function on its input scales the input gradient in
  backward (identity forward).
The expected node is the module itself (`….FeedForward.forward.0` / `.backward.0`).
Kernel faults in op kinds with few calls (4 a step):
- "softmax_forward": attention's `F.softmax` returns its output times 1 + eps;
- "gelu_forward": the MLP's `F.gelu` so.
The expected node is the API call. eps = k x the reference's p95 error of the tensor's op kind
(the module's output is `fc2`'s linear output: `Functional.linear.forward`; its input gradient is
`fc1`'s: `Module.Linear.backward`), k in KS. Also noise-only pairs of other seeds.

Usage: python gen_unseen.py --py /path/to/venv/bin/python [--jobs 2] [--work DIR]
"""
import argparse
import glob
import json
import lzma
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_cases  # noqa: E402
import gen_sweep  # noqa: E402

OUT = os.path.join(HERE, "..", "unseen.json.xz")
SEED = gen_sweep.SEED
REFERENCE_SEED = gen_sweep.REFERENCE_SEED
NOISE_SEEDS = [611, 612, 613]
KS = [1.5, 3, 6, 30]
LAYERS = [0, 3]
# group -> (fault kind, module relative to layers.L, API or None, op kind of the noise that sizes it)
FAULTS = {
    "module_forward": ("module_forward", "mlp", None, "Functional.linear.forward"),
    "module_backward": ("module_backward", "mlp", None, "Module.Linear.backward"),
    "function_forward": ("function_forward", "mlp", None, "Functional.linear.forward"),
    "function_backward": ("function_backward", "mlp", None, "Module.Linear.backward"),
    "softmax_forward": ("forward", "attn", "softmax", "Functional.softmax.forward"),
    "gelu_forward": ("forward", "mlp.act", "gelu", "Functional.gelu.forward"),
}


def op_kind(name):
    """`Functional.linear.forward` for an API node, `Module.Linear.backward` for a module."""
    parts = name.split(".")
    if parts[0] == "Module":
        m = re.match(r"^Module\..*\.([A-Za-z0-9_]+)\.(forward|backward)\.\d+$", name)
        return f"Module.{m.group(1)}.{m.group(2)}" if m else None
    if len(parts) < 4:
        return None
    return ".".join(parts[:2]) + "." + parts[-1]


def reference_noise(work, target, golden):
    """p95 of the output error per op kind (APIs and module classes) of the reference."""
    t, g = gen_sweep.dump_of(work, target), gen_sweep.dump_of(work, golden)
    errs = {}
    for name, node in t.items():
        kind = op_kind(name)
        if name not in g or kind is None:
            continue
        for n, b in zip(node.get("output") or [], g[name].get("output") or []):
            if isinstance(n, dict) and isinstance(b, dict):
                e = gen_sweep.entry_err(n, b)
                if e is not None:
                    errs.setdefault(kind, []).append(e)
    noise = {}
    for kind, v in sorted(errs.items()):
        v.sort()
        noise[kind] = v[min(len(v) - 1, int(0.95 * (len(v) - 1) + 0.5))]
    return noise


def expect(work, case):
    f = case["fault"]
    if f["api"] is not None:
        return gen_cases.expect(work, dict(case, world=1))
    direction = "backward" if f["kind"].endswith("backward") else "forward"
    (path,) = glob.glob(os.path.join(work, case["target"], "step0", "*", "construct.json"))
    with open(path) as fh:
        construct = json.load(fh)
    module_re = re.compile(r"^Module\." + re.escape(f["module"]) + r"\.[A-Za-z0-9_]+\." +
                           direction + r"\.0$")
    modules = [k for k in construct if module_re.match(k)]
    if len(modules) != 1:
        raise SystemExit(f"{case['name']}: module node of {f['module']} not found: {modules}")
    return {"step": 0, "rank": 0, "nodes": [modules[0]]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "diagnosis_unseen"))
    p.add_argument("--py", default=os.environ.get("PY", sys.executable))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    base = gen_sweep.base

    cases = []
    runs = {"golden": base(SEED, False), "ref_golden": base(REFERENCE_SEED, False),
            "ref_target": base(REFERENCE_SEED, True)}
    for seed in NOISE_SEEDS:
        runs[f"noise_golden_{seed}"] = base(seed, False)
        runs[f"noise_{seed}"] = base(seed, True)
        cases.append({"name": f"noise_{seed}", "target": f"noise_{seed}",
                      "golden": f"noise_golden_{seed}", "group": "noise", "fault": None})
    gen_sweep.run_all(args.py, args.work, runs, args.jobs)
    noise = reference_noise(args.work, "ref_target", "ref_golden")
    print("reference noise (p95):", json.dumps(noise, indent=1), flush=True)

    faulty = {}
    for group, (kind, module, api, op) in FAULTS.items():
        for layer in LAYERS:
            for k in KS:
                eps = round(k * noise[op], 6)
                fault = {"kind": kind, "api": api, "module": f"layers.{layer}.{module}",
                         "occurrence": 0, "step": 0, "rank": 0, "magnitude": eps,
                         "scale": True, "ratio": k, "noise_of": op}
                name = f"{group}_L{layer}_x{k}"
                faulty[name] = base(SEED, True, fault)
                cases.append({"name": name, "target": name, "golden": "golden", "group": group,
                              "fault": fault})
    gen_sweep.run_all(args.py, args.work, faulty, args.jobs)
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
        c["expect"] = expect(args.work, c) if c["fault"] else None
    blob = json.dumps({"runs": stored, "noise": noise,
                       "reference": {"target": "ref_target", "golden": "ref_golden"},
                       "cases": cases}, separators=(",", ":")).encode()
    with lzma.open(OUT, "wb", preset=9 | lzma.PRESET_EXTREME) as fh:
        fh.write(blob)
    print(f"{OUT}: {len(cases)} cases, {len(stored)} runs, {len(blob)} bytes of JSON, "
          f"{os.path.getsize(OUT)} compressed")


if __name__ == "__main__":
    main()
