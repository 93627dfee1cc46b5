"""Makes the second sweep ONCE (not part of `make test`): what the statistics can still tell
(docs/diagnosis.md §14). Two architectures (inject.py): the tiny transformer of gen_cases.py and
a tiny LLaMA (RMSNorm with an fp32 rsqrt, SwiGLU, rotary, causal softmax); a bfloat16 autocast
target with one fault of a chosen size against a float32 golden, as gen_sweep.py, with the
families the first sweep lacks. Writes tests/diagnosis/unseen.json.xz:

    {"runs": {RUN: {"step0/proc0/dump.json": TEXT, ...}},
     "references": {ARCH: {"target": RUN, "golden": RUN,
                           "noise": {"Functional.linear.forward": P95, ...}}},
     "cases": [{"name", "target", "golden", "group", "arch", "fault", "expect"}]}

The transformer, faults in layer 0 and layer 3 of 4, step 0 of a one-step run:
computation the dump does not see, in `layers.L.mlp` (a `FeedForward`):
- "module_forward": a forward hook on the module multiplies its output by 1 + eps;
- "module_backward": a full backward hook on it multiplies its input gradient by 1 + eps;
- "function_forward": a custom autograd Function inside its forward scales its output;
- "function_backward": a custom autograd Function on its input scales the input gradient in
  backward (identity forward).
The expected node is the module itself (`….FeedForward.forward.0` / `.backward.0`).
Kernel faults in op kinds with few calls (4 a step):
- "softmax_forward": attention's `F.softmax` returns its output times 1 + eps;
- "gelu_forward": the MLP's `F.gelu` so.
The LLaMA, each fault in layer 0 at step 0 and in layer 3 at step 1 of a two-step run, and in
layer 1 on rank 1 of a two-rank run: "softmax_forward", "silu_forward" (SwiGLU's `F.silu`),
"rsqrt_forward" (the fp32 `torch.rsqrt` of `layers.L.ln1`, an RMSNorm) and "module_backward"
(a full backward hook on the `SwiGLU` module). Noise-only pairs of other seeds for both, and a
reference of another seed per architecture.
The expected node is the API call, or the module for a module fault. eps = k x the reference's
p95 error of the tensor's op kind (the module's output is its last linear's output:
`Functional.linear.forward`; its input gradient is its first `Linear`'s backward:
`Module.Linear.backward`), k in KS.

Usage: python gen_unseen.py --py /path/to/venv/bin/python [--jobs 2] [--work DIR]
"""
import argparse
import glob
import json
import lzma
import math
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
KS = [1.5, 3, 6, 30]
# The two architectures of the sweep. Per architecture: its model, steps, noise-only seeds
# (seed, world, steps), the faults (group -> (fault kind, module relative to layers.L, API or
# None, op kind of the noise that sizes it)) and where each is placed: (layer, step, rank,
# world, steps of the run, suffix of the case name).
ARCHS = {
    "transformer": {
        "prefix": "",
        "model": gen_cases.MODEL,
        "noise_seeds": [(611, 1, 1), (612, 1, 1), (613, 1, 1)],
        "reference_steps": 1,
        "faults": {
            "module_forward": ("module_forward", "mlp", None, "Functional.linear.forward"),
            "module_backward": ("module_backward", "mlp", None, "Module.Linear.backward"),
            "function_forward": ("function_forward", "mlp", None, "Functional.linear.forward"),
            "function_backward": ("function_backward", "mlp", None, "Module.Linear.backward"),
            "softmax_forward": ("forward", "attn", "softmax", "Functional.softmax.forward"),
            "gelu_forward": ("forward", "mlp.act", "gelu", "Functional.gelu.forward"),
        },
        "places": [(0, 0, 0, 1, 1, "L0"), (3, 0, 0, 1, 1, "L3")],
    },
    "llama": {
        "prefix": "llama_",
        "model": dict(gen_cases.MODEL, arch="llama"),
        "noise_seeds": [(621, 1, 2), (622, 1, 2), (623, 1, 2), (624, 2, 1)],
        "reference_steps": 2,
        "faults": {
            "softmax_forward": ("forward", "attn", "softmax", "Functional.softmax.forward"),
            "silu_forward": ("forward", "mlp.act", "silu", "Functional.silu.forward"),
            "rsqrt_forward": ("forward", "ln1", "rsqrt", "Torch.rsqrt.forward"),
            "module_backward": ("module_backward", "mlp", None, "Module.Linear.backward"),
        },
        "places": [(0, 0, 0, 1, 2, "L0"), (3, 1, 0, 1, 2, "L3_step1"),
                   (1, 0, 1, 2, 1, "L1_rank1")],
    },
}


def base(arch, seed, bf16, fault=None, world=1, steps=1):
    return gen_sweep.base(seed, bf16, fault, model=ARCHS[arch]["model"], world=world,
                          steps=steps)


def golden_of(arch, world, steps):
    return f"{ARCHS[arch]['prefix']}golden" + ("" if (world, steps) == (1, 1) else
                                               f"_w{world}_s{steps}")


def op_kind(name):
    """`Functional.linear.forward` for an API node, `Module.Linear.backward` for a module."""
    parts = name.split(".")
    if parts[0] == "Module":
        m = re.match(r"^Module\..*\.([A-Za-z0-9_]+)\.(forward|backward)\.\d+$", name)
        return f"Module.{m.group(1)}.{m.group(2)}" if m else None
    if len(parts) < 4:
        return None
    return ".".join(parts[:2]) + "." + parts[-1]


