/*
 * fp8_gemm.h: the CPU's float8 GEMM as a te.Linear under fp8_autocast runs it through
 * cuBLASLt: out = (A B^T) * (scale_inv_a * scale_inv_b), with A [M, K] and B [N, K] row-major
 * float8 (the TN layout Hopper's FP8 GEMMs take: both operands K-contiguous, as nn.Linear's
 * weight [out, in] is), every value widened to float32 (exact), the products (exact: at most
 * 8 significant bits) summed in float32 in the order k = 0..K-1, and the sum multiplied once
 * by the product of the two float32 scale inverses (cuBLASLt's A and B scale pointers;
 * Transformer Engine stores scale_inv = 1 / scale). E5M2 x E5M2 is refused, as cuBLASLt
 * refuses it. The caller rounds out into the surrounding dtype (bfloat16 or float16 under
 * autocast).
 */
#ifndef AMPSCOPE_FP8_GEMM_H
#define AMPSCOPE_FP8_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"

/* false (nothing written) when both operands are float8_e5m2 or either is not a float8 */
bool fp8_gemm_cpu(const uint8_t *a, dtype da, const uint8_t *b, dtype db, float scale_inv_a,
                  float scale_inv_b, int m, int n, int k, float *out);

#endif
