"""Monitor fixtures made by real msprobe 26.2 (mindstudio-probe) on CPU torch.

Run with the oracle venv (never by `make test`):

    .oracle-venv/bin/python tests/monitor/make_monitor_fixtures.py [OUT_DIR]

It trains one tiny model (an embedding Linear, two residual blocks of LayerNorm, Linear, GELU,
Linear, and a head Linear; hidden size 32, no biases but the norms') for STEPS steps under
msprobe's training-state monitor and writes, under OUT_DIR (default tests/fixtures/monitor):

- `monitor_v1.tar.xz`: TrainerMon (v1) CSV output of every run below, two ranks each (two
  processes on gloo, gradients averaged with all_reduce), in `v1/<run>/<time>-rank<R>-<uid>/`;
- `monitor_v2.tar.xz`: TrainerMonitorV2 output (`v2/<run>/rank_0/`) of three runs on one rank
  (a fault meant for rank 1 is on rank 0 there);
- `monitor_trend.tar.xz`: `msprobe data2db` of three v1 runs' activation CSVs,
  `trend/<run>/monitor_data.trend.db`;
- `faults.json`: for each run, its numerics and the fault injected (kind, step, module, rank).

Runs (all the same initial weights; the data of each rank from its own seed):
- `golden`: float32.
- `noise_bf16`: bfloat16 autocast, no fault (a noise-only pair with `golden`).
- `noise_seed`: float32 with other data (another data seed; a noise-only pair, natural drift).
- `fault_weight`: bfloat16; at step K, before the forward, rank 1's `layers.1.fc1.weight` is scaled
  by 1.1 (a weight corrupted once).
- `fault_grad`: bfloat16; from step K on, the gradient that flows back through `layers.0.act`
  is scaled by 1.5 on both ranks (a backward kernel wrong from step K).
- `fault_optim`: bfloat16; from step K on, the optimizer also shrinks `layers.1.fc2.weight` by 1%
  at each step (a wrong weight decay of one parameter from step K).
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

# The environment overrides are for trying the script quickly; the fixtures use the defaults.
STEPS = int(os.environ.get("MONITOR_FIXTURE_STEPS", "500"))
FAULT_STEP = int(os.environ.get("MONITOR_FIXTURE_FAULT_STEP", "250"))
HIDDEN = 32
IN_DIM = 16
OUT_DIM = 4
BATCH = 16
WORLD = 2
OPS = ["norm", "max"]
MODULES = [
    "embed",
    "layers.0.norm",
    "layers.0.fc1",
    "layers.0.act",
    "layers.0.fc2",
    "layers.1.norm",
    "layers.1.fc1",
    "layers.1.act",
    "layers.1.fc2",
    "head",
]

RUNS = {
    "golden": {"dtype": "float32", "data_seed": 0, "fault": None},
    "noise_bf16": {"dtype": "bfloat16", "data_seed": 0, "fault": None},
    "noise_seed": {"dtype": "float32", "data_seed": 1, "fault": None},
    "fault_weight": {
        "dtype": "bfloat16",
        "data_seed": 0,
        "fault": {"kind": "weight", "step": FAULT_STEP, "module": "layers.1.fc1",
                  "param": "layers.1.fc1.weight", "ranks": [1], "band": "forward"},
    },
    "fault_grad": {
        "dtype": "bfloat16",
        "data_seed": 0,
        "fault": {"kind": "grad", "step": FAULT_STEP, "module": "layers.0.act",
                  "ranks": [0, 1], "band": "backward"},
    },
    "fault_optim": {
        "dtype": "bfloat16",
        "data_seed": 0,
        "fault": {"kind": "optim", "step": FAULT_STEP, "module": "layers.1.fc2",
                  "param": "layers.1.fc2.weight", "ranks": [0, 1], "band": "optimizer"},
    },
}
V2_RUNS = ["golden", "noise_bf16", "fault_weight"]
TREND_RUNS = ["golden", "noise_bf16", "fault_weight"]


class ScaleGrad(torch.autograd.Function):
    """Identity forward; the backward multiplies the gradient by `scale`."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


