/*
 * test_fp8_ops.c: the backend's float8 ops (backend.h: amax, fp8_quantize, fp8_gemm) on values
 * classified by hand in each test, on the CPU; with a GPU of compute capability 8.9 or newer
 * the CUDA backend's against the CPU's (the same bytes and counts; skipped elsewhere).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "helpers.h"

/* amax as TE's kernels take it: NaN ignored, inf counted, 0 for an all-NaN tensor */
Test(fp8_ops, amax_ignores_nan_and_counts_inf)
{
    test_env e;
    env_open(&e);
    int64_t s4[1] = {4}, s2[1] = {2};
    float amax = -1;
    tensor *a = env_tensor(&e, "a", DTYPE_FLOAT32, 1, s4, (float[]){1, -3, NAN, 2});
    cr_expect_eq(e.be->amax(e.be, a, &amax), 0);
    cr_expect_eq(amax, 3.0f);
    tensor *n = env_tensor(&e, "n", DTYPE_BFLOAT16, 1, s2, (float[]){NAN, -NAN});
    e.be->amax(e.be, n, &amax);
    cr_expect_eq(amax, 0.0f, "all NaN: %g", amax);
    tensor *i = env_tensor(&e, "i", DTYPE_FLOAT16, 1, s2, (float[]){-INFINITY, 1});
    e.be->amax(e.be, i, &amax);
    cr_expect(isinf(amax) && amax > 0);
    env_close(&e);
}

/*
 * E4M3, scale 2, saturating: x * 2 = {2, 1000, -600, NaN, 2^-10, 0, 2^-8, 3.25 * 2}:
 * 1000 and -600 clamp to +-448 (saturated 2); 2^-10 is half of the smallest subnormal 2^-9
 * and rounds to even, zero (underflow 1); 2^-8 is a subnormal (2 x 2^-9; subnormal 1); 6.5
 * is exact; the zero stays (zeros 2 with the underflow); NaN stays (nan 1); overflow 0.
 */
Test(fp8_ops, quantize_e4m3_saturating_by_hand)
{
    test_env e;
    env_open(&e);
    int64_t s[2] = {2, 4};
    const float x[8] = {1, 500, -300, NAN, 0x1p-11f, 0, 0x1p-9f, 3.25f};
    tensor *t = env_tensor(&e, "x", DTYPE_FLOAT32, 2, s, x);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT8_E4M3FN, 2, s);
    int64_t st_shape[2] = {4, 2};
    tensor *qt = env_zeros(&e, "qt", DTYPE_FLOAT8_E4M3FN, 2, st_shape);
    round_stats st;
    round_stats_init(&st);
    int64_t sat = -1;
    cr_assert_eq(e.be->fp8_quantize(e.be, t, 2.0f, true, q, qt, &sat, &st), 0);
    cr_expect_eq(sat, 2);
    const float want[8] = {2, 448, -448, NAN, 0, 0, 0x1p-8f, 6.5f};
    for (int i = 0; i < 8; i++) {
        float v = tensor_at(q, i);
        cr_expect(isnan(want[i]) ? isnan(v) : v == want[i], "q[%d] = %g, want %g", i, v, want[i]);
    }
    cr_expect_eq(st.counts.underflow, 1);
    cr_expect_eq(st.counts.zeros, 2);
    cr_expect_eq(st.counts.subnormal, 1);
    cr_expect_eq(st.counts.nan, 1);
    cr_expect_eq(st.counts.overflow, 0);
    /* the transposed copy: qt[c][r] = q[r][c], byte for byte */
    const uint8_t *qb = q->data, *tb = qt->data;
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++)
            cr_expect_eq(tb[c * 2 + r], qb[r * 4 + c], "qt[%d][%d]", c, r);
    env_close(&e);
}

/* The plain cast: E4M3 gives NaN above 464 (overflow and nan), 460 rounds to 448; E5M2 gives
 * inf from 61440 (overflow), 61000 rounds to 57344; saturating E5M2 clamps 1e6 to 57344. */
