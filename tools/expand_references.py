#!/usr/bin/env python3
"""expand_references.py: PyTorch's gradient of Tensor.expand for half gradients.

Writes one CSV (tests/references/expand_backward.csv, read by tests/test_expand.c) of rows
    dtype,x_shape,sizes,grad,dx
each the backward of y = x.expand(*sizes) for a leaf x of dtype `dtype` (float16 or
bfloat16) and x_shape, from dL/dy = grad (y's values in row-major order): dx = x.grad,
at::sum_to(grad, x.shape) (derivatives.yaml's expand), a sum with a float32 accumulator
rounded once into the dtype. Shapes are space-separated, values semicolon-separated.

Run on the CPU: its order of addition is not CUDA's, so the gradients are chosen for the
order not to matter: every value is a multiple of 2^-12 (float16) or 2^-8 (bfloat16) with
at most 11 (8) significant bits, and every sum of them stays below 2^23 such units, so each
partial sum in float32 is exact whatever the order, and CUDA's sum rounds the same exact
value once (checked here against a float64 sum). A float16 accumulator would round each
partial sum instead (the sums pass 1, where float16's spacing is 2^-10): the test tells the
two apart.

Usage: /opt/torch-venv/bin/python tools/expand_references.py > tests/references/expand_backward.csv
"""
import sys

import torch

# (x's shape, expand's sizes): a new leading dim, dims grown from 1, both
CASES = [
    ((1, 3), (64, 3)),
    ((2, 1, 3), (2, 40, 3)),
    ((3, 1), (4, 3, 5)),
    ((1, 2, 1), (2, 7, 2, 9)),
]
UNIT = {torch.float16: 2.0 ** -12, torch.bfloat16: 2.0 ** -8}
BITS = {torch.float16: 11, torch.bfloat16: 8}


def row(dt, xs, sizes, g):
    n = 1
    for s in sizes:
        n *= s
    k = torch.randint(-(2 ** BITS[dt]) + 1, 2 ** BITS[dt], (n,), generator=g, dtype=torch.int64)
    grad = (k.double() * UNIT[dt]).to(dt).reshape(sizes)
    assert torch.equal(grad.double().reshape(-1), k.double() * UNIT[dt])
    x = torch.zeros(xs, dtype=dt, requires_grad=True)
    x.expand(*sizes).backward(grad)
    exact = grad.double().sum_to_size(xs)
    assert abs(exact / UNIT[dt]).max() < 2 ** 23
    assert torch.equal(x.grad, exact.to(dt))
    text = lambda t: ";".join(repr(float(v)) for v in t.reshape(-1))
    return "%s,%s,%s,%s,%s" % (str(dt).split(".")[1], " ".join(map(str, xs)),
                               " ".join(map(str, sizes)), text(grad), text(x.grad))


def main():
    g = torch.Generator().manual_seed(0)
    out = ["dtype,x_shape,sizes,grad,dx"]
    for dt in (torch.float16, torch.bfloat16):
        for xs, sizes in CASES:
            out.append(row(dt, xs, sizes, g))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
