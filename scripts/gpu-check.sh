#!/usr/bin/env bash
# gpu-check.sh: the checks that need a GPU, in one run that either passes or says why not.
#
# Usage: scripts/gpu-check.sh (--carried | --build-here) [--quick] [--out DIR] [--cpu-full DIR]
#   --carried     use the bundle `make gpu-bundle` wrote on a development machine
#                 (build/gpu-bundle/: the portable binary and CUDA library, the commit and
#                 the digest of the sources they were built from, the list of its files)
#   --build-here  build on this machine with `make CUDA=1` (needs its compilers and Debian
#                 packages; nothing falls back to the other build)
#   --quick       for a 15-minute budget: the selftest, the small cases, one case of each
#                 question at full size, tools/gpu_bench.py --quick (default: every case)
#   --out DIR     where everything goes (default results/gpu-check/); emptied first
#   --cpu-full DIR  the full-size cases' CPU results, run elsewhere (`ampscope run CASES
#                 --device cpu --out DIR`): cpu-full is not run here (saves its minutes)
# Phases, in order, each under its own `timeout`, its output in DIR/<phase>.log; on a
# failure the last 40 lines of that log are printed and the script stops:
#   bundle|build  the carried files are there and were built from these sources, or a build
#   libraries     cuBLAS and cuDNN resolve (the library's run path, the loader's path, else
#                 PyTorch's nvidia-* Python packages, added to LD_LIBRARY_PATH)
#   cpu-small     the small cases on the CPU (the reference of cuda-small)
#   gpu           nvidia-smi, the GPU and its driver (a CUDA 13 build needs 580 or newer):
#                 the first GPU call; without one: one line "gpu-check: no GPU: ..." and exit 3
#   selftest      `ampscope selftest --device cuda`: every op on the GPU against the CPU
#   cuda-small, compare-small     the small cases on the GPU, compared with the CPU's
#   cuda-full     one case of each question at full size (--quick) or every case in cases/
#   bench         tools/gpu_bench.py --quick (skipped when python3 has no PyTorch with CUDA)
#   cpu-full, compare-full   the same cases on the CPU (unless --cpu-full), compared
# Compared: dtypes identical, underflow counts within 0.1% of the gradients' elements (+8)
# (tools/diff_results.py's byte-for-byte differences are kept in the log: summation order).
# Exit: 0 passed, 1 a phase failed, 2 bad usage, 3 no GPU (everything before it passed).
#   scripts/gpu-check.sh --source-digest   prints the digest of the sources (make gpu-bundle)
#   scripts/gpu-check.sh --compare CPU_DIR GPU_DIR   the comparison alone (gpu-rehearsal.sh)
set -u
cd "$(dirname "$0")/.."

BUNDLE=${GPU_CHECK_BUNDLE:-build/gpu-bundle} # another folder only for scripts/gpu-rehearsal.sh
QUICK_FULL_CASES=(cases/seed000-autocast-fp16-scaler.case cases/seed003-autocast-fp16-scaler.case)

# the files a build is made from, hashed in a fixed order (no git needed)
source_digest() {
    find Makefile harness kernels -type f \( -name Makefile -o -name '*.c' -o -name '*.h' \
        -o -name '*.cu' -o -name '*.cuh' \) | LC_ALL=C sort | xargs sha256sum | sha256sum |
        cut -d' ' -f1
}

# two results folders of the same cases: dtypes identical, underflow counts within tolerance
compare_runs() { # CPU_DIR GPU_DIR
    python3 tools/diff_results.py "$1" "$2" || echo "(byte-for-byte differences above: summation order; the verdict is below)"
    python3 - "$1/summary.csv" "$2/summary.csv" <<'PY'
import csv, sys
cpu = {r["case"]: r for r in csv.DictReader(open(sys.argv[1]))}
gpu = {r["case"]: r for r in csv.DictReader(open(sys.argv[2]))}
dtype_cols = ["status", "params", "autocast", "input_dtype", "output_dtype", "loss_dtype",
              "param_grad_dtypes", "cast_grad_dtypes", "activation_grad_dtypes"]
bad = 0
print("%-36s %-6s %-8s %14s %14s %10s %10s" % ("case", "dtypes", "status", "underflow cpu",
                                               "underflow gpu", "ms cpu", "ms gpu"))
for name in sorted(set(cpu) | set(gpu)):
    c, g = cpu.get(name), gpu.get(name)
    if c is None or g is None:
        print("%-36s missing on the %s" % (name, "CPU" if c is None else "GPU"))
        bad += 1
        continue
    same = all(c[k] == g[k] for k in dtype_cols)
    du = abs(int(c["grad_underflow"]) - int(g["grad_underflow"]))
    ok_counts = du <= 0.001 * max(int(c["grad_numel"]), 1) + 8
    bad += (not same) + (not ok_counts)
    print("%-36s %-6s %-8s %14s %14s %10s %10s" % (name, "same" if same else "DIFF", g["status"],
          c["grad_underflow"], g["grad_underflow"], c["step_ms"], g["step_ms"]))
print("%d case(s) differ" % bad)
sys.exit(1 if bad else 0)
PY
}

