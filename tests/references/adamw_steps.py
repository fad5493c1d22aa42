"""Writes tests/references/adamw_steps.csv: three steps of torch.optim.AdamW(foreach=False)
on an 8-element parameter in float32, float16 and bfloat16 (parameter, gradient and state
all in that dtype, as in a .half() model), for two configurations: PyTorch's defaults, and
lr=0.1 weight_decay=0.1 eps=1e-3 (an eps float16 holds). Values are float.hex of each
element after each step. Run: /opt/torch-venv/bin/python tests/references/adamw_steps.py
"""
import csv
import os

import torch

PARAMS = [1.0, -2.0, 0.5, 100.0, 3e-3, -0.7, 1e-5, 0.0]
GRADS = [
    [1e-4, 0.25, 0.5, -3.0, 1e-2, 7.0, -0.03, 2e-3],
    [2e-4, -0.25, 0.125, -1.0, 0.0, 6.0, 0.03, -2e-3],
    [-1e-4, 0.5, 0.0, 2.0, 1e-3, -5.0, 0.01, 4e-3],
]
CONFIGS = {
    "defaults": {},
    "lr0.1-wd0.1-eps1e-3": {"lr": 0.1, "weight_decay": 0.1, "eps": 1e-3},
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adamw_steps.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["dtype", "config", "lr", "weight_decay", "eps", "step", "index",
                    "param", "exp_avg", "exp_avg_sq"])
        for cname, opts in CONFIGS.items():
            for dname, dt in DTYPES.items():
                p = torch.tensor(PARAMS, dtype=dt, requires_grad=True)
                o = torch.optim.AdamW([p], foreach=False, **opts)
                d = o.defaults
                for s, g in enumerate(GRADS):
                    p.grad = torch.tensor(g, dtype=dt)
                    o.step()
                    st = o.state[p]
                    for i in range(len(PARAMS)):
                        w.writerow([dname, cname, d["lr"], d["weight_decay"], d["eps"], s + 1, i,
                                    float(p.detach()[i]).hex(), float(st["exp_avg"][i]).hex(),
                                    float(st["exp_avg_sq"][i]).hex()])
    print("torch", torch.__version__, "wrote", out)


if __name__ == "__main__":
    main()