Test(fp8_ops, quantize_plain_overflows_and_e5m2)
{
    test_env e;
    env_open(&e);
    int64_t s[1] = {3};
    tensor *x = env_tensor(&e, "x", DTYPE_FLOAT32, 1, s, (float[]){460, 465, -1});
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT8_E4M3FN, 1, s);
    round_stats st;
    round_stats_init(&st);
    int64_t sat = -1;
    cr_assert_eq(e.be->fp8_quantize(e.be, x, 1.0f, false, q, NULL, &sat, &st), 0);
    cr_expect_eq(sat, 0);
    cr_expect_eq(tensor_at(q, 0), 448.0f);
    cr_expect(isnan(tensor_at(q, 1)));
    cr_expect_eq(st.counts.overflow, 1);
    cr_expect_eq(st.counts.nan, 1);

    tensor *y = env_tensor(&e, "y", DTYPE_FLOAT32, 1, s, (float[]){61000, 61440, 1e6f});
    tensor *q5 = env_zeros(&e, "q5", DTYPE_FLOAT8_E5M2, 1, s);
    round_stats_init(&st);
    e.be->fp8_quantize(e.be, y, 1.0f, false, q5, NULL, &sat, &st);
    cr_expect_eq(tensor_at(q5, 0), 57344.0f);
    cr_expect(isinf(tensor_at(q5, 1)) && isinf(tensor_at(q5, 2)));
    cr_expect_eq(st.counts.overflow, 2);
    cr_expect_eq(st.counts.nan, 0);
    round_stats_init(&st);
    e.be->fp8_quantize(e.be, y, 1.0f, true, q5, NULL, &sat, &st);
    cr_expect_eq(sat, 3, "61000, 61440 and 1e6 all above 57344");
    cr_expect_eq(tensor_at(q5, 2), 57344.0f);
    cr_expect_eq(st.counts.overflow, 0);
    env_close(&e);
}

/*
 * x = [[1, 2, 3, 4], [0.5, -1, 0, 448]] scaled by 0.5 (scale_inv 2): [[0.5, 1, 1.5, 2],
 * [0.25, -0.5, 0, 224]], all exact in E4M3. w = [[1, 1, 1, 1], [1, 0, -1, 0], [0, 0, 0, 3]]
 * scaled by 4 (scale_inv 0.25): [[4, 4, 4, 4], [4, 0, -4, 0], [0, 0, 0, 12]] exact. y =
 * (xq wq^T) * 2 * 0.25 + b = x w^T + b, b = [0.5, 0, -1]: [[10.5, -2, 11], [448, 0.5,
 * 1343]]; in bfloat16 (8 significant bits) 1343 rounds to 1344 and 10.5 stays.
 */
Test(fp8_ops, gemm_scaled_operands_give_x_w_transposed)
{
    test_env e;
    env_open(&e);
    int64_t sx[2] = {2, 4}, sw[2] = {3, 4}, sb[1] = {3}, sy[2] = {2, 3};
    tensor *x = env_tensor(&e, "x", DTYPE_FLOAT32, 2, sx, (float[]){1, 2, 3, 4, 0.5f, -1, 0, 448});
    tensor *w = env_tensor(&e, "w", DTYPE_FLOAT32, 2, sw,
                           (float[]){1, 1, 1, 1, 1, 0, -1, 0, 0, 0, 0, 3});
    tensor *b = env_tensor(&e, "b", DTYPE_BFLOAT16, 1, sb, (float[]){0.5f, 0, -1});
    tensor *xq = env_zeros(&e, "xq", DTYPE_FLOAT8_E4M3FN, 2, sx);
    tensor *wq = env_zeros(&e, "wq", DTYPE_FLOAT8_E4M3FN, 2, sw);
    int64_t sat;
    e.be->fp8_quantize(e.be, x, 0.5f, true, xq, NULL, &sat, NULL);
    e.be->fp8_quantize(e.be, w, 4.0f, true, wq, NULL, &sat, NULL);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, sy);
    cr_assert_eq(e.be->fp8_gemm(e.be, xq, wq, 2.0f, 0.25f, b, true, y, NULL), 0);
    const float want[6] = {10.5f, -2, 11, 448, 0.5f, 1343};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(tensor_at(y, i), want[i], "y[%d] = %g, want %g", i, tensor_at(y, i), want[i]);
    tensor *yb = env_zeros(&e, "yb", DTYPE_BFLOAT16, 2, sy);
    round_stats st;
    round_stats_init(&st);
    cr_assert_eq(e.be->fp8_gemm(e.be, xq, wq, 2.0f, 0.25f, b, false, yb, &st), 0);
    cr_expect_eq(tensor_at(yb, 5), 1344.0f);
    cr_expect_eq(tensor_at(yb, 0), 10.5f);
    cr_expect_eq(st.numel, 6);
    env_close(&e);
}

