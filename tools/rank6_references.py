#!/usr/bin/env python3
"""rank6_references.py: the dtypes and shapes PyTorch's CUDA autocast dispatcher gives the
tensors of tests/cases/small-vit-qkv-5d-autocast.case, a chain through 5-d tensors.

The case's [model] written as PyTorch code (timm's ViT attention qkv.reshape(B, N, 3, H, D)
and HF Llama's repeat_kv expand, with the batch dim kept first as the case file keeps it),
run on fake CUDA tensors (FakeTensorMode: the dispatcher's AutocastCUDA kernels run without
a GPU) under CUDA autocast float16, bfloat16 and with autocast off, the autocast state set
at the dispatcher as torch.autocast's __enter__ sets it (tools/cast_references.py's Region).
Each layer output is recorded under the harness's name ("p.out") (fake CUDA tensors run no
backward: the gradients' dtypes are left to the case's [expect]). Also checked here: timm's own order, qkv.permute(2, 0, 3, 1, 4).unbind(0)[1], is the case's
permute(0, 2, 3, 1, 4) then select(1, 1).

Output, a CSV file: config,tensor,dtype,shape (shape as tensors.csv writes it, "2x3x3x2x4").
tests/test_rank6.c compares the harness's runs with it.

Usage: /opt/torch-venv/bin/python tools/rank6_references.py > tests/references/rank6.csv
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cast_references import DTYPES, Region  # noqa: E402

B, N, C, H, D, REP = 2, 3, 8, 2, 4, 3
CONST = "tests/cases/data/rank5-scale-1x1x3x1x4.npy"


def shape_text(t):
    return "x".join(str(s) for s in t.shape) or "scalar"


def rows(config):
    const = np.load(CONST)
    with FakeTensorMode():
        def w(*shape):
            return torch.randn(*shape, device="cuda", requires_grad=True)
        x = torch.randn(B, N, C, device="cuda")
        w_qkv, b_qkv, w_o, b_o = w(3 * C, C), w(3 * C), w(C, H * N * D), w(C)
        wp, bp = w(REP, 1, D), w(D)
        c = torch.tensor(const, device="cuda")  # a buffer: no gradient
        on = config != "off"
        with Region(on, DTYPES[config] if on else None):
            qkv = F.linear(x, w_qkv, b_qkv)                  # qkv = linear 8 -> 24
            r5 = qkv.reshape(B, N, 3, H, D)                  # r5  = reshape 3 3 2 4
            p = r5.permute(0, 2, 3, 1, 4).contiguous()       # p   = permute dims=0,2,3,1,4
            k = p.select(1, 1)                               # k   = select dim=1 index=1
            timm_k = r5.permute(2, 0, 3, 1, 4).unbind(0)[1]  # timm's order
            assert timm_k.shape == k.shape and timm_k.dtype == k.dtype
            ku = k.unsqueeze(2)                              # ku  = unsqueeze dim=2
            ke = ku.expand(-1, -1, REP, -1, -1)              # ke  = expand sizes=-1,-1,3,-1,-1
            sm = F.softmax(ke, dim=-1)                       # sm  = softmax dim=-1
            g = sm * wp                                      # g   = mul sm w
            gc = g * c                                       # gc  = mul g c
            a = gc + bp                                      # a   = add gc b
            m = a.mean(dim=2)                                # m   = mean dim=2
            f = m.reshape(B, -1)                             # f   = reshape 24
            o = F.linear(f, w_o, b_o)                        # o   = linear 24 -> 8
        outs = {"qkv": qkv, "r5": r5, "p": p, "k": k, "ku": ku, "ke": ke, "sm": sm, "g": g,
                "gc": gc, "a": a, "m": m, "f": f, "o": o}
        return [(config, f"{name}.out", str(t.dtype).replace("torch.", ""), shape_text(t))
                for name, t in outs.items()]


def main():
    print("config,tensor,dtype,shape")
    for config in ("float16", "bfloat16", "off"):
        for row in rows(config):
            print(",".join(row))
    print(f"PyTorch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
