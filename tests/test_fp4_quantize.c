/*
 * test_fp4_quantize.c: the CPU's NVFP4 and MXFP4 quantization (harness/ops/cpu/fp4_block.c,
 * rules in harness/ops/fp4_recipe.h) against independent implementations, whose outputs
 * tools/fp4_references.py wrote into tests/references/fp4/quantize/:
 *  - NVFP4 (row-wise, column-wise with the RHT, 16x16 tiles): every scale byte and E2M1 byte
 *    equal to Transformer Engine's formulas transcribed in float32 numpy with ml_dtypes'
 *    conversions;
 *  - NVFP4 row-wise against torchao 0.18's nvfp4_quantize where its rule is TE's: blocks
 *    whose scale is at least 2^-6 (torchao clamps smaller ones up to it, TE does not), and
 *    there values whose product with torchao's multiplier, (1 / (amax / 2688)) / s, rounds
 *    to the E2M1 value their product with TE's, 1 / (s * (1 / S_enc)), rounds to (the two
 *    differ in the last bit in some blocks; a product at an E2M1 tie can then round the
 *    other way: fewer than 1 in 100 values);
 *  - MXFP4 row-wise and column-wise against torchao's MXTensor.to_mx (FLOOR): every byte;
 *  - the RHT matrix against TE's, built there by Sylvester's recursion;
 *  - stochastic rounding by its statistics: the mean of many draws of values between two
 *    E2M1 neighbours within four standard errors of the value, the same seed giving the
 *    same bytes and another seed other bytes;
 *  - the counts (saturated, blocks with underflow, scales that underflowed) by hand on a
 *    small tensor.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "helpers.h"
#include "ops/cpu/cpu.h"
#include "ops/fp4_recipe.h"

#define REF_DIR "tests/references/fp4/quantize/"

/* a reference array, float32 */
static npy_array load(const char *name, const char *what)
{
    char path[256], err[256];
    snprintf(path, sizeof path, REF_DIR "%s.%s.npy", name, what);
    npy_array a;
    cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32, "%s", path);
    return a;
}

typedef struct quantized {
    tensor *q;
    uint8_t scales[64 * 128 / 16];
    fp4_quant_stats out;
    npy_array x;
} quantized;

/* the reference input `name` quantized by the CPU backend with o */
static void quantize(test_env *e, const char *name, const fp4_quant_opts *o, quantized *r)
{
    r->x = load(name, "x");
    int64_t s[2] = {r->x.shape[0], r->x.shape[1]};
    int64_t qs[2] = {o->colwise ? s[1] : s[0], o->colwise ? s[0] : s[1]};
    tensor *x = env_tensor(e, "x", DTYPE_BFLOAT16, 2, s, (const float *)r->x.data);
    r->q = env_zeros(e, "q", DTYPE_FLOAT4_E2M1FN, 2, qs);
    cr_assert_eq(e->be->fp4_block_quantize(e->be, x, o, r->q, r->scales, &r->out, NULL), 0, "%s",
                 e->be->err);
}

/* every scale and byte equal to the reference's `lib` (te or ao) */
static void expect_equal(const quantized *r, const char *name, const char *lib)
{
    char w[32];
    snprintf(w, sizeof w, "%s_scales", lib);
    npy_array s = load(name, w);
    snprintf(w, sizeof w, "%s_q", lib);
    npy_array q = load(name, w);
    cr_assert_eq(s.numel, r->out.blocks, "%s: blocks", name);
    cr_assert_eq(q.numel, r->q->numel, "%s: values", name);
    int64_t bad = 0;
    for (int64_t i = 0; i < s.numel; i++)
        bad += r->scales[i] != (uint8_t)((float *)s.data)[i];
    cr_expect_eq(bad, 0, "%s: %lld scales differ from %s's", name, (long long)bad, lib);
    const uint8_t *qd = (const uint8_t *)r->q->data;
    bad = 0;
    for (int64_t i = 0; i < q.numel; i++)
        bad += qd[i] != (uint8_t)((float *)q.data)[i];
    cr_expect_eq(bad, 0, "%s: %lld values differ from %s's", name, (long long)bad, lib);
    free(s.data);
    free(q.data);
}

