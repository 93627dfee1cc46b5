#!/usr/bin/env python3
"""Writes plugin/replay/tests/oracle/ops.json: every op the replay supports, run by torch on the
CPU at float64 (and msprobe's bench_functions/ for the NPU-only ops), its inputs, arguments and
expected outputs. Never run by `make test`; the Rust test (plugin/replay/tests/ops_oracle.rs)
replays the committed file.

    .oracle-venv/bin/python tests/replay/make_op_oracle.py   # the oracle venv of make test-differential
"""

from __future__ import annotations

import json
import pathlib

import torch
import torch.nn.functional as F
from msprobe.pytorch.bench_functions.fast_gelu import npu_fast_gelu
from msprobe.pytorch.bench_functions.npu_fusion_attention import npu_fusion_attention
from msprobe.pytorch.bench_functions.rms_norm import npu_rms_norm
from msprobe.pytorch.bench_functions.rotary_mul import npu_rotary_mul
from msprobe.pytorch.bench_functions.swiglu import npu_swiglu

OUT = pathlib.Path(__file__).resolve().parents[2] / "plugin/replay/tests/oracle/ops.json"
torch.manual_seed(38)


def t(*shape, low=-3.0, high=3.0):
    return torch.empty(*shape, dtype=torch.float64).uniform_(low, high)


def rec(v):
    """A value as msprobe's dump.json records it, tensors with their values inline."""
    if isinstance(v, torch.Tensor):
        r = {"type": "torch.Tensor", "dtype": str(v.dtype), "shape": list(v.shape)}
        flat = v.reshape(-1).tolist()
        if v.dtype == torch.bool and len(flat) > 4096:
            # Large masks (the compressed 2048×2048 one) as runs of [value, count].
            runs = []
            for x in flat:
                if runs and runs[-1][0] == x:
                    runs[-1][1] += 1
                else:
                    runs.append([x, 1])
            r["runs"] = runs
        else:
            r["values"] = flat
        return r
    if isinstance(v, (list, tuple)):
        return [rec(x) for x in v]
    if v is None:
        return None
    if isinstance(v, bool):
        return {"type": "bool", "value": v}
    if isinstance(v, int):
        return {"type": "int", "value": v}
    if isinstance(v, float):
        return {"type": "float", "value": v}
    if isinstance(v, str):
        return {"type": "str", "value": v}
    raise TypeError(type(v))


CASES = []


