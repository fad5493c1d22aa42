#!/usr/bin/env python3
"""pointwise_references.py: PyTorch's values of every pointwise row, for tests/test_pointwise.c.

Reads `ampscope ops --json`, and for every row (kind "pointwise") runs its ATen op on fixed
inputs: the forward y = op(a, b, ...) and, by autograd, the gradients of sum(dy * y) with
respect to each operand (summed over the dims where an operand broadcasts, in the gradient's
dtype, as autograd's engine sums them). Each row runs at every parameter set of its recipe
below, in float32, float16 and bfloat16, at one shape for all its operands and, for a row of
two operands, with the second broadcast along the first dim.

float32 is PyTorch's own CPU kernels. float16 and bfloat16 are computed as PyTorch's CUDA
kernels compute them (the harness follows CUDA; PyTorch's CPU kernels round half values at
other points): the op and its backward run in float32 on the half values and each result
is rounded once into the half dtype (opmath), a broadcast operand's gradient summed in
float32 and rounded once (the sum kernels' float accumulator), but where a row's CUDA
backward computes in scalar_t (sigmoid's and tanh's, BinaryMiscBackwardOpsKernels.cu):
there every operation of half tensors rounds, as c10::Half's operators do.

dropout's mask is the harness's own (element i kept when the top 24 bits of splitmix64(seed +
i * golden) fall below (1 - p) 2^24, with the seed the harness's layer draws for a layer
named y in step 0 of a case of seed 0); its values are PyTorch's native_dropout_backward
(x * mask * scale) with that mask and the harness's float32 scale 1 / (1 - p).

Writes one CSV line per tensor: row,params,dtype,shapes,tensor,values
    params   real=R0;choice=C0 (the row's parameter slot 0; more slots when a row has them)
    dtype    the operands' dtype; shapes: each operand's, "x"-joined dims, "/" between operands
    tensor   a, b (the operands), dy, y, da, db (the gradients, in the operands' shapes); for
             a half dtype also y.f32, da.f32, db.f32: the float32 values before the last
             rounding (where a row's backward computes in scalar_t: the result itself)
    values   the tensor's values (exact float32 or half values as Python reprs), space-separated

Usage: bin/ampscope ops --json | /opt/torch-venv/bin/python tools/pointwise_references.py \\
           > tests/references/pointwise.csv
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
M64 = (1 << 64) - 1


def splitmix(x):
    """rng_splitmix of core/rng.h: the next state and the value"""
    x = (x + 0x9E3779B97F4A7C15) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return x, z ^ (z >> 31)


def layer_seed(out_name="y.out", case_seed=0, step=0):
    """the seed layers/pointwise.c draws for a layer's output in a step"""
    h = 0xCBF29CE484222325
    for ch in out_name.encode():
        h = ((h ^ ch) * 0x100000001B3) & M64
    x = case_seed ^ h ^ ((step * 0x9E3779B97F4A7C15) & M64)
    return splitmix(x)[1]


def dropout_mask(seed, n, p):
    threshold = int((1.0 - p) * 16777216.0)
    keep = []
    for i in range(n):
        z = (seed + i * 0x9E3779B97F4A7C15) & M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        keep.append((z >> 40) < threshold)
    return torch.tensor(keep)


def dropout_scale(p):
    """Dropout.cu's scale as the harness stores it: float32(1 / float32(1 - p))"""
    q = torch.tensor(1.0 - p, dtype=torch.float32).item()
    return torch.tensor(1.0 / q, dtype=torch.float32).item()


def dropout(x, p):
    mask = dropout_mask(layer_seed(), x.numel(), p).reshape(x.shape)
    return torch.ops.aten.native_dropout_backward(x, mask, dropout_scale(p))


