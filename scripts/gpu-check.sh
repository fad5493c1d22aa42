#!/usr/bin/env bash
# gpu-check.sh: the checks that need a GPU, in one run of a few minutes on an H200.
#   1. the driver (a CUDA 13 build needs driver 580 or newer);
#   2. a build: made here with nvcc when the machine has it, else the portable build carried
#      from a development machine (`make portable`: OpenBLAS and the CUDA runtime linked in);
#   3. cuBLAS and cuDNN: from the system, or from PyTorch's nvidia-* Python packages;
#   4. `ampscope selftest --device cuda`: every op on the GPU against the CPU;
#   5. every case in cases/ on cuda, its summary diffed against a CPU run of the same cases
#      (results/summary.csv carried from a development machine, else the small cases are run
#      on this machine's CPU and only those are compared), then a short table;
#   6. tools/gpu_bench.py --quick: the harness's steps against cuBLAS's GEMMs and PyTorch's
#      own AMP step on the same models (the GPU part of `make bench`).
# Usage: scripts/gpu-check.sh [CPU_SUMMARY_CSV]   (prints everything; exits non-zero on failure)
set -u
cd "$(dirname "$0")/.."
cpu_summary=${1:-results/summary.csv}
fail() { echo "gpu-check: FAIL: $*"; exit 1; }
say() { echo "gpu-check: $*"; }

say "$(date -u '+%Y-%m-%d %H:%M UTC')"
# ---- 1. driver ----
command -v nvidia-smi >/dev/null || fail "no nvidia-smi: no NVIDIA driver on this machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi failed"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
[ "${driver%%.*}" -ge 580 ] || fail "driver $driver is older than 580, which CUDA 13 builds need"

# ---- 2. build ----
bin=bin/ampscope
if command -v nvcc >/dev/null && command -v cc >/dev/null && [ -e /usr/include/cblas.h ]; then
    say "building here with $(command -v nvcc)"
    make -s all >/dev/null || fail "make failed"
elif [ -x bin/ampscope-portable ] && [ -f lib/libampscope_cuda.so ]; then
    say "using the carried portable build (bin/ampscope-portable, lib/libampscope_cuda.so)"
    bin=bin/ampscope-portable
else
    fail "no nvcc here and no carried build: run 'make portable' on a development machine and carry bin/ and lib/"
fi

# ---- 3. cuBLAS and cuDNN ----
need="libcublas.so.13 libcublasLt.so.13 libcudnn.so.9"
missing=$(ldd lib/libampscope_cuda.so | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
    py=$(command -v python3 || true)
    [ -n "$py" ] || fail "missing $missing and no python3 to find PyTorch's copies"
    dirs=$("$py" - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
found = set()
for r in roots:
    for pat in ("nvidia/*/lib", "nvidia/cu13/lib", "torch/lib"):
        for d in glob.glob(os.path.join(r, pat)):
            found.add(d)
print(":".join(sorted(found)))
PY
)
    export LD_LIBRARY_PATH="${dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    missing=$(ldd lib/libampscope_cuda.so | awk '/not found/ {print $1}')
    [ -z "$missing" ] || fail "still missing: $missing (this build needs $need; PyTorch here ships $(ls ${dirs//:/ } 2>/dev/null | grep -o 'libcublas.so.[0-9]*' | sort -u | tr '\n' ' '))"
    say "cuBLAS/cuDNN from $dirs"
fi

# ---- 4. selftest ----
start=$SECONDS
"$bin" selftest --device cuda > /tmp/gpu-selftest.txt 2>&1
st=$?
grep -E "^FAIL|^selftest:|no usable" /tmp/gpu-selftest.txt
[ $st -eq 0 ] || fail "selftest failed (exit $st)"
say "selftest took $((SECONDS - start)) s"

# ---- 5. cases on cuda against the CPU ----
out=/tmp/gpu-results
rm -rf "$out"
if [ ! -f "$cpu_summary" ]; then
    say "no CPU summary at $cpu_summary: running the small cases on this machine's CPU"
    cases=(tests/cases/small-*.case)
    "$bin" run "${cases[@]}" --device cpu --out /tmp/cpu-results --quiet > /dev/null
    cpu_summary=/tmp/cpu-results/summary.csv
else
    cases=(cases/*.case)
fi
start=$SECONDS
"$bin" run "${cases[@]}" --device cuda --out "$out" --quiet
run_status=$?
say "cases on cuda took $((SECONDS - start)) s (exit $run_status)"

# dtypes must be identical; counts within 0.1% of the gradients' elements (summation order)
python3 - "$cpu_summary" "$out/summary.csv" <<'PY' || exit 1
import csv, sys
cpu = {r["case"]: r for r in csv.DictReader(open(sys.argv[1]))}
gpu = {r["case"]: r for r in csv.DictReader(open(sys.argv[2]))}
dtype_cols = ["status", "params", "autocast", "input_dtype", "output_dtype", "loss_dtype",
              "param_grad_dtypes", "cast_grad_dtypes", "activation_grad_dtypes"]
bad = 0
print("%-32s %-6s %-8s %14s %14s %10s %10s" % ("case", "dtypes", "status", "underflow cpu",
                                               "underflow gpu", "ms cpu", "ms gpu"))
for name, g in sorted(gpu.items()):
    c = cpu.get(name)
    if c is None:
        print("%-32s (no CPU row)" % name)
        continue
    same = all(c[k] == g[k] for k in dtype_cols)
    du = abs(int(c["grad_underflow"]) - int(g["grad_underflow"]))
    ok_counts = du <= 0.001 * max(int(c["grad_numel"]), 1) + 8
    bad += (not same) + (not ok_counts)
    print("%-32s %-6s %-8s %14s %14s %10s %10s" % (name, "same" if same else "DIFF", g["status"],
          c["grad_underflow"], g["grad_underflow"], c["step_ms"], g["step_ms"]))
print("gpu-check: %d case(s) differ" % bad)
sys.exit(1 if bad else 0)
PY
[ $run_status -le 1 ] || fail "ampscope run exited $run_status"

# ---- 6. the GPU part of the benchmark (quick): harness against cuBLAS and PyTorch's AMP ----
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    start=$SECONDS
    python3 tools/gpu_bench.py --quick --ampscope "$bin" --out /tmp/gpu-bench ||
        fail "tools/gpu_bench.py failed"
    say "benchmark took $((SECONDS - start)) s"
else
    say "benchmark skipped: python3 has no PyTorch with CUDA"
fi
say "PASS"