usage() {
    sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

build= quick=0 out=results/gpu-check cpu_full=
while [ $# -gt 0 ]; do
    case "$1" in
    --source-digest) source_digest; exit 0 ;;
    --compare) [ $# -eq 3 ] || usage; compare_runs "$2" "$3"; exit ;;
    --carried) build=carried ;;
    --build-here) build=here ;;
    --quick) quick=1 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
    --cpu-full) [ $# -ge 2 ] && [ -f "$2/summary.csv" ] || { echo "gpu-check: --cpu-full takes a results folder with a summary.csv" >&2; exit 2; }
        cpu_full=$2; shift ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
[ -n "$build" ] || { echo "gpu-check: say which build to use: --carried or --build-here" >&2; usage; }

rm -rf "$out" && mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 1; }
say() { echo "gpu-check: $*" | tee -a "$out/gpu-check.log"; }

# phase NAME SECONDS COMMAND...: runs COMMAND (a program or one of the functions below,
# exported) in a child bash under timeout, its output into $out/NAME.log
phase() {
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" > "$out/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        say "[$name] ok ($((SECONDS - start)) s)"
        return 0
    fi
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        say "[$name] FAILED: timed out after $limit s; the last 40 lines of $out/$name.log:"
    else
        say "[$name] FAILED (exit $rc); the last 40 lines of $out/$name.log:"
    fi
    tail -n 40 "$out/$name.log" | sed 's/^/    /' | tee -a "$out/gpu-check.log"
    exit 1
}

say "$(date -u '+%Y-%m-%d %H:%M UTC'), $([ $quick -eq 1 ] && echo quick || echo full) check, results in $out/"

# ---- bundle | build ----
check_bundle() {
    local f ok=1
    [ -f "$BUNDLE/FILES" ] || { echo "no $BUNDLE/FILES: run 'make gpu-bundle' on a development machine and carry $BUNDLE/"; return 1; }
    while read -r f; do
        [ -e "$f" ] || { echo "missing: $f"; ok=0; }
    done < "$BUNDLE/FILES"
    [ $ok -eq 1 ] || { echo "the carried bundle is incomplete: remake it with 'make gpu-bundle'"; return 1; }
    local commit built now
    commit=$(cat "$BUNDLE/COMMIT") built=$(cat "$BUNDLE/SOURCES") now=$(source_digest)
    echo "bundle built from commit $commit, sources $built"
    if command -v git > /dev/null && git rev-parse HEAD > /dev/null 2>&1; then
        local head
        head=$(git rev-parse HEAD)
        if [ "${commit%% *}" = "$head" ]; then
            echo "this checkout: the same commit"
        else
            echo "this checkout: commit $head, not the bundle's (its sources decide below)"
        fi
    else
        echo "this checkout: no git here, checked by the sources' digest"
    fi
    [ "$built" = "$now" ] || { echo "stale: these sources hash to $now, the bundle's to $built: remake it with 'make gpu-bundle' from this commit"; return 1; }
    echo "the sources here are the bundle's"
}
export -f source_digest check_bundle
export BUNDLE out
if [ "$build" = carried ]; then
    phase bundle 30 check_bundle
    bin=$BUNDLE/bin/ampscope lib=$BUNDLE/lib/libampscope_cuda.so
else
    phase build 900 make CUDA=1 all
    bin=bin/ampscope lib=lib/libampscope_cuda.so
fi

