/*
 * test_fp4_format.c: the float4_e2m1fn and float8_e8m0fnu codecs (harness/core/half.h:
 * e2m1_from_float, e8m0_from_float and their decoders) and their counting store
 * (harness/ops/cpu/round.c's count_bytes):
 *  - every float32 bit pattern against a rounding written here in double from each format's
 *    rule (format.h states both), and against the runs of tests/references/fp4/fp4_runs.csv
 *    (written by fp4_tables.py beside it): ml_dtypes for float4_e2m1fn, PyTorch and
 *    ml_dtypes for float8_e8m0fnu. The libraries' edges that differ are skipped by name and
 *    tested by value below: ml_dtypes stores a NaN as float4_e2m1fn 0x8 or 0x0, ampscope +6;
 *    ml_dtypes makes float8_e8m0fnu NaN of 0 and of negative values, PyTorch (and ampscope)
 *    2^-127 of 0 and |x|'s scale of a negative x; float32 subnormals between 2^-127 and
 *    1.5 * 2^-127 go to 2^-126 in PyTorch (its rounding of exponent field 0, which has no
 *    implicit bit), to 2^-127 in ml_dtypes;
 *  - tensors of known values against a classification by hand, at every ISA level.
 * The sweeps compare the codec with the libraries on all 2^32 patterns, on every core, and
 * with the double rounding at the ends of each run, which suffices (the argument above
 * make_pieces).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "ops/cpu/cpu.h"
#include "core/format.h"

/* float4_e2m1fn in double: round to nearest even with an exponent floored at 0 (the
 * subnormal 0.5's), beyond 6 (and +-inf) +-6, a NaN +6 */
static double e2m1_reference(float x)
{
    if (isnan(x))
        return 6.0;
    double a = fabs((double)x);
    if (isinf(x))
        return copysign(6.0, x);
    if (a == 0)
        return copysign(0.0, x);
    int e = ilogb(a) < 0 ? 0 : ilogb(a);
    double ulp = ldexp(1.0, e - 1);
    double v = nearbyint(a / ulp) * ulp; /* a / ulp exact; nearbyint ties to even */
    return copysign(v > 6.0 ? 6.0 : v, x);
}

/* float8_e8m0fnu in double, c10's rule: the sign ignored; from 2^-126 up, 2^e or 2^(e+1) for
 * |x| in [2^e, 2^(e+1)), the upper from 1.5 * 2^e on (the tie goes up); below 2^-126 (the
 * float32 subnormals and 0, exponent field 0, no implicit bit) 2^-126 above 2^-127, else
 * 2^-127; inf, NaN and 2^128 NaN. Returns the byte. */
static int e8m0_reference(float x)
{
    if (isnan(x) || isinf(x))
        return 0xff;
    double a = fabs((double)x);
    if (a < 0x1p-126)
        return a > 0x1p-127 ? 1 : 0;
    int e = ilogb(a);
    e += a / ldexp(1.0, e) >= 1.5;
    return e > 127 ? 0xff : e + 127;
}

typedef struct runs {
    uint32_t first[4096];
    uint8_t byte[4096];
    int n;
} runs;

/* the runs of lib's conversion to dst in fp4_runs.csv */
static void read_runs(const char *lib, const char *dst, runs *r)
{
    FILE *fp = fopen("tests/references/fp4/fp4_runs.csv", "r");
    cr_assert_not_null(fp, "tests/references/fp4/fp4_runs.csv");
    char line[128], l[32], d[32];
    r->n = 0;
    while (fgets(line, sizeof line, fp)) {
        unsigned a, b;
        if (sscanf(line, "%31[^,],%31[^,],0x%x,0x%x", l, d, &a, &b) != 4)
            continue; /* the comment and the header */
        if (strcmp(l, lib) || strcmp(d, dst))
            continue;
        cr_assert_lt(r->n, 4096);
        r->first[r->n] = a, r->byte[r->n] = (uint8_t)b;
        r->n++;
    }
    fclose(fp);
    cr_assert_gt(r->n, 8, "%s %s: no runs", lib, dst);
    cr_assert_eq(r->first[0], 0u);
}

