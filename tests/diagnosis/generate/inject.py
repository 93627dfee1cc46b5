"""One dump run of the diagnosis set: a tiny transformer on CPU under msprobe's PrecisionDebugger
(statistics mode, level mix), golden (float32) or target (bfloat16 autocast, optionally with one
injected fault). Run by gen_cases.py, once per run, in its own process.

A fault is a faulty kernel, not a change of the program: the API calls and their order are the
same as in the golden run, so msprobe names every node alike on both sides. The chosen API
(`torch.nn.functional.linear`, `gelu`, `silu`, `softmax`, `layer_norm`, `torch.matmul` or
`torch.rsqrt`) is replaced,
before msprobe wraps it, by a function that calls the original and, for the one call chosen
(module, occurrence within the module, step, rank), corrupts
- its output (a forward fault: what the API returns is wrong; the backward differs as a
  consequence), or
- the first gradient that the autograd node of its output passes back (a backward-only fault:
  the forward agrees; msprobe reads an API's backward at that node, after this hook).
The corruption adds Gaussian noise of `magnitude` times the tensor's RMS, or (`"scale": true`)
multiplies the tensor by `1 + magnitude`; with `"every_call": true` every call of the API is
wrong (an operator bug), wherever it is called. `"fp16": true` runs the target under float16
autocast instead of bfloat16; `"weight_scale": {MODULE: FACTOR}` scales a weight on both sides. It uses `torch.ops.aten`
only, which msprobe does not dump at level mix, so the fault adds no node. A weight fault adds
noise to a parameter of the module before the chosen step.

Computation the dump does not see (gen_unseen.py): `"kind"` `module_forward` (a forward hook on
the module multiplies its output by 1 + magnitude), `module_backward` (a full backward hook on
the module multiplies its first input gradient so), `function_forward` (a custom autograd
`Function`, not on msprobe's list, applied to the module's output inside its forward, scales it;
its backward passes the gradient on unchanged) and `function_backward` (a custom `Function`
applied to the module's input inside its forward: identity forward, its backward scales the
gradient). Only `FeedForward` modules carry the `Function` sites; without such a fault they do
nothing, so every other run is as before.

Two architectures (`model.arch`): the tiny transformer (LayerNorm, GELU MLP, learned positions;
the default) and a tiny LLaMA (RMSNorm as pow/mean/rsqrt/mul with the rsqrt in float32 inside a
bfloat16 model, a SwiGLU MLP, rotary q/k, causal softmax attention).

Usage: python inject.py SPEC.json  (SPEC: see gen_cases.py)
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

aten = torch.ops.aten

# The state of the fault, shared by the patched functions and the hooks below.
FAULT = {
    "spec": None,  # the fault's spec, or None
    "inside": 0,  # how deep the target module's forward is on the stack
    "calls": 0,  # calls of the faulty API inside the target module, this step
    "step": -1,
    "rank": 0,
    "done": False,
}
GEN = torch.Generator().manual_seed(7)


def _noise_like(t, magnitude):
    """`magnitude` x RMS(t) x N(0, 1), with aten ops only (not dumped)."""
    t32 = aten._to_copy(t.detach(), dtype=torch.float32)
    rms = float(aten.linalg_vector_norm(t32)) / math.sqrt(max(t32.numel(), 1))
    noise = aten.normal_(aten.empty_like(t32), 0.0, 1.0, generator=GEN)
    noise = aten.mul(noise, magnitude * max(rms, 1e-6))
    return aten._to_copy(noise, dtype=t.dtype)


def _corrupt(t, spec):
    """The fault on one tensor: scaled by 1 + magnitude (`"scale": true`, a kernel that computes
    wrongly by a factor) or plus noise of magnitude x RMS (the default)."""
    if spec.get("scale"):
        return aten.mul(t, 1.0 + spec["magnitude"])
    return aten.add(t, _noise_like(t, spec["magnitude"]))


def _corrupt_first_gradient(spec):
    """A hook on the output's autograd node: the first gradient it passes back is corrupted."""

    def hook(grad_inputs, _grad_outputs):
        out = list(grad_inputs)
        for i, g in enumerate(out):
            if g is not None:
                out[i] = _corrupt(g, spec)
                break
        return tuple(out)

    return hook


