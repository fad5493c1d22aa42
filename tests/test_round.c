/*
 * test_round.c: the CPU's rounding store (harness/cpu/round.c: F16C stores, vectorized
 * counts from bit patterns, histograms by vector compares or by tables) against the scalar
 * definitions of half.h (half_from_float, round_tally, hist_bin, themselves checked
 * exhaustively in test_half.c), for each destination dtype, on random bit patterns of every
 * kind (normals, subnormals, zeros, inf, NaN: exponents too spread for the vector
 * histogram) and on values spread as a tensor's usually are (a few octaves, zeros among
 * them: the vector histogram), with lengths that are not multiples of the vector width.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/cpu/cpu.h"
#include "../harness/rng.h"

enum { N = 10007 };

/* cpu_store of pre[0..N) into dt against half.h, element by element */
static void check_store(dtype dt, const float *pre)
{
    static uint8_t got[4 * N], want[4 * N];
    round_stats st, ref;
    round_stats_init(&st);
    round_stats_init(&ref);
    cpu_store(pre, got, dt, 0, N, &st);
    float min_normal = dtype_min_normal(dt);
    for (int i = 0; i < N; i++) {
        float post = store_from_float(want, dt, i, pre[i]);
        round_tally(&ref.counts, pre[i], post, min_normal);
        ref.hist[hist_bin(pre[i])]++;
    }
    ref.numel = N;
    cr_expect_eq(memcmp(got, want, (size_t)N * dtype_size(dt)), 0, "%s: stored bits differ",
                 dtype_name(dt));
    const round_counts *a = &st.counts, *b = &ref.counts;
    cr_expect_eq(a->zeros, b->zeros, "%s zeros", dtype_name(dt));
    cr_expect_eq(a->underflow, b->underflow, "%s underflow", dtype_name(dt));
    cr_expect_eq(a->subnormal, b->subnormal, "%s subnormal", dtype_name(dt));
    cr_expect_eq(a->overflow, b->overflow, "%s overflow", dtype_name(dt));
    cr_expect_eq(a->nan, b->nan, "%s nan", dtype_name(dt));
    cr_expect_eq(float_bits(a->amax), float_bits(b->amax), "%s amax %g %g", dtype_name(dt),
                 (double)a->amax, (double)b->amax);
    cr_expect_eq(float_bits(a->amin_nonzero), float_bits(b->amin_nonzero), "%s amin",
                 dtype_name(dt));
    cr_expect_eq(st.numel, ref.numel);
    cr_expect_eq(memcmp(st.hist, ref.hist, sizeof st.hist), 0, "%s histogram", dtype_name(dt));
}

static void check_dtype(dtype dt)
{
    static float pre[N];
    rng g;
    rng_seed(&g, 7);
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)rng_next(&g);
        switch (i % 4) { /* bias towards the places where roundings lose values */
        case 0:
            bits = (bits & 0x807fffffu) | (uint32_t)(100 + rng_below(&g, 20)) << 23;
            break;
        case 1:
            bits = (bits & 0x807fffffu) | (uint32_t)(130 + rng_below(&g, 30)) << 23;
            break;
        case 2:
            bits = i % 40 == 2 ? 0x7f800000u | (bits & 0x80000001u) : bits;
            break;
        default:
            bits = i % 20 == 3 ? bits & 0x80000000u : bits >> (bits & 7);
            break;
        }
        memcpy(&pre[i], &bits, 4);
    }
    /* every boundary of the three formats, both signs */
    static const float edges[] = {0x1p-14f,
                                  0x1.ff8p-15f,
                                  0x1p-24f,
                                  0x1p-25f,
                                  0x1.000002p-25f,
                                  65504.0f,
                                  65519.0f,
                                  65520.0f,
                                  0x1p-126f,
                                  0x1.fcp-127f,
                                  0x1p-133f,
                                  0x1p-134f,
                                  0x1.fffffep127f,
                                  0x1p-149f,
                                  0x1.fffffcp-127f,
                                  3.3895313892515355e38f,
                                  0.0f};
    int ne = (int)(sizeof edges / sizeof edges[0]);
    for (int k = 0; k < ne; k++) {
        pre[2 * k] = edges[k];
        pre[2 * k + 1] = -edges[k];
    }
    check_store(dt, pre);
    round_counts c;
    round_counts_init(&c);
    for (int i = 0; i < N; i++)
        round_tally(&c, pre[i], round_to(pre[i], dt), dtype_min_normal(dt));
    cr_expect_gt(c.underflow + c.overflow + c.subnormal, 0, "the inputs exercise the counts");
}