def case(api, fn, args, kwargs=None, note="", rtol=1e-12):
    kwargs = kwargs or {}
    out = fn(*args, **kwargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    CASES.append({
        "api": api,
        "note": note,
        "rtol": rtol,
        "input_args": rec(list(args)),
        "input_kwargs": {k: rec(v) for k, v in kwargs.items()},
        "output": [rec(o) for o in outs],
    })


x3 = t(2, 3, 8)
case("linear", F.linear, [x3, t(5, 8), t(5)])
case("linear", F.linear, [t(4, 8), t(6, 8)], note="no bias")
case("matmul", torch.matmul, [t(3, 4), t(4, 5)])
case("matmul", torch.matmul, [t(4), t(4, 5)], note="1-D @ 2-D")
case("matmul", torch.matmul, [t(3, 4), t(4)], note="2-D @ 1-D")
case("matmul", torch.matmul, [t(4), t(4)], note="dot")
case("matmul", torch.matmul, [t(2, 1, 3, 4), t(3, 4, 5)], note="batch broadcast")
case("__matmul__", torch.Tensor.__matmul__, [t(2, 3, 4), t(2, 4, 2)])
case("mm", torch.mm, [t(3, 7), t(7, 2)])
case("bmm", torch.bmm, [t(2, 3, 7), t(2, 7, 2)])
case("addmm", torch.addmm, [t(3, 2), t(3, 7), t(7, 2)], {"beta": 0.5, "alpha": 2.0})
case("baddbmm", torch.baddbmm, [t(2, 3, 2), t(2, 3, 7), t(2, 7, 2)], {"beta": -1.0, "alpha": 0.25})
case("softmax", F.softmax, [t(2, 3, 6)], {"dim": -1})
case("softmax", F.softmax, [t(2, 3, 6, low=-30, high=30), 1], note="dim positional")
case("log_softmax", F.log_softmax, [t(4, 9)], {"dim": -1})
case("layer_norm", F.layer_norm, [t(2, 3, 8), [8], t(8), t(8), 1e-5])
case("layer_norm", F.layer_norm, [t(2, 3, 4), [3, 4]], note="two dims, no affine")
case("rms_norm", F.rms_norm, [t(2, 3, 8), [8], t(8), 1e-6])
case("npu_rms_norm", npu_rms_norm, [t(2, 5, 8), t(8)], {"epsilon": 1e-6}, note="msprobe bench_functions (rstd returned as fp32)", rtol=2.0**-22)
case("npu_swiglu", npu_swiglu, [t(2, 3, 8)], {"dim": -1}, note="msprobe bench_functions (computes in fp32 for a non-fp32 input)", rtol=2.0**-21)
case("npu_fast_gelu", npu_fast_gelu, [t(3, 7)], note="msprobe bench_functions")
case("gelu", F.gelu, [t(3, 11, low=-6, high=6)])
case("gelu", F.gelu, [t(3, 11, low=-6, high=6)], {"approximate": "tanh"})
case("silu", F.silu, [t(3, 11, low=-8, high=8)])
case("relu", F.relu, [t(3, 5)])
case("sigmoid", torch.sigmoid, [t(3, 5, low=-10, high=10)])
case("tanh", torch.tanh, [t(3, 5)])
case("add", torch.add, [t(2, 3), t(3)], {"alpha": 0.5})
case("__add__", torch.Tensor.__add__, [t(2, 3), 1.25], note="scalar")
case("__radd__", torch.Tensor.__radd__, [t(2, 3), 2.0])
case("sub", torch.sub, [t(2, 3), t(2, 1)])
case("__rsub__", torch.Tensor.__rsub__, [t(2, 3), 1.0])
case("mul", torch.mul, [t(2, 3), t(1, 3)])
case("__mul__", torch.Tensor.__mul__, [t(2, 3), -0.125])
case("div", torch.div, [t(2, 3), t(2, 3, low=0.5, high=2)])
case("__truediv__", torch.Tensor.__truediv__, [t(2, 3), 3.0])
case("__rtruediv__", torch.Tensor.__rtruediv__, [t(2, 3, low=0.5, high=2), 1.0])
case("pow", torch.pow, [t(2, 3, low=0.1, high=3), 2.0])
case("pow", torch.pow, [t(2, 3, low=0.1, high=3), t(2, 3)], note="tensor exponent")
case("exp", torch.exp, [t(2, 3)])
case("log", torch.log, [t(2, 3, low=0.01, high=5)])
case("sqrt", torch.sqrt, [t(2, 3, low=0, high=5)])
case("rsqrt", torch.rsqrt, [t(2, 3, low=0.1, high=5)])
case("neg", torch.neg, [t(2, 3)])
case("abs", torch.abs, [t(2, 3)])
case("where", torch.where, [t(2, 3) > 0, t(2, 3), t(3)])
case("masked_fill", torch.Tensor.masked_fill, [t(2, 3), t(2, 3) > 0.5, -1e4])
case("sum", torch.sum, [t(2, 3, 4)])
case("sum", torch.sum, [t(2, 3, 4), [0, 2]], {"keepdim": True})
case("mean", torch.mean, [t(2, 3, 4), -1])
case("max", torch.max, [t(2, 3, 4)])
case("max", torch.max, [t(2, 3, 4), 1], note="values and indices")
case("min", torch.min, [t(2, 3), t(2, 3)], note="elementwise")
case("amax", torch.amax, [t(2, 3, 4), [1, 2]])
case("var", torch.var, [t(3, 8), 1])
case("var", torch.var, [t(3, 8)], {"dim": 0, "correction": 0, "keepdim": True})
case("std", torch.std, [t(3, 8), 1])
case("norm", torch.norm, [t(3, 8)], {"p": 2, "dim": -1})
case("norm", torch.norm, [t(3, 8)], note="Frobenius of all")
case("cross_entropy", F.cross_entropy, [t(6, 5), torch.tensor([0, 4, 2, 2, 1, 3])])
case("cross_entropy", F.cross_entropy, [t(6, 5), torch.tensor([0, -100, 2, 2, 1, 3])], {"reduction": "sum"}, note="ignore_index")
case("cross_entropy", F.cross_entropy, [t(4, 5), torch.tensor([0, 1, 2, 3])], {"reduction": "none"})
case("nll_loss", F.nll_loss, [F.log_softmax(t(6, 5), -1), torch.tensor([0, 4, 2, 2, 1, 3])])
case("embedding", F.embedding, [torch.tensor([[0, 3, 1], [4, 4, 2]]), t(5, 6)])
case("index_select", torch.index_select, [t(4, 5), 1, torch.tensor([4, 0, 2])])
case("gather", torch.gather, [t(3, 4), 1, torch.tensor([[0, 3], [1, 1], [2, 0]])])
case("cat", torch.cat, [[t(2, 3), t(2, 5)], 1])
case("stack", torch.stack, [[t(2, 3), t(2, 3)]], {"dim": 1})
case("split", torch.split, [t(5, 2), 2])
case("split", torch.split, [t(2, 6), [1, 5], 1], note="sections")
case("chunk", torch.chunk, [t(7, 2), 3])
case("view", torch.Tensor.view, [t(2, 3, 4), 6, -1])
case("reshape", torch.reshape, [t(2, 3, 4), [4, 6]])
case("transpose", torch.transpose, [t(2, 3, 4), 0, 2])
case("permute", torch.Tensor.permute, [t(2, 3, 4), 2, 0, 1])
case("expand", torch.Tensor.expand, [t(3, 1), 2, 3, 4])
case("unsqueeze", torch.unsqueeze, [t(3, 4), 1])
case("squeeze", torch.squeeze, [t(3, 1, 4)])
case("flatten", torch.flatten, [t(2, 3, 4), 1])

# scaled_dot_product_attention: torch's math at float64.
sdpa = F.scaled_dot_product_attention
q4, k4, v4 = t(2, 3, 5, 4), t(2, 3, 6, 4), t(2, 3, 6, 3)
case("scaled_dot_product_attention", sdpa, [q4, k4, v4], note="no mask, default scale")
case("scaled_dot_product_attention", sdpa, [t(2, 3, 5, 4), t(2, 3, 5, 4), t(2, 3, 5, 4)], {"is_causal": True}, note="causal")
case("scaled_dot_product_attention", sdpa, [q4, k4, v4], {"attn_mask": t(5, 6) > -1.0, "scale": 0.3}, note="bool mask, scale")
full_mask = torch.ones(2, 1, 5, 6, dtype=torch.bool)
full_mask[0, 0, 2, :] = False
case("scaled_dot_product_attention", sdpa, [q4, k4, v4, full_mask], note="bool mask positional, a fully masked row")
case("scaled_dot_product_attention", sdpa, [q4, k4, v4], {"attn_mask": t(2, 3, 5, 6)}, note="float mask")
case("scaled_dot_product_attention", sdpa, [t(2, 4, 5, 4), t(2, 2, 6, 4), t(2, 2, 6, 4)], {"enable_gqa": True, "is_causal": True}, note="grouped-query heads")
case("scaled_dot_product_attention", sdpa, [t(5, 4), t(7, 4), t(7, 2)], {"dropout_p": 0.0}, note="2-D, dropout_p 0")


# npu_fusion_attention: msprobe's CPU reference (bench_functions/npu_fusion_attention.py), its
# attention output; the arguments as torch_npu takes them (query, key, value, head_num,
# input_layout positional, the rest by keyword).
def fa(*args, **kwargs):
    return npu_fusion_attention(*args, **kwargs)[0]


B, N, S, D = 2, 4, 6, 8
def bnsd(n=N, s=S):
    return t(B, n, s, D)


q, k, v = bnsd(), bnsd(), bnsd()
case("npu_fusion_attention", fa, [q, k, v, N, "BNSD"], {"scale": 0.35}, note="BNSD, no mask")
case("npu_fusion_attention", fa, [q.permute(0, 2, 1, 3).contiguous(), k.permute(0, 2, 1, 3).contiguous(), v.permute(0, 2, 1, 3).contiguous(), N, "BSND"], {"scale": 0.35, "atten_mask": torch.triu(torch.ones(S, S, dtype=torch.bool), 1)}, note="BSND, causal SS mask")
bsh = lambda x: x.permute(0, 2, 1, 3).reshape(B, x.shape[2], -1).contiguous()
sbh = lambda x: x.permute(2, 0, 1, 3).reshape(x.shape[2], B, -1).contiguous()
case("npu_fusion_attention", fa, [bsh(q), bsh(k), bsh(v), N, "BSH"], {"scale": 0.25, "atten_mask": t(B, 1, S, S) > 1.0}, note="BSH, B1SS mask")
case("npu_fusion_attention", fa, [sbh(q), sbh(k), sbh(v), N, "SBH"], {"scale": 0.25, "atten_mask": t(B, N, S, S) > 1.0}, note="SBH, BNSS mask")
compressed = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)
q8, k10, v10 = t(B, N, 8, D), t(B, N, 10, D), t(B, N, 10, D)
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 2, "atten_mask": compressed}, note="sparse_mode 2 (compressed), S1 < S2")
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 3, "atten_mask": compressed}, note="sparse_mode 3 (compressed, bottom right)")
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 4, "atten_mask": compressed, "pre_tockens": 3, "next_tockens": 1}, note="sparse_mode 4 (band)")
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 0, "pre_tockens": 2, "next_tockens": 0}, note="sparse_mode 0, pre/next_tockens")
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 1}, note="sparse_mode 1 (no mask)")
case("npu_fusion_attention", fa, [q8, k10, v10, N, "BNSD"], {"scale": 0.3, "sparse_mode": 2}, note="sparse_mode 2 without a mask")
case("npu_fusion_attention", fa, [bsh(bnsd()), bsh(bnsd(n=2)), bsh(bnsd(n=2)), N, "BSH"], {"scale": 0.4, "next_tockens": 0}, note="BSH, grouped-query heads (2 KV heads), causal by next_tockens")
case("npu_fusion_attention", fa, [bnsd(), bnsd(n=1), bnsd(n=1), N, "BNSD"], {"scale": 0.4, "pse": t(B, N, S, S)}, note="pse, one KV head")

