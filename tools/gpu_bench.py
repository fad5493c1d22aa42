#!/usr/bin/env python3
"""gpu_bench.py: the GPU part of `make bench` (tools/bench.c is the CPU part).

For the benchmark's configurations (the MLPs in-hidden-hidden-out with Adam lr=1e-3, and
question 003's convolution: the models and case texts of tools/bench.c), on one device:
  - the harness's step: `ampscope run --device DEV` on the case, with every tensor observed
    and with `--observe off`; the fastest step after the warm-up, from steps.csv;
  - the floor: the step's GEMMs in float32 through torch.mm (cuBLAS on a GPU, TF32 off, as
    the harness accumulates in float32), the convolution's forward and weight gradient
    through conv2d (cuDNN), the fastest of five each, plus the bytes the optimizer, casts,
    GradScaler and activation passes must move (bench.c's floor_bytes) over the device's
    copy bandwidth, measured with a tensor copy;
  - PyTorch's own step on the same model as a user writes it: nn.Sequential, Adam with its
    defaults, and for autocast-fp16-scaler torch.autocast(float16) with torch.amp.GradScaler;
    question 003's code for the convolution; fp16-master-scaler has no PyTorch equivalent
    (master weights inside the optimizer) and is left out.
Writes OUT/bench-gpu.csv and OUT/bench-gpu.md and prints the table. A benchmark: it fails
on nothing but a run that does not work.

Usage: python3 tools/gpu_bench.py [--quick | --tiny] [--device cuda|cpu]
                                  [--ampscope bin/ampscope] [--out results]
--device cpu runs the same comparison on the CPU (how the script is checked where there is
no GPU; PyTorch's CPU autocast then computes in its own CPU kernels).
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

import torch

VARIANTS = ("fp32", "autocast-fp16-scaler", "fp16-master-scaler")


def configs(quick, tiny):
    """the rows, as tools/bench.c lists them; tiny: a small MLP per variant and a small conv,
    for checking the script"""

    def mlp(group, variant, i, h, o, batch, steps):
        return dict(kind="mlp", group=group, variant=variant, i=i, h=h, o=o, batch=batch,
                    steps=steps)

    def conv(group, batch, side, steps):
        return dict(kind="conv", group=group, variant="autocast-fp16", batch=batch, side=side,
                    steps=steps)

    if tiny:
        return [mlp("tiny", v, 64, 128, 10, 32, 3) for v in VARIANTS] + [conv("tiny", 2, 24, 3)]
    rows = [mlp("mlp", v, 1024, 4096, 1000, 256, 6) for v in VARIANTS]
    if not quick:
        rows += [mlp("q000", v, 1024, 16000, 2000, 64, 4) for v in VARIANTS]
        rows.append(conv("q003", 40, 555, 2))
    hidden = 1024
    while hidden <= (4096 if quick else 16384):
        rows.append(mlp("scaling", "autocast-fp16-scaler", 1024, hidden, 1000, 256,
                        3 if hidden >= 8192 else 4))
        hidden *= 2
    return rows


def shape_of(c):
    if c["kind"] == "conv":
        return f"conv {c['batch']}x3x{c['side']}x{c['side']}"
    return f"{c['i']}-{c['h']}-{c['h']}-{c['o']} b{c['batch']}"


def case_text(c):
    """tools/bench.c's case_text"""
    if c["kind"] == "conv":
        return (f"[case]\nname = bench\n[model]\nlayer1 = conv2d 3 -> 64 kernel=3 padding=1\n"
                f"[data]\nbatch = {c['batch']}\nshape = 3x{c['side']}x{c['side']}\n"
                f"input_dtype = float16\ntarget = randn_like\n[precision]\nparams = float32\n"
                f"autocast = float16\nloss_in_autocast = no\n[train]\n"
                f"loss = mse reduction=none\noptimizer = rmsprop lr=3e-5 alpha=0.99 eps=1e-7\n"
                f"steps = {c['steps']}\n")
    prec = {"fp32": "params = float32\n",
            "autocast-fp16-scaler": "params = float32\nautocast = float16\n[scaler]\n",
            "fp16-master-scaler": "params = float16\nautocast = float16\nmaster_weights = yes\n"
                                  "[scaler]\n"}[c["variant"]]
    i, h, o = c["i"], c["h"], c["o"]
    return (f"[case]\nname = bench\nobserve = all\n[model]\nfc1 = linear {i} -> {h}\n"
            f"relu = relu\nfc2 = linear {h} -> {h}\nfc3 = linear {h} -> {o}\n"
            f"[data]\nbatch = {c['batch']}\n[precision]\n{prec}[train]\n"
            f"optimizer = adam lr=1e-3\nsteps = {c['steps']}\n")


def ampscope_step(ampscope, device, text, observe_off):
    """the fastest step after the first, in ms, of one run of the case"""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.case")
        with open(path, "w") as f:
            f.write(text)
        cmd = [ampscope, "run", path, "--device", device, "--out", os.path.join(tmp, "out"),
               "--quiet"] + (["--observe", "off"] if observe_off else [])
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"gpu_bench: {' '.join(cmd)} failed:\n{run.stdout}{run.stderr}")
        with open(os.path.join(tmp, "out", "bench", "steps.csv")) as f:
            ms = [float(r["step_ms"]) for r in csv.DictReader(f)][1:]
    return min(ms)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def fastest_ms(device, fn, reps=5):
    best = float("inf")
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def gemm_floor_ms(device, c):
    """bench.c's gemm_floor: the MLP's forward, weight gradient and (but for fc1) input
    gradient through torch.mm; the convolution's forward and weight gradient through conv2d"""
    if c["kind"] == "conv":
        x = torch.randn(c["batch"], 3, c["side"], c["side"], device=device)
        w = torch.randn(64, 3, 3, 3, device=device)
        dy = torch.randn(c["batch"], 64, c["side"], c["side"], device=device)
        return (fastest_ms(device, lambda: torch.nn.functional.conv2d(x, w, padding=1)) +
                fastest_ms(device, lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, padding=1)))
    ms = 0.0
    dims = (c["i"], c["h"], c["h"], c["o"])
    for layer in range(3):
        n_in, n_out = dims[layer], dims[layer + 1]
        x = torch.randn(c["batch"], n_in, device=device)
        w = torch.randn(n_out, n_in, device=device)
        dy = torch.randn(c["batch"], n_out, device=device)
        ms += fastest_ms(device, lambda: torch.mm(x, w.t()))
        ms += fastest_ms(device, lambda: torch.mm(dy.t(), x))
        if layer > 0:
            ms += fastest_ms(device, lambda: torch.mm(dy, w))
        del x, w, dy
    return ms