# Each row's parameter sets ({slot: value} for real[] and choice[]) and its forward as a
# function of its operands and those parameters; scalar_t: its CUDA backward's arithmetic
# in the tensors' own dtype, from (dy, saved result).
RECIPES = {
    "relu": {"sets": [{}], "f": lambda x, p: torch.relu(x)},
    "gelu": {"sets": [{"choice": {0: 0}}, {"choice": {0: 1}}],
             "f": lambda x, p: F.gelu(x, approximate=["none", "tanh"][p["choice"][0]])},
    "silu": {"sets": [{}], "f": lambda x, p: F.silu(x)},
    "sigmoid": {"sets": [{}], "f": lambda x, p: torch.sigmoid(x),
                "scalar_t": lambda g, y: (g * (1 - y)) * y},
    "tanh": {"sets": [{}], "f": lambda x, p: torch.tanh(x),
             "scalar_t": lambda g, y: g * (1 - y * y)},
    "add": {"sets": [{}], "f": lambda a, b, p: torch.ops.aten.add.Tensor(a, b)},
    "mul": {"sets": [{}], "f": lambda a, b, p: torch.ops.aten.mul.Tensor(a, b)},
    "scale": {"sets": [{"real": {0: 0.125}}, {"real": {0: 3.0}}],
              "f": lambda x, p: torch.ops.aten.mul.Scalar(x, p["real"][0])},
    "dropout": {"sets": [{"real": {0: 0.1}}, {"real": {0: 0.5}}],
                "f": lambda x, p: dropout(x, p["real"][0])},
    "neg": {"sets": [{}], "f": lambda x, p: torch.neg(x)},
    "sub": {"sets": [{}], "f": lambda a, b, p: torch.ops.aten.sub.Tensor(a, b)},
    "div": {"sets": [{}], "f": lambda a, b, p: torch.ops.aten.div.Tensor(a, b),
            "composite": lambda g, xs, y, p, r: [g / xs[1], -g * r(r(xs[0] / xs[1]) / xs[1])]},
    "maximum": {"sets": [{}], "f": lambda a, b, p: torch.maximum(a, b)},
    "minimum": {"sets": [{}], "f": lambda a, b, p: torch.minimum(a, b)},
    "pow": {"sets": [{"real": {0: 2.0}}, {"real": {0: 1.5}}, {"real": {0: 3.0}}],
            "positive": True,
            "f": lambda x, p: torch.ops.aten.pow.Tensor_Scalar(x, p["real"][0]),
            # PowKernel.cu: base * base * base in scalar_t for the exponent 3
            "scalar_t_forward": lambda x, p, r: r(x * x) * x if p["real"][0] == 3.0 else None,
            "composite": lambda g, xs, y, p, r: [g * r(p["real"][0] * r(
                pow_kernel(xs[0], p["real"][0] - 1, r)))]},
    "rsqrt": {"sets": [{}], "positive": True, "f": lambda x, p: torch.rsqrt(x),
              "composite": lambda g, xs, y, p, r: [r(-0.5 * g) * r(r(y * y) * y)]},
    "sqrt": {"sets": [{}], "positive": True, "f": lambda x, p: torch.sqrt(x),
             "composite": lambda g, xs, y, p, r: [g / r(2 * y)]},
    "exp": {"sets": [{}], "f": lambda x, p: torch.exp(x),
            "composite": lambda g, xs, y, p, r: [g * y]},
    "log": {"sets": [{}], "positive": True, "f": lambda x, p: torch.log(x)},
    "reciprocal": {"sets": [{}], "f": lambda x, p: torch.reciprocal(x),
                   "composite": lambda g, xs, y, p, r: [-g * r(y * y)]},
    "abs": {"sets": [{}], "f": lambda x, p: torch.abs(x)},
    "sin": {"sets": [{}], "f": lambda x, p: torch.sin(x),
            "composite": lambda g, xs, y, p, r: [g * r(torch.cos(xs[0]))]},
    "cos": {"sets": [{}], "f": lambda x, p: torch.cos(x),
            "composite": lambda g, xs, y, p, r: [g * -r(torch.sin(xs[0]))]},
    "erf": {"sets": [{}], "f": lambda x, p: torch.erf(x),
            "composite": lambda g, xs, y, p, r: [r(f32(2.0 / math.sqrt(math.pi))
                                                   * r(torch.exp(-r(xs[0] * xs[0])))) * g]},
    "softplus": {"sets": [{"real": {0: 1.0, 1: 20.0}}, {"real": {0: 2.0, 1: 1.0}}],
                 "f": lambda x, p: F.softplus(x, beta=p["real"][0], threshold=p["real"][1])},
    # the CUDA kernels multiply by float32(1/6) where PyTorch's CPU kernels divide by 6
    "hardswish": {"sets": [{}], "f": lambda x, p: x * torch.clamp(x + 3, 0, 6) * f32(1.0 / 6.0)},
    "hardsigmoid": {"sets": [{}], "f": lambda x, p: torch.clamp(x + 3, 0, 6) * f32(1.0 / 6.0)},
    "relu6": {"sets": [{}], "f": lambda x, p: F.relu6(x)},
}


