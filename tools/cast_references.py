#!/usr/bin/env python3
"""cast_references.py: the dtypes PyTorch's CUDA autocast dispatcher gives explicit casts,
softmax's dtype= and autocast-disabled regions, and the values of a cast and its gradient.

1. dtype rows: the model of tests/cases/small-graph-casts-autocast.case written as PyTorch
   code and run on fake CUDA tensors (FakeTensorMode: the dispatcher's AutocastCUDA kernels
   run without a GPU) under CUDA autocast float16, bfloat16, and with autocast off. The
   autocast state is set at the dispatcher, as torch.autocast's __enter__ and __exit__ set it
   (torch/amp/autocast_mode.py: the context manager itself switches off on a machine
   without CUDA); `autocast=no` layers run inside a nested region with enabled=False. Each
   layer output is recorded under the harness's name ("fc1.out"), and for each `to` layer
   whether it returned its input itself (`to` of the dtype the input already has).
2. value rows: float32 values that round differently to float16 and bfloat16 (ties to
   even, overflow, subnormals), their `.to(dtype)` on the CPU (round to nearest even, as the
   CUDA copy kernel), and the gradient ToCopyBackward0 hands back for an upstream gradient
   dy in the cast's dtype (dy.to(float32)), as float.hex of float32 values.

Output, a CSV file: kind,config,tensor,dtype,value
  kind dtype: config float16|bfloat16|off, tensor a layer output, dtype its dtype;
  kind alias: config as above, tensor a `to` layer's output, value yes|no (it is its input);
  kind to:    config the cast's dtype, tensor x|y|dy|dx, value the hex floats, "|"-joined.
tests/test_cast.c compares the harness with it.

Usage: /opt/torch-venv/bin/python tools/cast_references.py > tests/references/casts.csv
"""
import sys

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Region:
    """torch.autocast("cuda", enabled=..., dtype=...)'s __enter__/__exit__ at the dispatcher"""

    def __init__(self, enabled, dtype=None):
        self.enabled, self.dtype = enabled, dtype

    def __enter__(self):
        self.prev = torch.is_autocast_enabled("cuda")
        self.prev_dtype = torch.get_autocast_dtype("cuda")
        torch.set_autocast_enabled("cuda", self.enabled)
        if self.dtype is not None:
            torch.set_autocast_dtype("cuda", self.dtype)
        torch.autocast_increment_nesting()

    def __exit__(self, *exc):
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cuda", self.prev)
        torch.set_autocast_dtype("cuda", self.prev_dtype)


def model_dtypes(config):
    """the case's [model] as PyTorch code; its layer outputs' dtypes"""
    with FakeTensorMode():
        def w(*shape):
            return torch.randn(*shape, device="cuda", requires_grad=True)
        x = torch.randn(2, 8, device="cuda")
        w1, b1, w2, b2, w3, b3 = w(8, 8), w(8), w(8, 8), w(8), w(4, 8), w(4)
        on = config != "off"
        with Region(on, DTYPES[config] if on else None):
            fc1 = F.linear(x, w1, b1)                       # fc1  = linear 8 -> 8
            h32 = fc1.to(torch.float32)                     # h32  = to float32
            att = F.softmax(fc1, dim=-1, dtype=torch.float32)  # att = softmax dim=-1 dtype=float32
            p = att.to(fc1.dtype)                           # p    = to fc1.dtype
            same = p.to(torch.float16)                      # same = to float16
            with Region(False):
                fc2 = F.linear(h32, w2, b2)                 # fc2  = linear 8 -> 8 autocast=no
            with Region(False):
                sm = F.softmax(same, dim=-1)                # sm   = softmax autocast=no
            g = fc2 * h32                                   # g    = mul fc2 h32
            r = g + sm                                      # r    = add g sm
            r2 = r + att                                    # r2   = add r att
            s16 = F.softmax(h32, dim=-1, dtype=torch.float16)  # s16 = softmax dtype=float16 from=h32
            r3 = r2 + s16                                   # r3   = add r2 s16
            fc3 = F.linear(r3, w3, b3)                      # fc3  = linear 8 -> 4
        outs = {"fc1": fc1, "h32": h32, "att": att, "p": p, "same": same, "fc2": fc2,
                "sm": sm, "g": g, "r": r, "r2": r2, "s16": s16, "r3": r3, "fc3": fc3}
        rows = [("dtype", config, f"{k}.out", str(v.dtype).replace("torch.", ""), "")
                for k, v in outs.items()]
        for name, (y, x) in {"h32": (h32, fc1), "p": (p, att), "same": (same, p)}.items():
            rows.append(("alias", config, f"{name}.out", "", "yes" if y is x else "no"))
        return rows


# float32 values around the half formats' rounding points
VALUES = [1.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 65504.0,
          65519.0, 65520.0, 1e5, 2**-24, 2**-25, 3 * 2**-26, 1.5 * 2**-24, 1e-40, 3.0e38,
          0.1, -0.0]


def hexes(t):
    return "|".join(float(v).hex() for v in t.float().tolist())


def cast_rows():
    rows = []
    for name in ("float16", "bfloat16"):
        x = torch.tensor(VALUES, dtype=torch.float32, requires_grad=True)
        y = x.to(DTYPES[name])
        dy = torch.tensor([(-1) ** i * (0.5 + i / 7) for i in range(len(VALUES))],
                          dtype=DTYPES[name])
        y.backward(dy)
        assert x.grad.dtype == torch.float32
        rows += [("to", name, "x", "float32", hexes(x.detach())),
                 ("to", name, "y", name, hexes(y.detach())),
                 ("to", name, "dy", name, hexes(dy)),
                 ("to", name, "dx", "float32", hexes(x.grad))]
    return rows


def main():
    print("kind,config,tensor,dtype,value")
    for config in ("float16", "bfloat16", "off"):
        for row in model_dtypes(config):
            print(",".join(row))
    for row in cast_rows():
        print(",".join(row))
    print(f"PyTorch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
