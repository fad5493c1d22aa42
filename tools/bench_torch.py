#!/usr/bin/env python3
"""bench_torch.py: PyTorch's own CPU training step on tools/bench.c's MLP and on a case's graph
model, for `make bench`.

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

A case (--case): the case's model as tools/torch_reference.py builds it (the same layers,
reading the same inputs), its parameters, input and target from `ampscope run --dump`'s
init/ folder (DUMP, which the caller wrote), the case's optimizer with PyTorch's defaults
(foreach where PyTorch picks it) and its autocast as torch.autocast("cpu", dtype): bfloat16
runs, float16 is refused (see above). Prints `pytorch <version> threads <n>` and then
`case <ms>` or `case unsupported <reason>`. SECTION.KEY=VALUE: the --set overrides the
case was run with.

Usage: python3 tools/bench_torch.py IN HIDDEN OUT BATCH STEPS
       python3 tools/bench_torch.py --case CASE DUMP STEPS AMPSCOPE [SECTION.KEY=VALUE...]
"""
import json
import os
import subprocess
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


def case_step_ms(case, dump, steps, ampscope, sets):
    """the fastest of `steps` steps of the case's model after the first, in ms"""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_reference as tr
    cmd = [ampscope, "check", "--json", case] + [a for s in sets for a in ("--set", s)]
    cfg = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    prec, train = cfg["precision"], cfg["train"]
    if prec["autocast"] == "float16" or prec["params"] == "float16":
        raise RuntimeError("float16 on the CPU: not measured (see the usage)")
    init = os.path.join(dump, "init")
    model = tr.build_model(cfg).to(dtype=tr.DTYPES[prec["params"]])
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(tr.load_tensor(init, name))
    x, target = tr.load_tensor(init, "input"), tr.load_tensor(init, "target")
    o = train["optimizer"]
    opts = dict(o["options"])
    if "betas" in opts:
        opts["betas"] = tuple(opts["betas"])
    optimizer = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
                 "rmsprop": torch.optim.RMSprop}[o["kind"]](model.parameters(), **opts)
    if train["loss"] != "cross_entropy":
        raise RuntimeError("loss %s: not measured" % train["loss"])
    autocast = prec["autocast"]
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=tr.DTYPES.get(autocast, torch.bfloat16),
                            enabled=autocast != "off"):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                     target.reshape(-1))
        loss.backward()
        optimizer.step()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times[1:])


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "--case":
        case, dump, steps, ampscope = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        sets = sys.argv[6:]
        print(f"pytorch {torch.__version__} threads {torch.get_num_threads()}", flush=True)
        try:
            print(f"case {case_step_ms(case, dump, steps, ampscope, sets):.3f}", flush=True)
        except (RuntimeError, TypeError, KeyError) as e:
            print(f"case unsupported {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                  flush=True)
        return
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
