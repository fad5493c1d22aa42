#!/usr/bin/env python3
"""fp8_linear_reference.py: the references of tests/test_fp8_linear.c, an emulation (not TE itself).

Transformer Engine's te.Linear under fp8_autocast (transformer_engine/pytorch/module/linear.py,
_Linear.forward and backward) emulated explicitly with PyTorch's float8 dtypes, for the model
of tests/cases/small-fp8-{delayed,current,delayed-scaler}.case (fc1 16 -> 32, relu, fc2 32 -> 16, mse, SGD,
bfloat16 autocast as CUDA's policy casts: the input and biases to bfloat16, relu in
bfloat16, mse_loss in float32; small-fp8-delayed-scaler: float16 and a GradScaler):
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
MXFP8 (tests/cases/small-fp8-mxfp8.case: fc1 32 -> 64, relu, fc2 64 -> 32, batch 32, format
E4M3, MXFP8BlockScaling's default; its own data, tests/cases/data/fp8-mx-*.npy), written here
from Transformer Engine's definitions, not from ampscope's C code:
  - each operand quantized twice, row-wise (blocks of 32 along its last dim) and column-wise
    (blocks of 32 along its first dim, stored transposed, as ampscope's `.colwise` copies);
    the weight's column-wise copy only where dgrad needs it (not fc1: its input is data);
  - a block's E8M0 exponent: float_to_e8m0(amax * (1 / fp8_max)) of
    transformer_engine/common/util/ptx.cuh rounds amax / fp8_max UP to a power of two 2^k
    and stores k + 127, clamped to [0, 254]; written here with frexp (an exact power of two
    stays, anything else goes to the next one up);
  - the values multiplied by exp2f_rcp(e) (1 for e = 0, else 2^(127 - e)), clamped to +-448
    and cast (TE's saturating cast);
  - the GEMMs on each operand's float8 values times 2^(e - 127) of its block, in float32:
    y = xq_row . wq_row^T, dx = gq_row . wt_col^T, dw = gt_col . xt_col^T (no scale_inv);
  - fp8.csv's scale: the multiplier of the block holding the tensor's amax (the copy's largest
    E8M0), one row per copy ("fc1.input", "fc1.input.colwise", ...).
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


def run(case, recipe, x, t, init, ac=torch.bfloat16, loss_scale=None):
    """ac: the autocast dtype; loss_scale: a GradScaler's init_scale (None: no scaler), which
    multiplies the loss, so the output gradients are quantized scaled, as TE quantizes what
    autograd hands it; unscale_ multiplies the float32 gradients by 1 / scale (a power of two:
    exact), and in these 3 steps the scale neither grows nor backs off"""
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
        bf = ac
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
        (loss * loss_scale if loss_scale else loss).backward()
        if loss_scale:
            for p in params.values():
                assert torch.isfinite(p.grad).all()
                p.grad.mul_(torch.tensor(1.0 / loss_scale, dtype=torch.float32))
        if recipe == "delayed":  # the end of backward
            for layer in states.values():
                layer["grad"].update()
        opt.step()
    write(case, rec.rows, rec.copies, losses)


MX_BATCH, MX_IN, MX_HIDDEN, MX_OUT, MX_BLOCK = 32, 32, 64, 32, 32


def mx_data():
    rng = np.random.default_rng(1616)
    # each 32-value block of the input in its own binade range, so block scales differ; one
    # row-wise block all zero (E8M0 0, multiplier 1); within a block values over 2^-16..2^1
    # of its largest, so E4M3 underflows some
    x = rng.standard_normal((MX_BATCH, MX_IN)) * np.exp2(rng.integers(-16, 2, (MX_BATCH, MX_IN)))
    x *= np.exp2(rng.integers(-6, 7, (MX_BATCH, 1)))
    x[0, :] = 0.0
    t = rng.standard_normal((MX_BATCH, MX_OUT))
    bound1, bound2 = 1 / np.sqrt(MX_IN), 1 / np.sqrt(MX_HIDDEN)
    p = {
        "fc1.weight": rng.uniform(-bound1, bound1, (MX_HIDDEN, MX_IN)),
        "fc1.bias": rng.uniform(-bound1, bound1, (MX_HIDDEN,)),
        "fc2.weight": rng.uniform(-bound2, bound2, (MX_OUT, MX_HIDDEN)),
        "fc2.bias": rng.uniform(-bound2, bound2, (MX_OUT,)),
    }
    np.save(os.path.join(DATA, "fp8-mx-input.npy"), x.astype(np.float32))
    np.save(os.path.join(DATA, "fp8-mx-target.npy"), t.astype(np.float32))
    for k, v in p.items():
        np.save(os.path.join(DATA, "fp8-mx-%s.npy" % k), v.astype(np.float32))
    return x.astype(np.float32), t.astype(np.float32), {k: v.astype(np.float32) for k, v in p.items()}


def e8m0(v):
    """TE's float_to_e8m0 of a float32 v >= 0 (finite here): the biased exponent of v rounded
    up to a power of two, 0 for v = 0 or v <= 2^-127, clamped to 254 above"""
    if v == 0:
        return 0
    m, ex = np.frexp(np.float64(v))  # v = m * 2^ex, 0.5 <= m < 1: exact for float32 values
    k = ex - 1 if m == 0.5 else ex  # 2^k >= v, the smallest such
    return int(min(max(k + 127, 0), 254))


def multiplier(e):
    """exp2f_rcp: what the values of a block with exponent e are multiplied by"""
    return 1.0 if e == 0 else float(np.float32(2.0 ** (127 - e)))


class MXRecorder:
    def __init__(self):
        self.step, self.rows, self.copies = 0, [], []

    def quantize(self, name, x, colwise, dt=E4M3):
        """x [R, C] (its transpose when colwise) quantized in blocks of 32 along the last dim:
        (float8 values [*, C], E8M0 bytes [*, C / 32])"""
        x = x.detach().float()
        v = x.T.contiguous() if colwise else x
        rcp = np.float32(1.0) / np.float32(FMAX[dt])  # TE's max_norm_rcp, a float constant
        blocks = v.reshape(-1, MX_BLOCK)
        es = [e8m0(np.float32(np.float32(float(b.abs().max())) * rcp)) for b in blocks]
        mult = torch.tensor([multiplier(e) for e in es], dtype=torch.float32)[:, None]
        scaled = blocks * mult
        saturated = int((scaled.abs() > FMAX[dt]).sum())
        q = scaled.clamp(-FMAX[dt], FMAX[dt]).to(dt).reshape(v.shape)
        underflow = int(((q.float() == 0) & (scaled.reshape(v.shape) != 0)).sum())
        amax = float(x.abs().max())
        suffix = ".colwise" if colwise else ""
        self.rows.append((self.step, name + suffix, NAME[dt], amax, multiplier(max(es)),
                          saturated, underflow))
        self.copies.append((self.step, "%s@%s%s" % (name, NAME[dt], suffix), q.float().numpy(),
                            NAME[dt]))
        return q, torch.tensor(es, dtype=torch.float32).reshape(v.shape[0], -1)


def mx_dequantize(q, es):
    """each float8 value times 2^(e - 127) of its block, in float32 (exact)"""
    s = torch.exp2(es - 127.0).repeat_interleave(MX_BLOCK, dim=1)
    return q.float() * s


def mx_linear(rec, name):
    class MXLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            xq, xe = rec.quantize(name + ".input", x, False)
            xt, xte = rec.quantize(name + ".input", x, True)
            wq, we = rec.quantize(name + ".weight", w, False)
            wt = None
            if ctx.needs_input_grad[0]:  # the weight's column-wise copy serves dgrad only
                wt, wte = rec.quantize(name + ".weight", w, True)
                wt = mx_dequantize(wt, wte)
            ctx.save_for_backward(mx_dequantize(xt, xte), wt)
            y = mx_dequantize(xq, xe) @ mx_dequantize(wq, we).T + b.float()
            return y.to(x.dtype)

        @staticmethod
        def backward(ctx, dy):
            xt, wt = ctx.saved_tensors
            db = dy.float().sum(0).to(dy.dtype)
            gq, ge = rec.quantize(name + ".out.grad", dy, False)
            gt, gte = rec.quantize(name + ".out.grad", dy, True)
            dx = (mx_dequantize(gq, ge) @ wt.T).to(dy.dtype) if wt is not None else None
            dw = (mx_dequantize(gt, gte) @ xt.T).to(dy.dtype)
            return dx, dw, db

    return MXLinear.apply


def run_mx(case, x, t, init):
    rec = MXRecorder()
    params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    fc = {layer: mx_linear(rec, layer) for layer in ("fc1", "fc2")}
    opt = torch.optim.SGD(params.values(), lr=LR, foreach=False)
    losses = []
    xt, tt = torch.tensor(x), torch.tensor(t)
    bf = torch.bfloat16
    for step in range(STEPS):
        rec.step = step
        h = torch.relu(fc["fc1"](xt.to(bf), params["fc1.weight"], params["fc1.bias"].to(bf)))
        y = fc["fc2"](h, params["fc2.weight"], params["fc2.bias"].to(bf))
        loss = torch.nn.functional.mse_loss(y.float(), tt)
        losses.append(float(loss.detach()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    write(case, rec.rows, rec.copies, losses)


def write(case, rows, copies, losses):
    os.makedirs(REFS, exist_ok=True)
    with open(os.path.join(REFS, case + ".fp8.csv"), "w") as f:
        f.write("step,tensor,format,amax,scale,saturated,underflow\n")
        for s, n, fmt, amax, scale, sat, under in rows:
            f.write("%d,%s,%s,%s,%s,%d,%d\n" % (s, n, fmt, amax.hex(), scale.hex(), sat, under))
    with open(os.path.join(REFS, case + ".loss.csv"), "w") as f:
        f.write("step,loss\n")
        for s, v in enumerate(losses):
            f.write("%d,%s\n" % (s, v.hex()))
    for s, n, v, fmt in copies:
        d = os.path.join(REFS, case, str(s))
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "%s.%s.npy" % (n, fmt)), v.astype(np.float32))


def main():
    x, t, init = data()
    run("small-fp8-delayed", "delayed", x, t, init)
    run("small-fp8-current", "current", x, t, init)
    run("small-fp8-delayed-scaler", "delayed", x, t, init, torch.float16, 1024.0)
    run_mx("small-fp8-mxfp8", *mx_data())


if __name__ == "__main__":
    main()
