"""Seeded generator of Megatron-style rank folders for msprobe's parallel merge.

One seed gives one case: `step0/rank<R>/` dump folders (a target, and for a compare a golden with
a layout of its own) and the `graph_visualize` options `--rank_size --tp --pp [--vpp] [--order]`
and, for some builds, `--file_type json`. Each rank holds pipeline stage `pp_rank` of a small GPT
(layers numbered locally, VPP chunks `Module.<c>.GPTModel`), split along its tensor-parallel index:
tensors a TP group shares are equal on its ranks, split ones (column outputs, weights) differ.
Root-level send/recv name the PP peers and all_reduce's `group_ranks` the TP group, unless the
case leaves them out (then msprobe derives the groups from the flags and `--order`). Values are
rounded to their dtype (float32, float16, bfloat16, float64) as the collector writes them, so
that msprobe's merged statistics go through its cast back to the dtype.

A random stream of its own (so the earlier draws stay as they were) picks the dump's task and
level: statistics (most), md5 (a CRC per tensor) or structure (`"data": {}`), level mix (most), L0
(modules only: no APIs, so no communication nodes either) or L1 (the level string only); and
the framework: PyTorch (most) or MindSpore (`Cell.` modules, `mindspore.Tensor` items).

Some cases give flags msprobe refuses (a rank_size that is not the number of rank folders, tp not
dividing it, vpp > 1 with pp 1, an order with a capital letter, `--file_type json` with a
golden): both tools must refuse them.

Usage: python gen_parallel.py SEED OUTDIR
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_case import dtype_round

# (rank_size, tp, pp, vpp)
LAYOUTS = [
    (2, 2, 1, 1),
    (4, 4, 1, 1),
    (2, 1, 2, 1),
    (4, 1, 4, 1),
    (2, 1, 2, 2),
    (4, 1, 4, 2),
    (4, 2, 2, 1),
    (8, 2, 2, 1),
    (4, 2, 2, 2),
    (4, 2, 1, 1),
    (4, 1, 2, 1),
    (2, 1, 1, 1),
    (1, 1, 1, 1),
]
ORDERS = ["tp-cp-ep-dp-pp"] * 4 + ["tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "pp-tp-dp", "tp-ep-dp-pp-cp"]
DTYPES = {"f32": "torch.float32", "f16": "torch.float16", "bf16": "torch.bfloat16", "f64": "torch.float64"}


def groups(rank_size: int, tp: int, pp: int, order: str):
    """Megatron's rank groups: the rank is a mixed-radix number over `order`, first dimension
    fastest (cp and ep of size 1)."""
    dp = rank_size // (tp * pp)
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "ep": 1}
    dims = [d for d in order.split("-") if d in sizes]
    for d in sizes:
        if d not in dims:
            dims.append(d)

    def coords(rank):
        out = {}
        for d in dims:
            out[d] = rank % sizes[d]
            rank //= sizes[d]
        return out

    def group_of(rank, along):
        c = coords(rank)
        return [r for r in range(rank_size) if all(coords(r)[d] == c[d] for d in dims if d != along)]

    return coords, group_of


class Values:
    def __init__(self, seed: int, dtype: str, rng: random.Random):
        self.seed = seed
        self.dtype = dtype
        self.rng = rng
        self.cache: dict = {}

    def stat(self, *key, shape=(4, 8), dtype=None):
        key = (self.seed, *key)
        dtype = dtype or self.dtype
        if (key, dtype) in self.cache:
            return dict(self.cache[(key, dtype)])
        g = np.random.default_rng(int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little"))
        a = g.standard_normal(shape) * 10 ** g.uniform(-2, 1)
        mx, mn = float(a.max()), float(a.min())
        mean, norm = float(a.mean()), float(np.linalg.norm(a))
        if dtype in ("f16", "bf16"):
            mx, mn, mean, norm = (dtype_round(dtype, v) for v in (mx, mn, mean, norm))
        elif dtype == "f32":
            mx, mn, mean, norm = (float(np.float32(v)) for v in (mx, mn, mean, norm))
        out = {
            "type": "torch.Tensor",
            "dtype": DTYPES[dtype],
            "shape": list(shape),
            "Max": mx,
            "Min": mn,
            "Mean": mean,
            "Norm": norm,
            "requires_grad": dtype != "f64" and g.random() < 0.7,
        }
        if g.random() < 0.03:
            out["Max"] = float("nan") if g.random() < 0.5 else float("inf")
        self.cache[(key, dtype)] = out
        return dict(out)


def rank_dump(x: random.Random, v: Values, rank, rank_size, tp, pp, vpp, order, shape: dict, dump_kind: dict):
    coords, group_of = groups(rank_size, tp, pp, order)
    c0 = coords(rank)
    t, s, dp = c0["tp"], c0["pp"], c0["dp"]
    tg, pg = group_of(rank, "tp"), group_of(rank, "pp")
    construct, data, stacks = {}, {}, []
    counters: dict = {}

    def api(name, fwd=True):
        n = counters.get(name, 0)
        counters[name] = n + 1
        return f"{name}.{n}.{'forward' if fwd else 'backward'}"

    def add(node, parent, entry):
        construct[node] = parent
        data[node] = entry
        stacks.append(node)

    def shared(*k, **kw):
        return v.stat("dp", dp, "stage", s, *k, **kw)

    def split(*k, **kw):
        return v.stat("dp", dp, "stage", s, "tp", t, *k, **kw)

    def group_kw():
        if not shape["group_ranks"]:
            return {}
        return {"group": {"type": "torch.ProcessGroup", "group_ranks": tg, "group_id": f"tp{tg[0]}"}}

    if len(pg) > 1 and shape["p2p"]:
        nxt = pg[(s + 1) % len(pg)]
        op = "isend" if shape["isend"] else "send"
        add(
            api(f"Distributed.{op}"),
            None,
            {"input_args": [shared("send")], "input_kwargs": {"dst": {"type": "int", "value": nxt}}, "output": [None]},
        )
        add(
            api("Distributed.irecv" if shape["isend"] else "Distributed.recv"),
            None,
            {
                "input_args": [shared("recv")],
                "input_kwargs": {"src": {"type": "int", "value": pg[s - 1]}},
                "output": [None],
            },
        )
    add(api("Torch.arange"), None, {"input_args": [{"type": "int", "value": 16}], "output": [shared("arange")]})
    if shape["between"]:
        add(api("Tensor.unsqueeze"), None, {"input_args": [shared("arange")], "output": [shared("ids")]})
    layers = shape["layers"]
    for c in range(vpp):
        P = f"Module.{c}.GPTModel" if vpp > 1 else "Module.module.GPTModel"
        top = f"{P}.forward.0"
        add(top, None, {"input_args": [shared("in", c)], "input_kwargs": {}, "output": [shared("out", c)]})
        if s == 0 and c == 0:
            emb = f"{P}.embedding.Embedding.forward.0"
            add(
                emb,
                top,
                {
                    "input_args": [shared("emb_in")],
                    "output": [shared("emb_out")],
                    "parameters": {"weight": split("emb_w")},
                },
            )
            add(api("Functional.embedding"), emb, {"input_args": [shared("emb_in")], "output": [shared("emb_out")]})
        blk = f"{P}.decoder.TransformerBlock.forward.0"
        add(blk, top, {"input_args": [shared("blk_in", c)], "output": [shared("blk_out", c)]})
        for lay_i in range(layers):
            L = f"{P}.decoder.layers.{lay_i}"
            lay = f"{L}.TransformerLayer.forward.0"
            add(lay, blk, {"input_args": [shared("lay_in", c, lay_i)], "output": [shared("lay_out", c, lay_i)]})
            if shape["norm"]:
                ln = f"{L}.input_layernorm.RMSNorm.forward.0"
                add(
                    ln,
                    lay,
                    {
                        "input_args": [shared("lay_in", c, lay_i)],
                        "output": [shared("ln", c, lay_i)],
                        "parameters": {"weight": shared("ln_w", c, lay_i, dtype="f32")},
                    },
                )
            col = f"{L}.linear_qkv.ColumnParallelLinear.forward.0"
            add(
                col,
                lay,
                {
                    "input_args": [shared("lay_in", c, lay_i)],
                    "output": [split("qkv", c, lay_i)],
                    "parameters": {"weight": split("qkv_w", c, lay_i), "bias": split("qkv_b", c, lay_i)},
                },
            )
            add(
                api("Torch.matmul"),
                col,
                {
                    "input_args": [shared("lay_in", c, lay_i), split("qkv_w", c, lay_i)],
                    "output": [split("qkv", c, lay_i)],
                },
            )
            add(
                api("Functional.gelu"),
                lay,
                {"input_args": [split("qkv", c, lay_i)], "output": [split("act", c, lay_i)]},
            )
            row = f"{L}.linear_proj.RowParallelLinear.forward.0"
            add(
                row,
                lay,
                {
                    "input_args": [split("act", c, lay_i)],
                    "output": [shared("proj", c, lay_i)],
                    "parameters": {"weight": split("proj_w", c, lay_i), "bias": shared("proj_b", c, lay_i)},
                },
            )
            add(
                api("Torch.matmul"),
                row,
                {
                    "input_args": [split("act", c, lay_i), split("proj_w", c, lay_i)],
                    "output": [split("partial", c, lay_i)],
                },
            )
            if shape["reduce"]:
                red = "reduce_scatter" if shape["reduce_scatter"] else "all_reduce"
                add(
                    api(f"Distributed.{red}"),
                    row,
                    {
                        "input_args": [split("partial", c, lay_i)],
                        "input_kwargs": group_kw(),
                        "output": [shared("proj", c, lay_i)],
                    },
                )
            if shape["rank_unique"] and x.random() < 0.3:
                # a node only some ranks have (e.g. a dropout that fired)
                add(
                    api("Functional.dropout"),
                    lay,
                    {"input_args": [shared("proj", c, lay_i)], "output": [split("drop")]},
                )
        if s == pp - 1 and c == vpp - 1:
            out = f"{P}.output_layer.ColumnParallelLinear.forward.0"
            add(
                out,
                top,
                {
                    "input_args": [shared("blk_out", c)],
                    "output": [split("logits")],
                    "parameters": {"weight": split("out_w")},
                },
            )
            add(
                api("Torch.matmul"),
                out,
                {"input_args": [shared("blk_out", c), split("out_w")], "output": [split("logits")]},
            )
    if shape["backward"]:
        for c in reversed(range(vpp)):
            P = f"Module.{c}.GPTModel" if vpp > 1 else "Module.module.GPTModel"
            top = f"{P}.backward.0"
            add(top, None, {"input": [shared("gout", c)], "output": [shared("gin", c)]})
            blk = f"{P}.decoder.TransformerBlock.backward.0"
            add(blk, top, {"input": [shared("blk_gout", c)], "output": [shared("blk_gin", c)]})
            for lay_i in reversed(range(layers)):
                L = f"{P}.decoder.layers.{lay_i}"
                lay = f"{L}.TransformerLayer.backward.0"
                add(lay, blk, {"input": [shared("lay_gout", c, lay_i)], "output": [shared("lay_gin", c, lay_i)]})
                col = f"{L}.linear_qkv.ColumnParallelLinear.backward.0"
                add(col, lay, {"input": [split("qkv_g", c, lay_i)], "output": [split("qkv_gin", c, lay_i)]})
                add(
                    api("Torch.matmul", False),
                    col,
                    {"input": [split("qkv_g", c, lay_i)], "output": [split("qkv_gin", c, lay_i)]},
                )
                if shape["reduce"]:
                    add(
                        api("Distributed.all_reduce"),
                        col,
                        {
                            "input_args": [split("qkv_gin", c, lay_i)],
                            "input_kwargs": group_kw(),
                            "output": [shared("qkv_gred", c, lay_i)],
                        },
                    )
    if dump_kind["level"] == "L0":
        # modules only
        construct = {k: p for k, p in construct.items() if k.startswith("Module.")}
        data = {k: d for k, d in data.items() if k.startswith("Module.")}
        stacks = [n for n in stacks if n.startswith("Module.")]
    if dump_kind["framework"] == "mindspore":
        construct, data, stacks = to_mindspore(construct, data, stacks)
    if dump_kind["task"] == "md5":
        add_md5(data)
    stack = {
        str(i): [[n], [f"File /train/model.py, line {10 + i}, in forward, \n call()"]]
        for i, n in enumerate(n for n in stacks if ".backward" not in n)
    }
    dump = {
        "task": "structure" if dump_kind["task"] == "structure" else "statistics",
        "level": dump_kind["level"],
        "framework": dump_kind["framework"],
        "dump_data_dir": None,
        "data": {} if dump_kind["task"] == "structure" else data,
    }
    return construct, dump, stack


MS_DTYPES = {
    "torch.float32": "Float32",
    "torch.float16": "Float16",
    "torch.bfloat16": "BFloat16",
    "torch.float64": "Float64",
}


def to_mindspore(construct: dict, data: dict, stacks: list):
    """The same dump as MindSpore writes it: `Cell.` modules, `mindspore.Tensor` items, no
    requires_grad."""

    def name(n):
        return "Cell." + n[len("Module.") :] if n and n.startswith("Module.") else n

    def item(v):
        if isinstance(v, list):
            return [item(e) for e in v]
        if isinstance(v, dict) and v.get("type") == "torch.Tensor":
            out = {k: e for k, e in v.items() if k != "requires_grad"}
            out["type"] = "mindspore.Tensor"
            out["dtype"] = MS_DTYPES[v["dtype"]]
            return out
        if isinstance(v, dict) and "type" not in v:
            return {k: item(e) for k, e in v.items()}
        return v

    return (
        {name(k): name(p) for k, p in construct.items()},
        {name(k): item(d) for k, d in data.items()},
        [name(n) for n in stacks],
    )


def add_md5(v):
    """A CRC32 for every tensor item (statistics plus md5, as task statistics with summary_mode md5)."""
    if isinstance(v, list):
        for e in v:
            add_md5(e)
    elif isinstance(v, dict):
        if str(v.get("type", "")).endswith(".Tensor"):
            v["md5"] = f"{zlib.crc32(json.dumps([v.get(k) for k in ('Max', 'Min', 'Mean', 'Norm')]).encode()):08x}"
        else:
            for e in v.values():
                add_md5(e)


def write_side(x: random.Random, seed: int, root: str, layout, order: str, steps: int, dump_kind: dict) -> dict:
    rank_size, tp, pp, vpp = layout
    v = Values(seed, x.choice(["f32"] * 3 + ["f16", "bf16", "f64"]), x)
    shape = {
        "layers": x.randint(1, 3),
        "p2p": x.random() < 0.8,
        "isend": x.random() < 0.3,
        "group_ranks": x.random() < 0.8,
        "reduce": x.random() < 0.9,
        "reduce_scatter": x.random() < 0.2,
        "between": x.random() < 0.7,
        "norm": x.random() < 0.5,
        "backward": x.random() < 0.8,
        "rank_unique": x.random() < 0.2,
    }
    for step in range(steps):
        for r in range(rank_size):
            d = os.path.join(root, f"step{step}", f"rank{r}")
            os.makedirs(d, exist_ok=True)
            v.seed = seed * 31 + step
            c, dp, st = rank_dump(x, v, r, rank_size, tp, pp, vpp, order, shape, dump_kind)
            for fname, obj in (("construct.json", c), ("dump.json", dp), ("stack.json", st)):
                with open(os.path.join(d, fname), "w") as f:
                    json.dump(obj, f, indent=1)
    return shape


def make_case(seed: int, out: str) -> dict:
    x = random.Random(seed * 7 + 3)
    kr = random.Random(seed * 13 + 1)
    dump_kind = {
        "task": kr.choice(["statistics"] * 6 + ["md5", "structure"]),
        "level": kr.choice(["mix"] * 6 + ["L0", "L1"]),
        "framework": kr.choice(["pytorch"] * 5 + ["mindspore"]),
    }
    compare = x.random() < 0.35
    steps = 2 if x.random() < 0.1 else 1
    layout_t = x.choice(LAYOUTS)
    order_t = x.choice(ORDERS)
    sides = [("target", layout_t, order_t)]
    if compare:
        # a golden of the same model on another layout (same data-parallel count, as msprobe needs)
        same_dp = [lo for lo in LAYOUTS if lo[0] // (lo[1] * lo[2]) == layout_t[0] // (layout_t[1] * layout_t[2])]
        sides.append(("golden", x.choice(same_dp), x.choice(ORDERS)))
    fw = dump_kind["framework"]
    mode = {"statistics": "statistics", "md5": "md5", "structure": "structure"}[dump_kind["task"]]
    case = {"seed": seed, "mode": mode, "framework_target": fw, "framework_golden": fw, "level": dump_kind["level"]}
    case["compare"] = compare
    shapes = {}
    for side, layout, order in sides:
        # a golden with the target's seed: the same values where the layouts agree
        shapes[side] = write_side(
            x,
            seed if side == "target" or x.random() < 0.7 else seed + 1,
            os.path.join(out, side),
            layout,
            order,
            steps,
            dump_kind,
        )
    flags = {
        "--rank_size": [str(lo[0]) for _, lo, _ in sides],
        "--tp": [str(lo[1]) for _, lo, _ in sides],
        "--pp": [str(lo[2]) for _, lo, _ in sides],
    }
    if any(lo[3] > 1 for _, lo, _ in sides) or x.random() < 0.2:
        flags["--vpp"] = [str(lo[3]) for _, lo, _ in sides]
    if any(o != "tp-cp-ep-dp-pp" for _, _, o in sides) or x.random() < 0.2:
        flags["--order"] = [o for _, _, o in sides]
    bad = None
    if x.random() < 0.08:
        bad = x.choice(["rank_size", "tp", "vpp", "order", "json_compare", "count"])
        if bad == "rank_size":
            flags["--rank_size"][0] = str(layout_t[0] * 2)
        elif bad == "tp":
            flags["--tp"][0] = str(3)
        elif bad == "vpp":
            flags["--vpp"] = ["2"] * len(sides)
            flags["--pp"] = ["1"] * len(sides)
        elif bad == "order":
            flags["--order"] = ["TP-pp-dp"] * len(sides)
        elif bad == "json_compare":
            flags["--file_type"] = ["json"]
        else:
            flags["--tp"] = flags["--tp"] * 2
    opts: list[str] = []
    for k, vals in flags.items():
        opts += [k, *vals]
    if compare:
        if x.random() < 0.15:
            opts.append("-lm")
        if x.random() < 0.15:
            opts.append("-fm")
    elif "--file_type" not in flags and x.random() < 0.35:
        opts += ["--file_type", "json"]
    if x.random() < 0.1:
        opts.append("-oc")
    # the log flags, which change what is printed, not the file
    opts += [f for f in ("-tensor_log", "-progress_log") if kr.random() < 0.05]
    case["options"] = opts
    case["layouts"] = {side: {"layout": list(lo), "order": o} for side, lo, o in sides}
    case["shapes"] = shapes
    case["steps"] = steps
    if bad:
        case["invalid_flag"] = bad
    top = "step0" if steps == 1 else ""
    case["target"] = os.path.join("target", top).rstrip("/")
    if compare:
        case["golden"] = os.path.join("golden", top).rstrip("/")
    case["file_type"] = "json" if "--file_type" in opts and not compare else "db"
    with open(os.path.join(out, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    return case


if __name__ == "__main__":
    print(json.dumps(make_case(int(sys.argv[1]), sys.argv[2])))
