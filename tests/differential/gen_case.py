"""Seeded generator of msprobe-shaped dump folders for differential testing.

One seed gives one case: a target dump (and, for compare cases, a golden dump derived from it by
perturbations chosen to fire msprobe's checker rules) plus the `msprobe graph_visualize` options to
run on them. Everything stays within what msprobe's dumpers write (see the real dumps in
`tests/fixtures/dumps/` and msprobe's data processors):

- folders `stepN/proc<pid>/` (or `rankN/`) holding `dump.json`, `construct.json`, `stack.json`
  (new stack format: `{"0": [[names], [frames]]}`) and, for `task: tensor`, `dump_tensor_data/`
  with `.pt` (PyTorch, needs torch) or `.npy` (MindSpore) files named by `data_name`;
- PyTorch names `Module.<path>.<Class>.forward.<n>` and MindSpore `Cell.<path>.<Class>.forward.<n>`,
  APIs `<Type>.<api>.<count>.<forward|backward>`, `parameters_grad` entries that are in dump.json
  but not in construct.json, backward entries without stack frames;
- construct.json in the order msprobe writes it: a module's key is written when the first API
  inside it is written (outer modules first), modules with no API when they end;
- statistics as the processors compute them: float tensors Max/Min/Mean/Norm; integer tensors
  Max/Min only on PyTorch (MindSpore casts to float32 and gives all four); bool tensors Max=any,
  Min=all; 0-d tensors all four equal the value; empty tensors all null (md5 null);
  fp16/bf16 values rounded to the dtype; md5 = CRC32 of the tensor bytes, 8 hex digits.

Extensions, drawn from a second random stream of the seed (so that a seed without them gives the
case it gave before): one case in ten is a multi-rank (`-tp` on a step folder holding rank0 and
rank1) or multi-step (`-tp` on a folder holding step0 and step1) layout, each folder a case of its
own sub-seed with the same mode, frameworks and options; one compare in four renames a golden
module attribute and passes `-lm mapping.yaml` with the `{parent class: {old: new}}` mapping,
unquoted, so that the new names yes/no/on/off are PyYAML 1.1 booleans (msprobe then drops the
mapping).

Usage: python gen_case.py SEED OUTDIR   (writes OUTDIR/case.json, OUTDIR/target, OUTDIR/golden)
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import zlib

import numpy as np

try:  # tensor mode on PyTorch writes real .pt files
    import torch  # type: ignore
except Exception:  # pragma: no cover - depends on the environment
    torch = None

PT_API = {
    "Functional": ["linear", "relu", "gelu", "layer_norm", "dropout", "softmax", "silu"],
    "Torch": ["matmul", "add", "cat", "arange", "empty", "sum"],
    "Tensor": ["__add__", "__mul__", "view", "float", "to", "__setitem__", "reshape"],
}
MS_API = {
    "Functional": ["softmax", "relu", "cross_entropy"],
    "Mint": ["matmul", "add", "cat", "arange", "empty"],
    "MintFunctional": ["linear", "gelu", "layer_norm", "dropout"],
    "Tensor": ["view", "__add__", "__mul__", "to", "reshape"],
    "Primitive": ["get_shp.Shape", "add.Add"],
}
CLASSES = ["Linear", "LayerNorm", "Block", "Attention", "FeedForward", "Embedding", "Dropout"]
ATTRS = ["embed", "layers", "attn", "mlp", "fc1", "fc2", "ln1", "ln2", "head", "proj", "qkv"]

PT_DTYPES = {
    "f32": "torch.float32",
    "f16": "torch.float16",
    "bf16": "torch.bfloat16",
    "i64": "torch.int64",
    "i32": "torch.int32",
    "bool": "torch.bool",
    "f64": "torch.float64",
}
MS_DTYPES = {
    "f32": "Float32",
    "f16": "Float16",
    "bf16": "BFloat16",
    "i64": "Int64",
    "i32": "Int32",
    "bool": "Bool",
    "f64": "Float64",
}
NP_DTYPES = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.float32,  # values are rounded to bf16 but kept in float32 storage for numpy
    "i64": np.int64,
    "i32": np.int32,
    "bool": np.bool_,
    "f64": np.float64,
}
FLOATS = ("f32", "f16", "bf16", "f64")


def round_bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (round half to even), kept as float32."""
    a = np.asarray(a, dtype=np.float32)
    flat = a.reshape(-1).copy()
    bits = flat.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    res = ((bits + rounding) >> 16 << 16).astype(np.uint32).view(np.float32).copy()
    res[np.isnan(flat)] = np.nan
    return res.reshape(a.shape)


class Tensor:
    """A generated tensor: its dtype key, values (numpy) and requires_grad."""

    def __init__(self, kind: str, values: np.ndarray, requires_grad: bool):
        self.kind = kind
        self.values = values
        self.requires_grad = requires_grad

    def copy(self) -> Tensor:
        return Tensor(self.kind, self.values.copy(), self.requires_grad)


