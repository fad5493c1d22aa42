/*
 * test_fp8_format.c: the float8 formats' codecs (harness/core/half.h: e4m3fn_from_float,
 * e5m2_from_float and their decoders), their counting store (harness/ops/cpu/round.c) and the
 * quantized copy in both overflow behaviours (harness/ops/cpu/fp8_quantize.h):
 *  - every float32 bit pattern against a formulation written here, in double: the value
 *    rounded half to even with an unbounded exponent (floored at the smallest normal's),
 *    then NaN (e4m3fn) or inf (e5m2) when it exceeds the largest finite;
 *  - every float16 and bfloat16 pattern against ml_dtypes' conversion, stored as runs in
 *    tests/references/fp8/fp8_runs.csv (written by fp8_tables.py beside it);
 *  - a tensor of known values against a classification by hand, for both formats and both
 *    behaviours, at every ISA level of the counting.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "ops/cpu/cpu.h"
#include "ops/cpu/fp8_quantize.h"
#include "core/format.h"

typedef struct layout {
    dtype dt;
    int man, bias;
    bool has_inf;
    double largest;
} layout;

static const layout e4m3 = {DTYPE_FLOAT8_E4M3FN, 3, 7, false, 448.0};
static const layout e5m2 = {DTYPE_FLOAT8_E5M2, 2, 15, true, 57344.0};

static double reference(float x, const layout *l)
{
    if (isnan(x))
        return NAN;
    double a = fabs((double)x), over = l->has_inf ? copysign(INFINITY, x) : NAN;
    if (isinf(x))
        return over;
    if (a == 0)
        return copysign(0.0, x);
    int e = ilogb(a);
    e = e < 1 - l->bias ? 1 - l->bias : e;
    double ulp = ldexp(1.0, e - l->man);
    double v = nearbyint(a / ulp) * ulp; /* a / ulp exact; nearbyint ties to even */
    return v > l->largest ? over : copysign(v, x);
}

static void check_every_float32(const layout *l)
{
    int64_t bad = 0;
    int64_t first_bad = 0x100000000LL;
#pragma omp parallel for reduction(+ : bad) reduction(min : first_bad)
    for (int64_t u = 0; u <= 0xffffffffLL; u++) {
        float x = bits_float((uint32_t)u);
        double want = reference(x, l);
        float got = round_to(x, l->dt);
        bool ok = isnan(want) ? isnan(got)
                              : (double)got == want && !signbit(got) == !signbit(want);
        if (!ok) {
            first_bad = u < first_bad ? u : first_bad;
            bad++;
        }
    }
    cr_expect_eq(bad, 0, "%s: %lld float32 patterns differ (one is 0x%08x: %a)",
                 dtype_name(l->dt), (long long)bad, (unsigned)first_bad,
                 (double)bits_float((uint32_t)first_bad));
}

Test(fp8_format, e4m3fn_every_float32, .timeout = 600) { check_every_float32(&e4m3); }
Test(fp8_format, e5m2_every_float32, .timeout = 600) { check_every_float32(&e5m2); }

/* every float16 and bfloat16 pattern against ml_dtypes' runs; NaN against NaN (ml_dtypes
 * stores e5m2's NaN as 0x7e, c10 as 0x7f), else the bits */
Test(fp8_format, float16_and_bfloat16_against_ml_dtypes)
{
    FILE *fp = fopen("tests/references/fp8/fp8_runs.csv", "r");
    cr_assert_not_null(fp, "tests/references/fp8/fp8_runs.csv");
    char line[128], src[32], dst[32];
    int first[1100], byte[1100], n = 0;
    char srcs[1100][32], dsts[1100][32];
    while (fgets(line, sizeof line, fp)) {
        unsigned a, b;
        if (sscanf(line, "%31[^,],%31[^,],0x%x,0x%x", src, dst, &a, &b) != 4)
            continue; /* the comment and the header */
        cr_assert_lt(n, 1100);
        snprintf(srcs[n], sizeof srcs[n], "%s", src);
        snprintf(dsts[n], sizeof dsts[n], "%s", dst);
        first[n] = (int)a, byte[n] = (int)b;
        n++;
    }
    fclose(fp);
    cr_assert_gt(n, 500);
    int checked = 0;
    for (int r = 0; r < n; r++) {
        int end = r + 1 < n && strcmp(srcs[r + 1], srcs[r]) == 0 && strcmp(dsts[r + 1], dsts[r]) == 0
                      ? first[r + 1]
                      : 65536;
        dtype s, d;
        cr_assert(dtype_parse(srcs[r], &s) && dtype_parse(dsts[r], &d));
        for (int p = first[r]; p < end; p++) {
            float x = float_from_pattern((uint32_t)p, s);
            uint8_t stored[4]; /* room for any format's store */
            store_from_float(stored, d, 0, x);
            uint8_t got = stored[0];
            float gv = float_from_pattern(got, d), wv = float_from_pattern((uint32_t)byte[r], d);
            bool ok = isnan(wv) ? isnan(gv) : got == byte[r];
            cr_expect(ok, "%s 0x%04x to %s: 0x%02x, ml_dtypes 0x%02x", srcs[r], p, dsts[r], got,
                      byte[r]);
            checked++;
        }
    }
    cr_expect_eq(checked, 4 * 65536);
}

