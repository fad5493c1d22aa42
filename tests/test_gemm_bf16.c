/*
 * test_gemm_bf16.c: the bfloat16 GEMM fast path (harness/ops/cpu/gemm_bf16.c) and its guard.
 * The guard's bounds against a hand calculation of the exponent fields; then, where the build
 * has oneDNN and the processor avx512_bf16 (else those tests skip with a message), operands on
 * each side of the bound through the backend's linear and matmul: which path ran (the
 * per-path GEMM counts), the outputs against hand-calculated values, and the counts of the
 * outputs' rounding against those of the exact path (the same values widened to float32,
 * which always run through sgemm). Where the summation order may change the last bits, the
 * tolerance is float32's bound for a sum of k products in any order: two orders differ by at
 * most 2 (k - 1) 2^-24 sum |a_i b_i|.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "core/half.h"
#include "ops/cpu/cpu.h"
#include "helpers.h"

/* n bfloat16 bits of the value v */
static void fill_bf16(uint16_t *x, int64_t n, float v)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = bf16_from_float(v);
}

/* emin fields: 2^-60 is 67, 2^-50 is 77, 2^-62 is 65; the bound is emin_a + emin_b >= 142 */
Test(gemm_bf16, guard_bounds_against_a_hand_calculation_of_exponent_fields)
{
    uint16_t a[4], b[4];
    fill_bf16(a, 4, ldexpf(1, -60));
    fill_bf16(b, 4, ldexpf(1, -50));
    cr_expect(cpu_gemm_bf16_exact(a, 4, b, 4, 4), "2^-60 x 2^-50: fields 67 + 77 = 144");
    fill_bf16(b, 4, ldexpf(1, -52)); /* 67 + 75 = 142: every product and sum a multiple of 2^-126 */
    cr_expect(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    fill_bf16(a, 4, ldexpf(1, -61)); /* 66 + 75 = 141: a sum may cancel to a multiple of 2^-127 */
    cr_expect_not(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    fill_bf16(a, 4, 1.0f);
    a[2] = 0x0001; /* a subnormal operand */
    fill_bf16(b, 4, 1.0f);
    cr_expect_not(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    a[2] = 0x7f80; /* infinity */
    cr_expect_not(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    a[2] = 0xffc0; /* NaN */
    cr_expect_not(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    a[2] = 0x8000; /* -0: a zero takes no part in the bound */
    cr_expect(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    fill_bf16(a, 4, 0.0f); /* all zeros, b tiny: every product is 0 */
    fill_bf16(b, 4, ldexpf(1, -120));
    cr_expect(cpu_gemm_bf16_exact(a, 4, b, 4, 4));
    /* overflow: 2^60 is field 187; 187 + 187 - 252 = 122, + ceil(log2 k) <= 126: k <= 16 */
    fill_bf16(a, 4, ldexpf(1, 60));
    fill_bf16(b, 4, ldexpf(1, 60));
    cr_expect(cpu_gemm_bf16_exact(a, 4, b, 4, 16));
    cr_expect_not(cpu_gemm_bf16_exact(a, 4, b, 4, 17));
}

static void skip_without_fast_path(void)
{
    if (!cpu_gemm_bf16_available())
        cr_skip_test("no bfloat16 fast path here (%s): the build has no oneDNN, the processor no "
                     "avx512_bf16, or AMPSCOPE_CPU_ISA is below avx512",
                     cpu_gemm_bf16_library() ? "oneDNN built in" : "built without oneDNN");
}

/* y [m, n] = x [m, k] w [n, k]^T by the backend's linear, with the per-path counts' changes */
static void linear_paths(test_env *e, const tensor *x, const tensor *w, tensor *y, round_stats *st,
                         int64_t *sgemm, int64_t *bf16)
{
    int64_t s0 = cpu_gemm_path_total(CPU_GEMM_SGEMM), b0 = cpu_gemm_path_total(CPU_GEMM_BF16);
    round_stats_init(st);
    cr_assert_eq(e->be->linear_forward(e->be, x, w, NULL, y, st), 0, "%s", e->be->err);
    *sgemm = cpu_gemm_path_total(CPU_GEMM_SGEMM) - s0;
    *bf16 = cpu_gemm_path_total(CPU_GEMM_BF16) - b0;
}

static void expect_same_counts(const round_counts *got, const round_counts *want)
{
    cr_expect_eq(got->zeros, want->zeros);
    cr_expect_eq(got->underflow, want->underflow);
    cr_expect_eq(got->subnormal, want->subnormal);
    cr_expect_eq(got->overflow, want->overflow);
    cr_expect_eq(got->nan, want->nan);
}

/* One side of the bound: x [2, K] of value xv, w [3, K] of value wv (row 1 of x with its
 * signs alternating: its sums cancel), y in dtype out. The path expected, y[0] = K xv wv
 * and y[row 1] = 0 by hand, and the same counts as the widened operands' sgemm. */
static void one_side(float xv, float wv, dtype out, bool fast)
{
    enum { K = 8 };
    test_env e;
    env_open(&e);
    int64_t xs[] = {2, K}, ws[] = {3, K}, ys[] = {2, 3};
    float xval[2 * K], wval[3 * K];
    for (int i = 0; i < K; i++) {
        xval[i] = xv;
        xval[K + i] = i % 2 ? -xv : xv;
    }
    for (int i = 0; i < 3 * K; i++)
        wval[i] = wv;
    tensor *x = env_tensor(&e, "x", DTYPE_BFLOAT16, 2, xs, xval),
           *w = env_tensor(&e, "w", DTYPE_BFLOAT16, 2, ws, wval),
           *x32 = env_tensor(&e, "x32", DTYPE_FLOAT32, 2, xs, xval),
           *w32 = env_tensor(&e, "w32", DTYPE_FLOAT32, 2, ws, wval),
           *y = env_zeros(&e, "y", out, 2, ys), *y32 = env_zeros(&e, "y32", out, 2, ys);
    round_stats st, st32;
    int64_t sgemm, bf16;
    linear_paths(&e, x32, w32, y32, &st32, &sgemm, &bf16);
    cr_expect_eq(sgemm, 1, "float32 operands run through sgemm");
    linear_paths(&e, x, w, y, &st, &sgemm, &bf16);
    cr_expect_eq(bf16, fast ? 1 : 0, "%g x %g: the bfloat16 path ran %lld times", xv, wv,
                 (long long)bf16);
    cr_expect_eq(sgemm, fast ? 0 : 1);
    float want = round_to(ldexpf(xv * wv, 3), out); /* K = 8 = 2^3 equal products */
    for (int j = 0; j < 3; j++) {
        cr_expect_eq(tensor_at(y, j), want, "y[0, %d] = %a, by hand %a", j, tensor_at(y, j), want);
        cr_expect_eq(tensor_at(y, 3 + j), 0.0f);
        cr_expect_eq(tensor_at(y, j), tensor_at(y32, j));
    }
    expect_same_counts(&st.counts, &st32.counts);
    env_close(&e);
}

Test(gemm_bf16, above_the_bound_runs_bf16_with_the_exact_paths_values_and_counts)
{
    skip_without_fast_path();
    one_side(ldexpf(1, -60), ldexpf(1, -50), DTYPE_FLOAT32, true);
    one_side(ldexpf(1.5f, -60), ldexpf(1.25f, -52), DTYPE_BFLOAT16, true);
    one_side(3.0f, -0.75f, DTYPE_BFLOAT16, true);
}

Test(gemm_bf16, below_the_bound_runs_sgemm_and_keeps_subnormal_outputs)
{
    skip_without_fast_path();
    /* 2^-65 x 2^-65 x 8 = 2^-127: subnormal in float32 (vdpbf16ps would give 0) */
    one_side(ldexpf(1, -65), ldexpf(1, -65), DTYPE_FLOAT32, false);
    /* products 2^-121, normal, but fields 67 + 66 = 133 < 142 */
    one_side(ldexpf(1, -60), ldexpf(1, -61), DTYPE_BFLOAT16, false);
}

/* Products of normal values whose sum cancels to a subnormal: a = [1 + 2^-7, -1] 2^-63, b =
 * [2^-63, 2^-63]; the products (1 + 2^-7) 2^-126 and -2^-126 are normal and their sum 2^-133
 * is not. A guard on the products alone would let this run on the bfloat16 instructions; this
 * one declines (fields 64 + 64 < 142) and the exact sum comes out. Where oneDNN is called
 * without the guard, the flushed sum shows why it is needed. */
Test(gemm_bf16, a_sum_cancelling_to_a_subnormal_is_kept_by_the_exact_path)
{
    skip_without_fast_path();
    test_env e;
    env_open(&e);
    int64_t as[] = {1, 1, 2}, bs[] = {1, 2, 1}, ys[] = {1, 1, 1};
    float av[] = {ldexpf(1 + 0x1p-7f, -63), -ldexpf(1, -63)}, bv[] = {ldexpf(1, -63),
                                                                        ldexpf(1, -63)};
    tensor *a = env_tensor(&e, "a", DTYPE_BFLOAT16, 3, as, av),
           *b = env_tensor(&e, "b", DTYPE_BFLOAT16, 3, bs, bv),
           *y = env_zeros(&e, "y", DTYPE_FLOAT32, 3, ys);
    round_stats st;
    round_stats_init(&st);
    int64_t b0 = cpu_gemm_path_total(CPU_GEMM_BF16);
    cr_assert_eq(e.be->matmul(e.be, a, b, false, false, y, &st), 0, "%s", e.be->err);
    cr_expect_eq(cpu_gemm_path_total(CPU_GEMM_BF16), b0, "the guard let a cancelling sum through");
    cr_expect_eq(tensor_at(y, 0), ldexpf(1, -133), "y = %a, by hand 0x1p-133", tensor_at(y, 0));
    cr_expect_eq(st.counts.subnormal, 1);
    float flushed = 1;
    cr_assert_eq(cpu_gemm_bf16(e.be, false, false, 1, 1, 1, 2, a, b, &flushed), 0, "%s",
                 e.be->err);
    cr_expect_eq(flushed, 0.0f, "oneDNN unguarded gave %a: no flush to zero on this processor",
                 flushed);
    env_close(&e);
}

/* A batched matmul of pseudo-random bfloat16 values in [-2, 2) (above the bound): the fast
 * path ran, every output within the two-orders bound of the widened operands' sgemm output,
 * the counts of the rounding into bfloat16 equal */
Test(gemm_bf16, batched_matmul_within_the_summation_order_bound_of_sgemm)
{
    skip_without_fast_path();
    enum { B = 3, M = 17, K = 64, N = 29 };
    test_env e;
    env_open(&e);
    static float av[B * M * K], bv[B * K * N];
    unsigned seed = 7;
    for (int i = 0; i < B * M * K + B * K * N; i++) {
        seed = seed * 1103515245u + 12345u;
        float v = round_to((float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f, DTYPE_BFLOAT16);
        if (i < B * M * K)
            av[i] = v;
        else
            bv[i - B * M * K] = v;
    }
    int64_t as[] = {B, M, K}, bs[] = {B, K, N}, ys[] = {B, M, N};
    tensor *a = env_tensor(&e, "a", DTYPE_BFLOAT16, 3, as, av),
           *b = env_tensor(&e, "b", DTYPE_BFLOAT16, 3, bs, bv),
           *a32 = env_tensor(&e, "a32", DTYPE_FLOAT32, 3, as, av),
           *b32 = env_tensor(&e, "b32", DTYPE_FLOAT32, 3, bs, bv),
           *y = env_zeros(&e, "y", DTYPE_FLOAT32, 3, ys),
           *y32 = env_zeros(&e, "y32", DTYPE_FLOAT32, 3, ys),
           *h = env_zeros(&e, "h", DTYPE_BFLOAT16, 3, ys),
           *h32 = env_zeros(&e, "h32", DTYPE_BFLOAT16, 3, ys);
    round_stats st[4];
    for (int i = 0; i < 4; i++)
        round_stats_init(&st[i]);
    int64_t b0 = cpu_gemm_path_total(CPU_GEMM_BF16);
    cr_assert_eq(e.be->matmul(e.be, a, b, false, false, y, &st[0]), 0, "%s", e.be->err);
    cr_assert_eq(e.be->matmul(e.be, a, b, false, false, h, &st[1]), 0, "%s", e.be->err);
    cr_expect_eq(cpu_gemm_path_total(CPU_GEMM_BF16), b0 + 2);
    cr_assert_eq(e.be->matmul(e.be, a32, b32, false, false, y32, &st[2]), 0, "%s", e.be->err);
    cr_assert_eq(e.be->matmul(e.be, a32, b32, false, false, h32, &st[3]), 0, "%s", e.be->err);
    int differ = 0;
    for (int bi = 0; bi < B; bi++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double mag = 0;
                for (int p = 0; p < K; p++)
                    mag += fabs((double)av[(bi * M + i) * K + p] * bv[(bi * K + p) * N + j]);
                int64_t o = (bi * M + i) * N + j;
                double d = fabs((double)tensor_at(y, o) - tensor_at(y32, o));
                cr_expect_leq(d, 2.0 * (K - 1) * 0x1p-24 * mag, "y[%lld]: %a against %a",
                              (long long)o, tensor_at(y, o), tensor_at(y32, o));
                differ += tensor_at(y, o) != tensor_at(y32, o);
            }
    cr_log_info("%d of %d float32 outputs differ from sgemm's in their last bits", differ,
                B * M * N);
    expect_same_counts(&st[0].counts, &st[2].counts);
    expect_same_counts(&st[1].counts, &st[3].counts);
    env_close(&e);
}

/* config.csv's GEMM counts of a run against a hand count of small-fp32.case's GEMMs under
 * autocast bfloat16, two steps: per step three linear forwards, three weight gradients and
 * two input gradients (fc1's input needs none): 16 in all, split by path. Without the fast
 * path, all 16 run through sgemm. */
Test(gemm_bf16, config_csv_counts_every_gemm_of_a_run_by_path)
{
    char out[256], path[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    const char *sets[] = {"precision.autocast=bfloat16", "train.steps=2"};
    run_case_file_set("tests/cases/small-fp32.case", sets, 2, out, &res, NULL);
    snprintf(path, sizeof path, "%s/small-fp32/config.csv", out);
    csv c;
    cr_assert(csv_read(path, &c), "%s", path);
    cr_assert_eq(c.n_rows, 1);
    long long sgemm = atoll(c.rows[0][csv_col(&c, "gemm_sgemm")]),
              bf16 = atoll(c.rows[0][csv_col(&c, "gemm_bf16")]);
    cr_expect_eq(sgemm + bf16, 16, "%lld through sgemm, %lld on bfloat16 instructions", sgemm, bf16);
    if (!cpu_gemm_bf16_available())
        cr_expect_eq(bf16, 0);
    cr_log_info("small-fp32 under autocast bfloat16: %lld GEMMs through sgemm, %lld on bfloat16 "
                "instructions",
                sgemm, bf16);
    csv_free(&c);
    rm_rf(out);
}