def cast(kind: str, values) -> np.ndarray:
    v = np.asarray(values)
    if kind == "bf16":
        return round_bf16(v.astype(np.float32))
    if kind == "bool":
        return v.astype(np.bool_)
    if kind in ("i64", "i32"):
        return np.round(v.astype(np.float64)).astype(NP_DTYPES[kind])
    return v.astype(NP_DTYPES[kind])


def py_float(x) -> float | int | bool | None:
    return x.item() if hasattr(x, "item") else x


class Gen:
    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)

    # ---------------------------------------------------------------- values
    def tensor(self, kinds=None, rg=None) -> Tensor:
        r = self.rng
        kind = r.choice(kinds or ["f32"] * 6 + ["f16", "bf16", "i64", "i32", "bool", "f64"])
        shape_kind = r.random()
        if shape_kind < 0.06:
            shape: tuple = ()
        elif shape_kind < 0.10:
            shape = (0,) if r.random() < 0.5 else (2, 0)
        else:
            shape = tuple(r.randint(1, 5) for _ in range(r.randint(1, 3)))
        if kind == "bool":
            vals = self.np.random(shape) < 0.5
        elif kind in ("i64", "i32"):
            vals = self.np.integers(-20, 100, size=shape)
        else:
            scale = 10 ** r.uniform(-3, 2)
            vals = self.np.standard_normal(shape) * scale
            if r.random() < 0.05:
                vals = np.zeros(shape)
        t = Tensor(kind, cast(kind, vals), rg if rg is not None else (kind in FLOATS and r.random() < 0.5))
        return t

    def scalar(self):
        r = self.rng
        c = r.random()
        if c < 0.35:
            return {"type": "int", "value": r.randint(-3, 64)}
        if c < 0.6:
            return {"type": "float", "value": r.choice([0.1, 1e-5, 2.0, -0.01, 0.5, 1.0])}
        if c < 0.8:
            return {"type": "bool", "value": r.random() < 0.5}
        if c < 0.9:
            return None
        return {"type": "str", "value": r.choice(["mean", "none", "sum"])}

    def arg(self, depth=0):
        r = self.rng.random()
        if r < 0.7 or depth > 0:
            return self.tensor() if self.rng.random() < 0.85 else self.scalar()
        if r < 0.85:
            return [self.arg(depth + 1) for _ in range(self.rng.randint(1, 3))]  # a tuple
        return self.scalar()


# ------------------------------------------------------------------ JSON of a value
def leaf_json(t, framework: str, mode: str, data_name: str | None):
    """The dump.json leaf msprobe writes for a generated value."""
    if t is None or isinstance(t, dict):
        return t
    if isinstance(t, list):
        return [leaf_json(x, framework, mode, f"{data_name}.{i}" if data_name else None) for i, x in enumerate(t)]
    v = t.values
    kind = t.kind
    if framework == "pytorch":
        out = {"type": "torch.Tensor", "dtype": PT_DTYPES[kind], "shape": list(v.shape)}
    else:
        out = {"type": "mindspore.Tensor", "dtype": MS_DTYPES[kind], "shape": list(v.shape)}
    mx = mn = mean = norm = None
    if v.size == 0:
        pass
    elif kind == "bool":
        mx, mn = bool(v.any()), bool(v.all())
    elif v.ndim == 0:
        val = py_float(v)
        if framework == "mindspore" and kind not in FLOATS:
            val = float(val)
        mx = mn = mean = norm = val
    elif kind in ("i64", "i32"):
        if framework == "pytorch":
            mx, mn = int(v.max()), int(v.min())
        else:
            f = v.astype(np.float32)
            mx, mn = float(f.max()), float(f.min())
            mean, norm = float(np.float32(f.mean())), float(np.float32(np.linalg.norm(f)))
    else:
        with np.errstate(all="ignore"):
            f = v.astype(np.float64)
            mx, mn = float(np.max(f)), float(np.min(f))
            if kind == "f64" and framework == "pytorch":
                mean = norm = None
            else:
                mean, norm = float(np.mean(f)), float(np.linalg.norm(f.ravel()))
                if kind in ("f16", "bf16"):
                    mean, norm = dtype_round(kind, mean), dtype_round(kind, norm)
                else:
                    mean, norm = float(np.float32(mean)), float(np.float32(norm))
    out.update({"Max": mx, "Min": mn, "Mean": mean, "Norm": norm})
    if framework == "pytorch":
        out["requires_grad"] = t.requires_grad
    if mode == "md5":
        out["md5"] = None if v.size == 0 else f"{zlib.crc32(np.ascontiguousarray(v).tobytes()):08x}"
    if mode == "tensor" and data_name:
        out["data_name"] = data_name + (".pt" if framework == "pytorch" else ".npy")
    return out


def dtype_round(kind, x):
    if x is None or not math.isfinite(x):
        return x
    if kind == "f16":
        return float(np.float16(x))
    return float(round_bf16(np.array([x], dtype=np.float32))[0])