# ---- libraries ----
# cuDNN opens its sub-libraries (libcudnn_cnn, _ops, _engines_*; they need libz) only at
# cudnnCreate: each beside libcudnn.so.9 must resolve too
cudnn_sublibraries() { # LD_LIBRARY_PATH as the run will have it
    local cudnn d f n=0 bad=0
    cudnn=$(ldd "$lib" | awk '$1 == "libcudnn.so.9" {print $3}')
    [ -n "$cudnn" ] || { echo "libcudnn.so.9 not resolved"; return 1; }
    d=$(dirname "$(readlink -f "$cudnn")")
    for f in "$d"/libcudnn_*.so.9; do
        [ -e "$f" ] || continue
        n=$((n + 1))
        if ldd "$f" | grep -q 'not found'; then
            echo "$f: $(ldd "$f" | awk '/not found/ {print $1}' | tr '\n' ' ')not found"
            bad=1
        fi
    done
    for f in libcudnn_cnn.so.9 libcudnn_ops.so.9 libcudnn_engines_precompiled.so.9; do
        [ -e "$d/$f" ] || { echo "$d/$f: missing (cuDNN's convolutions need it)"; bad=1; }
    done
    [ $bad -eq 0 ] && echo "cuDNN's $n sub-libraries in $d resolve"
    return $bad
}
find_libraries() {
    local missing dirs
    missing=$(ldd "$lib" | awk '/not found/ {print $1}')
    if [ -z "$missing" ]; then
        ldd "$lib" | grep -E 'libcublas|libcudnn'
        cudnn_sublibraries
        return
    fi
    echo "not found by the loader: $missing; looking in PyTorch's nvidia-* packages"
    command -v python3 > /dev/null || { echo "no python3 to find PyTorch's copies"; return 1; }
    dirs=$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
found = set()
for r in roots:
    for pat in ("nvidia/*/lib", "nvidia/cu13/lib", "torch/lib"):
        found.update(glob.glob(os.path.join(r, pat)))
print(":".join(sorted(found)))
PY
)
    [ -n "$dirs" ] || { echo "PyTorch's nvidia-* packages are not installed either"; return 1; }
    echo "$dirs" > "$out/library-path"
    missing=$(LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$lib" | awk '/not found/ {print $1}')
    [ -z "$missing" ] || { echo "still missing: $missing (PyTorch here ships: $(ls ${dirs//:/ } 2>/dev/null | grep -o 'lib\(cublas\|cudnn\)[a-zA-Z_]*\.so\.[0-9]*' | sort -u | tr '\n' ' '))"; return 1; }
    echo "found in $dirs"
    LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" cudnn_sublibraries
}
export -f find_libraries cudnn_sublibraries
export bin lib
phase libraries 60 find_libraries
if [ -f "$out/library-path" ]; then
    export LD_LIBRARY_PATH="$(cat "$out/library-path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# ---- the CPU reference of the small cases ----
small=(tests/cases/small-*.case)
run_cases() { # DEVICE DIR CASE...: exit 1 (an expectation failed) is a result, not a failure
    local dev=$1 dir=$2 rc
    shift 2
    "$bin" run "$@" --device "$dev" --out "$dir" --quiet
    rc=$?
    [ $rc -le 1 ] || return $rc
    [ -f "$dir/summary.csv" ] || { echo "no $dir/summary.csv"; return 1; }
}
export -f run_cases
phase cpu-small 300 run_cases cpu "$out/cpu-small" "${small[@]}"

# ---- the GPU: the first call that needs one ----
if ! command -v nvidia-smi > /dev/null; then
    say "no GPU: nvidia-smi is not installed (no NVIDIA driver on this machine); nothing ran on a GPU"
    exit 3
fi
if ! nvidia-smi -L > "$out/nvidia-smi-L.log" 2>&1 || ! grep -q '^GPU ' "$out/nvidia-smi-L.log"; then
    say "no GPU: nvidia-smi finds none ($(head -1 "$out/nvidia-smi-L.log")); nothing ran on a GPU"
    exit 3
fi
check_driver() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || return 1
    local driver
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
    [ "${driver%%.*}" -ge 580 ] || { echo "driver $driver is older than 580, which CUDA 13 builds need"; return 1; }
}
export -f check_driver
phase gpu 30 check_driver
say "GPU: $(head -1 "$out/gpu.log")"

# ---- the selftest ----
phase selftest 300 "$bin" selftest --device cuda
say "$(tail -1 "$out/selftest.log")"
# cuBLASLt's float8 GEMM with FAST_ACCUM off and on against float32 accumulation (or why not)
say "$(grep -E '^(MEASURE|SKIP) fp8_gemm' "$out/selftest.log")"

# ---- cases on the GPU against the CPU ----
export -f compare_runs
phase cuda-small 300 run_cases cuda "$out/cuda-small" "${small[@]}"
phase compare-small 60 compare_runs "$out/cpu-small" "$out/cuda-small"
if [ $quick -eq 1 ]; then full=("${QUICK_FULL_CASES[@]}"); else full=(cases/*.case); fi
phase cuda-full $([ $quick -eq 1 ] && echo 240 || echo 1800) run_cases cuda "$out/cuda-full" "${full[@]}"

# ---- the GPU part of the benchmark: the last phase that needs the GPU ----
if python3 -c 'import torch; assert torch.cuda.is_available()' > /dev/null 2>&1; then
    phase bench 300 python3 tools/gpu_bench.py --quick --ampscope "$bin" --out "$out/bench"
else
    say "[bench] skipped: python3 has no PyTorch with CUDA"
fi

# ---- the CPU side of the full-size cases (CPU only: after every GPU phase) ----
if [ -n "$cpu_full" ]; then
    say "[cpu-full] not run: the CPU results given in $cpu_full"
else
    cpu_full=$out/cpu-full
    phase cpu-full $([ $quick -eq 1 ] && echo 420 || echo 7200) run_cases cpu "$cpu_full" "${full[@]}"
fi
phase compare-full 60 compare_runs "$cpu_full" "$out/cuda-full"
sed -n '/^case /,$p' "$out/compare-full.log" | tee -a "$out/gpu-check.log"
say "PASS"