/*
 * Pieces: the library's runs cut further where the sign flips and around +-inf, so that on
 * each piece |x| grows with the pattern and x is all finite, all infinite or all NaN. The
 * codec is compared with the piece's byte on every pattern (each piece's patterns in blocks
 * of 2^20 on every core: the exhaustive part, a few nanoseconds a pattern). The double
 * rounding is a monotone function of |x| on a piece (constant on the NaNs): where it gives the
 * piece's byte at both ends it gives it everywhere between, so it is evaluated at the ends
 * only. Together: codec == library == double rounding on every pattern of the piece.
 */
typedef struct piece {
    uint32_t lo, hi; /* inclusive */
    uint8_t byte;
} piece;

static int make_pieces(const runs *r, piece *p, int max)
{
    static const uint32_t cuts[] = {0x7f800000u, 0x7f800001u, 0x80000000u, 0xff800000u,
                                    0xff800001u};
    int n = 0;
    for (int k = 0; k < r->n; k++) {
        uint32_t lo = r->first[k], hi = k + 1 < r->n ? r->first[k + 1] - 1u : UINT32_MAX;
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
            if (cuts[c] > lo && cuts[c] <= hi) {
                cr_assert_lt(n, max);
                p[n++] = (piece){lo, cuts[c] - 1u, r->byte[k]};
                lo = cuts[c];
            }
        cr_assert_lt(n, max);
        p[n++] = (piece){lo, hi, r->byte[k]};
    }
    return n;
}

typedef enum sweep_kind { SWEEP_E2M1, SWEEP_E8M0 } sweep_kind;

static uint8_t codec(sweep_kind k, float x)
{
    return k == SWEEP_E2M1 ? e2m1_from_float(x) : e8m0_from_float(x);
}

/* the double rounding of x agrees with byte b */
static bool reference_gives(sweep_kind k, float x, uint8_t b)
{
    if (k == SWEEP_E8M0)
        return e8m0_reference(x) == b;
    double want = e2m1_reference(x), v = float_from_e2m1(b);
    return v == want && !signbit(v) == !signbit(want);
}

/* patterns of the pieces where the codec differs from the piece's byte (the first in *first),
 * and pieces whose ends the double rounding does not give the byte at */
static void sweep(sweep_kind k, const piece *p, int n, int64_t *bad, uint32_t *first,
                  int64_t *bad_ref)
{
    int64_t b = 0, br = 0;
    uint32_t f = UINT32_MAX;
#pragma omp parallel for schedule(dynamic) reduction(+ : b, br) reduction(min : f)
    for (int i = 0; i < n; i++) {
        br += !reference_gives(k, bits_float(p[i].lo), p[i].byte) ||
              !reference_gives(k, bits_float(p[i].hi), p[i].byte);
        for (uint64_t u = p[i].lo; u <= p[i].hi; u++)
            if (codec(k, bits_float((uint32_t)u)) != p[i].byte) {
                b++;
                f = (uint32_t)u < f ? (uint32_t)u : f;
            }
    }
    *bad = b, *first = f, *bad_ref = br;
}

Test(fp4_format, e2m1_every_float32_against_ml_dtypes_and_double, .timeout = 600)
{
    static runs ml;
    static piece p[4096 + 64];
    read_runs("ml_dtypes", "float4_e2m1fn", &ml);
    int n = make_pieces(&ml, p, 4096 + 64);
    for (int i = 0; i < n; i++)
        if (isnan(bits_float(p[i].lo))) /* ml_dtypes: 0x8 or 0x0; ampscope +6 (format.h) */
            p[i].byte = FORMAT_FLOAT4_E2M1FN_NAN_PATTERN;
    int64_t bad, bad_ref;
    uint32_t first;
    sweep(SWEEP_E2M1, p, n, &bad, &first, &bad_ref);
    cr_expect_eq(bad, 0, "%lld patterns differ from ml_dtypes (first 0x%08x)", (long long)bad,
                 first);
    cr_expect_eq(bad_ref, 0, "%lld runs differ from the double rounding", (long long)bad_ref);
}

