#!/usr/bin/env python3
"""make_norm.py: PyTorch's values of the normalization ops, for tests/test_norm.c.

Run from the repository root:
    /opt/torch-venv/bin/python tests/references/norm/make_norm.py
For each configuration below it draws x, w, b and dy (numpy, seeded), rounds them into the
configuration's dtype, runs the op forward and backward in PyTorch (CPU) and writes
tests/references/norm/<name>.<tensor>.npy for x, w, b, dy, y, dx, dw, db: float32 arrays
holding the values exactly (half values are exact in float32). batch_norm runs in training
mode ("batch_norm-*") and in eval mode ("batch_norm_eval-*", F.batch_norm(training=False)).

Where CPU PyTorch's autocast lists differ from CUDA's (CPU autocast keeps layer_norm and
group_norm in their input's dtype; CUDA's fp32 list casts a half input up and returns
float32), the "-autocast" configurations cast explicitly as CUDA's policy does: the half
input is cast to float32 and the op runs in float32 with the float32 weight.

The half-model configurations ("-half": input, weight and bias in float16 or bfloat16, no
autocast) are computed as PyTorch's CUDA kernels compute them (layer_norm_kernel.cu,
group_norm_kernel.cu: float32 opmath from the half values, each output rounded once to the
half dtype), by running the op in float32 on the half values and rounding y, dx, dw and db
once. PyTorch's CPU kernels round differently there (their half backward differs by up to
a few half ulps: CPU accumulates dgamma and dbeta through half partial sums), so they are
not the reference; batch_norm's half models likewise (the native CUDA kernel, which
PyTorch picks for them, computes in float32 and rounds y, dx, the running stats, dw and db
once). group_norm has no half-model configuration: its CUDA kernel stores mean
and rstd in the half dtype and computes the output from those rounded values, which no
PyTorch CPU run reproduces.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# name, op, x shape, groups (group_norm), input dtype, run dtype (the op's), seed
CONFIGS = [
    ("layer_norm-f32-6x10", "layer_norm", (6, 10), 0, torch.float32, torch.float32, 1),
    ("layer_norm-f32-2x3x33", "layer_norm", (2, 3, 33), 0, torch.float32, torch.float32, 2),
    ("layer_norm-f16-autocast", "layer_norm", (4, 24), 0, torch.float16, torch.float32, 3),
    ("layer_norm-f16-half", "layer_norm", (4, 24), 0, torch.float16, torch.float16, 4),
    ("layer_norm-bf16-half", "layer_norm", (3, 40), 0, torch.bfloat16, torch.bfloat16, 5),
    ("group_norm-f32-2x6x4x5", "group_norm", (2, 6, 4, 5), 3, torch.float32, torch.float32, 6),
    ("group_norm-f32-3x4x7", "group_norm", (3, 4, 7), 2, torch.float32, torch.float32, 7),
    ("group_norm-f32-4x6", "group_norm", (4, 6), 2, torch.float32, torch.float32, 8),
    ("group_norm-f16-autocast", "group_norm", (2, 8, 3, 3), 4, torch.float16, torch.float32, 9),
    # batch_norm in training mode, momentum 0.1: on no autocast list, so under autocast a
    # float16 input meets float32 weight and stats and the output is float16 ("-mixed")
    ("batch_norm-f32-4x3x5x5", "batch_norm", (4, 3, 5, 5), 0, torch.float32, torch.float32, 10),
    ("batch_norm-f32-2x6x3x7", "batch_norm", (2, 6, 3, 7), 0, torch.float32, torch.float32, 11),
    ("batch_norm-f16-mixed", "batch_norm", (3, 4, 4, 4), 0, torch.float16, torch.float16, 12),
    ("batch_norm-f16-half", "batch_norm", (3, 4, 4, 4), 0, torch.float16, torch.float16, 13),
    ("batch_norm-bf16-half", "batch_norm", (2, 5, 3, 3), 0, torch.bfloat16, torch.bfloat16, 14),
    # batch_norm in eval mode (training=False): the running stats normalize and stay as
    # they are (rm and rv are written: equal to rm0 and rv0)
    ("batch_norm_eval-f32-4x3x5x5", "batch_norm_eval", (4, 3, 5, 5), 0, torch.float32,
     torch.float32, 20),
    ("batch_norm_eval-f32-1x6x1x1", "batch_norm_eval", (1, 6, 1, 1), 0, torch.float32,
     torch.float32, 21),
    ("batch_norm_eval-f16-mixed", "batch_norm_eval", (3, 4, 4, 4), 0, torch.float16,
     torch.float16, 22),
    ("batch_norm_eval-bf16-half", "batch_norm_eval", (2, 5, 3, 3), 0, torch.bfloat16,
     torch.bfloat16, 23),
    # rms_norm with eps=None (float32's epsilon), weight and no bias (b and db not written):
    # on CUDA's fp32 autocast list since 2.12, so "-autocast" casts the half input up
    ("rms_norm-f32-6x16", "rms_norm", (6, 16), 0, torch.float32, torch.float32, 15),
    ("rms_norm-f32-2x3x36", "rms_norm", (2, 3, 36), 0, torch.float32, torch.float32, 16),
    ("rms_norm-f16-autocast", "rms_norm", (4, 24), 0, torch.float16, torch.float32, 17),
    ("rms_norm-f16-half", "rms_norm", (4, 24), 0, torch.float16, torch.float16, 18),
    ("rms_norm-bf16-half", "rms_norm", (3, 40), 0, torch.bfloat16, torch.bfloat16, 19),
]


def save(name, tensor_name, t):
    np.save(os.path.join(HERE, f"{name}.{tensor_name}.npy"),
            t.detach().to(torch.float32).contiguous().numpy())


def main():
    torch.use_deterministic_algorithms(True)
    for name, op, shape, groups, in_dt, run_dt, seed in CONFIGS:
        rng = np.random.default_rng(seed)
        channels = shape[-1] if op in ("layer_norm", "rms_norm") else shape[1]
        # the input's dtype (what the previous layer stored); parameters in the run dtype
        # for a .half() model, float32 otherwise (under autocast)
        half_model = name.endswith("-half")
        par_dt = run_dt if half_model else torch.float32
        x = torch.tensor(rng.standard_normal(shape, dtype=np.float32) * 2 + 0.5).to(in_dt)
        w = torch.tensor(rng.standard_normal(channels, dtype=np.float32) * 0.5 + 1).to(par_dt)
        b = torch.tensor(rng.standard_normal(channels, dtype=np.float32) * 0.5).to(par_dt)
        dy = torch.tensor(rng.standard_normal(shape, dtype=np.float32)).to(run_dt)
        # float32 opmath: CUDA autocast's cast up, or the CUDA kernel's widening of half
        # values (exact); the results are rounded into run_dt once below
        xr = x.to(torch.float32).requires_grad_()
        wr = w.to(torch.float32).requires_grad_()
        br = b.to(torch.float32).requires_grad_()
        extra = ()
        if op == "layer_norm":
            y = F.layer_norm(xr, (channels,), wr, br, eps=1e-5)
        elif op == "rms_norm":
            y = F.rms_norm(xr, (channels,), wr, eps=None)
        elif op == "group_norm":
            y = F.group_norm(xr, groups, wr, br, eps=1e-5)
        else:
            rm0 = torch.tensor(rng.standard_normal(channels, dtype=np.float32) * 0.1).to(par_dt)
            rv0 = torch.tensor(rng.uniform(0.5, 2.0, channels).astype(np.float32)).to(par_dt)
            rm, rv = rm0.to(torch.float32).clone(), rv0.to(torch.float32).clone()  # in place
            y = F.batch_norm(xr, rm, rv, wr, br, training=op == "batch_norm", momentum=0.1,
                             eps=1e-5)
            extra = (("rm0", rm0), ("rv0", rv0), ("rm", rm.to(par_dt)), ("rv", rv.to(par_dt)))
        y.backward(dy.to(torch.float32))
        if op != "rms_norm":
            extra += (("b", b), ("db", br.grad.to(par_dt)))
        for tname, t in (("x", x), ("w", w), ("dy", dy), ("y", y.to(run_dt)),
                         ("dx", xr.grad.to(run_dt)), ("dw", wr.grad.to(par_dt))) + extra:
            save(name, tname, t)
        print(name, tuple(y.shape), run_dt, "torch", torch.__version__)


if __name__ == "__main__":
    main()
