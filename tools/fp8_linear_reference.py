#!/usr/bin/env python3
"""fp8_linear_reference.py: the references of tests/test_fp8_linear.c, written by PyTorch.

Transformer Engine's te.Linear under fp8_autocast (transformer_engine/pytorch/module/linear.py,
_Linear.forward and backward) emulated explicitly with PyTorch's float8 dtypes, for the model
of tests/cases/small-fp8-{delayed,current}.case (fc1 16 -> 32, relu, fc2 32 -> 16, mse, SGD,
bfloat16 autocast as CUDA's policy casts: the input and biases to bfloat16, relu in
bfloat16, mse_loss in float32):
  - input cast to bfloat16, amax = max |x|, q = (x * scale).clamp(+-448).to(float8_e4m3fn);
  - the weight quantized from its float32 parameter likewise;
  - y = ((xq.float() @ wq.float().T) * (scale_inv_x * scale_inv_w) + b).to(bfloat16);
  - backward: db = dy.float().sum(0).to(bfloat16) from dy unquantized; dy quantized to
    float8_e5m2 (hybrid, clamp +-57344); dx = ((gq @ wq) * s).to(bfloat16),
    dw = ((gq^T @ xq) * s).to(bfloat16), which autograd casts to the float32 parameter;
  - delayed scaling (transformer_engine/pytorch/fp8.py: _default_get_amax_and_update_history,
    _update_amax_history, _default_sf_compute): a step's quantizations use the scales from
    the history before it and write their amax into row 0; the forward tensors' histories
    are updated when the forward ends, the gradients' when the backward ends:
    amax = history.max(0), sf = (fp8_max / amax) / 2^margin kept where amax is not > 0 or not
    finite, inf -> FLT_MAX, history rolled by -1 and row 0 zeroed; scale_inv = 1 / scale;
  - current scaling: scale = fp8_max / amax (amax 0 or non-finite: 1; inf -> FLT_MAX).
It writes the case's data and initial parameters (tests/cases/data/fp8-*.npy) and, per case,
tests/references/fp8/<case>.fp8.csv (every quantization: its amax, scale, saturated and
underflow counts, as fp8.csv has them, floats as hex), <case>.loss.csv and the quantized
copies' values as float32 .npy (<case>/<step>/<tensor>.npy, the names of `run --dump`).

  /opt/torch-venv/bin/python tools/fp8_linear_reference.py
"""
import os

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "tests", "cases", "data")
REFS = os.path.join(ROOT, "tests", "references", "fp8")
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FMAX = {E4M3: 448.0, E5M2: 57344.0}
NAME = {E4M3: "float8_e4m3fn", E5M2: "float8_e5m2"}
FLT_MAX = float(np.finfo(np.float32).max)
BATCH, IN, HIDDEN, OUT, STEPS, LR, HISTORY = 16, 16, 32, 16, 3, 0.5, 4


def data():
    rng = np.random.default_rng(16)
    # values over many binades: at scale 1 the smallest underflow E4M3 (below 2^-10)
    x = rng.standard_normal((BATCH, IN)) * np.exp2(rng.integers(-13, 2, (BATCH, IN)))
    t = rng.standard_normal((BATCH, OUT))
    bound1, bound2 = 1 / np.sqrt(IN), 1 / np.sqrt(HIDDEN)
    p = {
        "fc1.weight": rng.uniform(-bound1, bound1, (HIDDEN, IN)),
        "fc1.bias": rng.uniform(-bound1, bound1, (HIDDEN,)),
        "fc2.weight": rng.uniform(-bound2, bound2, (OUT, HIDDEN)),
        "fc2.bias": rng.uniform(-bound2, bound2, (OUT,)),
    }
    os.makedirs(DATA, exist_ok=True)
    np.save(os.path.join(DATA, "fp8-input.npy"), x.astype(np.float32))
    np.save(os.path.join(DATA, "fp8-target.npy"), t.astype(np.float32))
    for k, v in p.items():
        np.save(os.path.join(DATA, "fp8-%s.npy" % k), v.astype(np.float32))
    return x.astype(np.float32), t.astype(np.float32), {k: v.astype(np.float32) for k, v in p.items()}


def f32(v):
    return float(np.float32(v))


class Delayed:
    """one tensor's delayed-scaling state"""

    def __init__(self, dt):
        self.fmax = FMAX[dt]
        self.history = torch.zeros(HISTORY, dtype=torch.float32)
        self.scale = torch.ones((), dtype=torch.float32)

    def update(self):
        amax = self.history.max(0).values
        # fp8_max / amax as one IEEE division, as TE's fused update kernel computes it
        # (scaled_max / amax in transformer_engine/common/recipe/delayed_scaling.cu); a torch
        # `float / tensor` would be amax.reciprocal() * fp8_max, two roundings
        sf = torch.tensor(np.float32(self.fmax) / np.float32(float(amax)) if float(amax) > 0 else 1.0,
                          dtype=torch.float32)
        sf = torch.where(amax > 0.0, sf, self.scale)
        sf = torch.where(torch.isfinite(amax), sf, self.scale)
        sf = torch.where(torch.isinf(sf), torch.full_like(sf, FLT_MAX), sf)
        self.scale = sf
        self.history = torch.roll(self.history, -1, 0)
        self.history[0] = 0.0


