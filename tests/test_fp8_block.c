/*
 * test_fp8_block.c: MXFP8's block-scaled ops on the CPU (backend.h: fp8_block_quantize,
 * fp8_block_gemm; harness/ops/cpu/fp8_block.c) on values classified by hand: each block's E8M0
 * byte, its float8 bytes and the counts, the column-wise copy, TE's infinite-amax edge, and
 * the GEMM against the products summed here from the float8 values times 2^(e - 127).
 * No GPU test: the CUDA backend leaves both ops out (MXFP8 runs on the CPU only in ampscope;
 * test_backend.c and test_gpu_path.c check how a case is refused then).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ops/fp8_recipe.h"
#include "helpers.h"

/*
 * Three blocks of 32 (the rest of each block zero):
 *  block 0, amax 100: 100 / 448 = 0.223 rounds up to 2^-2, e = 125, the values times 4:
 *    100 -> 400, halfway between E4M3's 384 and 416, to even: 384 (0x7c); 1 -> 4 (0x48);
 *    -0.75 -> -3 (0xc4); 3 * 2^-11 -> 3 * 2^-9, a subnormal (0x03); 2^-12 -> 2^-10, half of
 *    the smallest subnormal, to even: 0 (an underflow);
 *  block 1, amax 448: 448 / 448 = 1, e = 127, times 1: 448 (0x7e); 2^-9 stays, subnormal (0x01);
 *  block 2, amax inf: e = 254 (float_to_e8m0's satfinite), TE's exp2f_rcp(254) is the float
 *    of bits 0, i.e. 0: inf * 0 is NaN (0x7f, or 0xff: x86's default NaN has its sign set),
 *    1 * 0 is 0 before the cast (a zero, not an underflow of the rounding, which the counts
 *    are of).
 */
#define N_BLOCKS 3
static const float block_values[N_BLOCKS][5] = {
    {100, 1, -0.75f, 0x3p-11f, 0x1p-12f}, {448, 0x1p-9f, 0, 0, 0}, {INFINITY, 1, 0, 0, 0}};
static const uint8_t block_bytes[N_BLOCKS][5] = {
    {0x7c, 0x48, 0xc4, 0x03, 0x00}, {0x7e, 0x01, 0, 0, 0}, {0x7f, 0x00, 0, 0, 0}};
static const uint8_t block_e8m0[N_BLOCKS] = {125, 127, 254};

static void check_blocks(const tensor *q, const uint8_t *e8m0, const round_stats *st,
                         int64_t saturated)
{
    const uint8_t *qb = q->data;
    for (int b = 0; b < N_BLOCKS; b++) {
        cr_expect_eq(e8m0[b], block_e8m0[b], "block %d: E8M0 %d, want %d", b, e8m0[b],
                     block_e8m0[b]);
        for (int i = 0; i < FP8_MX_BLOCK; i++) {
            uint8_t want = i < 5 ? block_bytes[b][i] : 0, got = qb[b * FP8_MX_BLOCK + i];
            if (want == 0x7f) /* NaN: either sign */
                got &= 0x7f;
            cr_expect_eq(got, want, "block %d value %d: 0x%02x, want 0x%02x", b, i, got, want);
        }
    }
    cr_expect_eq(saturated, 0, "nothing is clamped: each block's scale fits its amax");
    cr_expect_eq(st->counts.underflow, 1);
    cr_expect_eq(st->counts.subnormal, 2);
    cr_expect_eq(st->counts.nan, 1);
    cr_expect_eq(st->counts.overflow, 0);
}

Test(fp8_block, quantize_rowwise_by_hand)
{
    test_env e;
    env_open(&e);
    int64_t s[2] = {1, N_BLOCKS * FP8_MX_BLOCK};
    float x[N_BLOCKS * FP8_MX_BLOCK] = {0};
    for (int b = 0; b < N_BLOCKS; b++)
        memcpy(x + b * FP8_MX_BLOCK, block_values[b], sizeof block_values[b]);
    tensor *t = env_tensor(&e, "x", DTYPE_FLOAT32, 2, s, x);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT8_E4M3FN, 2, s);
    uint8_t e8m0[N_BLOCKS] = {0};
    round_stats st;
    round_stats_init(&st);
    int64_t sat = -1;
    cr_assert_eq(e.be->fp8_block_quantize(e.be, t, false, q, e8m0, &sat, &st), 0, "%s",
                 e.be->err);
    check_blocks(q, e8m0, &st, sat);
    env_close(&e);
}

/* the same values down the columns of x [32, 3]: the column-wise copy [3, 32] has the same
 * blocks; the row-wise view's last dim (3) is refused */