def copy_bandwidth(device):
    """bytes per ms (read + write) of a 256 MiB tensor copy"""
    a = torch.ones(64 << 20, device=device)
    b = torch.empty_like(a)
    ms = fastest_ms(device, lambda: b.copy_(a))
    return 2 * a.numel() * 4 / ms


def floor_bytes(c):
    """bench.c's floor_bytes"""
    if c["kind"] == "conv":
        return c["batch"] * 64 * c["side"] ** 2 * 18 + (64 * 27 + 64) * 4 * 5
    i, h, o = c["i"], c["h"], c["o"]
    p = i * h + h * h + h * o + 2 * h + o
    return p * {"fp32": 7 * 4, "autocast-fp16-scaler": 7 * 4 + 6 + 6 + 8,
                "fp16-master-scaler": 7 * 4 + 6 + 8 + 6}[c["variant"]]


def timed_steps(device, steps, step):
    """the fastest of `steps` calls of step() after the first, in ms"""
    ms = []
    for _ in range(steps):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        ms.append((time.perf_counter() - t0) * 1e3)
    return min(ms[1:])


def pytorch_step(device, c):
    """PyTorch's own step on the same model and data (None: no equivalent)"""
    torch.manual_seed(0)
    if c["kind"] == "conv":  # question 003's code, the target drawn once as the case does
        model = torch.nn.Conv2d(3, 64, 3, padding=1).to(device)
        opt = torch.optim.RMSprop(model.parameters(), lr=3e-5, alpha=0.99, eps=1e-7)
        x = torch.randn(c["batch"], 3, c["side"], c["side"], device=device).half()
        target = torch.randn(c["batch"], 64, c["side"], c["side"], device=device).half()

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=torch.float16):
                pred = model(x)
            torch.nn.MSELoss(reduction="none")(pred, target).mean().backward()
            opt.step()
        return timed_steps(device, c["steps"], step)
    if c["variant"] == "fp16-master-scaler":
        return None
    i, h, o = c["i"], c["h"], c["o"]
    model = torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.ReLU(), torch.nn.Linear(h, h),
                                torch.nn.Linear(h, o)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(c["batch"], i, device=device)
    target = torch.randint(0, o, (c["batch"],), device=device)
    amp = c["variant"] == "autocast-fp16-scaler"
    scaler = torch.amp.GradScaler(device, enabled=amp)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), target)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return timed_steps(device, c["steps"], step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the scaled-down MLP and scaling only")
    ap.add_argument("--tiny", action="store_true",
                    help="a 64-128-128-10 MLP and a 2x3x24x24 conv only (a check)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--ampscope", default="bin/ampscope")
    ap.add_argument("--out", default="results")
    a = ap.parse_args()
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("gpu_bench: PyTorch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        where = torch.cuda.get_device_name(0)
    else:
        where = f"CPU, {os.cpu_count()} cores"
    bw = copy_bandwidth(a.device)
    head = (f"Run on {where}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; PyTorch "
            f"{torch.__version__}; copy bandwidth {bw / 1e6:.1f} GB/s.")
    print(head)
    cols = ("group", "variant", "shape", "step_ms", "step_ms_observe_off", "floor_ms",
            "step_over_floor", "observe_overhead", "pytorch_ms", "step_over_pytorch")
    print(" ".join(f"{c:>10}" if i > 2 else f"{c:<22}" for i, c in enumerate(cols)))
    rows = []
    for c in configs(a.quick, a.tiny):
        text = case_text(c)
        step = ampscope_step(a.ampscope, a.device, text, False)
        off = ampscope_step(a.ampscope, a.device, text, True)
        floor = gemm_floor_ms(a.device, c) + floor_bytes(c) / bw
        torch_ms = pytorch_step(a.device, c)
        r = dict(group=c["group"], variant=c["variant"], shape=shape_of(c),
                 step_ms=f"{step:.2f}", step_ms_observe_off=f"{off:.2f}", floor_ms=f"{floor:.2f}",
                 step_over_floor=f"{step / floor:.2f}", observe_overhead=f"{step / off - 1:.3f}",
                 pytorch_ms="" if torch_ms is None else f"{torch_ms:.2f}",
                 step_over_pytorch="" if torch_ms is None else f"{step / torch_ms:.2f}")
        rows.append(r)
        print(" ".join(f"{r[k]:>10}" if k not in ("group", "variant", "shape") else f"{r[k]:<22}"
                       for k in cols), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench-gpu.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(a.out, "bench-gpu.md"), "w") as f:
        f.write(head + "\n\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        for r in rows:
            f.write("| " + " | ".join(r[c] or "–" for c in cols) + " |\n")
    print(f"wrote {a.out}/bench-gpu.csv and {a.out}/bench-gpu.md")


if __name__ == "__main__":
    main()