Test(fp4_quantize, nvfp4_rowwise_equals_te_formulas)
{
    test_env e;
    env_open(&e);
    quantized r;
    quantize(&e, "nvfp4_rowwise", &(fp4_quant_opts){.recipe = FP4_NVFP4}, &r);
    expect_equal(&r, "nvfp4_rowwise", "te");
    cr_expect_gt(r.out.scales_underflow, 0, "the input has blocks whose E4M3 scale is 0");
    free(r.x.data);
    env_close(&e);
}

Test(fp4_quantize, nvfp4_colwise_rht_equals_te_formulas)
{
    test_env e;
    env_open(&e);
    quantized r;
    quantize(&e, "nvfp4_colwise_rht",
             &(fp4_quant_opts){.recipe = FP4_NVFP4, .colwise = true, .rht = true}, &r);
    expect_equal(&r, "nvfp4_colwise_rht", "te");
    free(r.x.data);
    env_close(&e);
}

Test(fp4_quantize, nvfp4_16x16_equals_te_formulas)
{
    test_env e;
    env_open(&e);
    quantized r;
    quantize(&e, "nvfp4_2d", &(fp4_quant_opts){.recipe = FP4_NVFP4, .block_2d = true}, &r);
    expect_equal(&r, "nvfp4_2d", "te");
    cr_expect_eq(r.out.blocks, 64 / 16 * 128 / 16);
    free(r.x.data);
    env_close(&e);
}

Test(fp4_quantize, nvfp4_rowwise_equals_torchao_where_its_rule_is_tes)
{
    test_env e;
    env_open(&e);
    quantized r;
    quantize(&e, "nvfp4_rowwise", &(fp4_quant_opts){.recipe = FP4_NVFP4}, &r);
    npy_array s = load("nvfp4_rowwise", "ao_scales"), q = load("nvfp4_rowwise", "ao_q");
    const float *x = (const float *)r.x.data;
    float per_tensor = r.out.amax / (FORMAT_FLOAT8_E4M3FN_LARGEST * FORMAT_FLOAT4_E2M1FN_LARGEST);
    int64_t compared = 0, clamped = 0, ties = 0, bad = 0;
    for (int64_t b = 0; b < r.out.blocks; b++) {
        float sv = float_from_e4m3fn(r.scales[b]);
        if (sv < FORMAT_FLOAT8_E4M3FN_SMALLEST_NORMAL) { /* torchao's clamp */
            clamped++;
            continue;
        }
        bad += r.scales[b] != (uint8_t)((float *)s.data)[b];
        float m_te = fp4_nv_multiplier(r.scales[b], r.out.s_enc), m_ao = (1.0f / per_tensor) / sv;
        for (int64_t i = b * FP4_NV_BLOCK; i < (b + 1) * FP4_NV_BLOCK; i++) {
            /* the two orders of operations put the product on two sides of an E2M1 rounding
             * boundary: torchao's byte is then not TE's rule's */
            if (e2m1_from_float(x[i] * m_te) != e2m1_from_float(x[i] * m_ao)) {
                ties++;
                continue;
            }
            compared++;
            bad += ((uint8_t *)r.q->data)[i] != (uint8_t)((float *)q.data)[i];
        }
    }
    cr_expect_eq(bad, 0, "%lld scales or values differ from torchao's", (long long)bad);
    cr_expect_gt(clamped, 0, "the input has blocks below torchao's clamp");
    cr_expect_gt(compared, r.q->numel * 9 / 10, "%lld of %lld values compared",
                 (long long)compared, (long long)r.q->numel);
    cr_expect_leq(ties, compared / 100, "%lld values at a boundary", (long long)ties);
    free(s.data);
    free(q.data);
    free(r.x.data);
    env_close(&e);
}

Test(fp4_quantize, mxfp4_equals_torchao_floor)
{
    static const char *const names[2] = {"mxfp4_rowwise", "mxfp4_colwise"};
    for (int k = 0; k < 2; k++) {
        test_env e;
        env_open(&e);
        quantized r;
        quantize(&e, names[k], &(fp4_quant_opts){.recipe = FP4_MXFP4, .colwise = k == 1}, &r);
        expect_equal(&r, names[k], "ao");
        free(r.x.data);
        env_close(&e);
    }
}

Test(fp4_quantize, rht_matrix_is_tes)
{
    npy_array m = load("rht_matrix", "x");
    cr_assert_eq(m.numel, FP4_NV_BLOCK * FP4_NV_BLOCK);
    float mine[FP4_NV_BLOCK * FP4_NV_BLOCK];
    fp4_rht_matrix(mine);
    for (int i = 0; i < FP4_NV_BLOCK * FP4_NV_BLOCK; i++)
        cr_expect_eq(mine[i], ((float *)m.data)[i], "entry %d", i);
    free(m.data);
}

