"""Makes the generated diagnosis set ONCE (not part of `make test`): real msprobe dumps of a tiny
transformer, golden float32 against a bfloat16 target with one injected fault (inject.py), plus
fault-free pairs (bfloat16 against float32, noise only). Writes tests/diagnosis/cases.json.xz:

    {"runs": {RUN: {"step0/rank0/dump.json": TEXT, ...}},        # construct.json and dump.json
     "cases": [{"name", "target": RUN, "golden": RUN, "fault": {...} or null,
                "expect": {"step", "rank", "nodes": [API node, its module]} or null}]}

stack.json is left out (the rules never read it; the test writes `{}`). The expected nodes are
resolved from the target's own construct.json: the API node of the faulty call (the
`occurrence`-th call of that API directly inside the module) and the module node, `.forward` or
`.backward` by the fault's pass; a weight fault expects the API that used the weight.

Usage: PY=.oracle-venv/bin/python python gen_cases.py [--jobs 3] [--work DIR]
(.oracle-venv: the differential oracle venv, made by `make test-differential`)
(torch 2.6 CPU and mindstudio-probe 26.2 in PY's environment).
"""
import argparse
import glob
import json
import lzma
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "cases.json.xz")
MODEL = {"vocab": 64, "d_model": 32, "heads": 4, "d_ff": 64, "layers": 4, "seq": 8, "batch": 2}
SEED = 42

# (module relative to layers.L, API, occurrence inside that module, part of the block)
SITES = [
    ("ln1", "layer_norm", 0, "attention"),
    ("attn.qkv", "linear", 0, "attention"),
    ("attn", "matmul", 0, "attention"),
    ("attn", "softmax", 0, "attention"),
    ("attn", "matmul", 1, "attention"),
    ("attn.proj", "linear", 0, "attention"),
    ("ln2", "layer_norm", 0, "mlp"),
    ("mlp.fc1", "linear", 0, "mlp"),
    ("mlp.act", "gelu", 0, "mlp"),
    ("mlp.fc2", "linear", 0, "mlp"),
]
WEIGHT_SITES = [s for s in SITES if s[1] in ("linear", "layer_norm")]
API_PREFIX = {
    "linear": "Functional.linear.",
    "gelu": "Functional.gelu.",
    "softmax": "Functional.softmax.",
    "layer_norm": "Functional.layer_norm.",
    "matmul": "Torch.matmul.",
    "silu": "Functional.silu.",
    "rsqrt": "Torch.rsqrt.",
}


def plan():
    """The cases, from a fixed seed: the same list every time."""
    rnd = random.Random(2026)
    cases = []

    def fault(kind, steps, step, world=1, sites=SITES):
        module, api, occurrence, part = rnd.choice(sites)
        layer = rnd.randrange(MODEL["layers"])
        f = {"kind": kind, "api": api, "module": f"layers.{layer}.{module}",
             "occurrence": occurrence, "part": part, "step": step,
             "rank": rnd.randrange(world), "magnitude": round(rnd.uniform(0.5, 2.0), 2)}
        golden = f"golden_w{world}_s{steps}"
        name = f"{kind}_{part}_L{layer}_{api}{occurrence}_w{world}_s{steps}_step{step}_{len(cases)}"
        cases.append({"name": name, "golden": golden, "target": name, "world": world,
                      "steps": steps, "seed": SEED, "fault": f})

    for _ in range(18):
        fault("forward", 1, 0)
    for _ in range(12):
        fault("backward", 1, 0)
    for _ in range(6):
        fault("weight", 1, 0, sites=WEIGHT_SITES)
    for kind, n in (("forward", 5), ("backward", 3), ("weight", 2)):
        for _ in range(n):
            fault(kind, 2, 1, sites=WEIGHT_SITES if kind == "weight" else SITES)
    for _ in range(3):
        fault("backward", 2, 0)
    for kind, n in (("forward", 6), ("backward", 4)):
        for _ in range(n):
            fault(kind, 1, 0, world=2)
    # fault-free: bf16 against fp32 on other data (their own golden)
    for i, (world, steps) in enumerate([(1, 1)] * 4 + [(1, 2)] * 2 + [(2, 1)] * 2):
        seed = 100 + i
        cases.append({"name": f"clean_w{world}_s{steps}_{seed}",
                      "golden": f"golden_w{world}_s{steps}_{seed}",
                      "target": f"clean_w{world}_s{steps}_{seed}", "world": world,
                      "steps": steps, "seed": seed, "fault": None})
    return cases


def run_priority(item):
    """Goldens first, then fault-free targets, then the faulty ones with the groups of the plan
    interleaved (so that a run cut short still covers every kind of fault)."""
    name, spec = item
    if name.startswith("golden"):
        return (0, spec["index"])
    if spec["fault"] is None:
        return (1, spec["index"])
    return (2, spec["index"] % 7, spec["index"])


def runs_of(cases):
    """Every dump run needed: name -> spec."""
    runs = {}
    for index, c in enumerate(cases):
        base = {"seed": c["seed"], "model": MODEL, "steps": c["steps"], "world": c["world"],
                "index": index}
        runs.setdefault(c["golden"], dict(base, bf16=False, fault=None))
        runs[c["target"]] = dict(base, bf16=True, fault=c["fault"])
    return runs