class Recorder:
    def __init__(self, case, recipe):
        self.case, self.recipe, self.step = case, recipe, 0
        self.rows, self.copies = [], []

    def quantize(self, name, x, dt, state):
        x = x.detach().float()
        amax = x.abs().max() if x.numel() else torch.zeros(())
        if self.recipe == "delayed":
            scale = state.scale.clone()
            state.history[0] = amax
        else:
            a = float(amax)
            scale = torch.tensor(1.0 if a == 0 or not np.isfinite(a) else f32(np.float32(FMAX[dt]) / np.float32(a)))
            if torch.isinf(scale):
                scale = torch.tensor(FLT_MAX)
        v = x * scale
        saturated = int((v.abs() > FMAX[dt]).sum())
        q = v.clamp(-FMAX[dt], FMAX[dt]).to(dt)
        underflow = int(((q.float() == 0) & (v != 0)).sum())
        self.rows.append((self.step, name, NAME[dt], float(amax), float(scale), saturated, underflow))
        self.copies.append((self.step, "%s@%s" % (name, NAME[dt]), q.float().numpy(), NAME[dt]))
        return q, torch.tensor(f32(1.0 / np.float32(scale)))


def gemm(a, b, sa, sb, bias=None):
    """(a [M,K] b[N,K]^T) in float32 from the float8 values, times sa * sb, + bias"""
    y = (a.float() @ b.float().T) * (sa * sb)
    return y + bias.float() if bias is not None else y


def te_linear(rec, name, states, grad_dt):
    class TELinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            xq, sx = rec.quantize(name + ".input", x, E4M3, states["input"])
            wq, sw = rec.quantize(name + ".weight", w, E4M3, states["weight"])
            ctx.save_for_backward(xq, wq)
            ctx.s = (sx, sw)
            return gemm(xq, wq, sx, sw, b).to(x.dtype)

        @staticmethod
        def backward(ctx, dy):
            xq, wq = ctx.saved_tensors
            sx, sw = ctx.s
            db = dy.float().sum(0).to(dy.dtype)
            gq, sg = rec.quantize(name + ".out.grad", dy, grad_dt, states["grad"])
            dx = gemm(gq, wq.T.contiguous(), sg, sw).to(dy.dtype)
            dw = gemm(gq.T.contiguous(), xq.T.contiguous(), sg, sx).to(dy.dtype)
            return dx, dw, db

    return TELinear.apply


def run(case, recipe, x, t, init):
    rec = Recorder(case, recipe)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    states = {
        layer: {"input": Delayed(E4M3), "weight": Delayed(E4M3), "grad": Delayed(E5M2)}
        for layer in ("fc1", "fc2")
    }
    fc = {layer: te_linear(rec, layer, states[layer], E5M2) for layer in ("fc1", "fc2")}
    opt = torch.optim.SGD(params.values(), lr=LR, foreach=False)
    losses = []
    xt, tt = torch.tensor(x), torch.tensor(t)
    for step in range(STEPS):
        rec.step = step
        bf = torch.bfloat16
        h = fc["fc1"](xt.to(bf), params["fc1.weight"], params["fc1.bias"].to(bf))
        h = torch.relu(h)
        y = fc["fc2"](h, params["fc2.weight"], params["fc2.bias"].to(bf))
        if recipe == "delayed":  # fp8_autocast's exit
            for layer in states.values():
                layer["input"].update()
                layer["weight"].update()
        loss = torch.nn.functional.mse_loss(y.float(), tt)
        losses.append(float(loss.detach()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if recipe == "delayed":  # the end of backward
            for layer in states.values():
                layer["grad"].update()
        opt.step()
    os.makedirs(REFS, exist_ok=True)
    with open(os.path.join(REFS, case + ".fp8.csv"), "w") as f:
        f.write("step,tensor,format,amax,scale,saturated,underflow\n")
        for s, n, fmt, amax, scale, sat, under in rec.rows:
            f.write("%d,%s,%s,%s,%s,%d,%d\n" % (s, n, fmt, amax.hex(), scale.hex(), sat, under))
    with open(os.path.join(REFS, case + ".loss.csv"), "w") as f:
        f.write("step,loss\n")
        for s, v in enumerate(losses):
            f.write("%d,%s\n" % (s, v.hex()))
    for s, n, v, fmt in rec.copies:
        d = os.path.join(REFS, case, str(s))
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "%s.%s.npy" % (n, fmt)), v.astype(np.float32))


def main():
    x, t, init = data()
    run("small-fp8-delayed", "delayed", x, t, init)
    run("small-fp8-current", "current", x, t, init)


if __name__ == "__main__":
    main()