# ------------------------------------------------------------------ the model
class Node:
    def __init__(self, name, kind, parent):
        self.name = name  # full dump name
        self.kind = kind  # "module" | "api" | "pgrad"
        self.parent = parent  # parent dump name or None
        self.data: dict = {}


def build_model(g: Gen, framework: str, recompute: random.Random | None = None):
    """Runs a random 'model' forward and backward; returns dump entries in dump order, the
    construct.json dict in msprobe's order and the stack of each forward node.

    With `recompute` (a random stream of its own), some inner modules are activation-checkpointed
    as an older collector dumped them: before the backward pass the module's forward runs again at
    the top level (parent null, a new call number, stack frames of a recompute function), and its
    backward is that recomputed call's, at the top level too; the first forward keeps its place
    and gets no backward. msprobe's `_handle_recompute` moves such pairs under the backward of the
    first call's parent."""
    r = g.rng
    prefix = "Module" if framework == "pytorch" else "Cell"
    apis = PT_API if framework == "pytorch" else MS_API
    api_count: dict = {}
    mod_count: dict = {}
    entries: list[Node] = []
    construct: dict = {}
    stacks: dict = {}
    pending: list[Node] = []  # modules entered whose construct key is not yet written

    def flush_pending():
        while pending:
            m = pending.pop(0)
            construct[m.name] = m.parent

    def new_api(parent, direction, api_key=None):
        t = r.choice(list(apis))
        a = r.choice(apis[t])
        key = api_key or f"{t}.{a}"
        if direction == "forward":
            n = api_count.get(key, 0)
            api_count[key] = n + 1
        else:
            n = api_key_n[key]
        return Node(f"{key}.{n}.{direction}", "api", parent)

    api_key_n: dict = {}

    def module_tree(depth, path):
        kids = []
        for _ in range(r.randint(0, 3 if depth < 2 else 0)):
            attr = r.choice(ATTRS)
            if attr == "layers":
                attr = f"layers.{r.randint(0, 3)}"
            kids.append(module_tree(depth + 1, f"{path}.{attr}" if path else attr))
        has_params = r.random() < 0.5
        return {"path": path, "cls": r.choice(CLASSES), "kids": kids, "params": has_params}

    roots = [module_tree(0, r.choice(ATTRS) + (str(i) if r.random() < 0.3 else "")) for i in range(r.randint(1, 3))]
    # de-duplicate module paths (a path is one module instance)
    seen = set()
    for m in roots:
        if m["path"] in seen:
            m["path"] += "_x"
        seen.add(m["path"])

    fwd_calls: list = []  # (node, module spec or None) in call order for the backward pass

    def frames(name):
        return [
            f"File /home/user/train/models.py, line {r.randint(10, 200)}, in forward, \n"
            f" x = self.{name.split('.')[1]}(x)",
            "File /home/user/train/run_dump.py, line 96, in main, \n logits = model(ids)",
        ]

    def call_api(parent):
        node = new_api(parent, "forward")
        node.data = {"input_args": [g.arg() for _ in range(r.randint(0, 3))], "input_kwargs": {}, "output": []}
        if r.random() < 0.3:
            node.data["input_kwargs"] = {r.choice(["alpha", "dim", "eps"]): g.scalar()}
        node.data["output"] = [g.tensor() for _ in range(r.randint(1, 2))] if r.random() < 0.93 else [None]
        construct[node.name] = parent
        flush_pending()
        stacks[node.name] = frames(node.name)
        entries.append(node)
        fwd_calls.append((node, None))

    def call_module(spec, parent, recomputed_stack=None):
        key = f"{prefix}.{spec['path']}.{spec['cls']}"
        n = mod_count.get(key, 0)
        mod_count[key] = n + 1
        node = Node(f"{key}.forward.{n}", "module", parent)
        if recomputed_stack is not None:
            # the recomputation of a checkpointed module: at the top level, APIs inside it
            pending.append(node)
            calls = len(fwd_calls)
            for _ in range(recompute.randint(0, 2)):
                call_api(node.name)
            del fwd_calls[calls:]  # their backward is not generated
            if node in pending:
                pending.remove(node)
                construct[node.name] = None
            node.data = {"input_args": [g.tensor(["f32", "f16", "bf16"])], "input_kwargs": {}, "output": [g.tensor()]}
            if spec["params"]:
                node.data["parameters"] = {p: g.tensor(["f32"], rg=True) for p in ("weight",)}
            stacks[node.name] = recomputed_stack
            entries.append(node)
            return node
        pending.append(node)
        for _ in range(r.randint(0, 2)):
            call_api(node.name)
        for kid in spec["kids"]:
            call_module(kid, node.name)
            if r.random() < 0.3:
                call_api(node.name)
        if node in pending:
            pending.remove(node)
            construct[node.name] = parent
        node.data = {"input_args": [g.tensor(["f32", "f16", "bf16"])], "input_kwargs": {}, "output": [g.tensor()]}
        if spec["params"]:
            node.data["parameters"] = {p: g.tensor(["f32"], rg=True) for p in ("weight", "bias")[: r.randint(1, 2)]}
        stacks[node.name] = frames(node.name)
        entries.append(node)
        fwd_calls.append((node, spec))

    for _ in range(r.randint(1, 2)):  # one or two "micro steps"
        for spec in roots:
            for _ in range(r.randint(0, 3)):
                call_api(None)  # APIs between modules
            call_module(spec, None)
        backward = r.random() < 0.8
        if not backward:
            continue
        # activation checkpointing: inner modules recomputed at the top level before the backward
        recomputed: dict = {}
        if recompute is not None:
            for node, spec in list(fwd_calls):
                if node.kind == "module" and node.parent and recompute.random() < 0.4:
                    again = call_module(spec, None, recompute_stack(recompute, framework))
                    recomputed[node.name] = again.name
        # backward in reverse order, nested like the forward (a module's backward holds its APIs)
        bw_of: dict = {}
        for node, spec in reversed(fwd_calls):
            if r.random() < 0.3:
                continue
            if node.kind == "module":
                bname = node.name.replace(".forward.", ".backward.")
                bparent = bw_of.get(node.parent) if node.parent else None
                if node.name in recomputed:
                    # the backward of the recomputed call, at the top level (or, rarely, where
                    # the first call's backward would be: then only the forward twin is loose)
                    bname = recomputed[node.name].replace(".forward.", ".backward.")
                    if recompute.random() < 0.9:
                        bparent = None
                b = Node(bname, "module", bparent)
                bw_of[node.name] = bname
                b.data = {"input": [g.tensor(["f32"])], "output": [g.tensor(["f32"]) if r.random() < 0.8 else None]}
                construct[bname] = bparent
                entries.append(b)
                if spec["params"] and r.random() < 0.9:
                    pg = f"{node.name.rsplit('.forward.', 1)[0]}.parameters_grad"
                    if r.random() < 0.5:
                        pg += f".{node.name.rsplit('.', 1)[1]}"
                    if not any(e.name == pg for e in entries):
                        p = Node(pg, "pgrad", None)
                        p.data = {k: [g.tensor(["f32"])] for k in node.data.get("parameters", {})}
                        entries.append(p)
            else:
                bname = node.name.rsplit(".forward", 1)[0] + ".backward"
                bparent = bw_of.get(node.parent) if node.parent else None
                b = Node(bname, "api", bparent)
                b.data = {"input": [g.tensor(["f32"])], "output": [g.tensor(["f32"]) for _ in range(r.randint(1, 2))]}
                construct[bname] = bparent
                entries.append(b)
        fwd_calls.clear()
    return entries, construct, stacks


