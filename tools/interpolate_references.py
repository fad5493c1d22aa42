#!/usr/bin/env python3
"""interpolate_references.py: PyTorch's values of F.interpolate(mode="nearest"), for
tests/test_interpolate.c.

Writes tests/references/interpolate.csv: for each configuration below, x (seeded numpy
draws rounded into the dtype), dy (the upstream gradient: the loss is sum(y * dy)), and
PyTorch's y and dx of F.interpolate(x, scale_factor=S, mode="nearest"). Rows: config,
dtype, n, c, h, w, scale_factor, tensor, index, value (float.hex of the float32 value; half
values are exact in float32).

Float16 and bfloat16 configurations are computed as PyTorch's CUDA kernels compute them
(UpSampleNearest2d.cu: the forward copies, the backward sums dy in float32, accscalar_t, and
rounds once): the op runs in float32 on the half values and y and dx are rounded into the
dtype once. (Under CUDA autocast the op is on the float32 list: a half input is cast up,
which is the float32 configuration on half values.)

Run: /opt/torch-venv/bin/python tools/interpolate_references.py > tests/references/interpolate.csv
"""
import csv
import sys

import numpy as np
import torch
import torch.nn.functional as F

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CONFIGS = [  # name, dtype, n, c, h, w, scale_factor, seed
    ("f32-2x3x4x5-s2", "float32", 2, 3, 4, 5, 2, 1),
    ("f32-1x2x3x3-s3", "float32", 1, 2, 3, 3, 3, 2),
    ("f32-1x1x2x7-s1", "float32", 1, 1, 2, 7, 1, 3),
    ("f16-2x2x3x4-s2", "float16", 2, 2, 3, 4, 2, 4),
    ("bf16-1x3x4x4-s2", "bfloat16", 1, 3, 4, 4, 2, 5),
]


def main():
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["config", "dtype", "n", "c", "h", "w", "scale_factor", "tensor", "index",
                  "value"])
    for name, dt, n, c, h, w, s, seed in CONFIGS:
        rng = np.random.default_rng(seed)
        x = torch.tensor(rng.standard_normal((n, c, h, w), dtype=np.float32)).to(DT[dt])
        dy = torch.tensor(rng.standard_normal((n, c, h * s, w * s), dtype=np.float32)).to(DT[dt])
        xr = x.to(torch.float32).requires_grad_()
        y = F.interpolate(xr, scale_factor=s, mode="nearest")
        y.backward(dy.to(torch.float32))
        for tname, t in (("x", x), ("dy", dy), ("y", y.to(DT[dt])), ("dx", xr.grad.to(DT[dt]))):
            for i, v in enumerate(t.detach().to(torch.float32).flatten().tolist()):
                out.writerow([name, dt, n, c, h, w, s, tname, i, float(v).hex()])
    print("torch", torch.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
