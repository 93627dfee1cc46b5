"""`graph-ascend diagnose --dump-config` against real msprobe: the written config.json, run by
msprobe 26.2 on a small model on the CPU, dumps exactly the suspects' tensors, in a dump that
`graph-ascend convert` builds a graph from. Never run by `make test` (it needs the oracle venv).

1. A golden and a target run (statistics, level mix, two steps) of a model with 12 Linear
   layers (so that `Functional.linear.1` has neighbours `.10` and `.11`) and a LayerNorm; in
   the target, in step 1 only (step 0 agrees), one fault: layer 1's weight scaled (a forward
   source), or (PyTorch) the gradients layer 1's linear passes back scaled (a backward source).
2. `convert` the pair, `diagnose --dump-config`: the config.
3. Both runs again with that config: each dump holds tensors for exactly the intended calls
   (the diagnosis's sources: a forward source's forward; a backward source's both passes),
   only in the config's steps, every `data_name` a file; `construct.json` is not empty; and
   `convert` builds a compare of the pair. With `--dump-task tensor` (the default) only the
   intended calls are recorded (a module's: with every call inside it and its parameters'
   gradients, msprobe's mix scope) and `graph-ascend precheck` replays the API calls among them;
   with `--dump-task statistics` every call is recorded again and the compare's diagnosis finds
   the same sources.

MindSpore: the same run with MindSpore's PrecisionDebugger (PYNATIVE, CPU) when MindSpore runs
here (in the oracle venv its wheel, built against NumPy 1.x, fails under NumPy 2 at the first
kernel: reported as skipped); and, always, the config written for the committed MindSpore
compare (`tests/fixtures/upstream_vis/compare_ms_stats`) read by msprobe's own MindSpore config
classes, its `tensor_list` matched as msprobe matches it against every name of the committed
MindSpore dumps it came from: exactly the intended calls.

Usage: .oracle-venv/bin/python tests/replay/check_dump_config.py [--binary PATH] [--keep DIR]
Exit status 0 when every check passes.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
LAYERS = 12
FAULT_LAYER = 1
FAULT_STEP = 1
STEPS = 2


def statistics_config(dump_path: str) -> dict:
    return {
        "task": "statistics",
        "dump_path": dump_path,
        "rank": [],
        "step": [],
        "level": "mix",
        "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
    }


def run_torch(side: str, config: str, fault: str) -> None:
    """One run under msprobe's PrecisionDebugger (in its own process)."""
    import torch
    import torch.nn as nn
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(seed=1234, mode=False)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(LAYERS))
            self.norm = nn.LayerNorm(16)

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x))
            return self.norm(x)

    model = Net()
    state = {"step": -1}

    def scale_gradient(_module, _args, out):
        # A backward-only kernel fault: the gradients the autograd node of layer 1's output
        # passes back are scaled (msprobe reads that API's backward at this node, after it).
        if side == "target" and state["step"] == FAULT_STEP:
            out.grad_fn.register_hook(
                lambda grad_inputs, _outs: tuple(None if g is None else g * 1.5 for g in grad_inputs))

    if fault == "gradient":
        model.layers[FAULT_LAYER].register_forward_hook(scale_gradient)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    debugger = PrecisionDebugger(config_path=config)
    g = torch.Generator().manual_seed(5)
    for step in range(STEPS):
        state["step"] = step
        if side == "target" and step == FAULT_STEP and fault == "weight":
            with torch.no_grad():
                model.layers[FAULT_LAYER].weight.mul_(1.5)
        x = torch.randn(4, 16, generator=g)
        debugger.start(model=model)
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()