/* where ml_dtypes' E8M0 differs from PyTorch's: 0, negative values, float32 subnormals
 * between 2^-127 and 1.5 * 2^-127 (PyTorch 2^-126, ml_dtypes 2^-127) */
static bool e8m0_libraries_differ(uint32_t u)
{
    return u == 0 || u >= 0x80000000u || (u > 0x00400000u && u < 0x00600000u);
}

Test(fp4_format, e8m0_every_float32_against_torch_ml_dtypes_and_double, .timeout = 600)
{
    static runs torch, ml;
    static piece p[4096 + 64];
    read_runs("torch", "float8_e8m0fnu", &torch);
    read_runs("ml_dtypes", "float8_e8m0fnu", &ml);
    int n = make_pieces(&torch, p, 4096 + 64);
    int64_t bad, bad_ref;
    uint32_t first;
    sweep(SWEEP_E8M0, p, n, &bad, &first, &bad_ref);
    cr_expect_eq(bad, 0, "%lld patterns differ from torch (first 0x%08x)", (long long)bad, first);
    cr_expect_eq(bad_ref, 0, "%lld runs differ from the double rounding", (long long)bad_ref);
    /* ml_dtypes against torch's runs, run boundary by run boundary, where they agree */
    int64_t differ = 0;
    for (int i = 0; i < ml.n; i++) {
        uint32_t ends[2] = {ml.first[i], i + 1 < ml.n ? ml.first[i + 1] - 1u : UINT32_MAX};
        for (int e = 0; e < 2; e++)
            if (!e8m0_libraries_differ(ends[e]))
                differ += e8m0_from_float(bits_float(ends[e])) != ml.byte[i];
    }
    for (int i = 0; i < torch.n; i++) /* torch's boundaries, looked up in ml_dtypes' runs */
        for (int e = 0; e < 2; e++) {
            uint32_t u = e ? (i + 1 < torch.n ? torch.first[i + 1] - 1u : UINT32_MAX)
                           : torch.first[i];
            int j = 0;
            while (j + 1 < ml.n && ml.first[j + 1] <= u)
                j++;
            if (!e8m0_libraries_differ(u))
                differ += ml.byte[j] != torch.byte[i];
        }
    cr_expect_eq(differ, 0, "%lld run ends where ml_dtypes and torch differ outside the known edges",
                 (long long)differ);
}

/* the edges each library settles its own way, by value */
Test(fp4_format, edges_by_value)
{
    cr_expect_eq(e2m1_from_float(NAN), 0x7);  /* +6; ml_dtypes 0x8 */
    cr_expect_eq(e2m1_from_float(-NAN), 0x7); /* the NaN's sign is not kept */
    cr_expect_eq(e2m1_from_float(INFINITY), 0x7);
    cr_expect_eq(e2m1_from_float(-INFINITY), 0xf);
    cr_expect_eq(e2m1_from_float(6.999f), 0x7);
    cr_expect_eq(e2m1_from_float(7.0f), 0x7); /* the tie to 8 saturates */
    cr_expect_eq(e2m1_from_float(0.25f), 0x0); /* tie to the even zero */
    cr_expect_eq(e2m1_from_float(0.75f), 0x2); /* tie between 0.5 and 1: the even 1 */
    cr_expect_eq(e2m1_from_float(-0.0f), 0x8);
    cr_expect_eq(e8m0_from_float(0.0f), 0x00); /* 2^-127; ml_dtypes NaN */
    cr_expect_eq(e8m0_from_float(1.5f), 128);   /* the tie goes up to 2 */
    cr_expect_eq(e8m0_from_float(nextafterf(1.5f, 0.0f)), 127);
    cr_expect_eq(e8m0_from_float(-4.0f), 129); /* the magnitude's; ml_dtypes NaN */
    cr_expect_eq(e8m0_from_float(0x1.8p127f), 0xff);
    cr_expect_eq(float_from_e8m0(0), 0x1p-127f);
    cr_expect_eq(float_from_e8m0(0xfe), 0x1p127f);
    cr_expect(isnan(float_from_e8m0(0xff)));
    const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int p = 0; p < 16; p++) {
        float want = p & 8 ? -e2m1_values[p & 7] : e2m1_values[p & 7];
        cr_expect(float_from_e2m1((uint8_t)p) == want && !signbit(float_from_e2m1((uint8_t)p)) ==
                                                              !(p & 8),
                  "pattern 0x%x", p);
        cr_expect_eq(e2m1_from_float(want), p, "round trip of pattern 0x%x", p);
    }
}

