"""Writes tests/references/losses.csv: F.binary_cross_entropy_with_logits and F.l1_loss
(reduction='mean') and the input's gradient, in PyTorch on the CPU, for one [6, 5] input
in several dtype pairs (input, target), outside autocast; and the same under CUDA autocast's
policy (both ops on its fp32 list), written by casting the half input and target to
float32 explicitly, as that policy does. Columns: loss, config, x_dtype, t_dtype, index,
x, t (the inputs, float.hex), value (the loss), grad (d loss / d x, in x's dtype).
Run: /opt/torch-venv/bin/python tests/references/losses.py
"""
import csv
import os

import torch
import torch.nn.functional as F

DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
CONFIGS = [  # name, x dtype, t dtype, autocast (cast both up to float32 first)
    ("float32", "float32", "float32", False),
    ("float16-x-float32-t", "float16", "float32", False),
    ("float16", "float16", "float16", False),
    ("bfloat16", "bfloat16", "bfloat16", False),
    ("autocast-float16", "float16", "float32", True),
    ("autocast-bfloat16", "bfloat16", "bfloat16", True),
]
LOSSES = {"bce_with_logits": F.binary_cross_entropy_with_logits, "l1": F.l1_loss}


def inputs(loss):
    g = torch.Generator().manual_seed(13)
    x = torch.randn(6, 5, generator=g, dtype=torch.float64) * 3
    x[0, 0], x[0, 1], x[0, 2], x[0, 3] = 20.0, -20.0, 0.0, 1e-3  # saturated, zero, small
    if loss == "bce_with_logits":
        t = (torch.rand(6, 5, generator=g, dtype=torch.float64) < 0.5).double()
        t[1, :] = 0.25  # soft labels
    else:
        t = torch.randn(6, 5, generator=g, dtype=torch.float64)
        t[2, :3] = x[2, :3]  # x == t: sgn(0) = 0
    return x, t


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "losses.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["loss", "config", "x_dtype", "t_dtype", "index", "x", "t", "value", "grad"])
        for lname, fn in LOSSES.items():
            x64, t64 = inputs(lname)
            for cname, xd, td, autocast in CONFIGS:
                x = x64.to(DT[xd]).requires_grad_(True)
                t = t64.to(DT[td])
                if lname == "l1" and xd == td:  # x == t survives the rounding
                    t[2, :3] = x.detach()[2, :3]
                loss = fn(x.float(), t.float()) if autocast else fn(x, t)
                loss.backward()
                assert x.grad.dtype == x.dtype
                xs, ts, gs = x.detach().flatten(), t.flatten(), x.grad.flatten()
                for i in range(xs.numel()):
                    w.writerow([lname, cname, xd, td, i, float(xs[i]).hex(), float(ts[i]).hex(),
                                float(loss.detach()).hex(), float(gs[i]).hex()])
                print(lname, cname, "loss", loss.dtype, float(loss.detach()))
    print("torch", torch.__version__, "wrote", out)


if __name__ == "__main__":
    main()