def run_mindspore(side: str, config: str, fault: str) -> None:
    assert fault == "weight"
    import mindspore as ms
    import numpy as np
    from mindspore import mint, nn, ops
    from msprobe.mindspore import PrecisionDebugger, seed_all

    # msprobe takes a tensor's Norm with mint.norm, whose kernel (LinalgVectorNorm) MindSpore
    # 2.10's CPU wheel lacks; ops.norm gives the same value (as the fixtures' run_ms_dump.py).
    mint.norm = ops.norm
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    seed_all(seed=1234, mode=False)

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.CellList([mint.nn.Linear(16, 16) for _ in range(LAYERS)])
            self.norm = nn.LayerNorm((16,), begin_norm_axis=-1, begin_params_axis=-1)

        def construct(self, x):
            for layer in self.layers:
                x = ops.tanh(layer(x))
            return self.norm(x)

    model = Net()
    opt = nn.SGD(model.trainable_params(), learning_rate=0.01)

    def loss_fn(x):
        return (model(x) ** 2).mean()

    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
    debugger = PrecisionDebugger(config_path=config)
    rng = np.random.default_rng(5)
    for step in range(STEPS):
        if side == "target" and step == FAULT_STEP:
            w = model.layers[FAULT_LAYER].weight
            w.set_data(w * 1.5)
        x = ms.Tensor(rng.standard_normal((4, 16)).astype(np.float32))
        debugger.start(model=model)
        _, grads = grad_fn(x)
        opt(grads)
        debugger.stop()
        debugger.step()


