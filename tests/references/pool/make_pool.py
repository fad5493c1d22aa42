#!/usr/bin/env python3
"""make_pool.py: PyTorch's values of the pooling ops, for tests/test_pool.c.

Run from the repository root:
    /opt/torch-venv/bin/python tests/references/pool/make_pool.py
For each configuration below it draws x and dy (numpy, seeded), rounds them into the
configuration's dtype, runs the op forward and backward in PyTorch (CPU) and writes
tests/references/pool/<name>.<tensor>.npy for x, dy, y, dx: float32 arrays holding the
values exactly (half values are exact in float32).

The pools are on no autocast list (CPU's and CUDA's agree). Half configurations ("-half")
are computed as PyTorch's CUDA kernels compute them (DilatedMaxPool2d.cu,
AveragePool2d.cu, mean's reduction for the 1x1 adaptive pool: float32 accumulation from the
half values, each output rounded once to the half dtype): the op runs in float32 on the
half values and y and dx are rounded once.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# name, op, x shape, kernel, stride, padding, count_include_pad, dtype, seed
CONFIGS = [
    ("max-f32-k2", "max", (2, 3, 6, 6), 2, 2, 0, True, torch.float32, 1),
    ("max-f32-k3s2p1", "max", (2, 2, 7, 5), 3, 2, 1, True, torch.float32, 2),
    ("max-f32-k3s1", "max", (1, 2, 5, 5), 3, 1, 0, True, torch.float32, 3),
    ("max-f16-half", "max", (2, 3, 6, 6), 2, 2, 0, True, torch.float16, 4),
    ("avg-f32-k2", "avg", (2, 3, 6, 6), 2, 2, 0, True, torch.float32, 5),
    ("avg-f32-k3s2p1", "avg", (2, 2, 7, 5), 3, 2, 1, True, torch.float32, 6),
    ("avg-f32-k3s2p1-nopad", "avg", (2, 2, 7, 5), 3, 2, 1, False, torch.float32, 7),
    ("avg-bf16-half", "avg", (2, 3, 6, 6), 3, 1, 1, True, torch.bfloat16, 8),
    ("gap-f32", "gap", (3, 4, 5, 7), 0, 0, 0, True, torch.float32, 9),
    ("gap-f16-half", "gap", (2, 8, 7, 7), 0, 0, 0, True, torch.float16, 10),
]


def save(name, tensor_name, t):
    np.save(os.path.join(HERE, f"{name}.{tensor_name}.npy"),
            t.detach().to(torch.float32).contiguous().numpy())


def main():
    for name, op, shape, k, s, p, cip, dt, seed in CONFIGS:
        rng = np.random.default_rng(seed)
        x = torch.tensor(rng.standard_normal(shape, dtype=np.float32) * 2).to(dt)
        xr = x.to(torch.float32).requires_grad_()
        if op == "max":
            y = F.max_pool2d(xr, k, s, p)
        elif op == "avg":
            y = F.avg_pool2d(xr, k, s, p, count_include_pad=cip)
        else:
            y = F.adaptive_avg_pool2d(xr, 1)
        dy = torch.tensor(rng.standard_normal(tuple(y.shape), dtype=np.float32)).to(dt)
        y.backward(dy.to(torch.float32))
        for tname, t in (("x", x), ("dy", dy), ("y", y.to(dt)), ("dx", xr.grad.to(dt))):
            save(name, tname, t)
        print(name, tuple(y.shape), dt, "torch", torch.__version__)


if __name__ == "__main__":
    main()