def dumps_of(work, run):
    """`(step folder, rank)` -> the dump's data, of every step and rank of a run."""
    out = {}
    for step_dir in sorted(glob.glob(os.path.join(work, run, "step*"))):
        paths = sorted(glob.glob(os.path.join(step_dir, "*", "dump.json")))
        for rank, path in enumerate(paths):
            with open(path) as fh:
                out[(os.path.basename(step_dir), rank)] = json.load(fh)["data"]
    return out


def reference_noise(work, target, golden):
    """p95 of the output error per op kind (APIs and module classes) of the reference, over its
    steps."""
    errs = {}
    goldens = dumps_of(work, golden)
    for at, t in dumps_of(work, target).items():
        g = goldens.get(at, {})
        for name, node in t.items():
            kind = op_kind(name)
            if name not in g or kind is None:
                continue
            for n, b in zip(node.get("output") or [], g[name].get("output") or []):
                if isinstance(n, dict) and isinstance(b, dict):
                    e = gen_sweep.entry_err(n, b)
                    # a masked -inf on both sides has no finite error: no sample
                    if e is not None and math.isfinite(e):
                        errs.setdefault(kind, []).append(e)
    noise = {}
    for kind, v in sorted(errs.items()):
        v.sort()
        noise[kind] = v[min(len(v) - 1, int(0.95 * (len(v) - 1) + 0.5))]
    return noise


def expect(work, case):
    f = case["fault"]
    if f["api"] is not None:
        return gen_cases.expect(work, case)
    direction = "backward" if f["kind"].endswith("backward") else "forward"
    rank_dirs = sorted(glob.glob(os.path.join(work, case["target"], f"step{f['step']}", "*")))
    rank_dir = rank_dirs[f["rank"]] if case["world"] > 1 else rank_dirs[0]
    with open(os.path.join(rank_dir, "construct.json")) as fh:
        construct = json.load(fh)
    module_re = re.compile(r"^Module\." + re.escape(f["module"]) + r"\.[A-Za-z0-9_]+\." +
                           direction + r"\.0$")
    modules = [k for k in construct if module_re.match(k)]
    if len(modules) != 1:
        raise SystemExit(f"{case['name']}: module node of {f['module']} not found: {modules}")
    return {"step": f["step"], "rank": f["rank"], "nodes": [modules[0]]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "diagnosis_unseen"))
    p.add_argument("--py", default=os.environ.get("PY", sys.executable))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)

    cases, runs, references = [], {}, {}
    for arch, a in ARCHS.items():
        pre, ref_steps = a["prefix"], a["reference_steps"]
        runs[golden_of(arch, 1, ref_steps)] = base(arch, SEED, False, steps=ref_steps)
        runs[f"{pre}ref_golden"] = base(arch, REFERENCE_SEED, False, steps=ref_steps)
        runs[f"{pre}ref_target"] = base(arch, REFERENCE_SEED, True, steps=ref_steps)
        for _layer, _step, _rank, world, steps, _suffix in a["places"]:
            runs[golden_of(arch, world, steps)] = base(arch, SEED, False, world=world,
                                                       steps=steps)
        for seed, world, steps in a["noise_seeds"]:
            runs[f"{pre}noise_golden_{seed}"] = base(arch, seed, False, world=world, steps=steps)
            runs[f"{pre}noise_{seed}"] = base(arch, seed, True, world=world, steps=steps)
            cases.append({"name": f"{pre}noise_{seed}", "target": f"{pre}noise_{seed}",
                          "golden": f"{pre}noise_golden_{seed}", "group": "noise",
                          "arch": arch, "world": world, "fault": None})
    gen_sweep.run_all(args.py, args.work, runs, args.jobs)
    for arch, a in ARCHS.items():
        pre = a["prefix"]
        noise = reference_noise(args.work, f"{pre}ref_target", f"{pre}ref_golden")
        print(f"{arch} reference noise (p95):", json.dumps(noise, indent=1), flush=True)
        references[arch] = {"target": f"{pre}ref_target", "golden": f"{pre}ref_golden",
                            "noise": noise}

    faulty = {}
    for arch, a in ARCHS.items():
        noise = references[arch]["noise"]
        for group, (kind, module, api, op) in a["faults"].items():
            for layer, step, rank, world, steps, suffix in a["places"]:
                for k in KS:
                    eps = round(k * noise[op], 6)
                    fault = {"kind": kind, "api": api, "module": f"layers.{layer}.{module}",
                             "occurrence": 0, "step": step, "rank": rank, "magnitude": eps,
                             "scale": True, "ratio": k, "noise_of": op}
                    name = f"{a['prefix']}{group}_{suffix}_x{k}"
                    faulty[name] = base(arch, SEED, True, fault, world=world, steps=steps)
                    cases.append({"name": name, "target": name,
                                  "golden": golden_of(arch, world, steps), "group": group,
                                  "arch": arch, "world": world, "fault": fault})
    gen_sweep.run_all(args.py, args.work, faulty, args.jobs)
    runs.update(faulty)

    stored = {name: gen_cases.stored_files(args.work, name) for name in runs}
    for c in cases:
        c["expect"] = expect(args.work, c) if c["fault"] else None
        del c["world"]
    blob = json.dumps({"runs": stored, "references": references, "cases": cases},
                      separators=(",", ":")).encode()
    with lzma.open(OUT, "wb", preset=9 | lzma.PRESET_EXTREME) as fh:
        fh.write(blob)
    print(f"{OUT}: {len(cases)} cases, {len(stored)} runs, {len(blob)} bytes of JSON, "
          f"{os.path.getsize(OUT)} compressed")


if __name__ == "__main__":
    main()
