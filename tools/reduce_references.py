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
       /opt/torch-venv/bin/python tools/reduce_references.py --kinds \\
           > tests/references/reduce_kinds.csv

With --kinds, the values of the rows' layer kinds (layers/reduce.c: `sum dim=-1 keepdim=yes`)
instead, for tests/references/reduce_kinds.csv: x.sum(dim, keepdim), x.mean(...),
x.amax(...) over dims of the whole tensor (negative ones too), keepdim yes and no, with x
float32, float16 and bfloat16, outside autocast and under CUDA autocast float16, where sum
is on the fp32_set_opt_dtype list: sum(x, dim, keepdim, dtype=torch.float32), which on CUDA
reads the half values and writes float32 (ReduceOps.cpp, make_reduction_from_out_ty), its
gradient the float32 one expanded, cast into x's dtype. One CSV line per tensor:
    kind,params,dtype,autocast,shape,dim,keepdim,ydtype,tensor,values
    params   real0=C: var's correction (op_params.real[0]); dim: the dims as written, "," replaced by ";"; ydtype: y's dtype
    tensor   x, dy (in y's dtype), y, dx (in x's dtype); y.f32 and dx.f32 the float32
             values before their last rounding
"""
import json
import sys

import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
RECIPES = {
    "sum": lambda x, dims: torch.sum(x, dims),
    "mean": lambda x, dims: torch.mean(x, dims),
    "amax": lambda x, dims: torch.amax(x, dims),
    # the rows' tests pass op_params of zeros: var's correction 0
    "var": lambda x, dims: torch.var(x, dims, correction=0),
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
    if name == "var" and dt != torch.float32:
        dx = var_backward(xf.detach(), dims, dy.to(dt).float(), 0.0, dt)
    return y.detach(), dx


def var_backward(x, dims, dy, correction, dt):
    """FunctionsManual.cpp's var_backward as CUDA runs it on half tensors:
    ((2 / (R - correction)) * grad) * (self - self.mean(dim, True)), the scalar float32
    opmath, every kernel's result rounded into dt (x holds dt's values as float32)"""
    def r(t):
        return t.to(dt).float()
    R = 1
    for d in dims:
        R *= x.shape[d]
    scale = torch.tensor(2.0 / (R - correction), dtype=torch.float32)
    keep = [1 if d in [k % x.dim() for k in dims] else s for d, s in enumerate(x.shape)]
    return r(scale * dy.reshape(keep)) * r(x - r(torch.mean(x, dims, keepdim=True)))


# (kind, x's shape, dim, keepdim, var's correction)
KIND_CASES = [("sum", [2, 3, 4], [-1], False, None), ("sum", [2, 3, 4], [1, 2], True, None),
              ("mean", [2, 3, 4], [-1], True, None), ("mean", [2, 5, 6], [1], False, None),
              ("amax", [2, 3, 4], [-2], True, None), ("amax", [2, 4, 3], [2], False, None),
              ("var", [2, 3, 4], [-1], True, 1.0), ("var", [2, 5, 6], [1, 2], False, 0.0),
              # tensors of 5 and 6 dims (TENSOR_MAX_DIMS): a middle dim, and three kept and
              # three reduced groups; appended, so that the rows above keep their values
              ("sum", [2, 3, 4, 2, 3], [2], False, None),
              ("mean", [2, 3, 4, 2, 3], [-3], True, None),
              ("sum", [2, 3, 2, 2, 2, 3], [1, 3, 5], False, None)]


def kinds():
    gen = torch.Generator().manual_seed(29)
    print("kind,params,dtype,autocast,shape,dim,keepdim,ydtype,tensor,values")
    lines = 0
    for name, shape, dims, keepdim, correction in KIND_CASES:
        x = torch.randint(-8, 8, shape, generator=gen).float() * 0.375
        x += torch.randn(*shape, generator=gen) * (0 if name == "amax" else 0.01)
        for dname, dt in DTYPES.items():
            for autocast in ["no", "float16"]:
                xd = x.to(dt)
                fp32_out = autocast != "no" and name == "sum" and dt != torch.float32
                ydt = torch.float32 if fp32_out else dt
                xf = xd.float().requires_grad_(True)
                y = RECIPES_DIM[name](xf, dims, keepdim, correction)
                dy = torch.randn(y.shape, generator=gen).to(ydt)
                (dx,) = torch.autograd.grad(y, xf, dy.float())
                if name == "mean" and ydt != torch.float32:  # grad * float32(1 / count)
                    inv = torch.tensor(1.0, dtype=torch.float32) / (x.numel() // y.numel())
                    dx = (dy.float() * inv).reshape(
                        [1 if d in [k % len(shape) for k in dims] else s
                         for d, s in enumerate(shape)]).expand(shape)
                if name == "var" and dt != torch.float32:
                    dx = var_backward(xd.float(), dims, dy.float(), correction, dt)
                params = "" if correction is None else f"real0={correction!r}"
                common = (f"{name},{params},{dname},{autocast},{'x'.join(map(str, shape))},"
                          f"{';'.join(map(str, dims))},{'yes' if keepdim else 'no'},"
                          f"{str(ydt).replace('torch.', '')}")
                tensors = [("x", xd), ("dy", dy), ("y", y.detach().to(ydt)), ("dx", dx.to(dt)),
                           ("y.f32", y.detach()), ("dx.f32", dx)]
                for tname, t in tensors:
                    vals = " ".join(text(v) for v in t.float().flatten().tolist())
                    print(f"{common},{tname},{vals}")
                    lines += 1
    print(f"PyTorch {torch.__version__}: {lines} tensors of {len(KIND_CASES)} kind cases",
          file=sys.stderr)


RECIPES_DIM = {
    "sum": lambda x, dims, keepdim, c: torch.sum(x, dims, keepdim=keepdim),
    "mean": lambda x, dims, keepdim, c: torch.mean(x, dims, keepdim=keepdim),
    "amax": lambda x, dims, keepdim, c: torch.amax(x, dims, keepdim=keepdim),
    "var": lambda x, dims, keepdim, c: torch.var(x, dims, keepdim=keepdim, correction=c),
}


def main():
    if sys.argv[1:] == ["--kinds"]:
        kinds()
        return
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
