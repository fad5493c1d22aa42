/*
 * fp8_block.c: MXFP8's block-scaled quantization and GEMM on the CPU (the CUDA backend
 * leaves both out: cuBLASLt's MXFP8 GEMMs need compute capability 10.0, Blackwell). Shapes:
 * the quantized view [R, C], one E8M0 byte per block of 32 along C, row-major ([R, C / 32]).
 *
 * Quantization, as Transformer Engine's MXFP8 cast kernels (transformer_engine/common/util/
 * cast_kernels.cuh, common/cast/mxfp8/quantize_mxfp8.cuh in later releases): the block's amax
 * (fmaxf of |v| from 0: NaNs ignored), e = float_to_e8m0(amax * (1 / fp8_max)) (fp8_recipe.h's
 * fp8_e8m0_te), each value times exp2f_rcp(e) (fp8_e8m0_multiplier) in float32 and cast with
 * __NV_SATFINITE (saturating: fp8_quantize.h's FP8_SATURATE, the clamped counted). Since e
 * rounds amax / fp8_max up to a power of two, only an infinite value is ever clamped.
 * A column-wise copy is the row-wise quantization of the transpose: its blocks run along R.
 *
 * The GEMM: each operand's float8 value times its block's 2^(e - 127) is exact in float32
 * (at most 4 significant bits whose lowest is >= 2^-9 * 2^-127 for E4M3, 2^-16 * 2^-127 for
 * E5M2, above float32's smallest subnormal 2^-149), so both operands are dequantized into
 * float32 and cblas_sgemm multiplies them once. A product of two such values (at most 8
 * significant bits) is exact in float32 while it stays at or above FLT_MIN: the GEMM refuses
 * operands whose smallest non-zero magnitudes multiply to less (a subnormal product would be
 * rounded, or flushed by the processor), rather than give a product that is not the exact
 * one. Where this matches cuBLASLt's block-scaled MXFP8 GEMM (sm_100's tcgen05.mma with
 * block scales): the same operands, every product exact, float32 accumulation. Where it may
 * differ: the GPU sums each 32-wide block's scaled products inside the MMA (order and
 * internal width its own) before adding them to its float32 accumulator, in its own K order
 * and split; OpenBLAS sums the products one by one (with FMA) in its order. Sums can differ
 * by float32 roundings; no GPU result is compared here.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "core/format.h"
#include "fp8_quantize.h"
#include "ops/fp8_recipe.h"
#include "cpu.h"

int cpu_fp8_block_quantize(backend *be, const tensor *x, bool colwise, tensor *q, uint8_t *e8m0,
                           int64_t *saturated, round_stats *st)
{
    int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
    int64_t r = colwise ? cols : rows, c = colwise ? rows : cols;
    if (c % FP8_MX_BLOCK != 0) {
        snprintf(be->err, sizeof be->err,
                 "fp8_block_quantize: %.80s's %s dim %lld is not a multiple of MXFP8's block of %d",
                 x->name, colwise ? "leading" : "last", (long long)c, FP8_MX_BLOCK);
        return -1;
    }
    float *own;
    const float *v = cpu_as_f32(be, x, &own);
    float *t = v && colwise ? cpu_scratch(be, x->numel) : NULL;
    if (!v || (colwise && !t)) {
        cpu_scratch_free(be, own, x->numel);
        return -1;
    }
    if (t) /* the transpose, [cols, rows] */
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                t[j * rows + i] = v[i * cols + j];
    const float *src = t ? t : v;
    float largest = format_of(q->dtype)->largest;
    *saturated = 0;
    for (int64_t b = 0; b < r * c / FP8_MX_BLOCK; b++) {
        const float *blk = src + b * FP8_MX_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < FP8_MX_BLOCK; i++)
            amax = fmaxf(fabsf(blk[i]), amax);
        e8m0[b] = fp8_e8m0_te(amax, largest);
        *saturated += fp8_quantize(blk, FP8_MX_BLOCK, fp8_e8m0_multiplier(e8m0[b]), q->dtype,
                                   FP8_SATURATE, (uint8_t *)q->data + b * FP8_MX_BLOCK, st);
    }
    cpu_scratch_free(be, t, x->numel);
    cpu_scratch_free(be, own, x->numel);
    return 0;
}

/* dst = t's float8 values times their blocks' scales (exact); the smallest non-zero magnitude
 * in *small (FLT_MAX for none); -1 (be->err) when a finite value's product is not finite */
static int dequantize(backend *be, const tensor *t, const uint8_t *e8m0, float *dst, float *small)
{
    *small = FLT_MAX;
    for (int64_t i = 0; i < t->numel; i++) {
        float q = load_as_float(t->data, t->dtype, i);
        float v = q * fp8_e8m0_value(e8m0[i / FP8_MX_BLOCK]);
        if (isfinite(q) && !isfinite(v)) {
            snprintf(be->err, sizeof be->err,
                     "fp8_block_gemm: %.80s's value %g times its block scale 2^%d leaves "
                     "float32's range", t->name, (double)q, (int)e8m0[i / FP8_MX_BLOCK] - 127);
            return -1;
        }
        if (v != 0.0f && fabsf(v) < *small)
            *small = fabsf(v);
        dst[i] = v;
    }
    return 0;
}

int cpu_fp8_block_gemm(backend *be, const tensor *a, const uint8_t *a_e8m0, const tensor *b,
                       const uint8_t *b_e8m0, const tensor *bias, tensor *y, round_stats *st)
{
    int64_t k = a->shape[a->ndim - 1], m = a->numel / k, n = b->numel / k;
    float *af = cpu_scratch(be, m * k), *bf = af ? cpu_scratch(be, n * k) : NULL;
    float *c = bf ? cpu_scratch(be, m * n) : NULL;
    float small_a, small_b;
    int rc = -1;
    if (!c || dequantize(be, a, a_e8m0, af, &small_a) || dequantize(be, b, b_e8m0, bf, &small_b))
        goto done;
    if ((double)small_a * (double)small_b < (double)FLT_MIN) {
        snprintf(be->err, sizeof be->err,
                 "fp8_block_gemm: %.80s x %.80s: the smallest non-zero values (%g and %g, "
                 "scaled) multiply below FLT_MIN, where a float32 product is not exact: not run",
                 a->name, b->name, (double)small_a, (double)small_b);
        goto done;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                af, (blasint)k, bf, (blasint)k, 0.0f, c, (blasint)n);
    if (bias)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                c[i * n + j] += load_as_float(bias->data, bias->dtype, j);
    cpu_store_parallel(c, y->data, y->dtype, 0, m * n, st);
    rc = 0;
done:
    cpu_scratch_free(be, c, m * n);
    cpu_scratch_free(be, bf, n * k);
    cpu_scratch_free(be, af, m * k);
    return rc;
}
