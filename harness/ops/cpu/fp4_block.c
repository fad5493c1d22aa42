/*
 * fp4_block.c: NVFP4's and MXFP4's block-scaled quantization on the CPU (the CUDA backend
 * leaves it out: cuBLASLt's FP4 GEMMs need compute capability 10.0, Blackwell). Shapes: x
 * viewed as [R, C] (C its last dim), or its transpose [C, R] when colwise; q has the view's
 * shape, one float4_e2m1fn value a byte; scales one byte a block, row-major: [R, C / 16]
 * (NVFP4 1x16), [R / 16, C / 16] (NVFP4 16x16 tiles), [R, C / 32] (MXFP4).
 *
 * In the order of TE's NVFP4 kernels (fp4_recipe.h's files): the view (transposed for a
 * column-wise copy); under rht each 16 values along a row times TE's RHT matrix in float32
 * (products of a bfloat16 value and +-1/4 are exact; the sum runs over i ascending, where
 * the GPU's MMA has an order of its own); amax over the whole view (fmaxf from 0, NaNs
 * ignored), S_enc from it; each block's amax, its scale byte and multiplier; each value
 * times the multiplier in float32, converted to E2M1 by round to nearest even with
 * saturation (cvt.rn.satfinite) or stochastically (fp4_recipe.h's fp4_e2m1_stochastic). The
 * random bits of a block come from the harness's generator seeded with the seed and the
 * block's index, so that they depend on neither threads nor order. MXFP4 is the same
 * without S_enc, RHT and 2D tiles, its scale torchao's FLOOR rule.
 *
 * The GEMM (fp4_block_gemm): each operand's E2M1 values times their block scales are exact in
 * float32, so both are dequantized and cblas_sgemm multiplies them once (products of at most
 * 6 significant bits each, exact while at or above FLT_MIN; MXFP4 blocks near E8M0's 2^-127
 * could go below it, which these cases do not reach), then times alpha = S_dec_a * S_dec_b
 * (NVFP4's per-tensor decode scales, as cuBLASLt's alpha) and plus the bias, rounded once.
 * An RHT on both operands along the reduction dim needs no inverse: the matrix is orthogonal,
 * so the product of the transformed operands is the product of the originals. Where the GPU
 * may differ: its order of the sums, inside and across the MMA's blocks.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>

#include "core/format.h"
#include "core/rng.h"
#include "ops/fp4_recipe.h"
#include "cpu.h"

/* the view's values, transposed for a column-wise copy, then under rht each 16 along a
 * row times the RHT matrix: into t ([r, c]) */
static void fp4_view(const float *v, int64_t rows, int64_t cols, const fp4_quant_opts *o,
                     float *t)
{
    int64_t r = o->colwise ? cols : rows, c = o->colwise ? rows : cols;
    if (o->colwise)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                t[j * rows + i] = v[i * cols + j];
    else
        for (int64_t i = 0; i < r * c; i++)
            t[i] = v[i];
    if (!o->rht)
        return;
    float m[FP4_NV_BLOCK * FP4_NV_BLOCK];
    fp4_rht_matrix(m);
    for (int64_t b = 0; b < r * c / FP4_NV_BLOCK; b++) {
        float *blk = t + b * FP4_NV_BLOCK, y[FP4_NV_BLOCK];
        for (int j = 0; j < FP4_NV_BLOCK; j++) {
            float s = 0.0f;
            for (int i = 0; i < FP4_NV_BLOCK; i++)
                s += blk[i] * m[i * FP4_NV_BLOCK + j];
            y[j] = s;
        }
        for (int j = 0; j < FP4_NV_BLOCK; j++)
            blk[j] = y[j];
    }
}

