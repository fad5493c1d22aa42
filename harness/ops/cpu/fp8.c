/*
 * fp8.c: the float8 ops of te.Linear under fp8_autocast on the CPU (twin of kernels/fp8.cu):
 * amax, the quantized copy with its transposed copy (fp8_quantize.h's counting quantizer),
 * and the scaled float8 GEMM through OpenBLAS.
 *
 * The GEMM: both float8 operands are widened to float32 (exact), cblas_sgemm multiplies them
 * (a product of two float8 values has at most 8 significant bits: exact in float32) and sums
 * in float32, and the sum is multiplied once by scale_inv_a * scale_inv_b (cuBLASLt's A and
 * B scale pointers; TE stores scale_inv = 1 / scale in float32), the bias added in float32,
 * and the result rounded once into y's dtype with its counts. fast_accum does not apply: the
 * CPU always keeps every partial sum in float32. Shapes: a [M, K], b [N, K], y [M, N].
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp8_quantize.h"
#include "cpu.h"

int cpu_amax(backend *be, const tensor *x, float *amax)
{
    (void)be;
    float m = 0.0f, buf[CPU_CHUNK];
    for (int64_t off = 0; off < x->numel; off += CPU_CHUNK) {
        int64_t n = x->numel - off < CPU_CHUNK ? x->numel - off : CPU_CHUNK;
        const float *v = cpu_view(x, off, n, buf);
        for (int64_t i = 0; i < n; i++)
            m = fmaxf(fabsf(v[i]), m); /* fmaxf returns the other operand of a NaN */
    }
    *amax = m;
    return 0;
}

int cpu_fp8_quantize(backend *be, const tensor *x, float scale, bool saturate, tensor *q,
                     tensor *qt, int64_t *saturated, round_stats *st)
{
    float *own;
    const float *v = cpu_as_f32(be, x, &own);
    if (!v)
        return -1;
    *saturated = fp8_quantize(v, x->numel, scale, q->dtype, saturate ? FP8_SATURATE : FP8_PLAIN,
                              q->data, st);
    cpu_scratch_free(be, own, x->numel);
    if (qt) { /* the same bytes, [cols, rows] */
        int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
        const uint8_t *src = q->data;
        uint8_t *dst = qt->data;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                dst[c * rows + r] = src[r * cols + c];
    }
    return 0;
}

int cpu_fp8_gemm(backend *be, const tensor *a, const tensor *b, float scale_inv_a,
                 float scale_inv_b, const tensor *bias, bool fast_accum, tensor *y,
                 round_stats *st)
{
    (void)fast_accum;
    if (a->dtype == DTYPE_FLOAT8_E5M2 && b->dtype == DTYPE_FLOAT8_E5M2) {
        snprintf(be->err, sizeof be->err,
                 "fp8_gemm: float8_e5m2 x float8_e5m2 is not a float8 GEMM cuBLASLt runs (one "
                 "operand must be float8_e4m3fn)");
        return -1;
    }
    int64_t k = a->shape[a->ndim - 1], m = a->numel / k, n = b->numel / k;
    float *a_own, *b_own;
    const float *af = cpu_as_f32(be, a, &a_own);
    const float *bf = af ? cpu_as_f32(be, b, &b_own) : NULL;
    float *c = bf ? cpu_scratch(be, m * n) : NULL;
    if (c) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)k,
                    1.0f, af, (blasint)k, bf, (blasint)k, 0.0f, c, (blasint)n);
        float s = scale_inv_a * scale_inv_b;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                float v = c[i * n + j] * s;
                c[i * n + j] = bias ? v + load_as_float(bias->data, bias->dtype, j) : v;
            }
        cpu_store_parallel(c, y->data, y->dtype, 0, m * n, st);
    }
    cpu_scratch_free(be, c, m * n);
    if (bf)
        cpu_scratch_free(be, b_own, b->numel);
    if (af)
        cpu_scratch_free(be, a_own, a->numel);
    return c ? 0 : -1;
}