# stack frames of a recomputed call (`_is_recompute_by_stack_torch`): torch's checkpoint, Megatron's
# custom backward (a `backward` frame one or two frames above torch/autograd/function.py, or
# `checkpoint_function_backward` in a megatron file), and look-alikes that are not recompute
RECOMPUTE_STACKS = {
    "torch": [
        "File /usr/local/lib/python3.10/site-packages/torch/utils/checkpoint.py, line 1124, in recompute_fn, \n"
        " fn(*args, **kwargs)",
        "File /usr/local/lib/python3.10/site-packages/torch/autograd/graph.py, line 825, in _engine_run_backward, \n"
        " return Variable._execution_engine.run_backward(",
        "File /home/user/train/run_dump.py, line 101, in main, \n loss.backward()",
    ],
    "megatron": [
        "File /workspace/Megatron-LM/megatron/core/tensor_parallel/random.py, line 310, in backward, \n"
        " outputs = ctx.run_function(*detached_inputs)",
        "File /usr/local/lib/python3.10/site-packages/torch/autograd/function.py, line 307, in apply, \n"
        " return user_fn(self, *args)",
        "File /home/user/train/run_dump.py, line 101, in main, \n loss.backward()",
    ],
    "megatron_checkpoint": [
        "File /workspace/Megatron-LM/megatron/core/tensor_parallel/random.py, line 290, "
        "in checkpoint_function_backward, \n outputs = run_function(*inputs)",
        "File /workspace/MindSpeed/mindspeed/core/tensor_parallel/random.py, line 80, in backward, \n"
        " return checkpoint_function_backward(ctx, *args)",
        "File /usr/local/lib/python3.10/site-packages/torch/autograd/function.py, line 307, in apply, \n"
        " return user_fn(self, *args)",
    ],
    # not recompute: recompute_fn outside torch's checkpoint.py, a backward frame far from autograd
    "decoy_fn": [
        "File /home/user/train/my_checkpoint.py, line 12, in recompute_fn, \n fn(*args)",
        "File /home/user/train/run_dump.py, line 101, in main, \n loss.backward()",
    ],
    "decoy_backward": [
        "File /home/user/train/layers.py, line 40, in backward, \n return grad * 2",
        "File /home/user/train/engine.py, line 12, in step, \n loss.backward()",
        "File /home/user/train/engine.py, line 20, in run, \n self.step()",
        "File /usr/local/lib/python3.10/site-packages/torch/autograd/function.py, line 307, in apply, \n"
        " return user_fn(self, *args)",
    ],
    "none": [],
}


