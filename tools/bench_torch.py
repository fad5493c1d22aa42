#!/usr/bin/env python3
"""bench_torch.py: PyTorch's own CPU training step on tools/bench.c's MLP, for `make bench`.

The model as a user writes it: nn.Sequential(Linear(i, h), ReLU, Linear(h, h), Linear(h, o)),
cross-entropy on a fixed batch of random inputs and class targets, Adam(lr=1e-3), no
observation of any kind. Timed as bench.c times the harness's steps: the fastest step after
the first (a warm-up). Variants:
  fp32              plain float32
  autocast-bf16     torch.autocast("cpu", dtype=torch.bfloat16), no GradScaler, where this
                    PyTorch's CPU autocast supports it
Not float16: CPU autocast accepts it, but its float16 GEMMs are so slow (more than half a
minute per step of the 1024-4096-4096-1000, batch 256 MLP, against a fraction of a second in
float32) that they would be most of the benchmark's time.
Prints one line `pytorch <version> threads <n>` and then `<variant> <ms>` per variant, or
`<variant> unsupported <reason>`. A benchmark: it checks nothing.

Usage: python3 tools/bench_torch.py IN HIDDEN OUT BATCH STEPS
"""
import sys
import time

import torch


def step_ms(i, h, o, batch, steps, dtype):
    """the fastest of `steps` steps after the first, in ms"""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                                torch.nn.Linear(h, o))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, i)
    target = torch.randint(0, o, (batch,))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times[1:])


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.strip().splitlines()[-1])
    i, h, o, batch, steps = (int(a) for a in sys.argv[1:])
    print(f"pytorch {torch.__version__} threads {torch.get_num_threads()}", flush=True)
    for name, dtype in (("fp32", None), ("autocast-bf16", torch.bfloat16)):
        try:
            print(f"{name} {step_ms(i, h, o, batch, steps, dtype):.3f}", flush=True)
        except (RuntimeError, TypeError) as e:  # a dtype this PyTorch's CPU autocast lacks
            print(f"{name} unsupported {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                  flush=True)


if __name__ == "__main__":
    main()