class _ScaleForward(torch.autograd.Function):
    """A fused operator msprobe does not wrap: its output scaled, its gradient passed on."""

    @staticmethod
    def forward(ctx, x, factor):
        return aten.mul(x, factor)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _ScaleBackward(torch.autograd.Function):
    """A fused operator msprobe does not wrap: identity forward, its gradient scaled."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return aten.clone(x)

    @staticmethod
    def backward(ctx, g):
        return aten.mul(g, ctx.factor), None


UNSEEN_KINDS = ("module_forward", "module_backward", "function_forward", "function_backward")


def _unseen_armed(module_name, kind):
    """The unseen-computation fault of `kind` for module `module_name` in this step, once."""
    spec = FAULT["spec"]
    if spec is None or FAULT["done"] or spec["kind"] != kind or spec["module"] != module_name:
        return None
    if FAULT["step"] != spec["step"] or FAULT["rank"] != spec.get("rank", 0):
        return None
    FAULT["done"] = True
    return spec


def unseen_input(module, x):
    spec = _unseen_armed(getattr(module, "_ga_name", None), "function_backward")
    return x if spec is None else _ScaleBackward.apply(x, 1.0 + spec["magnitude"])


def unseen_output(module, out):
    spec = _unseen_armed(getattr(module, "_ga_name", None), "function_forward")
    return out if spec is None else _ScaleForward.apply(out, 1.0 + spec["magnitude"])


def hook_unseen(model, spec):
    """Module hooks that change what the module returns (forward) or passes back (backward)."""
    module = model.get_submodule(spec["module"])
    factor = 1.0 + spec["magnitude"]
    if spec["kind"] == "module_forward":
        def forward_hook(_m, _args, out):
            if _unseen_armed(spec["module"], "module_forward") is None:
                return None
            return aten.mul(out, factor)

        module.register_forward_hook(forward_hook)
    elif spec["kind"] == "module_backward":
        def backward_hook(_m, grad_input, _grad_output):
            if _unseen_armed(spec["module"], "module_backward") is None:
                return None
            out = list(grad_input)
            out[0] = aten.mul(out[0], factor)
            return tuple(out)

        module.register_full_backward_hook(backward_hook)
    for name, m in model.named_modules():
        m._ga_name = name


def _armed(api):
    spec = FAULT["spec"]
    if spec is None or FAULT["done"] or spec["kind"] == "weight" or spec["kind"] in UNSEEN_KINDS:
        return None
    if spec["api"] != api:
        return None
    if spec.get("every_call"):
        # an operator wrong on every call, wherever it is called
        return spec
    if FAULT["inside"] <= 0:
        return None
    if FAULT["step"] != spec["step"] or FAULT["rank"] != spec.get("rank", 0):
        return None
    index = FAULT["calls"]
    FAULT["calls"] += 1
    if index != spec.get("occurrence", 0):
        return None
    FAULT["done"] = True
    return spec


def _patch(owner, attr, api):
    original = getattr(owner, attr)

    def patched(*args, **kwargs):
        spec = _armed(api)
        if spec is None:
            return original(*args, **kwargs)
        if spec["kind"] == "forward":
            return _corrupt(original(*args, **kwargs), spec)
        # backward-only: the API's own backward (the autograd node of its output) is faulty.
        # The hook is registered before msprobe's, which sees what it returns.
        out = original(*args, **kwargs)
        if out.grad_fn is None:
            raise SystemExit(f"no autograd node on the output of {api}")
        out.grad_fn.register_hook(_corrupt_first_gradient(spec))
        return out

    patched.__name__ = getattr(original, "__name__", attr)
    patched.__doc__ = getattr(original, "__doc__", None)
    setattr(owner, attr, patched)


def install_patches():
    _patch(F, "linear", "linear")
    _patch(F, "gelu", "gelu")
    _patch(F, "softmax", "softmax")
    _patch(F, "layer_norm", "layer_norm")
    _patch(torch, "matmul", "matmul")
    _patch(F, "silu", "silu")
    _patch(torch, "rsqrt", "rsqrt")


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, all_reduce):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.all_reduce = all_reduce

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        out = self.proj(out.transpose(1, 2).contiguous().view(b, s, d))
        if self.all_reduce:
            import torch.distributed as dist

            dist.all_reduce(out, group=dist.group.WORLD)
            out = out / dist.get_world_size()
        return out


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        x = unseen_input(self, x)
        return unseen_output(self, self.fc2(self.act(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, all_reduce):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads, all_reduce)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, vocab, d_model, n_heads, d_ff, n_layers, max_len, all_reduce):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(
            [Block(d_model, n_heads, d_ff, all_reduce) for _ in range(n_layers)]
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.embed(ids) + self.pos(pos)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


class RMSNorm(nn.Module):
    """LLaMA's norm, as its reference code writes it: pow, mean and rsqrt in float32 (inside a
    bfloat16 model too), the weight applied to the result cast back to the input's dtype."""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        var = x32.pow(2).mean(-1, keepdim=True)
        return self.weight * (x32 * torch.rsqrt(var + self.eps)).to(x.dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Causal softmax attention with rotary position embeddings on q and k (one fused qkv
    projection, so the block's normed input has one consumer)."""

    def __init__(self, d_model, n_heads, max_len, all_reduce):
        super().__init__()
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.all_reduce = all_reduce
        inv = 1.0 / (10000 ** (torch.arange(0, self.d_head, 2).float() / self.d_head))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        causal = torch.ones(max_len, max_len, dtype=torch.bool).triu(1)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(b, s, self.n_heads, self.d_head).transpose(1, 2)
        cos, sin = self.cos[:s], self.sin[:s]
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_head)
        scores = scores.masked_fill(self.causal[:s, :s], float("-inf"))
        out = torch.matmul(F.softmax(scores, dim=-1), v)
        out = self.proj(out.transpose(1, 2).contiguous().view(b, s, d))
        if self.all_reduce:
            import torch.distributed as dist

            dist.all_reduce(out, group=dist.group.WORLD)
            out = out / dist.get_world_size()
        return out


class SwiGLU(nn.Module):
    """LLaMA's MLP, gate and up fused in one projection: down(silu(gate) * up)."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.act = nn.SiLU()
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        x = unseen_input(self, x)
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return unseen_output(self, self.down(self.act(gate) * up))


class LlamaBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, max_len, all_reduce):
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = LlamaAttention(d_model, n_heads, max_len, all_reduce)
        self.ln2 = RMSNorm(d_model)
        self.mlp = SwiGLU(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab, d_model, n_heads, d_ff, n_layers, max_len, all_reduce):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(
            [LlamaBlock(d_model, n_heads, d_ff, max_len, all_reduce) for _ in range(n_layers)]
        )
        self.ln_f = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


ARCHITECTURES = {"transformer": TinyTransformer, "llama": TinyLlama}


def hook_target_module(model, spec):
    module = model.get_submodule(spec["module"])

    def enter(_m, _args):
        FAULT["inside"] += 1

    def leave(_m, _args, _out):
        FAULT["inside"] -= 1

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)
    return module


def corrupt_weight(model, spec):
    module = model.get_submodule(spec["module"])
    with torch.no_grad():
        w = module.weight
        w.add_(_noise_like(w, spec["magnitude"]))


def run(spec, rank=0, world=1):
    FAULT["rank"] = rank
    fault = spec.get("fault")
    if fault is not None and fault.get("rank", 0) == rank:
        FAULT["spec"] = fault
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(seed=spec["seed"], mode=False)
    m = spec["model"]
    model = ARCHITECTURES[m.get("arch", "transformer")](
        vocab=m["vocab"], d_model=m["d_model"], n_heads=m["heads"], d_ff=m["d_ff"],
        n_layers=m["layers"], max_len=m["seq"], all_reduce=world > 1,
    )
    if FAULT["spec"] is not None and FAULT["spec"]["kind"] in UNSEEN_KINDS:
        hook_unseen(model, FAULT["spec"])
    elif FAULT["spec"] is not None and FAULT["spec"]["kind"] != "weight" \
            and not FAULT["spec"].get("every_call"):
        hook_target_module(model, FAULT["spec"])
    # the same weights scaled on both sides (a model whose activations leave float16's range)
    for module, factor in spec.get("weight_scale", {}).items():
        with torch.no_grad():
            model.get_submodule(module).weight.mul_(factor)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    debugger = PrecisionDebugger(config_path=spec["config"])
    g = torch.Generator().manual_seed(spec["seed"] + 1000 * rank)
    for step in range(spec["steps"]):
        FAULT["step"], FAULT["calls"] = step, 0
        if FAULT["spec"] is not None and FAULT["spec"]["kind"] == "weight" \
                and FAULT["spec"]["step"] == step:
            corrupt_weight(model, FAULT["spec"])
        debugger.start(model=model)
        opt.zero_grad()
        ids = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=g)
        tgt = torch.randint(0, m["vocab"], (m["batch"], m["seq"]), generator=g)
        if world > 1:
            import torch.distributed as dist

            dist.broadcast(ids, src=0, group=dist.group.WORLD)
        if spec["bf16"]:
            low = torch.float16 if spec.get("fp16") else torch.bfloat16
            with torch.autocast("cpu", dtype=low):
                logits = model(ids)
        else:
            logits = model(ids)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()
    if FAULT["spec"] is not None and FAULT["spec"]["kind"] != "weight" and not FAULT["done"] \
            and not FAULT["spec"].get("every_call"):
        raise SystemExit(f"fault never fired: {FAULT['spec']}")


def worker(rank, world, spec):
    import torch.distributed as dist

    install_patches()  # a spawned process starts afresh
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(spec["port"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    run(spec, rank, world)
    dist.barrier()
    dist.destroy_process_group()


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    with open(spec["config"], "w") as f:
        json.dump({"task": "statistics", "dump_path": os.path.abspath(spec["out"]), "rank": [],
                   "step": [], "level": "mix", "async_dump": False,
                   "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                  "summary_mode": "statistics"}}, f)
    install_patches()  # before msprobe is imported: it wraps what it finds
    if spec["world"] > 1:
        import torch.multiprocessing as mp

        mp.spawn(worker, args=(spec["world"], spec), nprocs=spec["world"], join=True)
    else:
        run(spec)


if __name__ == "__main__":
    main()