def recompute_stack(x: random.Random, framework: str) -> list:
    """The stack of a recomputed call; MindSpore's is not read by msprobe (any loose pair is one)."""
    if framework != "pytorch":
        return RECOMPUTE_STACKS["none" if x.random() < 0.5 else "torch"]
    return RECOMPUTE_STACKS[
        x.choice(["torch"] * 3 + ["megatron"] * 2 + ["megatron_checkpoint", "decoy_fn", "decoy_backward", "none"])
    ]


# ------------------------------------------------------------------ golden by perturbation
CHECKER_PERTURBATIONS = [
    "noise_small",  # passes
    "noise_large",  # RelativeErr / RelativeWarn / OneThousandth / Cosine
    "dtype",  # DTypeErrChecker
    "shape",  # ShapeErrChecker
    "requires_grad",  # RequiresGradErrChecker
    "nan_inf",  # InfNanErrChecker (target side)
    "nan_both",  # NaN at the same place in both
    "scalar",  # ParametersErrChecker
    "zero",  # zero bench (N/A relative errors, cosine Nan)
    "drop_item",  # extra target items (Bench 'Nan')
    "extra_item",  # extra bench items (ignored)
]


def perturb_value(g: Gen, v, which: str, framework: str, target_side: dict):
    """A golden value derived from target value `v` by perturbation `which`.
    Some perturbations change the *target* instead (`target_side['t']`)."""
    r = g.rng
    if isinstance(v, Tensor):
        t = v.copy()
        a = t.values
        if which == "noise_small" and t.kind in FLOATS and a.size:
            t.values = cast(t.kind, a * (1 + 1e-4 * g.np.standard_normal(a.shape)))
        elif which == "noise_large" and a.size:
            if t.kind in FLOATS:
                t.values = cast(t.kind, a * r.choice([3.0, -1.0, 0.2]) + g.np.standard_normal(a.shape))
            elif t.kind in ("i64", "i32"):
                t.values = cast(t.kind, a * 2 + 1)
            else:
                t.values = ~a
        elif which == "dtype":
            new = r.choice([k for k in ("f32", "f16", "bf16", "i64") if k != t.kind])
            t.kind, t.values = new, cast(new, a.astype(np.float64))
        elif which == "shape":
            t.values = cast(t.kind, np.concatenate([a.ravel(), a.ravel()[:1] if a.size else np.zeros(1)]))
        elif which == "requires_grad" and framework == "pytorch":
            t.requires_grad = not t.requires_grad
        elif which == "nan_inf" and t.kind in FLOATS and a.size and a.ndim:
            tv = v.values.copy()
            tv.flat[r.randrange(tv.size)] = r.choice([np.nan, np.inf, -np.inf])
            target_side["t"] = Tensor(v.kind, cast(v.kind, tv), v.requires_grad)
        elif which == "nan_both" and t.kind in FLOATS and a.size and a.ndim:
            i = r.randrange(a.size)
            tv = v.values.copy()
            tv.flat[i] = np.nan
            target_side["t"] = Tensor(v.kind, cast(v.kind, tv), v.requires_grad)
            t.values = tv.copy()
            t.values.flat[(i + 1) % a.size] *= 1.0001
            t.values = cast(t.kind, t.values)
        elif which == "zero" and a.size:
            t.values = cast(t.kind, np.zeros(a.shape))
        return t
    if isinstance(v, dict) and which == "scalar" and v.get("type") in ("int", "float"):
        return {"type": v["type"], "value": v["value"] + (1 if v["type"] == "int" else 0.5)}
    if isinstance(v, list) and v and which == "drop_item":
        return v[:-1]
    if isinstance(v, list) and which == "extra_item":
        return [*v, g.tensor()]
    return v


def perturb_entries(g: Gen, entries: list[Node], framework: str, rate: float):
    """Golden entries (and possibly modified target entries) from the target entries."""
    r = g.rng
    golden = []
    for e in entries:
        ge = Node(e.name, e.kind, e.parent)
        for key, val in e.data.items():
            if isinstance(val, list):
                out = []
                tl = []
                for x in val:
                    which = r.choice(CHECKER_PERTURBATIONS) if r.random() < rate else "none"
                    ts: dict = {}
                    out.append(perturb_value(g, x, which, framework, ts))
                    tl.append(ts.get("t", x))
                e.data[key] = tl
                # a parameters_grad list always holds one tensor (its items are not indexed)
                which = r.choice(["drop_item", "extra_item"]) if r.random() < rate / 4 and e.kind != "pgrad" else "none"
                ge.data[key] = perturb_value(g, out, which, framework, {})
            elif isinstance(val, dict):
                out = {}
                for k, x in val.items():
                    which = r.choice(CHECKER_PERTURBATIONS) if r.random() < rate else "none"
                    ts = {}
                    out[k] = perturb_value(g, x, which, framework, ts)
                    val[k] = ts.get("t", x)
                ge.data[key] = out
            else:
                ts = {}
                which = r.choice(CHECKER_PERTURBATIONS) if r.random() < rate else "none"
                ge.data[key] = perturb_value(g, val, which, framework, ts)
                e.data[key] = ts.get("t", val)
        golden.append(ge)
    return golden


