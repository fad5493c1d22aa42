#!/usr/bin/env python3
"""autocast_policies.py: PyTorch's CUDA autocast policy of every op `ampscope ops --json` lists.

For each distinct ATen op that autocast sees (each entry's aten[0]), calls it under CUDA
autocast float16 (FakeTensorMode CUDA tensors: the dispatcher's AutocastCUDA kernels run
without a GPU) three times, with its floating inputs float32, float16 and bfloat16, and once
more with float16 inputs and an explicit dtype=torch.float16 when the op takes a dtype. The
output dtypes tell the policy of aten/src/ATen/autocast_mode.h:

    policy              float32  float16  bfloat16  (float16, dtype=float16)
    lower_precision_fp  float16  float16  float16
    fp32                float32  float32  float32   (no dtype argument, or not float16)
    fp32_set_opt_dtype  float32  float32  float32   float16 (a given dtype is kept)
    promote             float32  float16  error     (the widest of the inputs and float16;
                                                    bfloat16 under float16 raises
                                                    "Unexpected floating ScalarType in
                                                    at::autocast::prioritize")
    none                float32  float16  bfloat16
    banned              the call raises under autocast

(fp32_append_dtype, which no op here has, reads as fp32.) Writes one CSV row per ATen op:
    aten,float32,float16,bfloat16,float16_dtype,policy
tests/test_autocast_policy.c compares `ampscope ops --json` with the file.

Usage: bin/ampscope ops --json | /opt/torch-venv/bin/python tools/autocast_policies.py \\
           > tests/references/autocast_policies.csv
"""
import json
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

# Calls of the ops whose arguments are not "floating tensors of one shape and plain
# numbers": f(t, dt) with t(shape, dtype) making a floating CUDA tensor.
RECIPES = {
    "linear": lambda t, dt: torch.ops.aten.linear(t((4, 8), dt), t((3, 8), dt), t((3,), dt)),
    "conv2d": lambda t, dt: torch.ops.aten.conv2d(t((1, 2, 5, 5), dt), t((3, 2, 3, 3), dt),
                                                  t((3,), dt)),
    "matmul": lambda t, dt: torch.ops.aten.matmul(t((2, 3, 4), dt), t((2, 4, 5), dt)),
    "scaled_dot_product_attention": lambda t, dt: torch.ops.aten.scaled_dot_product_attention(
        t((1, 2, 4, 8), dt), t((1, 2, 4, 8), dt), t((1, 2, 4, 8), dt)),
    "layer_norm": lambda t, dt: torch.ops.aten.layer_norm(t((4, 8), dt), [8], t((8,), dt),
                                                          t((8,), dt)),
    "rms_norm": lambda t, dt: torch.ops.aten.rms_norm(t((4, 8), dt), [8], t((8,), dt)),
    "group_norm": lambda t, dt: torch.ops.aten.group_norm(t((2, 4, 3, 3), dt), 2, t((4,), dt),
                                                          t((4,), dt)),
    "batch_norm": lambda t, dt: torch.ops.aten.batch_norm(
        t((2, 3, 4, 4), dt), t((3,), dt), t((3,), dt), t((3,), dt), t((3,), dt), True, 0.1,
        1e-5, True),
    "nll_loss": lambda t, dt: torch.ops.aten.nll_loss(
        t((4, 5), dt), torch.zeros(4, dtype=torch.int64, device="cuda")),
    "embedding": lambda t, dt: torch.ops.aten.embedding(
        t((10, 4), dt), torch.zeros(3, dtype=torch.int64, device="cuda")),
    "masked_fill.Scalar": lambda t, dt: torch.ops.aten.masked_fill.Scalar(
        t((4, 4), dt), torch.ones(4, 4, dtype=torch.bool, device="cuda"), float("-inf")),
    "native_dropout": lambda t, dt: torch.ops.aten.native_dropout(t((4, 8), dt), 0.1, True)[0],
    "max_pool2d": lambda t, dt: torch.ops.aten.max_pool2d(t((1, 2, 4, 4), dt), [2, 2]),
    "avg_pool2d": lambda t, dt: torch.ops.aten.avg_pool2d(t((1, 2, 4, 4), dt), [2, 2]),
    "adaptive_avg_pool2d": lambda t, dt: torch.ops.aten.adaptive_avg_pool2d(
        t((1, 2, 4, 4), dt), [1, 1]),
    "upsample_nearest2d.vec": lambda t, dt: torch.ops.aten.upsample_nearest2d.vec(
        t((1, 2, 4, 4), dt), None, [2.0, 2.0]),
    "cat": lambda t, dt: torch.ops.aten.cat([t((2, 3), dt), t((2, 5), dt)], -1),
    "stack": lambda t, dt: torch.ops.aten.stack([t((2, 3), dt), t((2, 3), dt)], 1),
    "constant_pad_nd": lambda t, dt: torch.ops.aten.constant_pad_nd(t((2, 3), dt), [1, 2], 0.5),
    "flatten.using_ints": lambda t, dt: torch.ops.aten.flatten.using_ints(t((2, 3, 4), dt), 1),
    "transpose.int": lambda t, dt: torch.ops.aten.transpose.int(t((2, 3), dt), 0, 1),
    "permute": lambda t, dt: torch.ops.aten.permute(t((2, 3, 4), dt), [0, 2, 1]),
    "expand": lambda t, dt: torch.ops.aten.expand(t((2, 1, 3), dt), [2, 4, 3]),
    "repeat_interleave.self_int": lambda t, dt: torch.ops.aten.repeat_interleave.self_int(
        t((2, 3), dt), 2, 1),
    "view": lambda t, dt: torch.ops.aten.view(t((2, 3), dt), [6]),
    # x.to(dt): returns x itself (no AutocastCUDA kernel, so the input's dtype is kept)
    "to.dtype": lambda t, dt: torch.ops.aten.to.dtype(t((4, 8), dt), dt),
}