class Act(nn.Module):
    """GELU whose backward can be scaled (the injected gradient fault)."""

    def __init__(self):
        super().__init__()
        self.grad_scale = 1.0

    def forward(self, x):
        if self.grad_scale != 1.0:
            x = ScaleGrad.apply(x, self.grad_scale)
        return nn.functional.gelu(x)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.act = Act()
        self.fc2 = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, h):
        return h + self.fc2(self.act(self.fc1(self.norm(h))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(IN_DIM, HIDDEN, bias=False)
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(HIDDEN, OUT_DIM, bias=False)

    def forward(self, x):
        h = self.embed(x)
        for block in self.layers:
            h = block(h)
        return self.head(h)


class BuggyAdam(torch.optim.Adam):
    """Adam that, once `bug_param` is set, also shrinks that parameter by 1% per step."""

    bug_param = None

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        if self.bug_param is not None:
            self.bug_param.mul_(0.99)
        return loss


def teacher():
    gen = torch.Generator().manual_seed(1234)
    return torch.randn(IN_DIM, OUT_DIM, generator=gen) / IN_DIM**0.5


def batches(data_seed, rank):
    gen = torch.Generator().manual_seed(1000 * data_seed + rank)
    w = teacher()
    for _ in range(STEPS):
        x = torch.randn(BATCH, IN_DIM, generator=gen)
        y = torch.tanh(x @ w * 2.0)
        yield x, y


def v1_config(path):
    config = {
        "targets": {m: {} for m in MODULES},
        "xy_distribution": True,
        "wg_distribution": True,
        "mv_distribution": True,
        "param_distribution": True,
        "ops": OPS,
        "format": "csv",
        "step_count_per_record": 100,
    }
    with open(path, "w") as f:
        json.dump(config, f)


def v2_config(path, out_dir):
    config = {
        "framework": "pytorch",
        "output_dir": out_dir,
        "step_count_per_record": 100,
        "monitors": {
            "module": {"enabled": True, "targets": MODULES, "ops": OPS},
            "param": {"enabled": True, "ops": OPS},
        },
    }
    with open(path, "w") as f:
        json.dump(config, f)


def train(rank, world, run, out_dir, version, port):
    spec = RUNS[run]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    opt = BuggyAdam(model.parameters(), lr=2e-3)
    cfg = os.path.join(out_dir, f"config_{version}_{rank}.json")
    if version == "v1":
        from msprobe.pytorch import TrainerMon

        os.environ["MONITOR_OUTPUT_DIR"] = out_dir
        v1_config(cfg)
        mon = TrainerMon(cfg, params_have_main_grad=False)
        mon.set_monitor(model, grad_acc_steps=1, optimizer=opt)
    else:
        from msprobe.core.monitor_v2.trainer import TrainerMonitorV2

        v2_config(cfg, out_dir)
        mon = TrainerMonitorV2(cfg, fr="pytorch")
        mon.start(model=model, optimizer=opt)
    fault = spec["fault"]
    params = dict(model.named_parameters())
    modules = dict(model.named_modules())
    for step, (x, y) in enumerate(batches(spec["data_seed"], rank)):
        # A one-rank run (v2) takes the fault on its rank 0.
        if fault and step == fault["step"] and (rank in fault["ranks"] or world == 1):
            if fault["kind"] == "weight":
                with torch.no_grad():
                    params[fault["param"]].mul_(1.1)
            elif fault["kind"] == "grad":
                modules[fault["module"]].grad_scale = 1.5
            elif fault["kind"] == "optim":
                opt.bug_param = params[fault["param"]]
        opt.zero_grad()
        if spec["dtype"] == "bfloat16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x)
        else:
            out = model(x)
        loss = nn.functional.mse_loss(out.float(), y)
        loss.backward()
        if world > 1:
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
    if version == "v2":
        mon.stop()
    if world > 1:
        dist.destroy_process_group()


def run_one(run, version, out_dir, world, port):
    os.makedirs(out_dir, exist_ok=True)
    if world > 1:
        mp.spawn(train, args=(world, run, out_dir, version, port), nprocs=world, join=True)
    else:
        train(0, 1, run, out_dir, version, port)
    for name in os.listdir(out_dir):
        if name.startswith("config_"):
            os.remove(os.path.join(out_dir, name))


def make_trend(v1_dir, trend_dir):
    """`msprobe data2db` of TREND_RUNS' activation CSVs (`actv`, `actv_grad`: the files that
    name modules; the others would triple the fixture's size), one trend.db per run."""
    msprobe = os.path.join(os.path.dirname(sys.executable), "msprobe")
    for run in TREND_RUNS:
        print(f"data2db {run}", flush=True)
        subset = tempfile.mkdtemp(prefix="monitor_trend_")
        for rank_dir in os.listdir(os.path.join(v1_dir, run)):
            os.makedirs(os.path.join(subset, rank_dir))
            for name in os.listdir(os.path.join(v1_dir, run, rank_dir)):
                if name.startswith("actv_"):
                    shutil.copy(os.path.join(v1_dir, run, rank_dir, name),
                                os.path.join(subset, rank_dir, name))
        subprocess.run([msprobe, "data2db", "--db", os.path.join(trend_dir, run), "--data", subset,
                        "--format", "monitor"], check=True)
        shutil.rmtree(subset)


def tar_xz(src_dir, arcname, dest):
    with tarfile.open(dest, "w:xz", preset=9) as tar:
        tar.add(src_dir, arcname=arcname)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "fixtures", "monitor")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="monitor_fixtures_")
    port = 29611
    for run in RUNS:
        port += 1
        print(f"v1 {run}", flush=True)
        run_one(run, "v1", os.path.join(work, "v1", run), WORLD, port)
    for run in V2_RUNS:
        print(f"v2 {run}", flush=True)
        run_one(run, "v2", os.path.join(work, "v2", run), 1, 0)
    make_trend(os.path.join(work, "v1"), os.path.join(work, "trend"))
    tar_xz(os.path.join(work, "v1"), "v1", os.path.join(out, "monitor_v1.tar.xz"))
    tar_xz(os.path.join(work, "v2"), "v2", os.path.join(out, "monitor_v2.tar.xz"))
    tar_xz(os.path.join(work, "trend"), "trend", os.path.join(out, "monitor_trend.tar.xz"))
    with open(os.path.join(out, "faults.json"), "w") as f:
        json.dump({"steps": STEPS, "world": WORLD, "ops": OPS, "modules": MODULES, "runs": RUNS},
                  f, indent=1)
        f.write("\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