# ------------------------------------------------------------------ writing
def save_tensor(path: str, t: Tensor, framework: str):
    if framework == "pytorch":
        dt = {
            "f32": torch.float32,
            "f16": torch.float16,
            "bf16": torch.bfloat16,
            "i64": torch.int64,
            "i32": torch.int32,
            "bool": torch.bool,
            "f64": torch.float64,
        }[t.kind]
        torch.save(torch.from_numpy(np.ascontiguousarray(t.values)).to(dt), path)
    else:
        np.save(path, t.values)


def write_dump(folder: str, entries: list[Node], construct: dict, stacks: dict, framework: str, mode: str, level="mix"):
    os.makedirs(folder, exist_ok=True)
    tensor_dir = os.path.join(folder, "dump_tensor_data")
    if mode == "tensor":
        os.makedirs(tensor_dir, exist_ok=True)
    data = {}

    def to_json(v, data_name):
        if isinstance(v, list):
            return [to_json(x, f"{data_name}.{i}") for i, x in enumerate(v)]
        if isinstance(v, Tensor):
            out = leaf_json(v, framework, mode, data_name)
            if mode == "tensor" and v.values.size:
                save_tensor(os.path.join(tensor_dir, out["data_name"]), v, framework)
            elif mode == "tensor":
                out.pop("data_name", None)
            return out
        return v

    for e in entries:
        d = {}
        for key, val in e.data.items():
            if e.kind == "pgrad":
                # parameters_grad: {name: [tensor]}, data_name <op>.<name>.pt (lists not indexed)
                d[key] = [to_json(x, f"{e.name}.{key}") for x in val]
                continue
            io = {
                "input_args": "input",
                "input_kwargs": "input",
                "input": "input",
                "output": "output",
                "parameters": "parameters",
            }[key]
            if isinstance(val, dict):
                d[key] = {k: to_json(x, f"{e.name}.{io}.{k}") for k, x in val.items()}
            elif isinstance(val, list):
                d[key] = [to_json(x, f"{e.name}.{io}.{i}") for i, x in enumerate(val)]
            else:
                d[key] = to_json(val, f"{e.name}.{io}.0")
        data[e.name] = d
    if mode == "structure":
        # task structure: the collector records the call tree and stacks, no data
        data = {}
    dump = {
        "task": {"tensor": "tensor", "structure": "structure"}.get(mode, "statistics"),
        "level": level,
        "framework": framework,
        "dump_data_dir": tensor_dir if mode == "tensor" else None,
        "data": data,
    }
    with open(os.path.join(folder, "dump.json"), "w") as f:
        json.dump(dump, f, indent=1)
    with open(os.path.join(folder, "construct.json"), "w") as f:
        json.dump(construct, f, indent=1)
    # new stack format: identical frame lists grouped
    groups: dict = {}
    for name, fr in stacks.items():
        groups.setdefault(json.dumps(fr), []).append(name)
    stack = {str(i): [names, json.loads(fr)] for i, (fr, names) in enumerate(groups.items())}
    with open(os.path.join(folder, "stack.json"), "w") as f:
        json.dump(stack, f, indent=1)


def rename_for_golden(g: Gen, entries, construct, stacks, rate):
    """Drops a few golden nodes (unmatched on either side)."""
    r = g.rng
    drop = {e.name for e in entries if e.kind == "api" and e.name.endswith(".forward") and r.random() < rate}
    if r.random() < 0.8:  # usually with their backward twins (a backward alone needs a data_mode filter)
        drop |= {n.rsplit(".forward", 1)[0] + ".backward" for n in drop}
    entries = [e for e in entries if e.name not in drop]
    construct = {k: v for k, v in construct.items() if k not in drop}
    stacks = {k: v for k, v in stacks.items() if k not in drop}
    return entries, construct, stacks


def mindspore_ok() -> bool:
    import importlib.util

    return importlib.util.find_spec("mindspore") is not None


# ------------------------------------------------------------------ extensions (own random stream)
# Drawn from a second generator seeded from the case seed, so the cases of older seeds stay as
# they were when no extension applies.

# attribute names a golden model may use instead: PyYAML 1.1 reads on/off/yes/no as booleans,
# as msprobe's loader does
RENAMES = ["self_attn", "ffn", "block_1", "on", "off", "yes", "no"]


def module_parts(name: str):
    """(prefix, path parts, class, tail parts) of a module dump name, or None for an API."""
    parts = name.split(".")
    if parts[0] not in ("Module", "Cell"):
        return None
    if parts[-1] == "parameters_grad" and len(parts) >= 4:
        return parts[0], parts[1:-2], parts[-2], parts[-1:]
    if len(parts) >= 5 and parts[-2] in ("forward", "backward"):
        return parts[0], parts[1:-3], parts[-3], parts[-2:]
    return None