def dump(py, work, name, spec, port):
    out = os.path.join(work, name)
    if complete(out, spec):
        return name, None
    spec = dict(spec, out=out, config=os.path.join(work, name + ".cfg.json"), port=port)
    spec_path = os.path.join(work, name + ".spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    r = subprocess.run([py, os.path.join(HERE, "inject.py"), spec_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return name, r.stderr[-3000:]
    return name, None


def complete(out, spec):
    """Whether a run has its dump.json for every step and rank (msprobe writes a stub first)."""
    found = [p for p in glob.glob(os.path.join(out, "step*", "*", "dump.json"))
             if os.path.getsize(p) > 4096]
    return len(found) == spec["steps"] * spec["world"]


def counter(name):
    m = re.match(r".*\.(\d+)\.(forward|backward)$", name)
    return int(m.group(1)) if m else -1


def expect(work, case):
    f = case["fault"]
    if f is None:
        return None
    direction = "backward" if f["kind"] == "backward" else "forward"
    rank_dirs = sorted(glob.glob(os.path.join(work, case["target"], f"step{f['step']}", "*")))
    rank_dir = rank_dirs[f["rank"]] if case["world"] > 1 else rank_dirs[0]
    with open(os.path.join(rank_dir, "construct.json")) as fh:
        construct = json.load(fh)
    module_re = re.compile(r"^Module\." + re.escape(f["module"]) + r"\.[A-Za-z0-9_]+\." +
                           direction + r"\.0$")
    modules = [k for k in construct if module_re.match(k)]
    if len(modules) != 1:
        raise SystemExit(f"{case['name']}: module node of {f['module']} not found: {modules}")
    module = modules[0]
    prefix = API_PREFIX[f["api"]]
    # The forward calls directly inside the module, in call order; the backward twin by name.
    fwd_module = module.replace(".backward.0", ".forward.0")
    calls = sorted((k for k, parent in construct.items()
                    if parent == fwd_module and k.startswith(prefix) and k.endswith(".forward")),
                   key=counter)
    if len(calls) <= f["occurrence"]:
        raise SystemExit(f"{case['name']}: call {f['occurrence']} of {prefix} in {fwd_module}: {calls}")
    api = calls[f["occurrence"]]
    if direction == "backward":
        api = api[: -len(".forward")] + ".backward"
    return {"step": f["step"], "rank": f["rank"] if case["world"] > 1 else 0,
            "nodes": [api, module]}


def stored_files(work, name):
    """A run's construct.json and dump.json files: `step<S>/<rank folder>/<file>` -> text."""
    files = {}
    for path in sorted(glob.glob(os.path.join(work, name, "step*", "*", "*.json"))):
        base = os.path.basename(path)
        if base not in ("construct.json", "dump.json"):
            continue
        step_dir, rank_dir = path.split(os.sep)[-3:-1]
        # one process: msprobe names the folder proc<PID>; any stable name will do
        rank_dir = rank_dir if rank_dir.startswith("rank") else "proc0"
        with open(path) as fh:
            # re-serialised compactly: the same JSON, a third of the bytes
            files[f"{step_dir}/{rank_dir}/{base}"] = json.dumps(json.load(fh),
                                                                 separators=(",", ":"))
    return files


def pack(work, cases, runs):
    done = {name for name, spec in runs.items() if complete(os.path.join(work, name), spec)}
    cases = [c for c in cases if c["golden"] in done and c["target"] in done]
    runs = {name: runs[name] for name in done}
    stored = {name: stored_files(work, name) for name in runs}
    listed = []
    for c in cases:
        listed.append({"name": c["name"], "golden": c["golden"], "target": c["target"],
                       "world": c["world"], "steps": c["steps"], "fault": c["fault"],
                       "expect": expect(work, c)})
    blob = json.dumps({"runs": stored, "cases": listed}, separators=(",", ":")).encode()
    with lzma.open(OUT, "wb", preset=9 | lzma.PRESET_EXTREME) as fh:
        fh.write(blob)
    print(f"{OUT}: {len(listed)} cases, {len(stored)} runs, {len(blob)} bytes of JSON, "
          f"{os.path.getsize(OUT)} compressed")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "diagnosis_cases"))
    p.add_argument("--py", default=os.environ.get("PY", sys.executable))
    p.add_argument("--pack-only", action="store_true")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = plan()
    runs = runs_of(cases)
    if not args.pack_only:
        with ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(dump, args.py, args.work, name, spec, 29700 + i)
                       for i, (name, spec) in enumerate(sorted(runs.items(), key=run_priority))]
            failed = 0
            for fut in futures:
                name, err = fut.result()
                print(("FAILED " if err else "ok ") + name, flush=True)
                if err:
                    failed += 1
                    print(err, file=sys.stderr)
        if failed:
            raise SystemExit(f"{failed} runs failed")
    pack(args.work, cases, runs)


if __name__ == "__main__":
    main()
