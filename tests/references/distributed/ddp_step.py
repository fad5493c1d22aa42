#!/usr/bin/env python3
"""ddp_step.py: one SGD step of a small float32 MLP on the full batch, in PyTorch, as the
reference for a 4-rank `comm = ddp` case of the harness (tests/test_distributed.c).

DistributedDataParallel with world_size ranks, each on batch B of the DistributedSampler's
stride, averages the ranks' mean-loss gradients: for equal B that is the full batch's
mean-loss gradient, which this script computes in one process (no process group). With
accumulate = A (DDP's no_sync over A - 1 micro-batches, loss / A each), the step's gradient
is the same full-batch mean over A x world_size x B samples. So one file of samples serves
both, and the weights after the step are the reference within float32 rounding (the
harness sums in another order: per rank, per micro-batch, then the all-reduce).

Writes into tests/references/distributed/ddp/:
  x.npy, y.npy            the samples (float32 [S, 6]) and class labels (int64 [S]), S = 16
  init.<param>.npy        the initial parameters (fc1.weight [8, 6], fc1.bias [8],
                          fc2.weight [3, 8], fc2.bias [3])
  step.<param>.npy        the parameters after one SGD step (lr 0.5) on all 16 samples
Usage: /opt/torch-venv/bin/python tests/references/distributed/ddp_step.py
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp")
SAMPLES, LR = 16, 0.5


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(25)
    x = torch.randn(SAMPLES, 6, generator=g)
    y = torch.randint(0, 3, (SAMPLES,), generator=g)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    np.save(os.path.join(OUT, "x.npy"), x.numpy())
    np.save(os.path.join(OUT, "y.npy"), y.numpy())
    for n, p in zip(names, model.parameters()):
        np.save(os.path.join(OUT, f"init.{n}.npy"), p.detach().numpy())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    for n, p in zip(names, model.parameters()):
        np.save(os.path.join(OUT, f"step.{n}.npy"), p.detach().numpy())
    print(f"torch {torch.__version__}: loss {loss.item():.9g}, files in {OUT}")


if __name__ == "__main__":
    main()
