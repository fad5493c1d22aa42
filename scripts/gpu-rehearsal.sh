#!/usr/bin/env bash
# gpu-rehearsal.sh: runs `scripts/gpu-check.sh --quick --carried` on this machine in an
# environment shaped like a GPU machine's (`make gpu-rehearsal`, after `make gpu-bundle`):
# `env -i` with a PATH of a few runtime tools only (no compiler, no make, no git, no Debian
# development packages: the bundle in build/gpu-bundle/ is all there is to run), the CUDA
# libraries found as the script finds them there (the library's run path, the loader), and
# stand-ins for make, the compilers, the package tools and the dependency installer that
# record any call. Passes when every phase before the first GPU call ran, nothing called a
# stand-in, and the check either stopped at the GPU with one "no GPU" line (exit 3) or, on
# a machine with one, passed; and the first phase refuses a stale bundle or one missing a
# file, and no build given is bad usage. Usage: scripts/gpu-rehearsal.sh (from the repository root)
set -u
cd "$(dirname "$0")/.."
dir=build/gpu-rehearsal
rm -rf "$dir" && mkdir -p "$dir/path" "$dir/home" || exit 1
fail() { echo "gpu-rehearsal: FAIL: $*"; exit 1; }

# what a bare GPU machine has: a shell, coreutils, the loader's ldd, python3, nvidia-smi
for t in bash sh env timeout cat head tail grep sed awk sort tr cut wc date ls mkdir rm cp \
         mv dirname basename readlink find xargs sha256sum tee du id uname sleep ldd python3 \
         nvidia-smi; do
    p=$(command -v "$t") && ln -s "$p" "$dir/path/$t"
done
# stand-ins: any call is recorded and fails (scripts/install-deps.sh, reached by make or by
# its path, starts with dpkg-query)
for t in make cc gcc clang nvcc apt-get apt dpkg dpkg-query sudo pip pip3; do
    printf '#!/bin/sh\necho "%s $*" >> "%s/called.log"\nexit 127\n' "$t" "$PWD/$dir" > "$dir/path/$t"
    chmod +x "$dir/path/$t"
done
: > "$dir/called.log"
start=$SECONDS
env -i PATH="$PWD/$dir/path" HOME="$PWD/$dir/home" LANG=C.UTF-8 \
    bash scripts/gpu-check.sh --quick --carried --out "$dir/out" > "$dir/output.txt" 2>&1
rc=$?
sed 's/^/    /' "$dir/output.txt"
echo "gpu-rehearsal: gpu-check.sh exited $rc after $((SECONDS - start)) s (its files: $dir/out/)"

[ -s "$dir/called.log" ] && fail "the check called what a GPU machine does not have: $(sort -u "$dir/called.log" | tr '\n' ';')"
for ph in bundle libraries cpu-small; do
    grep -q "^gpu-check: \[$ph\] ok" "$dir/output.txt" || fail "phase $ph did not pass"
done
# the first phase refuses a stale bundle and a missing file; no build given is bad usage
stale=$dir/stale-bundle
mkdir -p "$stale" && cp -r build/gpu-bundle/. "$stale/" || exit 1
sed -i "s|^build/gpu-bundle/|$stale/|" "$stale/FILES"
echo 0000 > "$stale/SOURCES"
env -i PATH="$PWD/$dir/path" HOME="$PWD/$dir/home" GPU_CHECK_BUNDLE="$stale" \
    bash scripts/gpu-check.sh --quick --carried --out "$dir/out-stale" > "$dir/stale.txt" 2>&1
src=$?
[ $src -eq 1 ] && grep -q '^gpu-check: \[bundle\] FAILED' "$dir/stale.txt" && grep -q 'stale: ' "$dir/stale.txt" ||
    fail "a bundle built from other sources was not refused (exit $src): $(cat "$dir/stale.txt")"
rm "$stale/lib/libampscope_cuda.so"
env -i PATH="$PWD/$dir/path" HOME="$PWD/$dir/home" GPU_CHECK_BUNDLE="$stale" \
    bash scripts/gpu-check.sh --quick --carried --out "$dir/out-stale" > "$dir/stale.txt" 2>&1
src=$?
[ $src -eq 1 ] && grep -q "missing: $stale/lib/libampscope_cuda.so" "$dir/stale.txt" ||
    fail "a bundle without its library was not refused (exit $src): $(cat "$dir/stale.txt")"
env -i PATH="$PWD/$dir/path" bash scripts/gpu-check.sh --quick > "$dir/usage.txt" 2>&1
src=$?
[ $src -eq 2 ] && grep -q -- '--carried or --build-here' "$dir/usage.txt" ||
    fail "no build given: exit $src, not 2 with a message: $(cat "$dir/usage.txt")"
[ -s "$dir/called.log" ] && fail "the check called what a GPU machine does not have: $(sort -u "$dir/called.log" | tr '\n' ';')"
# the comparison of a GPU run with the CPU's, on the CPU run against itself and a copy with
# one dtype changed
small=$dir/out/cpu-small
env -i PATH="$PWD/$dir/path" bash scripts/gpu-check.sh --compare "$small" "$small" > "$dir/compare.txt" 2>&1 &&
    grep -q '^0 case(s) differ' "$dir/compare.txt" ||
    fail "the CPU's small cases do not compare equal to themselves: $(cat "$dir/compare.txt")"
other=$dir/other-small
cp -r "$small" "$other" || exit 1
sed -i '2s/float32/float16/' "$other/summary.csv"
env -i PATH="$PWD/$dir/path" bash scripts/gpu-check.sh --compare "$small" "$other" > "$dir/compare.txt" 2>&1 &&
    fail "a changed dtype was not found: $(cat "$dir/compare.txt")"
grep -q '^1 case(s) differ' "$dir/compare.txt" || fail "a changed dtype: $(cat "$dir/compare.txt")"
echo "gpu-rehearsal: a stale bundle, a bundle missing a file and a missing --carried / --build-here are refused; the comparison finds a changed dtype"

case $rc in
3)
    n=$(grep -c '^gpu-check: no GPU: ' "$dir/output.txt")
    [ "$n" -eq 1 ] || fail "the missing GPU is reported in $n lines, not one"
    grep -q "^gpu-check: \[gpu\]" "$dir/output.txt" && fail "a GPU phase ran without a GPU"
    echo "gpu-rehearsal: passed: every phase before the first GPU call ran; the missing GPU: $(grep '^gpu-check: no GPU: ' "$dir/output.txt" | sed 's/^gpu-check: //')"
    ;;
0)
    echo "gpu-rehearsal: passed: this machine has a GPU and the whole quick check passed"
    ;;
*)
    fail "gpu-check.sh exited $rc"
    ;;
esac