# npu_rotary_mul: msprobe's CPU reference (the rotate-half form), r1/r2 broadcast over x.
case("npu_rotary_mul", npu_rotary_mul, [t(2, 5, 3, 8), t(1, 5, 1, 8), t(1, 5, 1, 8)], note="BSND, cos/sin [1, S, 1, D]")
case("npu_rotary_mul", npu_rotary_mul, [t(2, 3, 5, 6), t(1, 1, 5, 6), t(1, 1, 5, 6)], note="BNSD, cos/sin [1, 1, S, D]")
case("npu_rotary_mul", npu_rotary_mul, [t(2, 3, 5, 4), t(2, 1, 1, 4), t(2, 1, 1, 4)], note="cos/sin [B, 1, 1, D]")


# npu_add_rms_norm (no bench function of its own in msprobe): x = x1 + x2, then msprobe's
# npu_rms_norm; outputs (y, rstd, x) as torch_npu returns them.
def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    y, rstd = npu_rms_norm(x1 + x2, gamma, epsilon)
    return y, rstd, x1 + x2


case("npu_add_rms_norm", add_rms_norm, [t(2, 5, 8), t(2, 5, 8), t(8)], {"epsilon": 1e-6}, note="msprobe's npu_rms_norm of the sum (rstd as fp32)", rtol=2.0**-22)
case("npu_add_rms_norm", add_rms_norm, [t(3, 16), t(3, 16), t(16), 1e-5], note="epsilon positional", rtol=2.0**-22)