# plain values for the arguments of a generic call, by schema type
PLAIN = {"int": -1, "SymInt": -1, "float": 0.5, "number": 0.5, "bool": False,
         "List[int]": [0], "Optional[List[int]]": [0]}


def overload(name):
    base, _, ov = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), ov or "default")


def generic(name):
    """a call of op `name` with a [4, 8] tensor for each Tensor argument and plain values for
    the other arguments without a default"""
    op = overload(name)

    def call(t, dt, **kw):
        args = []
        for a in op._schema.arguments:
            if a.kwarg_only or a.has_default_value():
                continue
            ty = str(a.type)
            if ty == "Tensor":
                args.append(t((4, 8), dt))
            elif ty in PLAIN:
                args.append(PLAIN[ty])
            else:
                raise SystemExit(f"autocast_policies.py: {name}: no value for argument "
                                 f"{a.name} of type {ty}: give it a recipe in RECIPES")
        return op(*args, **kw)
    call.takes_dtype = any(a.name == "dtype" for a in op._schema.arguments)
    return call


def run(name, dt, explicit=None):
    """the output dtype of one call under CUDA autocast float16, or 'error'"""
    fn = RECIPES.get(name) or generic(name)
    with FakeTensorMode():
        def t(shape, d):
            return torch.randn(*shape, device="cuda").to(d)
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", torch.float16)
        torch.autocast_increment_nesting()
        try:
            out = fn(t, dt, dtype=explicit) if explicit else fn(t, dt)
            return str(out.dtype).replace("torch.", "")
        except (RuntimeError, TypeError):
            return "error"
        finally:
            torch.autocast_decrement_nesting()
            torch.set_autocast_enabled("cuda", False)
            torch.clear_autocast_cache()


def policy(f32, f16, bf16, f16_dtype):
    seen = (f32, f16, bf16)
    if seen == ("error",) * 3:
        return "banned"
    if seen == ("float16",) * 3:
        return "lower_precision_fp"
    if seen == ("float32",) * 3:
        return "fp32_set_opt_dtype" if f16_dtype == "float16" else "fp32"
    if seen == ("float32", "float16", "error"):
        return "promote"
    if seen == ("float32", "float16", "bfloat16"):
        return "none"
    raise SystemExit(f"autocast_policies.py: output dtypes {seen} are no policy's")


def main():
    ops = json.load(sys.stdin)
    names = sorted({op["aten"][0] for op in ops})
    print("aten,float32,float16,bfloat16,float16_dtype,policy")
    for name in names:
        outs = [run(name, dt) for dt in (torch.float32, torch.float16, torch.bfloat16)]
        fn = RECIPES.get(name) or generic(name)
        explicit = run(name, torch.float16, torch.float16) \
            if getattr(fn, "takes_dtype", False) else ""
        print(",".join([name, *outs, explicit, policy(*outs, explicit)]))
    print(f"PyTorch {torch.__version__}: {len(names)} ATen ops", file=sys.stderr)


if __name__ == "__main__":
    main()
