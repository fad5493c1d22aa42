#!/bin/sh
# run-cases.sh CASE...: what `make run-cases` runs, with the Makefile's AMPSCOPE, PYTHON,
# RESULTS (the folder written), SWEEP_CASE and REFERENCE (docs/reference-run, or "" when the
# run is not every case of cases/, or makes the reference): the cases, the loss-scale sweep and
# the precision matrix of SWEEP_CASE, the plots, then results compared with REFERENCE by
# tools/compare_reference.py (the same cases, tensors, dtypes and shapes, else a failure).
# Ends with one line: how many cases passed and failed, the sweep's, the matrix's and the
# comparison's status, and where to start reading. Exit 1 when anything failed.
set -u
log=$(mktemp) || exit 2
trap 'rm -f "$log" "$log.rc" "$log.ref"' EXIT
rc=0

{
    "$AMPSCOPE" run "$@" --out "$RESULTS"
    echo $? >"$log.rc"
} | tee "$log"
[ "$(cat "$log.rc")" = 0 ] || rc=1
passed=$(grep -c '^PASS ' "$log")
failed=$(grep -c '^FAIL ' "$log")
not_run=$(($# - passed - failed))
names=$(grep '^FAIL ' "$log" | cut -d' ' -f2 | head -3 | tr '\n' ' ' | sed 's/ $//; s/ /, /g')
[ "$failed" -gt 3 ] && names="$names, ..."

if "$AMPSCOPE" run "$SWEEP_CASE" --out "$RESULTS" --sweep 'scaler.init_scale=2^0..2^24' --quiet; then
    sweep="ran"
else
    sweep="FAILED" rc=1
fi
if "$AMPSCOPE" matrix "$SWEEP_CASE" --out "$RESULTS" --quiet; then
    matrix="ran"
else
    matrix="FAILED" rc=1
fi
if "$PYTHON" plot/plot.py --ampscope "$AMPSCOPE" "$RESULTS"; then
    plots="drawn"
else
    plots="FAILED" rc=1
fi

if [ -z "$REFERENCE" ]; then
    reference="no reference compared (a run of some cases, or one that makes the reference)"
elif "$PYTHON" tools/compare_reference.py --ran "$@" "$REFERENCE" "$RESULTS" >"$log.ref"; then
    cat "$log.ref"
    reference="the cases, tensors, dtypes and shapes of $REFERENCE"
else
    cat "$log.ref"
    reference="NOT those of $REFERENCE (above; make reference-run)"
    rc=1
fi

line="run-cases: $passed of $# cases passed, $failed failed${names:+ ($names)}"
[ "$not_run" -gt 0 ] && line="$line, $not_run not run (above)"
echo "$line; the sweep $sweep, the matrix $matrix, the plots $plots; $reference;" \
    "start reading at $RESULTS/REPORT.md"
exit $rc