Test(round, float16_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT16); }
Test(round, bfloat16_store_and_counts_match_half_h) { check_dtype(DTYPE_BFLOAT16); }
Test(round, float32_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT32); }

/* Values spread as a weight's or a gradient's: magnitudes 2^-30 to 2^-5 (float16 loses the
 * lowest to zero or keeps them subnormal), a tenth of them zeros, a float32 subnormal, an
 * infinity and a NaN in the first chunk of 4096; 2^-140 to 2^3 in the second (too wide for
 * the vector histogram), so that both ways of counting and their special bins are checked. */
static void check_spread(dtype dt)
{
    static float pre[N];
    rng g;
    rng_seed(&g, 13);
    for (int i = 0; i < N; i++) {
        int wide = i >= 4096 && i < 8192;
        float m = 1.0f + (float)rng_below(&g, 1 << 20) * 0x1p-20f;
        int e = wide ? -140 + (int)rng_below(&g, 144) : -30 + (int)rng_below(&g, 26);
        pre[i] = i % 10 == 0 ? 0.0f : (i % 2 ? -1.0f : 1.0f) * ldexpf(m, e);
    }
    pre[101] = 0x1p-140f;
    pre[103] = bits_float(0x7f800000u);
    pre[105] = bits_float(0x7fc00001u);
    check_store(dt, pre);
}

Test(round, float16_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT16); }
Test(round, bfloat16_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_BFLOAT16); }
Test(round, float32_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT32); }

/* A float16 GEMM on the CPU: operands widened (F16C where available), multiplied and summed
 * in float32, rounded once. With 5-bit significands and K = 16 every product and partial sum
 * is exact in float32, so the result must be the float64 sum rounded to float16 once. */
Test(round, float16_gemm_is_the_exact_sum_rounded_once)
{
    enum { B = 9, K = 16, O = 37 };
    float x[B * K], w[O * K];
    rng g;
    rng_seed(&g, 11);
    for (int i = 0; i < B * K; i++)
        x[i] = (float)((int)rng_below(&g, 63) - 31) * 0x1p-3f;
    for (int i = 0; i < O * K; i++)
        w[i] = (float)((int)rng_below(&g, 63) - 31) * 0x1p-9f;
    mem_account acct = {0};
    backend *be = backend_cpu_open(&acct);
    be->account = &acct;
    tensor_pool pool = {.be = be, .account = &acct};
    char err[256];
    int64_t xs[2] = {B, K}, ws[2] = {O, K}, ys[2] = {B, O};
    tensor *tx = tensor_new(&pool, "x", DTYPE_FLOAT16, 2, xs, MEM_ACTIVATIONS, err, sizeof err);
    tensor *tw = tensor_new(&pool, "w", DTYPE_FLOAT16, 2, ws, MEM_PARAMS, err, sizeof err);
    tensor *ty = tensor_new(&pool, "y", DTYPE_FLOAT16, 2, ys, MEM_ACTIVATIONS, err, sizeof err);
    for (int i = 0; i < B * K; i++)
        store_from_float(tx->data, DTYPE_FLOAT16, i, x[i]);
    for (int i = 0; i < O * K; i++)
        store_from_float(tw->data, DTYPE_FLOAT16, i, w[i]);
    cr_assert_eq(be->linear_forward(be, tx, tw, NULL, ty, NULL), 0);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) {
            double sum = 0;
            for (int k = 0; k < K; k++)
                sum += (double)x[b * K + k] * (double)w[o * K + k];
            float want = round_to((float)sum, DTYPE_FLOAT16); /* sum is exact in float32 */
            cr_expect_eq(load_as_float(ty->data, DTYPE_FLOAT16, b * O + o), want, "y[%d,%d]", b, o);
        }
    cr_expect_eq(acct.current[MEM_WORKSPACE], 0, "workspace returned");
    tensor_pool_clear(&pool);
    be->close(be);
}