def rename_attr(entries, construct, stacks, old: str, new: str):
    """The golden model calls its attribute `old` `new`: every module path segment renamed."""

    def ren(name):
        mp = module_parts(name) if name else None
        if not mp:
            return name
        prefix, path, cls, tail = mp
        return ".".join([prefix, *[new if x == old else x for x in path], cls, *tail])

    for e in entries:
        e.name = ren(e.name)
        e.parent = ren(e.parent)
    return entries, {ren(k): ren(v) for k, v in construct.items()}, {ren(k): v for k, v in stacks.items()}


def mapping_for_rename(construct: dict, old: str, new: str) -> dict:
    """msprobe's -lm YAML for a renamed attribute: {class of the parent module: {old: new}}."""
    classes = []
    for name, parent in construct.items():
        mp = module_parts(name)
        pp = module_parts(parent) if parent else None
        if mp and pp and mp[1] and mp[1][-1] == old and pp[2] not in classes:
            classes.append(pp[2])
    return {c: {old: new} for c in classes}


def write_yaml_mapping(path: str, mapping: dict):
    """Plain YAML, unquoted, so that PyYAML 1.1 reads yes/no/on/off as booleans."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for cls, pairs in mapping.items():
            f.write(f"{cls}:\n")
            for k, v in pairs.items():
                f.write(f"  {k}: {v}\n")


def attrs_of(construct: dict) -> list[str]:
    """Module attribute names (last path segment, not a layer index) that have a parent module."""
    out = []
    for name, parent in construct.items():
        mp = module_parts(name)
        if mp and parent and module_parts(parent) and mp[1] and not mp[1][-1].isdigit() and mp[1][-1] not in out:
            out.append(mp[1][-1])
    return out


def make_multi(seed: int, out: str, torch_ok: bool | None, layout: str, kind: str = "default") -> dict:
    """A multi-rank (`-tp step0/` with rank0, rank1) or multi-step (`-tp` with step0, step1, each
    with rank0) case: each folder is a case of its own sub-seed with the first one's mode,
    frameworks and options."""
    first = None
    folders = ["step0/rank0", "step0/rank1"] if layout == "ranks" else ["step0/rank0", "step1/rank0"]
    for k, folder in enumerate(folders):
        sub = os.path.join(out, f"_sub{k}")
        case = make_single(seed * 10 + k if k else seed, sub, torch_ok, first, None, refusable=False, kind=kind)
        first = first or case
        for side in ("target", "golden"):
            if case.get(side):
                dst = os.path.join(out, side, folder)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.replace(os.path.join(sub, case[side]), dst)
                # the tensor folder moved with its dump.json
                with open(os.path.join(dst, "dump.json")) as f:
                    dump = json.load(f)
                if dump.get("dump_data_dir"):
                    dump["dump_data_dir"] = os.path.join(dst, "dump_tensor_data")
                    with open(os.path.join(dst, "dump.json"), "w") as f:
                        json.dump(dump, f, indent=1)
        shutil.rmtree(sub, ignore_errors=True)
    case = dict(first)
    case["seed"] = seed
    case["layout"] = layout
    top = "target/step0" if layout == "ranks" else "target"
    case["target"] = top
    if first.get("golden"):
        case["golden"] = top.replace("target", "golden")
    with open(os.path.join(out, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    return case


KINDS = ("default", "structure", "recompute", "ms_tensor", "parallel", "distributed")


def make_case(seed: int, out: str, torch_ok: bool | None = None, kind: str = "default") -> dict:
    """The case of `seed` of one kind: `default` (the generator of the first sessions), `structure`
    (task structure dumps, no data), `recompute` (activation-checkpointed modules at the top level),
    `ms_tensor` (MindSpore tensor-mode compares), `parallel` (rank folders merged with
    --rank_size/--tp/--pp/--vpp/--order, --file_type json) or `distributed` (rank folders with
    communication calls, linked across ranks)."""
    if kind == "parallel":
        import gen_parallel

        case = gen_parallel.make_case(seed, out)
        case["kind"] = kind
        return case
    if kind == "distributed":
        import gen_distributed

        case = gen_distributed.make_case(seed, out)
        case["kind"] = kind
        return case
    x = random.Random(seed * 1000003 + 17)
    layout = x.choice(["single"] * 8 + ["ranks", "steps"])
    if layout != "single":
        case = make_multi(seed, out, torch_ok, layout, kind)
    else:
        case = make_single(seed, out, torch_ok, None, x, kind=kind)
    if kind != "default":
        case["kind"] = kind
        # the log flags, which change what is printed, not the file
        logs = random.Random(seed * 101 + 7)
        case["options"] += [f for f in ("-tensor_log", "-progress_log") if logs.random() < 0.05]
        with open(os.path.join(out, "case.json"), "w") as f:
            json.dump(case, f, indent=1)
    return case


def make_single(
    seed: int, out: str, torch_ok: bool | None, forced: dict | None, x, refusable: bool = True, kind: str = "default"
) -> dict:
    g = Gen(seed)
    r = g.rng
    torch_ok = (torch is not None) if torch_ok is None else torch_ok
    mode = r.choice(["statistics", "statistics", "md5", "tensor"])
    fw_t = r.choice(["pytorch", "pytorch", "mindspore"])
    compare = r.random() < 0.85
    fw_g = fw_t
    if compare and r.random() < 0.15:
        # msprobe compares MindSpore against PyTorch; a PyTorch target against a MindSpore golden
        # is refused (INVALID_TASK_ERROR), so that case is generated rarely
        if fw_t == "pytorch" and r.random() < 0.8:
            fw_t = "mindspore"
        fw_g = "pytorch" if fw_t == "mindspore" else "mindspore"
        if not refusable and fw_t == "pytorch":
            # msprobe 26.2 hangs (its pool never returns) when a rank or step of a multi-folder
            # compare is refused, so multi-folder cases keep to pairs it accepts
            fw_g = "pytorch"
    if mode == "tensor" and not torch_ok and "pytorch" in (fw_t, fw_g):
        mode = "statistics"
    if mode == "tensor" and compare and fw_t == "mindspore" and not mindspore_ok():
        # msprobe's MindSpore tensor compare imports mindspore; without it the oracle cannot run
        mode = "statistics"
    opts: list[str] = []
    if compare:
        if fw_t != fw_g or r.random() < 0.2:
            opts.append("-lm")
        if r.random() < 0.2:
            opts.append("-fm")
    if r.random() < 0.2:
        opts.append("-oc")
    if kind == "structure":
        mode = "structure"
    elif kind == "ms_tensor":
        # a MindSpore target in tensor mode, compared with MindSpore or (rarely) PyTorch
        mode, compare, fw_t = "tensor", True, "mindspore"
        fw_g = "pytorch" if torch_ok and r.random() < 0.3 else "mindspore"
        if fw_g == "pytorch" and "-lm" not in opts:
            opts.insert(0, "-lm")
    if forced:
        mode, compare = forced["mode"], forced["compare"]
        fw_t, fw_g = forced["framework_target"], forced["framework_golden"]
        opts = list(forced["options"])
    recompute = random.Random(seed * 7919 + 5) if kind == "recompute" else None
    entries, construct, stacks = build_model(g, fw_t, recompute)
    rate = r.choice([0.0, 0.1, 0.3, 0.6])
    case = {
        "seed": seed,
        "mode": mode,
        "framework_target": fw_t,
        "framework_golden": fw_g,
        "compare": compare,
        "options": opts,
        "perturbation_rate": rate,
    }
    tdir = os.path.join(out, "target", "step0", "proc1000")
    if compare:
        golden = perturb_entries(g, entries, fw_t, rate)
        g_entries, g_construct, g_stacks = rename_for_golden(g, golden, dict(construct), dict(stacks), rate / 5)
        if fw_g != fw_t:
            swap = ("Module.", "Cell.") if fw_t == "pytorch" else ("Cell.", "Module.")
            for e in g_entries:
                e.name = e.name.replace(swap[0], swap[1], 1) if e.name.startswith(swap[0]) else e.name
            g_construct = {
                k.replace(swap[0], swap[1], 1) if k.startswith(swap[0]) else k: (
                    v.replace(swap[0], swap[1], 1) if v and v.startswith(swap[0]) else v
                )
                for k, v in g_construct.items()
            }
            g_stacks = {k.replace(swap[0], swap[1], 1) if k.startswith(swap[0]) else k: v for k, v in g_stacks.items()}
        if x is not None and x.random() < 0.25:
            # a renamed golden attribute and its -lm YAML mapping
            attrs = attrs_of(g_construct)
            if attrs:
                old, new = x.choice(attrs), x.choice(RENAMES)
                mapping = mapping_for_rename(g_construct, old, new)
                if mapping and new not in attrs:
                    g_entries, g_construct, g_stacks = rename_attr(g_entries, g_construct, g_stacks, old, new)
                    write_yaml_mapping(os.path.join(out, "mapping.yaml"), mapping)
                    opts = [o for o in opts if o != "-lm"] + ["-lm", "mapping.yaml"]
                    case["options"] = opts
                    case["layer_mapping_yaml"] = mapping
        gdir = os.path.join(out, "golden", "step0", "proc2000")
        write_dump(gdir, g_entries, g_construct, g_stacks, fw_g, mode)
        case["golden"] = os.path.relpath(gdir, out)
    write_dump(tdir, entries, construct, stacks, fw_t, mode)
    case["target"] = os.path.relpath(tdir, out)
    with open(os.path.join(out, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    return case


if __name__ == "__main__":
    print(json.dumps(make_case(int(sys.argv[1]), sys.argv[2])))