/* values between E2M1 neighbours (and on one), each repeated; the mean of the stochastic
 * roundings within four standard errors of the value (the rounding's variance is
 * (v - lo)(hi - v)), reproducible from the seed */
Test(fp4_quantize, stochastic_rounding_is_unbiased_and_seeded)
{
    test_env e;
    env_open(&e);
    enum { REPS = 4096 };
    const float v[8] = {0.1f, 0.3f, 1.2f, 1.75f, 2.6f, -3.3f, 5.9f, 4.0f};
    int64_t s[2] = {8 * REPS / 16, 16};
    float *x = malloc(sizeof(float) * 8 * REPS);
    /* a 6 in every block, so that every block has the same scale and multiplier (near 1) */
    for (int i = 0; i < 8 * REPS; i++)
        x[i] = i % 16 == 15 ? 6.0f : v[(i / 16) % 8];
    tensor *t = env_tensor(&e, "x", DTYPE_FLOAT32, 2, s, x);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT4_E2M1FN, 2, s);
    tensor *q2 = env_zeros(&e, "q2", DTYPE_FLOAT4_E2M1FN, 2, s);
    uint8_t *sc = malloc((size_t)(8 * REPS / 16));
    fp4_quant_stats out;
    fp4_quant_opts o = {.recipe = FP4_NVFP4, .stochastic = true, .seed = 42};
    cr_assert_eq(e.be->fp4_block_quantize(e.be, t, &o, q, sc, &out, NULL), 0);
    float mult = fp4_nv_multiplier(sc[0], out.s_enc);
    cr_assert(mult > 0.99f && mult < 1.01f, "multiplier %a", mult);
    double sum[8] = {0}, n[8] = {0};
    for (int i = 0; i < 8 * REPS; i++) {
        if (i % 16 == 15)
            continue;
        sum[(i / 16) % 8] += float_from_e2m1(((uint8_t *)q->data)[i]);
        n[(i / 16) % 8]++;
    }
    for (int k = 0; k < 8; k++) {
        /* E2M1's neighbours of a: spacing 0.5 below 2, 1 below 4, then 2 */
        double a = fabs(v[k] * mult), step = a < 2 ? 0.5 : a < 4 ? 1 : 2;
        double lo = floor(a / step) * step, var = (a - lo) * (lo + step - a);
        double mean = fabs(sum[k] / n[k]), se = sqrt(var / n[k]);
        cr_expect_leq(fabs(mean - a), 4 * se + 1e-12, "%g: mean %g, standard error %g", v[k], mean,
                      se);
    }
    cr_assert_eq(e.be->fp4_block_quantize(e.be, t, &o, q2, sc, &out, NULL), 0);
    cr_expect_eq(memcmp(q->data, q2->data, (size_t)q->numel), 0, "the same seed, the same bytes");
    o.seed = 43;
    cr_assert_eq(e.be->fp4_block_quantize(e.be, t, &o, q2, sc, &out, NULL), 0);
    cr_expect_neq(memcmp(q->data, q2->data, (size_t)q->numel), 0, "another seed, other bytes");
    free(sc);
    free(x);
    env_close(&e);
}

/*
 * Counts by hand: two NVFP4 blocks of 16. Block 0: 16 values 1..16 (amax 16, the tensor's):
 * S_enc = 2688 / 16 = 168, its scale e4m3(16 * 168 / 6 = 448) = 448, multiplier
 * 1 / (448 / 168) = 0.375, values 0.375..6: none saturates, none underflows. Block 1: 1e-6
 * and 15 zeros: scale e4m3(1e-6 * 28 = 2.8e-5) rounds to 0 (below 2^-10): a scale underflow,
 * its multiplier FLT_MAX, so 1e-6 * FLT_MAX = 3.4e32 saturates to 6: one saturated value,
 * no underflow. MXFP4 on 32 values, 0.001 at 0, 7.9 at 1, the rest 0: amax 7.9, FLOOR's
 * scale 2^(2 - 2) = 1, 7.9 saturates, 0.001 underflows: one block with each.
 */
