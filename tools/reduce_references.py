#!/usr/bin/env python3
"""reduce_references.py: PyTorch's values of every reduction row, for tests/test_reduce.c.

Reads `ampscope ops --json`, and for every reduction row runs its ATen op over fixed inputs
and dims: the forward y and, by autograd, the gradient of sum(dy * y) with respect to x, in
float32 and, as PyTorch's CUDA kernels compute them, in float16 and bfloat16: the forward
sums the half values in float32 and rounds once (cuda/ReduceSumProdKernel.cu's and
ReduceMomentKernel.cu's float accumulators, mean's factor float(num_outputs) / numel),
amax compares the half values; the backward of mean multiplies by the float32 reciprocal of
the count and rounds once (its division by a CPU scalar, cuda/BinaryDivTrueKernel.cu), amax's
divides by the ties' count in float32 and rounds (derivatives.yaml's scale_grad_by_count),
sum's expands. The inputs hold ties (values of a coarse grid) so that amax's gradient shares.

Writes one CSV line per tensor: row,dtype,shape,dims,tensor,values
    shape    x's dims, "x"-joined; dims: the reduced dims, "x"-joined
    tensor   x, dy (y's values), y, dx; for a half dtype also y.f32 and dx.f32, the float32
             values before the last rounding
    values   space-separated (Python reprs of the exact values)

Usage: bin/ampscope ops --json | /opt/torch-venv/bin/python tools/reduce_references.py \\
           > tests/references/reduce.csv
"""
import json
import sys

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
RECIPES = {
    "sum": lambda x, dims: torch.sum(x, dims),
    "mean": lambda x, dims: torch.mean(x, dims),
    "amax": lambda x, dims: torch.amax(x, dims),
}
CASES = [([4, 5, 6], [0, 2]), ([7, 11], [0]), ([2, 3, 6, 6], [2, 3]), ([300], [0])]


def text(v):
    return repr(float(v)) if v == v else "nan"


def values(name, x, dims, dy, dt):
    """y, dx (rounded into dt) and their float32 values before that rounding"""
    xf = x.to(dt).float().requires_grad_(True)
    y = RECIPES[name](xf, dims)
    (dx,) = torch.autograd.grad(y, xf, dy.to(dt).float())
    if name == "mean" and dt != torch.float32:  # grad * float32(1 / count), rounded once
        count = torch.tensor(x.numel() // y.numel(), dtype=torch.float32)
        inv = torch.tensor(1.0, dtype=torch.float32) / count
        dx = (dy.to(dt).float().reshape(
            [1 if d in dims else s for d, s in enumerate(x.shape)]) * inv).expand(x.shape)
    return y.detach(), dx


def main():
    ops = [op for op in json.load(sys.stdin) if op["kind"] == "reduction"]
    gen = torch.Generator().manual_seed(23)
    print("row,dtype,shape,dims,tensor,values")
    lines = 0
    for op in ops:
        name = op["name"]
        if name not in RECIPES:
            raise SystemExit(f"reduce_references.py: row {name} has no recipe in RECIPES")
        for shape, dims in CASES:
            x = torch.randint(-8, 8, shape, generator=gen).float() * 0.375
            x += torch.randn(*shape, generator=gen) * (0 if name == "amax" else 0.01)
            kept = [s for d, s in enumerate(shape) if d not in dims]
            dy = torch.randn(kept, generator=gen)
            for dname, dt in DTYPES.items():
                y, dx = values(name, x, dims, dy, dt)
                common = f"{name},{dname},{'x'.join(map(str, shape))},{'x'.join(map(str, dims))}"
                tensors = [("x", x.to(dt)), ("dy", dy.to(dt)), ("y", y.to(dt)), ("dx", dx.to(dt))]
                if dt != torch.float32:
                    tensors += [("y.f32", y), ("dx.f32", dx)]
                for tname, t in tensors:
                    vals = " ".join(text(v) for v in t.float().flatten().tolist())
                    print(f"{common},{tname},{vals}")
                    lines += 1
    print(f"PyTorch {torch.__version__}: {lines} tensors of {len(ops)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