int cpu_fp4_block_quantize(backend *be, const tensor *x, const fp4_quant_opts *o, tensor *q,
                           uint8_t *scales, fp4_quant_stats *out, round_stats *st)
{
    int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
    int64_t r = o->colwise ? cols : rows, c = o->colwise ? rows : cols;
    bool nv = o->recipe == FP4_NVFP4;
    int bs = nv ? FP4_NV_BLOCK : FP4_MX_BLOCK;
    int th = nv && o->block_2d ? FP4_NV_BLOCK : 1; /* a block's rows */
    if (c % bs != 0 || r % th != 0) {
        snprintf(be->err, sizeof be->err,
                 "fp4_block_quantize: %.80s's %s dim %lld is not a multiple of %s's block of %d",
                 x->name, c % bs ? (o->colwise ? "leading" : "last") : (o->colwise ? "last" : "leading"),
                 (long long)(c % bs ? c : r), nv ? "NVFP4" : "MXFP4", bs);
        return -1;
    }
    if (!nv && (o->rht || o->block_2d)) {
        snprintf(be->err, sizeof be->err,
                 "fp4_block_quantize: MXFP4 has no RHT and no 2D blocks (%.80s)", x->name);
        return -1;
    }
    float *own;
    const float *v = cpu_as_f32(be, x, &own);
    float *t = v ? cpu_scratch(be, x->numel) : NULL;
    if (!t) {
        cpu_scratch_free(be, own, x->numel);
        return -1;
    }
    fp4_view(v, rows, cols, o, t);
    cpu_scratch_free(be, own, x->numel);
    *out = (fp4_quant_stats){.s_enc = 1.0f};
    for (int64_t i = 0; i < r * c; i++)
        out->amax = fmaxf(fabsf(t[i]), out->amax);
    if (nv)
        out->s_enc = fp4_nv_s_enc(out->amax);
    float enc = out->s_enc * (1.0f / FORMAT_FLOAT4_E2M1FN_LARGEST); /* fp4_nv_block_scale's */
    uint8_t *qd = (uint8_t *)q->data;
    int64_t bw = c / bs; /* blocks across a row */
    for (int64_t b = 0; b < (r / th) * bw; b++) {
        int64_t r0 = (b / bw) * th, c0 = (b % bw) * bs;
        float bamax = 0.0f;
        for (int64_t i = r0; i < r0 + th; i++)
            for (int64_t j = c0; j < c0 + bs; j++)
                bamax = fmaxf(fabsf(t[i * c + j]), bamax);
        uint8_t s = nv ? fp4_nv_block_scale(bamax, out->s_enc) : fp4_mx_scale(bamax);
        float mult = nv ? fp4_nv_multiplier(s, out->s_enc) : fp4_mx_multiplier(s);
        scales[b] = s;
        out->blocks++;
        if (nv) {
            out->scales_underflow += s == 0 && bamax > 0.0f;
            out->scales_saturated += bamax * enc > FORMAT_FLOAT8_E4M3FN_LARGEST;
        } else {
            out->scales_underflow +=
                bamax > 0.0f && (int)((float_bits(bamax) >> 23) & 0xffu) - 2 < 0;
        }
        rng g;
        rng_seed(&g, o->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(b + 1)));
        bool uf = false, sat = false;
        for (int64_t i = r0; i < r0 + th; i++)
            for (int64_t j = c0; j < c0 + bs; j++) {
                float pre = t[i * c + j] * mult;
                uint8_t byte = o->stochastic ? fp4_e2m1_stochastic(pre, (uint32_t)(rng_next(&g) >> 32))
                                             : e2m1_from_float(pre);
                qd[i * c + j] = byte;
                bool finite = isfinite(pre);
                bool over = finite && fabsf(pre) > FORMAT_FLOAT4_E2M1FN_LARGEST;
                out->saturated += over;
                sat |= over;
                uf |= finite && pre != 0.0f && (byte & FORMAT_FLOAT4_E2M1FN_MAG_MASK) == 0;
                t[i * c + j] = pre; /* for the counts below */
            }
        out->blocks_underflow += uf;
        out->blocks_saturated += sat;
    }
    if (st)
        cpu_count(t, qd, DTYPE_FLOAT4_E2M1FN, 0, r * c, st);
    cpu_scratch_free(be, t, x->numel);
    return 0;
}

/* the scale of element (i, j) of a quantized copy [rows, cols]: its block's byte, as
 * fp4_block_quantize lays them out (1 x block, or 16x16 tiles) */
static float fp4_scale_at(const uint8_t *scales, const fp4_quant_opts *o, int64_t cols, int64_t i,
                          int64_t j)
{
    bool nv = o->recipe == FP4_NVFP4;
    int bs = nv ? FP4_NV_BLOCK : FP4_MX_BLOCK, th = nv && o->block_2d ? FP4_NV_BLOCK : 1;
    uint8_t s = scales[(i / th) * (cols / bs) + j / bs];
    return nv ? float_from_e4m3fn(s) : float_from_e8m0(s);
}

/* q's E2M1 values times their blocks' scales into dst (exact: at most 2 significant bits
 * times 4 (E4M3) or a power of two (E8M0)); NVFP4's per-tensor S_dec is the GEMM's alpha */
static void fp4_dequantize(const tensor *q, const uint8_t *scales, const fp4_quant_opts *o,
                           float *dst)
{
    int64_t cols = q->shape[q->ndim - 1], rows = q->numel / cols;
    const uint8_t *qd = (const uint8_t *)q->data;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            dst[i * cols + j] =
                float_from_e2m1(qd[i * cols + j]) * fp4_scale_at(scales, o, cols, i, j);
}

int cpu_fp4_block_gemm(backend *be, const tensor *a, const uint8_t *a_scales,
                       const fp4_quant_opts *a_opts, float a_s_enc, const tensor *b,
                       const uint8_t *b_scales, const fp4_quant_opts *b_opts, float b_s_enc,
                       const tensor *bias, tensor *y, round_stats *st)
{
    int64_t k = a->shape[a->ndim - 1], m = a->numel / k, n = b->numel / k;
    float *af = cpu_scratch(be, m * k), *bf = af ? cpu_scratch(be, n * k) : NULL;
    float *c = bf ? cpu_scratch(be, m * n) : NULL;
    if (!c) {
        cpu_scratch_free(be, bf, n * k);
        cpu_scratch_free(be, af, m * k);
        return -1;
    }
    fp4_dequantize(a, a_scales, a_opts, af);
    fp4_dequantize(b, b_scales, b_opts, bf);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)k, 1.0f,
                af, (blasint)k, bf, (blasint)k, 0.0f, c, (blasint)n);
    /* cuBLASLt's alpha: the two per-tensor decode scales (1 under MXFP4) */
    float alpha = (1.0f / a_s_enc) * (1.0f / b_s_enc);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * n + j] = c[i * n + j] * alpha +
                           (bias ? load_as_float(bias->data, bias->dtype, j) : 0.0f);
    cpu_store_parallel(c, y->data, y->dtype, 0, m * n, st);
    cpu_scratch_free(be, c, m * n);
    cpu_scratch_free(be, bf, n * k);
    cpu_scratch_free(be, af, m * k);
    return 0;
}