Test(fp8_block, quantize_colwise_by_hand)
{
    test_env e;
    env_open(&e);
    int64_t s[2] = {FP8_MX_BLOCK, N_BLOCKS}, st_shape[2] = {N_BLOCKS, FP8_MX_BLOCK};
    float x[FP8_MX_BLOCK * N_BLOCKS] = {0};
    for (int b = 0; b < N_BLOCKS; b++)
        for (int i = 0; i < 5; i++)
            x[i * N_BLOCKS + b] = block_values[b][i];
    tensor *t = env_tensor(&e, "x", DTYPE_FLOAT32, 2, s, x);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT8_E4M3FN, 2, st_shape);
    uint8_t e8m0[N_BLOCKS] = {0};
    round_stats st;
    round_stats_init(&st);
    int64_t sat = -1;
    cr_assert_eq(e.be->fp8_block_quantize(e.be, t, true, q, e8m0, &sat, &st), 0, "%s",
                 e.be->err);
    check_blocks(q, e8m0, &st, sat);
    tensor *r = env_zeros(&e, "r", DTYPE_FLOAT8_E4M3FN, 2, s);
    cr_expect_neq(e.be->fp8_block_quantize(e.be, t, false, r, e8m0, &sat, NULL), 0);
    cr_expect(strstr(e.be->err, "not a multiple of MXFP8's block of 32") != NULL, "got: %s",
              e.be->err);
    env_close(&e);
}

/* the float8 value of byte b (E4M3: bias 7, subnormals below 2^-6), written here */
static double e4m3_value(uint8_t b)
{
    int s = b >> 7, ex = (b >> 3) & 15, m = b & 7;
    double v = ex ? ldexp(1 + m / 8.0, ex - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

/*
 * y [2, 3] = a [2, 64] . b [3, 64]^T + bias, two blocks along K with their own scales:
 * a's bytes cycle over a few E4M3 values, b's too; the sums, computed here in double from the
 * bytes times 2^(e - 127), are exact in float32 (few significant bits), so y must equal them.
 */
Test(fp8_block, gemm_against_dequantized_products)
{
    test_env e;
    env_open(&e);
    enum { M = 2, N = 3, K = 64, KB = K / FP8_MX_BLOCK };
    int64_t sa[2] = {M, K}, sb[2] = {N, K}, sbias[1] = {N}, sy[2] = {M, N};
    tensor *a = env_zeros(&e, "a", DTYPE_FLOAT8_E4M3FN, 2, sa);
    tensor *b = env_zeros(&e, "b", DTYPE_FLOAT8_E4M3FN, 2, sb);
    static const uint8_t pick[5] = {0x38, 0x40, 0xc4, 0x30, 0x00}; /* 1, 2, -3, 0.5, 0 */
    uint8_t *ab = a->data, *bb = b->data;
    for (int i = 0; i < M * K; i++)
        ab[i] = pick[(i * 7 + 1) % 5];
    for (int i = 0; i < N * K; i++)
        bb[i] = pick[(i * 3 + 2) % 5];
    const uint8_t a_e8m0[M * KB] = {127 + 3, 127 - 5, 127, 127 + 10};
    const uint8_t b_e8m0[N * KB] = {127 - 2, 127 + 1, 127, 127, 127 + 4, 127 - 8};
    const float bias[N] = {0.5f, -1, 0};
    tensor *bt = env_tensor(&e, "bias", DTYPE_FLOAT32, 1, sbias, bias);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, sy);
    cr_assert_eq(e.be->fp8_block_gemm(e.be, a, a_e8m0, b, b_e8m0, bt, y, NULL), 0, "%s",
                 e.be->err);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double want = bias[n];
            for (int k = 0; k < K; k++)
                want += e4m3_value(ab[m * K + k]) * ldexp(1, a_e8m0[m * KB + k / 32] - 127) *
                        e4m3_value(bb[n * K + k]) * ldexp(1, b_e8m0[n * KB + k / 32] - 127);
            cr_expect_eq((double)tensor_at(y, m * N + n), want, "y[%d][%d] = %a, want %a", m, n,
                         (double)tensor_at(y, m * N + n), want);
        }
    env_close(&e);
}

/* scales 2^-126 on both sides: 1 x 1 gives 2^-252, below FLT_MIN: refused, not rounded */
Test(fp8_block, gemm_refuses_products_below_float32_normals)
{
    test_env e;
    env_open(&e);
    int64_t s[2] = {1, FP8_MX_BLOCK}, s1[2] = {1, 1};
    tensor *a = env_zeros(&e, "a", DTYPE_FLOAT8_E4M3FN, 2, s);
    ((uint8_t *)a->data)[0] = 0x38; /* 1 */
    const uint8_t tiny[1] = {1};
    const uint8_t one[1] = {127};
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, s1);
    cr_expect_neq(e.be->fp8_block_gemm(e.be, a, tiny, a, tiny, NULL, y, NULL), 0);
    cr_expect(strstr(e.be->err, "below FLT_MIN") != NULL, "got: %s", e.be->err);
    /* 2^-126 x 1: a normal product, run */
    cr_expect_eq(e.be->fp8_block_gemm(e.be, a, tiny, a, one, NULL, y, NULL), 0, "%s", e.be->err);
    cr_expect_eq(tensor_at(y, 0), 0x1p-126f);
    env_close(&e);
}