/*
 * Known values classified by hand, stored at every ISA level (the values at the start and in
 * the tail of a tensor of 1s). float4_e2m1fn: 0 a zero already; 0.1 and 0.25 (a tie to the
 * even zero) underflow; 0.3 and 0.5 store the subnormal 0.5; 1 and 6 normal; 6.5 rounds to 6
 * but lies beyond it, 7 and -1e6 saturate: three overflows; inf stores 6 (not finite: no
 * overflow); NaN stores 6 and counts as nan. amax 6, least non-zero 0.5.
 * float8_e8m0fnu: 0 and 2^-130 store 2^-127 (no zero, no underflow); 1; 1.5 stores 2; -4
 * stores 4; 3e38 overflows to NaN; inf and NaN NaN. amax 4, least 2^-127.
 */
static void check_known(dtype dt, const float *v, int k, round_counts want)
{
    enum { N = 3 * 64 + 16 };
    cr_assert_leq(k, 16);
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = 1.0f;
    memcpy(x, v, sizeof(float) * (size_t)k);
    memcpy(x + N - k, v, sizeof(float) * (size_t)k);
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (!cpu_isa_runs((cpu_isa)l))
            continue;
        uint8_t dst[N];
        round_stats st;
        round_stats_init(&st);
        cpu_store_at((cpu_isa)l, x, dst, dt, 0, N, &st);
        const char *d = dtype_name(dt), *in = cpu_isa_name((cpu_isa)l);
        expect_store_counts(&st.counts, &want, 2, d, in);
        cr_expect_eq(st.counts.amax, want.amax, "%s %s amax %a", d, in, st.counts.amax);
        cr_expect_eq(st.counts.amin_nonzero, want.amin_nonzero, "%s %s amin %a", d, in,
                     st.counts.amin_nonzero);
        cr_expect_eq(st.numel, N, "%s %s", d, in);
        for (int i = 0; i < N; i++)
            cr_expect_eq(dst[i], dt == DTYPE_FLOAT4_E2M1FN ? e2m1_from_float(x[i])
                                                           : e8m0_from_float(x[i]),
                         "%s %s element %d", d, in, i);
    }
}

Test(fp4_format, e2m1_known_values_counted)
{
    const float v[] = {0.0f, 0.1f, 0.25f, 0.3f, 0.5f, 1.0f, 6.0f, 6.5f, 7.0f, -1e6f, INFINITY, NAN};
    check_known(DTYPE_FLOAT4_E2M1FN, v, (int)(sizeof v / sizeof v[0]),
                (round_counts){3, 2, 2, 3, 1, 6.0f, 0.5f});
}

Test(fp4_format, e8m0_known_values_counted)
{
    const float v[] = {0.0f, 0x1p-130f, 1.0f, 1.5f, -4.0f, 3e38f, INFINITY, NAN};
    check_known(DTYPE_FLOAT8_E8M0FNU, v, (int)(sizeof v / sizeof v[0]),
                (round_counts){0, 0, 0, 1, 3, 4.0f, 0x1p-127f});
}