def f32(v):
    """a Python float as float32 (a CUDA kernel's opmath constant or CPU scalar)"""
    return torch.tensor(v, dtype=torch.float32).item()


def pow_kernel(x, e, r):
    """x ** e as Pow.cpp and PowKernel.cu compute it for the special exponents (r rounds a
    scalar_t intermediate)"""
    if e == 0:
        return torch.ones_like(x)
    if e == 1:
        return x
    if e == 2:
        return x * x
    if e == 3:
        return r(x * x) * x
    return torch.pow(x, e)


def text(v):
    return repr(float(v)) if v == v else "nan"


def params_text(p):
    parts = [f"real{k}={v!r}" for k, v in sorted(p.get("real", {}).items())]
    parts += [f"choice{k}={v}" for k, v in sorted(p.get("choice", {}).items())]
    return ";".join(parts)


def values(recipe, p, xs, dy, dt):
    """y and the operands' gradients as CUDA computes them for operands of dtype dt (each
    operand's gradient in the output's shape rounded into dt, then summed in float32 to the
    operand's shape and rounded again), and the float32 values before their last rounding"""
    shape = torch.broadcast_shapes(*[x.shape for x in xs])
    xe = [x.to(dt).float().expand(shape).clone().requires_grad_(True) for x in xs]
    out = recipe["f"](*xe, p)
    y = out.detach()
    if dt != torch.float32 and "scalar_t" in recipe:
        g = recipe["scalar_t"](dy.to(dt), y.to(dt))
        return y, [g.float()]
    def r(t):
        return t.to(dt).float()
    if dt != torch.float32 and recipe.get("scalar_t_forward"):
        yf = recipe["scalar_t_forward"](xe[0].detach(), p, r)
        if yf is not None:
            y = yf
    if dt != torch.float32 and "composite" in recipe:
        # a backward of several kernels: each intermediate a tensor of dtype dt
        grads = recipe["composite"](r(dy), [x.detach() for x in xe], r(y), p, r)
        return y, [g if x.shape == shape else r(g).sum_to_size(x.shape)
                   for g, x in zip(grads, xs)]
    grads = torch.autograd.grad(out, xe, dy.to(dt).float())
    return y, [g if x.shape == shape else g.to(dt).float().sum_to_size(x.shape)
               for g, x in zip(grads, xs)]


def main():
    ops = [op for op in json.load(sys.stdin) if op["kind"] == "pointwise"]
    gen = torch.Generator().manual_seed(17)
    print("row,params,dtype,shapes,tensor,values")
    lines = 0
    for op in ops:
        name, arity = op["name"], op["arity"]
        if name not in RECIPES:
            raise SystemExit(f"pointwise_references.py: row {name} has no recipe in RECIPES")
        recipe = RECIPES[name]
        shapes = [[[5, 13]] * arity]
        if arity == 2:
            shapes.append([[5, 13], [13]])
        for p in recipe["sets"]:
            p = {"real": p.get("real", {}), "choice": p.get("choice", {})}
            for sh in shapes:
                xs = [torch.randn(*s, generator=gen) * 2 for s in sh]
                if recipe.get("positive"):  # the op's domain (log, sqrt, rsqrt, pow)
                    xs = [x.abs() + 0.05 for x in xs]
                dy = torch.randn(*sh[0], generator=gen)
                for dname, dt in DTYPES.items():
                    y, grads = values(recipe, p, xs, dy, dt)
                    shapes_text = "/".join("x".join(map(str, s)) for s in sh)
                    common = f"{name},{params_text(p)},{dname},{shapes_text}"
                    tensors = [(chr(ord("a") + k), xs[k].to(dt)) for k in range(arity)]
                    tensors += [("dy", dy.to(dt)), ("y", y.to(dt))]
                    tensors += [("d" + chr(ord("a") + k), g.to(dt)) for k, g in enumerate(grads)]
                    if dt != torch.float32:  # before their last rounding
                        tensors += [("y.f32", y)]
                        tensors += [(f"d{chr(ord('a') + k)}.f32", g) for k, g in enumerate(grads)]
                    for tname, t in tensors:
                        vals = " ".join(text(v) for v in t.float().flatten().tolist())
                        print(f"{common},{tname},{vals}")
                        lines += 1
    print(f"PyTorch {torch.__version__}: {lines} tensors of {len(ops)} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