Test(fp4_quantize, counts_by_hand)
{
    test_env e;
    env_open(&e);
    float x[32] = {0};
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    x[16] = 1e-6f;
    int64_t s[2] = {1, 32};
    tensor *t = env_tensor(&e, "x", DTYPE_FLOAT32, 2, s, x);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT4_E2M1FN, 2, s);
    uint8_t sc[2];
    fp4_quant_stats out;
    cr_assert_eq(e.be->fp4_block_quantize(e.be, t, &(fp4_quant_opts){.recipe = FP4_NVFP4}, q, sc,
                                          &out, NULL),
                 0);
    cr_expect_eq(out.s_enc, 168.0f);
    cr_expect_eq(float_from_e4m3fn(sc[0]), 448.0f);
    cr_expect_eq(sc[1], 0);
    cr_expect_eq(out.blocks, 2);
    cr_expect_eq(out.scales_underflow, 1);
    cr_expect_eq(out.saturated, 1);
    cr_expect_eq(out.blocks_saturated, 1);
    cr_expect_eq(out.blocks_underflow, 0);
    float y[32] = {0.001f, 7.9f};
    tensor *u = env_tensor(&e, "y", DTYPE_FLOAT32, 2, s, y);
    uint8_t e8;
    cr_assert_eq(e.be->fp4_block_quantize(e.be, u, &(fp4_quant_opts){.recipe = FP4_MXFP4}, q, &e8,
                                          &out, NULL),
                 0);
    cr_expect_eq(e8, 127);
    cr_expect_eq(out.saturated, 1);
    cr_expect_eq(out.blocks_saturated, 1);
    cr_expect_eq(out.blocks_underflow, 1);
    env_close(&e);
}

/* the block GEMM against a sum in double of the operands decoded by TE's rule (E2M1 value
 * times its block's E4M3 scale times S_dec, NVFP4; the weight in 16x16 tiles), to float32's
 * accumulation error: |y - sum| <= 2^-20 sum |terms| */
Test(fp4_quantize, nvfp4_gemm_equals_decoded_sum_in_double)
{
    test_env e;
    env_open(&e);
    enum { M = 32, N = 16, K = 64 };
    float x[M * K], w[N * K];
    for (int i = 0; i < M * K; i++)
        x[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 7));
    for (int i = 0; i < N * K; i++)
        w[i] = cosf(0.11f * (float)i) * 0.02f;
    int64_t xs[2] = {M, K}, ws[2] = {N, K}, ys[2] = {M, N};
    tensor *xt = env_tensor(&e, "x", DTYPE_FLOAT32, 2, xs, x);
    tensor *wt = env_tensor(&e, "w", DTYPE_FLOAT32, 2, ws, w);
    tensor *xq = env_zeros(&e, "xq", DTYPE_FLOAT4_E2M1FN, 2, xs);
    tensor *wq = env_zeros(&e, "wq", DTYPE_FLOAT4_E2M1FN, 2, ws);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, ys);
    fp4_quant_opts xo = {.recipe = FP4_NVFP4}, wo = {.recipe = FP4_NVFP4, .block_2d = true};
    uint8_t xsc[M * K / 16], wsc[N * K / 16];
    fp4_quant_stats a, b;
    cr_assert_eq(e.be->fp4_block_quantize(e.be, xt, &xo, xq, xsc, &a, NULL), 0);
    cr_assert_eq(e.be->fp4_block_quantize(e.be, wt, &wo, wq, wsc, &b, NULL), 0);
    cr_assert_eq(e.be->fp4_block_gemm(e.be, xq, xsc, &xo, a.s_enc, wq, wsc, &wo, b.s_enc, NULL, y,
                                      NULL),
                 0);
    const uint8_t *qa = (const uint8_t *)xq->data, *qb = (const uint8_t *)wq->data;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double va = float_from_e2m1(qa[m * K + k]) *
                            (double)float_from_e4m3fn(xsc[m * (K / 16) + k / 16]) / a.s_enc;
                double vb = float_from_e2m1(qb[n * K + k]) *
                            (double)float_from_e4m3fn(wsc[(n / 16) * (K / 16) + k / 16]) / b.s_enc;
                sum += va * vb;
                mag += fabs(va * vb);
            }
            float got = ((float *)y->data)[m * N + n];
            cr_expect_leq(fabs(got - sum), 0x1p-20 * mag + 1e-30, "y[%d, %d] = %g, want %g", m,
                          n, (double)got, sum);
        }
    env_close(&e);
}
