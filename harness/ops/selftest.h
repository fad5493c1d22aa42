/*
 * selftest.h: the backend selftest. Runs every op of the backend table on two backends (a
 * reference, normally the CPU, and the device under test) with identical random inputs of
 * small shapes in every dtype combination the harness uses, and compares the outputs and
 * the counts of their rounding.
 *
 * Comparison rules:
 *  - exact ops (cast, mul_scalar, fill, observe, every pointwise row, nll_loss backward,
 *    mse, mean backward, unscale, optimizer steps, causal_fill): every element has the same
 *    bits (two NaNs are equal whatever their payloads), the counts and histograms are equal,
 *    found_inf and lost updates are equal. The pointwise rows (pointwise.h: every row, in
 *    every dtype, a row of several operands at five broadcast patterns, at two parameter
 *    sets) run one formula source on both sides; their erf, tanh and exp are each side's
 *    double function rounded to float32, which differ only where a double result within an
 *    ulp or two of double lies that close to a float32 rounding boundary (about 2^-28 of
 *    the values).
 *  - the reduction rows (reduce.h), exact: both backends add in the order reduce.h writes
 *    down (every row, in every dtype, over eight patterns of dims, one span and several).
 *  - summation-order ops (linear, conv2d, log_softmax, softmax, nll_loss forward), whose
 *    pre-rounding values differ with the order of a float32
 *    (or double) sum: an element passes when it is equal, at most 1 ulp of the output dtype away,
 * or within |a - b| <= 1e-5 * max(|a|, |b|) + 1e-6 * (the largest finite |ref| of the tensor) (the
 * absolute term covers outputs near zero after cancellation); each count (zeros, underflow,
 * subnormal, overflow, nan) may differ by at most s = (elements that differ) + numel / 100 + 1, the
 * histograms by at most 2 s in L1 distance (an element moved from one bin to another), amax and
 * amin_nonzero by the element rule.
 *  - exact-count checks (linear and conv2d, then the GEMMs again with the device under
 *    test in --gpu-math native): operands 0 or +-a power of two, so every output is exact in
 *    any summation order and lands in float32's subnormal range or on float16's / bfloat16's
 *    underflow boundary; values and counts must be equal (a native output's stored zeros
 *    are the reference's zeros plus underflows), and the reference must count the
 *    subnormals and underflows the case is built to reach. A flush to zero or an inexact
 *    algorithm fails them.
 *  - float8: amax and fp8_quantize (both formats, saturating and plain, with the transposed
 *    copy) exact; fp8_gemm exact on operands whose sums are exact in any order and in fewer
 *    bits than float32 (both fast_accum settings), then a measurement, not a check: the
 *    largest difference of the device's GEMM (K = 4096) from the reference's float32
 *    accumulation, relative to the largest |y|, with cuBLASLt's FAST_ACCUM off and on
 *    ("MEASURE fp8_gemm ..." lines). "SKIP fp8_gemm" where the device has no float8 GEMMs
 *    (compute capability below 8.9). MXFP8's fp8_block_quantize (row- and column-wise,
 *    its E8M0 scales) and fp8_block_gemm exact; "SKIP" where the device runs no MXFP8.
 * Every op of the table is called by some check (tests/test_selftest.c counts them).
 * Every check also fails when a side still counts workspace after the op returned.
 * Prints one line per check, "PASS op what" or "FAIL op what (details)", then
 * "selftest: N passed, M failed".
 */
#ifndef AMPSCOPE_SELFTEST_H
#define AMPSCOPE_SELFTEST_H

#include <stdio.h>

#include "backend.h"

/* Returns the number of failed checks. ref and dut may be the same backend. */
int selftest_run(backend *ref, backend *dut, FILE *out);

#endif