/*
 * Known values, classified by hand. e4m3fn (largest 448, smallest normal 2^-6, smallest
 * subnormal 2^-9): 0 a zero already; 2^-11 (below half the smallest subnormal) underflows;
 * 2^-10 a tie to the even zero: underflows; 3 * 2^-11 rounds to 2^-9: subnormal; 2^-7
 * subnormal; 1, 448 normal; 464 a tie to the even 448 under the plain cast, clamped when
 * saturating (above 448: torchao's clamp takes it); 470 and 1e6 and inf: NaN under the plain
 * cast (470 and 1e6 overflow, inf was not finite), clamped to 448 when saturating;
 * NaN NaN in both. e5m2 (largest 57344, smallest normal 2^-14, subnormal 2^-16): the same
 * values, with 2^-11, 2^-10, 3 * 2^-11 and 2^-7 all normal, 464, 470 normal; 1e6 and inf
 * inf under the plain cast (1e6 overflows), clamped when saturating.
 */
typedef struct known {
    int64_t zeros, underflow, subnormal, overflow, nan, saturated;
} known;

static void check_known(dtype dt, fp8_overflow ov, known want)
{
    const float v[] = {0.0f,    0x1p-11f, 0x1p-10f, 0x3p-11f, 0x1p-7f, 1.0f,
                       448.0f,  464.0f,   -470.0f,  1e6f,     INFINITY, NAN};
    enum { K = sizeof v / sizeof v[0], N = 3 * 64 + K };
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = 2.0f; /* normal in both; the known values at the start and in the tail */
    memcpy(x, v, sizeof v);
    memcpy(x + N - K, v, sizeof v);
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (!cpu_isa_runs((cpu_isa)l))
            continue;
        /* the quantized copy counted at level l: fp8_quantize's clamping, then the store */
        float pre[N];
        int64_t sat = 0;
        for (int i = 0; i < N; i++) {
            pre[i] = x[i];
            float big = format_of(dt)->largest;
            if (ov == FP8_SATURATE && fabsf(x[i]) > big) {
                pre[i] = copysignf(big, x[i]);
                sat++;
            }
        }
        uint8_t dst[N];
        round_stats st;
        round_stats_init(&st);
        cpu_store_at((cpu_isa)l, pre, dst, dt, 0, N, &st);
        const char *d = dtype_name(dt), *in = cpu_isa_name((cpu_isa)l);
        expect_store_counts(&st.counts,
                            &(round_counts){.zeros = want.zeros,
                                            .underflow = want.underflow,
                                            .subnormal = want.subnormal,
                                            .overflow = want.overflow,
                                            .nan = want.nan},
                            2, d, in);
        cr_expect_eq(sat, 2 * want.saturated, "%s %s saturated", d, in);
    }
    /* fp8_quantize itself (the best level) gives the same */
    uint8_t dst[N];
    round_stats st;
    round_stats_init(&st);
    int64_t sat = fp8_quantize(x, N, 1.0f, dt, ov, dst, &st);
    cr_expect_eq(sat, 2 * want.saturated, "%s fp8_quantize saturated", dtype_name(dt));
    cr_expect_eq(st.counts.overflow, 2 * want.overflow, "%s fp8_quantize overflow", dtype_name(dt));
    cr_expect_eq(st.counts.nan, 2 * want.nan, "%s fp8_quantize nan", dtype_name(dt));
    cr_expect_eq(st.counts.underflow, 2 * want.underflow, "%s fp8_quantize", dtype_name(dt));
}

Test(fp8_format, e4m3fn_known_values_plain)
{
    check_known(DTYPE_FLOAT8_E4M3FN, FP8_PLAIN, (known){3, 2, 2, 2, 4, 0});
}
Test(fp8_format, e4m3fn_known_values_saturating)
{
    check_known(DTYPE_FLOAT8_E4M3FN, FP8_SATURATE, (known){3, 2, 2, 0, 1, 4});
}
Test(fp8_format, e5m2_known_values_plain)
{
    check_known(DTYPE_FLOAT8_E5M2, FP8_PLAIN, (known){1, 0, 0, 1, 1, 0});
}
Test(fp8_format, e5m2_known_values_saturating)
{
    check_known(DTYPE_FLOAT8_E5M2, FP8_SATURATE, (known){1, 0, 0, 0, 1, 2});
}

/* the row's limits as the codecs see them: largest, the overflow thresholds of c10 */
Test(fp8_format, c10_thresholds)
{
    cr_expect_eq(round_to(464.0f, DTYPE_FLOAT8_E4M3FN), 448.0f);
    cr_expect(isnan(round_to(nextafterf(464.0f, 1e9f), DTYPE_FLOAT8_E4M3FN)));
    cr_expect_eq(e4m3fn_from_float(-INFINITY), 0xff);
    cr_expect_eq(round_to(nextafterf(61440.0f, 0.0f), DTYPE_FLOAT8_E5M2), 57344.0f);
    cr_expect(isinf(round_to(61440.0f, DTYPE_FLOAT8_E5M2)));
    cr_expect_eq(e5m2_from_float(NAN), FORMAT_FLOAT8_E5M2_NAN_PATTERN);
    cr_expect_eq(float_from_e5m2(FORMAT_FLOAT8_E5M2_MAX_PATTERN), FORMAT_FLOAT8_E5M2_LARGEST);
    cr_expect_eq(float_from_e4m3fn(FORMAT_FLOAT8_E4M3FN_MAX_PATTERN), FORMAT_FLOAT8_E4M3FN_LARGEST);
}
