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
}


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