def run_side(framework: str, fault: str, side: str, config: dict, cwd: pathlib.Path) -> pathlib.Path:
    """Runs `side` in a fresh process with `config` (its dump_path relative to `cwd`)."""
    cwd.mkdir(parents=True, exist_ok=True)
    path = cwd / "config.json"
    path.write_text(json.dumps(config, indent=1))
    done = subprocess.run(
        [sys.executable, __file__, "--run", framework, side, str(path), fault],
        cwd=cwd, capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{framework} {side} run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return cwd / config["dump_path"]


def ga(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True)


def convert(binary: str, target: pathlib.Path, golden: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    done = ga(binary, "convert", "--target_path", str(target), "--golden_path", str(golden),
              "-o", str(out))
    if done.returncode != 0:
        raise SystemExit(f"convert {target} failed:\n{done.stderr}")
    (db,) = out.glob("*.vis.db")
    return db


def intended_calls(sources: list[dict]) -> dict[int, set[str]]:
    """Per step, the calls whose tensors the config is meant to keep (docs/diagnosis.md, "What
    to dump next"), worked out here from msprobe's naming, independently of the writer."""
    out: dict[int, set[str]] = {}
    for s in sources:
        for node in {s["node"], s["golden_node"]}:
            parts = node.split(".")
            calls = out.setdefault(s["step"], set())
            if parts[0] in ("Module", "Cell"):
                calls.add(node)
                if s["direction"] == "backward":
                    calls.add(node.replace(".backward.", ".forward."))
            elif s["direction"] == "backward":
                stem = ".".join(parts[:-1])
                calls.update({stem + ".forward", stem + ".backward"})
            else:
                calls.add(node)
    return out


def with_module_contents(intended: dict[int, set[str]], first_dump: pathlib.Path) -> dict[int, set[str]]:
    """For task `tensor`: a module in msprobe's `list` dumps every call inside it too (its mix
    scope), and its parameters' gradients: the calls below it in the first run's
    `construct.json`, and `<module>.parameters_grad.<N>`."""
    out = {}
    for step, calls in intended.items():
        (construct,) = (first_dump / f"step{step}").glob("*/construct.json")
        parent = json.loads(construct.read_text())
        modules = {c for c in calls if c.split(".")[0] in ("Module", "Cell")}
        more = set(calls)
        for name in parent:
            p, seen = parent.get(name), 0
            while p is not None and seen < 1000:
                if p in modules:
                    more.add(name)
                    break
                p, seen = parent.get(p), seen + 1
        for m in modules:
            stem, _, index = m.rsplit(".", 2)
            more.add(f"{stem}.parameters_grad.{index}")
        out[step] = more
    return out


def has_data_name(v) -> bool:
    if isinstance(v, dict):
        return "data_name" in v or any(has_data_name(x) for x in v.values())
    if isinstance(v, list):
        return any(has_data_name(x) for x in v)
    return False


def data_names(v):
    if isinstance(v, dict):
        if "data_name" in v:
            yield v["data_name"]
        for x in v.values():
            yield from data_names(x)
    elif isinstance(v, list):
        for x in v:
            yield from data_names(x)


def check_dump(dump: pathlib.Path, intended: dict[int, set[str]], failures: list[str], label: str,
               only_intended: bool):
    """A module's parameter gradients are recorded only when it has any: an intended
    `parameters_grad` name may be absent."""
    steps = sorted(int(p.name[4:]) for p in dump.glob("step*"))
    if steps != sorted(intended):
        failures.append(f"{label}: steps dumped {steps}, config's {sorted(intended)}")
    kept_total = 0
    for step in steps:
        for rank_dir in (dump / f"step{step}").iterdir():
            data = json.loads((rank_dir / "dump.json").read_text())["data"]
            kept = {name for name, rec in data.items() if has_data_name(rec)}
            want = intended.get(step, set())
            want = {n for n in want if ".parameters_grad." not in n or n in data}
            if kept != want:
                failures.append(
                    f"{label} step {step}: tensors of {sorted(kept)}, intended {sorted(want)}")
            for name in kept:
                for f in data_names(data[name]):
                    if not (rank_dir / "dump_tensor_data" / f).is_file():
                        failures.append(f"{label} step {step}: {name}: {f} missing")
            construct = json.loads((rank_dir / "construct.json").read_text())
            if not construct:
                failures.append(f"{label} step {step}: construct.json is empty")
            if only_intended and set(data) != want:
                failures.append(f"{label} step {step}: recorded {sorted(data)}, intended {sorted(want)}")
            kept_total += len(kept)
            print(f"  {label} step {step}: {len(data)} calls recorded, tensors of {len(kept)}: "
                  f"{sorted(kept)}")
    return kept_total


def check(framework: str, fault: str, task: str, binary: str, work: pathlib.Path) -> list[str]:
    failures: list[str] = []
    print(f"{framework}, {fault} fault, --dump-task {task}:")
    first = {side: run_side(framework, fault, side, statistics_config("./dump"), work / "first" / side)
             for side in ("golden", "target")}
    db = convert(binary, first["target"], first["golden"], work / "first" / "out")
    diag = ga(binary, "diagnose", str(db), "--format", "json")
    sources = json.loads(diag.stdout)["sources"]
    print(f"  diagnosis of the statistics compare: {[(s['step'], s['node']) for s in sources]}")
    if not sources:
        return failures + [f"{framework}: the statistics compare has no source"]
    cfg_path = work / "dump_config.json"
    written = ga(binary, "diagnose", str(db), "--dump-config", str(cfg_path), "--dump-task", task)
    print("  " + written.stderr.strip().replace("\n", "\n  "))
    if written.returncode != 1 or not cfg_path.is_file():
        return failures + [f"{framework}: diagnose --dump-config: {written.stderr}"]
    again = ga(binary, "diagnose", str(db), "--dump-config", str(cfg_path))
    if again.returncode != 2 or "never replaces" not in again.stderr:
        failures.append(f"{framework}: an existing config was not refused: {again.stderr}")
    config = json.loads(cfg_path.read_text())
    items = config["tensor"]["list"] if task == "tensor" else config["statistics"]["tensor_list"]
    print(f"  task {config['task']}, items {items}, step {config['step']}")
    intended = intended_calls(sources)
    second = {side: run_side(framework, fault, side, config, work / "second" / side)
              for side in ("golden", "target")}
    for side, dump in second.items():
        want = with_module_contents(intended, first[side]) if task == "tensor" else intended
        check_dump(dump, want, failures, f"{framework} {side}", task == "tensor")
    db2 = convert(binary, second["target"], second["golden"], work / "second" / "out")
    if task == "tensor":
        pre = ga(binary, "precheck", "--target_path", str(second["target"]),
                 "--golden_path", str(second["golden"]), "--all")
        apis = sorted(n for calls in intended.values() for n in calls
                      if n.split(".")[0] not in ("Module", "Cell") and n.endswith(".forward"))
        print("  precheck: " + " / ".join(l.strip() for l in pre.stdout.splitlines()
                                          if "replayed" in l))
        missing = [n for n in apis if n not in pre.stdout]
        if pre.returncode not in (0, 1) or missing:
            failures.append(f"{framework}: precheck did not replay {missing}: {pre.stderr}")
        print(f"  convert built {db2.name}")
        return failures
    diag2 = ga(binary, "diagnose", str(db2), "--format", "json")
    sources2 = json.loads(diag2.stdout)["sources"]
    print(f"  convert built {db2.name}; its diagnosis: {[(s['step'], s['node']) for s in sources2]}")
    if [(s["step"], s["node"]) for s in sources2] != [(s["step"], s["node"]) for s in sources]:
        failures.append(f"{framework}: the tensor run's diagnosis differs: {sources2}")
    return failures


def check_mindspore_fixture(binary: str, work: pathlib.Path) -> list[str]:
    """The config of the committed MindSpore compare, through msprobe's MindSpore config code
    and against the names of the dumps it was converted from."""
    import lzma

    from msprobe.mindspore.dump.debugger.debugger_config import DebuggerConfig
    from msprobe.mindspore.dump.ms_config import parse_common_config, parse_task_config

    failures: list[str] = []
    print("mindspore, committed compare_ms_stats:")
    work.mkdir(parents=True, exist_ok=True)
    (xz,) = (REPO / "tests/fixtures/upstream_vis/compare_ms_stats").glob("*.vis.db.xz")
    db = work / "compare_ms_stats.vis.db"
    db.write_bytes(lzma.decompress(xz.read_bytes()))
    sources = json.loads(ga(binary, "diagnose", str(db), "--format", "json").stdout)["sources"]
    cfg_path = work / "dump_config.json"
    written = ga(binary, "diagnose", str(db), "--dump-config", str(cfg_path),
                 "--dump-task", "statistics")
    print("  " + written.stderr.strip().replace("\n", "\n  "))
    if not cfg_path.is_file():
        return [f"mindspore: no config written: {written.stderr}"]
    config = json.loads(cfg_path.read_text())
    common = parse_common_config(config)
    task = parse_task_config(common.task, config)
    debugger = DebuggerConfig(common, task)
    print(f"  msprobe's MindSpore DebuggerConfig: task {debugger.task}, level {debugger.level}, "
          f"step {debugger.step}, tensor_list {debugger.tensor_list}")
    if debugger.tensor_list != config["statistics"]["tensor_list"] or debugger.task != "statistics":
        failures.append(f"mindspore: msprobe read the config otherwise: {vars(debugger)}")
    intended = intended_calls(sources)
    for side in ("ms_stats_a", "ms_stats_b"):
        for dump_json in sorted((REPO / "tests/fixtures/dumps" / side).glob("step*/*/dump.json")):
            step = int(dump_json.parent.parent.name[4:])
            if step not in intended:
                continue
            names = json.loads(dump_json.read_text())["data"].keys()
            kept = {n for n in names if any(item in n for item in debugger.tensor_list)}
            print(f"  {side} step {step}: {len(names)} calls, the list keeps {sorted(kept)}")
            if kept != intended[step]:
                failures.append(f"mindspore {side} step {step}: keeps {sorted(kept)}, "
                                f"intended {sorted(intended[step])}")
    return failures


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(REPO / "target/release/graph-ascend"))
    ap.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    ap.add_argument("--framework", choices=["pytorch", "mindspore", "both"], default="both")
    ap.add_argument("--run", nargs=4, metavar=("FRAMEWORK", "SIDE", "CONFIG", "FAULT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        framework, side, config, fault = args.run
        (run_torch if framework == "pytorch" else run_mindspore)(side, config, fault)
        return 0
    frameworks = ["pytorch", "mindspore"] if args.framework == "both" else [args.framework]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(args.keep or tmp)
        for fw in frameworks:
            if fw == "mindspore":
                failures += check_mindspore_fixture(args.binary, root / "mindspore" / "fixture")
                try:
                    failures += check("mindspore", "weight", "statistics", args.binary,
                                      root / "mindspore" / "run")
                except SystemExit as e:  # the runtime itself, before any config of ours
                    last = [line for line in str(e).splitlines() if line.strip()][-1:]
                    print(f"mindspore run: SKIPPED, MindSpore does not run here: {last}")
                continue
            for fault, task in [("weight", "tensor"), ("weight", "statistics"), ("gradient", "tensor"),
                                ("gradient", "statistics")]:
                failures += check(fw, fault, task, args.binary, root / fw / f"{fault}_{task}")
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
