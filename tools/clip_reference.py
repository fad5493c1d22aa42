#!/usr/bin/env python3
"""clip_reference.py: torch.nn.utils.clip_grad_norm_ and clip_grad_value_ on fixed gradients,
written as tests/references/clip_grad.txt for tests/test_clip.c.

Usage: /opt/torch-venv/bin/python tools/clip_reference.py > tests/references/clip_grad.txt

Each set is a list of gradients (dtype and values drawn from numpy's seeded generator, or
built to overflow float16's norm), the call, and what PyTorch returned and left in the
gradients. Values are printed with float.hex, so they read back exactly. Format:
    set NAME FUNC ARG NORM_TYPE       FUNC: norm (clip_grad_norm_, ARG = max_norm) | value
    grad DTYPE N v0 v1 ...            the gradients before, one line each
    total DTYPE v                     (norm only) the returned total norm
    clipped DTYPE N v0 v1 ...         the gradients after, in the order above
    end
"""
import numpy as np
import torch

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def hexes(t):
    return " ".join(float(x).hex() for x in t.float().flatten().tolist())


def emit(name, func, arg, norm_type, grads):
    params = [torch.nn.Parameter(g.clone()) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    print(f"set {name} {func} {float(arg).hex()} {norm_type}")
    for g in grads:
        print(f"grad {str(g.dtype)[6:]} {g.numel()} {hexes(g)}")
    if func == "norm":
        total = torch.nn.utils.clip_grad_norm_(params, arg, norm_type=float(norm_type))
        print(f"total {str(total.dtype)[6:]} {float(total).hex()}")
    else:
        torch.nn.utils.clip_grad_value_(params, arg)
    for p in params:
        print(f"clipped {str(p.grad.dtype)[6:]} {p.grad.numel()} {hexes(p.grad)}")
    print("end")


def main():
    rng = np.random.default_rng(14)

    def g(dtype, n, scale):
        return torch.tensor(rng.standard_normal(n) * scale, dtype=torch.float32).to(DT[dtype])

    print(f"# torch {torch.__version__}, CPU")
    emit("fp32-l2-clips", "norm", 1.0, "2", [g("float32", 37, 0.5), g("float32", 8, 2.0)])
    emit("fp32-l2-no-clip", "norm", 100.0, "2", [g("float32", 37, 0.5), g("float32", 8, 2.0)])
    emit("fp16-l2", "norm", 0.5, "2", [g("float16", 64, 0.1), g("float16", 5, 3.0)])
    emit("fp16-fp32-mixed", "norm", 0.25, "2", [g("float16", 64, 0.1), g("float32", 9, 1.0)])
    emit("bf16-l2", "norm", 0.5, "2", [g("bfloat16", 50, 0.3), g("bfloat16", 7, 1.5)])
    emit("fp16-bf16-mixed", "norm", 0.5, "2", [g("float16", 50, 0.3), g("bfloat16", 7, 1.5)])
    emit("fp32-inf", "norm", 0.1, "inf", [g("float32", 20, 1.0), g("float32", 6, 4.0)])
    emit("fp32-l1", "norm", 2.0, "1", [g("float32", 20, 1.0), g("float32", 6, 4.0)])
    emit("fp32-l3", "norm", 2.0, "3", [g("float32", 20, 1.0), g("float32", 6, 4.0)])
    # float16's norm is float16: 1024 values of 3000 have norm 96000 > 65504, inf, so
    # clip_coef = 1 / inf = 0 and every gradient becomes 0 (a finite fp32 one as well)
    emit("fp16-norm-overflows", "norm", 1.0, "2",
         [torch.full((1024,), 3000.0, dtype=torch.float16), g("float32", 4, 1.0)])
    emit("fp32-value", "value", 0.7, "2", [g("float32", 30, 1.0), g("float32", 5, 0.2)])
    emit("fp16-value", "value", 0.3, "2", [g("float16", 30, 1.0)])


if __name__ == "__main__":
    main()
