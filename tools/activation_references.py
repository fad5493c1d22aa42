#!/usr/bin/env python3
"""activation_references.py: PyTorch's values of the row kinds softmax, log_softmax and
causal_mask, for tests/test_activation.c (the pointwise rows' are tools/pointwise_references.py's).

Writes tests/references/activations.csv, one row per element:
    op,variant,dtype,out_dtype,rows,cols,i,x,dy,y,dx
x and dy are the inputs (values of `dtype`), y = op(x) in `out_dtype`, dx the gradient of
sum(dy * y) with respect to x, in `dtype`. Ops: softmax, log_softmax (dim=-1 over rows x
cols), causal_mask (masked_fill of the strict upper triangle of [rows, cols] with -inf).

float32 rows are PyTorch's own ops and autograd on the CPU. Half rows (float16, bfloat16)
are cast explicitly as PyTorch's CUDA kernels compute them (the harness follows CUDA, and
PyTorch's CPU kernels do not round everywhere at the same points): the op runs on the
float32 values of the half input and its result is rounded once into the half dtype
(opmath); the backward of softmax and log_softmax reads the half result, as CUDA's does:
softmax's from a half product grad * output, then in float32,
rounded once (softmax_backward_cuda_out); log_softmax's in float32, rounded once
(_log_softmax_backward_data). softmax and log_softmax of
a float16 input into a float32 output (out_dtype float32) are autocast's fp32_set_opt_dtype
(half_to_float=True on CUDA): softmax(x.float()), and a gradient rounded once to float16.

Usage: /opt/torch-venv/bin/python tools/activation_references.py [OUT.csv]
"""
import sys

import torch
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

ROWS = {
    ("softmax", ""): lambda x: torch.softmax(x, -1),
    ("log_softmax", ""): lambda x: torch.log_softmax(x, -1),
    ("causal_mask", ""): lambda x: x.masked_fill(
        torch.ones(x.shape[-2:], dtype=torch.bool).triu(1), float("-inf")),
}
# The backward formulas that read the op's result, which a half op saves in half; g and y
# are half tensors. softmax's
# is SoftMax.cu's softmax_backward_cuda_out: tmp = grad * output (a half tensor), then
# tmp - output * sum(tmp) in float32 (accscalar_t), rounded once; log_softmax's computes in
# float32 and rounds once.
def softmax_backward_half(g, y):
    tmp = (g * y).float()
    return (tmp - y.float() * tmp.sum(-1, keepdim=True)).to(g.dtype)


SAVES_RESULT = {
    "softmax": softmax_backward_half,
    "log_softmax": lambda g, y: torch.ops.aten._log_softmax_backward_data(
        g.float(), y.float(), -1, torch.float32).to(g.dtype),
}


def g(v):
    return repr(float(v)) if v == v else "nan"


def values(fn, variant_op, x, dy, dt, out_dt):
    """y and dx as CUDA computes them for input dtype dt and output dtype out_dt"""
    xf = x.to(dt).float().detach().clone().requires_grad_(True)
    y = fn(xf)
    if variant_op in SAVES_RESULT and out_dt != torch.float32:
        yh = y.detach().to(out_dt)
        dx = SAVES_RESULT[variant_op](dy.to(out_dt), yh)
        return yh.float(), dx.to(dt).float()
    (dx,) = torch.autograd.grad(y, xf, dy.to(out_dt).float())
    return y.detach().to(out_dt).float(), dx.to(dt).float()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/references/activations.csv"
    gen = torch.Generator().manual_seed(13)
    xr = torch.randn(3, 7, generator=gen) * 3
    dyr = torch.randn(3, 7, generator=gen)
    rows = []
    for (op, variant), fn in ROWS.items():
        pairs = [(n, n) for n in DTYPES]
        if op != "causal_mask":
            pairs.append(("float16", "float32"))
        for name, out_name in pairs:
            dt, out_dt = DTYPES[name], DTYPES[out_name]
            y, dx = values(fn, op, xr, dyr, dt, out_dt)
            x = xr.to(dt).float().flatten()
            d = dyr.to(out_dt).float().flatten()
            y, dx = y.flatten(), dx.flatten()
            for i in range(x.numel()):
                rows.append((op, variant, name, out_name, 3, 7, i, x[i], d[i], y[i], dx[i]))
    with open(out, "w") as f:
        f.write("op,variant,dtype,out_dtype,rows,cols,i,x,dy,y,dx\n")
        for r in rows:
            f.write(",".join(str(v) for v in r[:7]) + "," + ",".join(g(v) for v in r[7:]) + "\n")
    print(f"PyTorch {torch.__version__}: {len(rows)} rows into {out}")


if __name__ == "__main__":
    main()
