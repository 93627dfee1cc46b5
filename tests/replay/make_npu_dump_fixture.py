#!/usr/bin/env python3
"""Writes plugin/replay/tests/fixtures/npu_dump/ and npu_dump_faulty/: a synthetic msprobe 26.2
tensor dump (dump.json and .pt files, as msprobe's PyTorch dump writes them) of NPU-only calls that
cannot be dumped here (no torch_npu): npu_fusion_attention (bf16, BSH, a causal S×S mask with
sparse_mode 0 — the compressed 2048×2048 mask of sparse_mode 2–4 is 4 MB as a .pt, and is covered
by the oracle rows of make_op_oracle.py —, grouped-query heads, its seven outputs), npu_rotary_mul and
npu_add_rms_norm. Their "device" outputs are computed the way the kernels do in bf16 (fp32
scores and sums, flash attention's P rounded to bf16, one rounding of each output); the faulty
variant moves the attention output of one head +4 bf16 ULPs. Never run by `make test`.

    .oracle-venv/bin/python tests/replay/make_npu_dump_fixture.py
"""

from __future__ import annotations

import json
import pathlib
import shutil

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "plugin/replay/tests/fixtures"
torch.manual_seed(4438)
BF16 = torch.bfloat16


def stats(t: torch.Tensor) -> dict:
    f = t.double()
    if t.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    return {"Max": f.max().item(), "Min": f.min().item(), "Mean": f.mean().item(), "Norm": f.norm().item()}


class Dump:
    def __init__(self, name: str):
        self.dir = OUT / name / "step0" / "rank0"
        if (OUT / name).exists():
            shutil.rmtree(OUT / name)
        (self.dir / "dump_tensor_data").mkdir(parents=True)
        self.data = {}

    def rec(self, v, file_stem: str):
        if isinstance(v, torch.Tensor):
            name = f"{file_stem}.pt"
            torch.save(v.clone(), self.dir / "dump_tensor_data" / name)
            out = {"type": "torch.Tensor", "dtype": str(v.dtype), "shape": list(v.shape)}
            out.update(stats(v) if v.dtype != torch.bool else {"Max": bool(v.any()), "Min": bool(v.all()), "Mean": None, "Norm": None})
            out.update({"requires_grad": False, "data_name": name})
            return out
        if isinstance(v, bool):
            return {"type": "bool", "value": v}
        if isinstance(v, int):
            return {"type": "int", "value": v}
        if isinstance(v, float):
            return {"type": "float", "value": v}
        if isinstance(v, str):
            return {"type": "str", "value": v}
        raise TypeError(type(v))

    def call(self, name: str, args: list, kwargs: dict, outputs: list):
        self.data[name] = {
            "input_args": [self.rec(a, f"{name}.input.{i}") for i, a in enumerate(args)],
            "input_kwargs": {k: self.rec(v, f"{name}.input.{k}") for k, v in kwargs.items()},
            "output": [self.rec(o, f"{name}.output.{i}") for i, o in enumerate(outputs)],
        }

    def write(self):
        doc = {"task": "tensor", "level": "L1", "framework": "pytorch",
               "dump_data_dir": f"/data/dumps/{self.dir.parents[1].name}/step0/rank0/dump_tensor_data",
               "data": self.data}
        (self.dir / "dump.json").write_text(json.dumps(doc, indent=1) + "\n")


def flash_bf16(q, k, v, n1, n2, scale):
    """BSH bf16 attention as a flash kernel rounds it: fp32 scores, causal, P to bf16, fp32 P·V."""
    b, s, h1 = q.shape
    d = h1 // n1
    qh = q.float().reshape(b, s, n1, d).transpose(1, 2)
    kh = k.float().reshape(b, s, n2, d).transpose(1, 2).repeat_interleave(n1 // n2, 1)
    vh = v.float().reshape(b, s, n2, d).transpose(1, 2).repeat_interleave(n1 // n2, 1)
    scores = (qh @ kh.transpose(-1, -2)) * scale
    scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
    m = scores.amax(-1, keepdim=True)
    p = torch.exp(scores - m)
    l = p.sum(-1, keepdim=True)
    o = (p.to(BF16).float() @ vh) / l
    out = o.transpose(1, 2).reshape(b, s, h1).to(BF16)
    return out, m.expand(b, n1, s, 8).contiguous(), l.expand(b, n1, s, 8).contiguous()


def build(name: str, faulty: bool):
    dump = Dump(name)
    b, s, n1, n2, d = 2, 64, 4, 2, 32
    q = torch.randn(b, s, n1 * d).to(BF16)
    k = torch.randn(b, s, n2 * d).to(BF16)
    v = torch.randn(b, s, n2 * d).to(BF16)
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    out, smax, ssum = flash_bf16(q, k, v, n1, n2, 0.5)
    if faulty:
        head = out[:, :, d:2 * d].float()
        step = torch.pow(2.0, torch.floor(torch.log2(head.abs())) - 7)
        out[:, :, d:2 * d] = (head + 4 * step).to(BF16)
    dump.call("NPU.npu_fusion_attention.0.forward", [q, k, v, n1, "BSH"],
              {"atten_mask": mask, "scale": 0.5, "pre_tockens": 65536, "next_tockens": 65536, "keep_prob": 1.0, "sparse_mode": 0},
              [out, smax, ssum, torch.empty(0, dtype=BF16), 0, 0, 0])
    x = torch.randn(b, s, n1, d).to(BF16)
    pos = torch.arange(s, dtype=torch.float32)[:, None] / (10000 ** (torch.arange(0, d, 2) / d))
    cos = torch.cat([pos.cos(), pos.cos()], -1)[None, :, None, :].to(BF16)
    sin = torch.cat([pos.sin(), pos.sin()], -1)[None, :, None, :].to(BF16)
    xf = x.float()
    rot = torch.cat([-xf[..., d // 2:], xf[..., : d // 2]], -1)
    dump.call("NPU.npu_rotary_mul.0.forward", [x, cos, sin], {}, [(cos.float() * xf + sin.float() * rot).to(BF16)])
    x1, x2, gamma = torch.randn(b, s, 128).to(BF16), torch.randn(b, s, 128).to(BF16), torch.randn(128).to(BF16)
    xs = x1.float() + x2.float()
    rstd = torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + 1e-6)
    dump.call("NPU.npu_add_rms_norm.0.forward", [x1, x2, gamma], {"epsilon": 1e-6},
              [(xs * rstd * gamma.float()).to(BF16), rstd, xs.to(BF16)])
    dump.write()


build("npu_dump", False)
build("npu_dump_faulty", True)
print(f"{OUT}: npu_dump, npu_dump_faulty")