# Second tier: convolutions, group/batch norm, cumsum (torch at float64).
case("conv1d", F.conv1d, [t(2, 4, 9), t(6, 4, 3), t(6)], note="bias")
case("conv1d", F.conv1d, [t(2, 4, 11), t(6, 2, 3)], {"stride": 2, "padding": 2, "dilation": 2, "groups": 2}, note="stride, padding, dilation, groups")
case("conv1d", F.conv1d, [t(4, 10), t(3, 4, 4), t(3)], {"padding": "same"}, note="unbatched, 'same' (even kernel)")
case("conv1d", F.conv1d, [t(1, 3, 8), t(3, 1, 3), None, [1], "valid", [1], 3], note="positional, 'valid', depthwise")
case("conv2d", F.conv2d, [t(2, 3, 7, 6), t(4, 3, 3, 3), t(4)], note="bias")
case("conv2d", F.conv2d, [t(1, 4, 9, 8), t(6, 2, 3, 2)], {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}, note="per-dim stride, padding, dilation; groups")
case("conv2d", F.conv2d, [t(3, 6, 6), t(2, 3, 2, 3)], {"padding": "same", "dilation": 2}, note="unbatched, 'same' with dilation")
case("group_norm", F.group_norm, [t(2, 6, 5), 3, t(6), t(6)], {"eps": 1e-5}, note="affine")
case("group_norm", F.group_norm, [t(2, 4, 3, 3), 2], note="2-d positions, no affine")
case("group_norm", F.group_norm, [t(3, 4), 4, t(4), t(4), 1e-3], note="(N, C), a group per channel")
case("batch_norm", F.batch_norm, [t(4, 3, 5), t(3), t(3, low=0.5, high=2), t(3), t(3)], note="inference, running statistics")
case("batch_norm", F.batch_norm, [t(4, 3, 2, 2), t(3), t(3, low=0.5, high=2)], {"training": False, "eps": 1e-3}, note="inference, no affine")
case("batch_norm", F.batch_norm, [t(4, 3, 5), t(3), t(3, low=0.5, high=2), t(3), t(3), True, 0.1, 1e-5], note="training: the batch's statistics")
case("batch_norm", F.batch_norm, [t(6, 4), None, None, t(4), t(4)], {"training": True}, note="training, (N, C), no running statistics")
case("cumsum", torch.cumsum, [t(3, 7), 1])
case("cumsum", torch.cumsum, [t(4, 2, 3)], {"dim": 0}, note="dim keyword")
case("cumsum", torch.Tensor.cumsum, [t(2, 5), -1], note="Tensor.cumsum, negative dim")

OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps({"torch": torch.__version__, "cases": CASES}, indent=None) + "\n")
print(f"{OUT}: {len(CASES)} cases")