/* E4M3 x E5M2 (a gradient GEMM under hybrid) runs; E5M2 x E5M2 is refused with a message */
Test(fp8_ops, gemm_e5m2_times_e5m2_refused)
{
    test_env e;
    env_open(&e);
    int64_t s[2] = {1, 2}, s1[2] = {1, 1};
    tensor *g = env_tensor(&e, "g", DTYPE_FLOAT32, 2, s, (float[]){3, -0.75f});
    tensor *v = env_tensor(&e, "v", DTYPE_FLOAT32, 2, s, (float[]){2, 4});
    tensor *gq = env_zeros(&e, "gq", DTYPE_FLOAT8_E5M2, 2, s);
    tensor *vq = env_zeros(&e, "vq", DTYPE_FLOAT8_E4M3FN, 2, s);
    int64_t sat;
    e.be->fp8_quantize(e.be, g, 1.0f, true, gq, NULL, &sat, NULL);
    e.be->fp8_quantize(e.be, v, 1.0f, true, vq, NULL, &sat, NULL);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, s1);
    cr_expect_eq(e.be->fp8_gemm(e.be, vq, gq, 1, 1, NULL, false, y, NULL), 0);
    cr_expect_eq(tensor_at(y, 0), 3.0f, "2 * 3 + 4 * -0.75");
    cr_expect_neq(e.be->fp8_gemm(e.be, gq, gq, 1, 1, NULL, false, y, NULL), 0);
    cr_expect(strstr(e.be->err, "float8_e5m2 x float8_e5m2") != NULL, "got: %s", e.be->err);
    env_close(&e);
}

/* ---- the CUDA backend against the CPU (a GPU of compute capability 8.9 or newer) ---- */

static backend *gpu_or_skip(void)
{
    char err[1024] = "";
    backend *gpu = backend_cuda_load(NULL, "lib", err, sizeof err);
    if (!gpu)
        cr_skip_test("no GPU: %s", err);
    if (!backend_supports(gpu, BACKEND_OP_fp8_gemm, DTYPE_FLOAT8_E4M3FN)) {
        gpu->close(gpu);
        cr_skip_test("the GPU has no float8 GEMMs (compute capability below 8.9)");
    }
    return gpu;
}

static tensor *to_gpu(backend *gpu, tensor_pool *pool, const tensor *t)
{
    char err[256];
    tensor *g = tensor_new(pool, t->name, t->dtype, t->ndim, t->shape, MEM_ACTIVATIONS, err,
                           sizeof err);
    cr_assert_not_null(g, "%s", err);
    gpu->upload(gpu, g->data, t->data, tensor_bytes(t));
    return g;
}

/* 64 x 32 values over many binades (saturating, subnormal, underflowing, NaN): the same
 * bytes, counts, saturations and amax; the GEMM without fast accumulation equal to the CPU's
 * within the float32 summation order (K = 32 sums of exact products) */
Test(fp8_ops, cuda_matches_cpu)
{
    backend *gpu = gpu_or_skip();
    test_env e;
    env_open(&e);
    mem_account ga = {0};
    tensor_pool gp = {.be = gpu, .account = &ga};
    enum { R = 64, C = 32 };
    float v[R * C];
    for (int i = 0; i < R * C; i++)
        v[i] = ldexpf((float)((i * 37) % 101 - 50) / 7.0f, (i % 29) - 18);
    v[5] = NAN;
    int64_t s[2] = {R, C}, st_[2] = {C, R}, sy[2] = {R, R};
    tensor *x = env_tensor(&e, "x", DTYPE_BFLOAT16, 2, s, v);
    for (int f = 0; f < 2; f++) {
        dtype dt = f ? DTYPE_FLOAT8_E5M2 : DTYPE_FLOAT8_E4M3FN;
        tensor *q = env_zeros(&e, "q", dt, 2, s), *qt = env_zeros(&e, "qt", dt, 2, st_);
        tensor *gx = to_gpu(gpu, &gp, x), *gq = to_gpu(gpu, &gp, q), *gqt = to_gpu(gpu, &gp, qt);
        float ca, ga_;
        e.be->amax(e.be, x, &ca);
        gpu->amax(gpu, gx, &ga_);
        cr_expect_eq(ca, ga_, "amax cpu %g gpu %g", ca, ga_);
        round_stats cs, gs;
        round_stats_init(&cs);
        round_stats_init(&gs);
        int64_t csat, gsat;
        e.be->fp8_quantize(e.be, x, 8.0f, true, q, qt, &csat, &cs);
        gpu->fp8_quantize(gpu, gx, 8.0f, true, gq, gqt, &gsat, &gs);
        uint8_t back[R * C], backt[R * C];
        gpu->download(gpu, back, gq->data, R * C);
        gpu->download(gpu, backt, gqt->data, R * C);
        cr_expect(memcmp(back, q->data, R * C) == 0, "%s bytes differ", dtype_name(dt));
        cr_expect(memcmp(backt, qt->data, R * C) == 0, "%s transposed bytes differ", dtype_name(dt));
        cr_expect_eq(csat, gsat);
        cr_expect(memcmp(&cs.counts, &gs.counts, sizeof cs.counts) == 0, "%s counts differ",
                  dtype_name(dt));
        cr_expect(memcmp(cs.hist, gs.hist, sizeof cs.hist) == 0, "%s histograms differ",
                  dtype_name(dt));
    }
    /* the GEMM: E4M3 x E4M3, y = q q^T without NaN */
    v[5] = 1;
    tensor *x2 = env_tensor(&e, "x2", DTYPE_FLOAT32, 2, s, v);
    tensor *q = env_zeros(&e, "q", DTYPE_FLOAT8_E4M3FN, 2, s);
    int64_t sat;
    e.be->fp8_quantize(e.be, x2, 1.0f, true, q, NULL, &sat, NULL);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, sy);
    e.be->fp8_gemm(e.be, q, q, 0.5f, 0.25f, NULL, false, y, NULL);
    tensor *gq = to_gpu(gpu, &gp, q), *gy = to_gpu(gpu, &gp, y);
    cr_assert_eq(gpu->fp8_gemm(gpu, gq, gq, 0.5f, 0.25f, NULL, false, gy, NULL), 0, "%s",
                 gpu->err);
    float yb[R * R];
    gpu->download(gpu, yb, gy->data, sizeof yb);
    for (int i = 0; i < R * R; i++) {
        float c = tensor_at(y, i);
        cr_expect(fabsf(yb[i] - c) <= 1e-5f * fmaxf(fabsf(c), 1.0f), "y[%d] cpu %g gpu %g", i, c,
                  yb[i]);
    }
    tensor_pool_clear(&gp);
    gpu->close(gpu);
    env_close(&e);
}
