/*
 * test_half.c: the float32 <-> float16 / bfloat16 numerics of harness/core/half.h and the
 * bookkeeping built on them (hist_bin, round_tally).
 *
 * Every expectation comes from a source independent of half.h:
 *  - float32 -> float16, all 2^32 inputs, against the x86 F16C instruction VCVTPS2PH
 *    (round to nearest even); NaNs included, since half.h means to match F16C there.
 *  - float32 -> bfloat16, all 2^32 inputs, against a reference written here from the IEEE
 *    definition: the two bfloat16 neighbours by truncation, the exact distances to them in
 *    double, the nearer one, ties to the even mantissa, 2^128 standing for inf.
 *  - half_round (round_to's float16 value, branch-free), all 2^32 inputs, against F16C's
 *    conversion there and back, bit for bit.
 *  - float16 -> float32 on all 65,536 patterns against F16C VCVTPH2PS; bfloat16 -> float32
 *    on all 65,536 patterns against a value built with ldexp from sign / exponent / mantissa
 *    (and the bits against the pattern placed in the high half of a float); round trips.
 *  - round_to() on hand-worked values, each derivation written next to it.
 *  - hist_bin() on hand-worked values, and on all 2^32 inputs against the definition of a
 *    bin: bin k is right iff 2^k <= |x| < 2^(k+1), compared in double with 2^k from ldexp
 *    (i.e. k = floor(log2|x|); frexp gives the expected bin in failure messages).
 *  - round_tally() on a scripted sequence of real float16 / bfloat16 roundings whose
 *    cumulative counts are written out by hand.
 * The exhaustive passes split the 2^32 range across two pthreads. x86 only (F16C, and the
 * bfloat16 union check assumes little-endian).
 *
 * Build (from the repository root):
 *   gcc -std=c11 -O2 -mf16c -pthread -Iharness tests/test_half.c harness/core/stats.c \
 *       harness/core/dtype.c -lcriterion -lm -o /tmp/test_half && /tmp/test_half
 */
#include <criterion/criterion.h>
#include <float.h>
#include <immintrin.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "core/stats.h"

#define N_THREADS 2
#define ALL_PATTERNS (UINT64_C(1) << 32)

/* ---- small helpers, independent of half.h ---- */

static float f32_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

static int is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

/* The bin hist.csv calls "k" (2^k <= |x| < 2^(k+1)) as an index into round_stats.hist. */
static int bin_of_exponent(int k) { return k - HIST_MIN_EXP; }

/* ---- running a check over all 2^32 float32 patterns on N_THREADS threads ---- */

/* What a check found: how many inputs failed, and the first one. */
typedef struct mismatch {
    uint64_t count;
    uint32_t first_input;
    uint32_t first_got;
    uint32_t first_expected;
} mismatch;

static void note_mismatch(mismatch *m, uint32_t input, uint32_t got, uint32_t expected)
{
    if (m->count++ == 0) {
        m->first_input = input;
        m->first_got = got;
        m->first_expected = expected;
    }
}

static void merge_mismatch(mismatch *into, const mismatch *m)
{
    if (m->count && !into->count) {
        into->first_input = m->first_input;
        into->first_got = m->first_got;
        into->first_expected = m->first_expected;
    }
    into->count += m->count;
}

enum { NOT_NAN, IS_NAN }; /* the two kinds of finding of a conversion check */

/* One thread's slice [lo, hi) of the patterns and what its check found (two kinds). */
typedef struct slice {
    uint64_t lo, hi;
    mismatch found[2];
} slice;

typedef void *(*slice_fn)(void *);

/* Runs fn on N_THREADS slices covering all 2^32 patterns; merges the findings into out[2]. */
static void run_all_patterns(slice_fn fn, mismatch out[2])
{
    pthread_t threads[N_THREADS];
    slice slices[N_THREADS];
    memset(slices, 0, sizeof slices);
    for (int t = 0; t < N_THREADS; t++) {
        slices[t].lo = ALL_PATTERNS / N_THREADS * (uint64_t)t;
        slices[t].hi = ALL_PATTERNS / N_THREADS * (uint64_t)(t + 1);
        cr_assert_eq(pthread_create(&threads[t], NULL, fn, &slices[t]), 0);
    }
    memset(out, 0, 2 * sizeof *out);
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(threads[t], NULL);
        for (int k = 0; k < 2; k++)
            merge_mismatch(&out[k], &slices[t].found[k]);
    }
}

static void expect_no_mismatch(const mismatch *m, const char *what)
{
    cr_expect_eq(m->count, 0,
                 "%s: %" PRIu64 " inputs differ, first 0x%08" PRIx32 ": got 0x%" PRIx32
                 ", expected 0x%" PRIx32,
                 what, m->count, m->first_input, m->first_got, m->first_expected);
}

/* ---- 1: float32 -> float16 against F16C ---- */

/* F16C's float16 of the 8 patterns first .. first + 7, built in registers. */
static __m128i f16c_x8(uint32_t first)
{
    const __m128i lo = _mm_add_epi32(_mm_set1_epi32((int)first), _mm_setr_epi32(0, 1, 2, 3));
    const __m128i hi = _mm_add_epi32(lo, _mm_set1_epi32(4));
    const __m256 v = _mm256_set_m128(_mm_castsi128_ps(hi), _mm_castsi128_ps(lo));
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
}

static short half_of(uint32_t bits) { return (short)half_from_float(f32_of(bits)); }

/* half.h's float16 of the same 8 patterns (built in a register: a store of 8 halves then a
 * vector load would stall store forwarding, slowing the pass by a third). */
static __m128i half_from_float_x8(uint32_t first)
{
    return _mm_setr_epi16(half_of(first), half_of(first + 1), half_of(first + 2),
                          half_of(first + 3), half_of(first + 4), half_of(first + 5),
                          half_of(first + 6), half_of(first + 7));
}

static void *check_f16_slice(void *arg)
{
    slice *s = arg;
    for (uint64_t base = s->lo; base < s->hi; base += 8) {
        uint32_t first = (uint32_t)base;
        __m128i want = f16c_x8(first), got = half_from_float_x8(first);
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(got, want)) == 0xffff)
            continue;
        uint16_t got_lanes[8], want_lanes[8]; /* rare: find the lanes that differ */
        _mm_storeu_si128((__m128i *)got_lanes, got);
        _mm_storeu_si128((__m128i *)want_lanes, want);
        for (uint32_t i = 0; i < 8; i++)
            if (got_lanes[i] != want_lanes[i])
                note_mismatch(&s->found[isnan(f32_of(first + i)) ? IS_NAN : NOT_NAN], first + i,
                              got_lanes[i], want_lanes[i]);
    }
    return NULL;
}

Test(half_exhaustive, float16_from_float32, .timeout = 300)
{
    mismatch found[2];
    run_all_patterns(check_f16_slice, found);
    expect_no_mismatch(&found[NOT_NAN], "half_from_float vs F16C (non-NaN inputs)");
    expect_no_mismatch(&found[IS_NAN], "half_from_float vs F16C (NaN inputs)");
}

/* half_round(x) must be F16C's float16 of x widened back by F16C, bit for bit. */
static void *check_half_round_slice(void *arg)
{
    slice *s = arg;
    for (uint64_t base = s->lo; base < s->hi; base += 8) {
        uint32_t first = (uint32_t)base, want[8];
        _mm256_storeu_ps((float *)want, _mm256_cvtph_ps(f16c_x8(first)));
        for (uint32_t i = 0; i < 8; i++) {
            uint32_t got = bits_of(half_round(f32_of(first + i)));
            if (got != want[i])
                note_mismatch(&s->found[isnan(f32_of(first + i)) ? IS_NAN : NOT_NAN], first + i,
                              got, want[i]);
        }
    }
    return NULL;
}

Test(half_exhaustive, half_round_is_the_float16_value, .timeout = 300)
{
    mismatch found[2];
    run_all_patterns(check_half_round_slice, found);
    expect_no_mismatch(&found[NOT_NAN], "half_round vs F16C round trip (non-NaN inputs)");
    expect_no_mismatch(&found[IS_NAN], "half_round vs F16C round trip (NaN inputs)");
}

/* ---- 2: float32 -> bfloat16 against a reference from the IEEE definition ---- */

/* Checks the 2^16 patterns whose high half is `top` (sign, exponent, 7 mantissa bits). */
static void check_bf16_block(uint32_t top, mismatch found[2])
{
    uint32_t sign = top & 0x8000u;
    uint32_t below = top & 0x7fffu; /* |x| truncated toward zero to bfloat16 */
    uint32_t above = below + 1u;    /* the next bfloat16 up */
    float first = f32_of(top << 16);
    if (isnan(first) || isinf(first)) { /* exponent all ones: inf, else NaN */
        for (uint32_t low = 0; low < 0x10000u; low++) {
            uint32_t bits = top << 16 | low;
            float x = f32_of(bits);
            uint16_t got = bf16_from_float(x);
            if (isnan(x) && !is_bf16_nan(got))
                note_mismatch(&found[IS_NAN], bits, got, 0x7fc0u);
            if (isinf(x) && got != (sign | 0x7f80u))
                note_mismatch(&found[NOT_NAN], bits, got, sign | 0x7f80u);
        }
        return;
    }
    /* Past 0x7F7F, the largest finite bfloat16, the next value up is 2^128: rounding to it
     * (inf) is what happens at or past the midpoint 2^128 - 2^119. */
    double v_below = fabs((double)f32_of(below << 16));
    double v_above = below == 0x7f7fu ? ldexp(1.0, 128) : fabs((double)f32_of(above << 16));
    for (uint32_t low = 0; low < 0x10000u; low++) {
        uint32_t bits = top << 16 | low;
        float x = f32_of(bits);
        double v = fabs((double)x);
        /* Exact: v and its neighbours are float32 values at most one binade apart. */
        double d_below = v - v_below, d_above = v_above - v;
        /* The nearer neighbour; on a tie the even one, i.e. `above` when `below` is odd. */
        uint32_t pick =
            below + (uint32_t)(d_above < d_below) + (uint32_t)(d_above == d_below) * (below & 1u);
        uint16_t got = bf16_from_float(x);
        if (got != (sign | pick))
            note_mismatch(&found[NOT_NAN], bits, got, sign | pick);
    }
}

static void *check_bf16_slice(void *arg)
{
    slice *s = arg;
    for (uint64_t top = s->lo >> 16; top < s->hi >> 16; top++)
        check_bf16_block((uint32_t)top, s->found);
    return NULL;
}

Test(half_exhaustive, bfloat16_from_float32, .timeout = 300)
{
    mismatch found[2];
    run_all_patterns(check_bf16_slice, found);
    expect_no_mismatch(&found[NOT_NAN], "bf16_from_float vs reference (non-NaN inputs)");
    expect_no_mismatch(&found[IS_NAN], "bf16_from_float of a NaN is not a NaN");
    /* c10::BFloat16 gives exactly 0x7FC0 for every NaN; spot-check that too. */
    cr_expect_eq(bf16_from_float(f32_of(0x7f800001u)), 0x7fc0u);
    cr_expect_eq(bf16_from_float(f32_of(0xffffffffu)), 0x7fc0u);
    cr_expect_eq(bf16_from_float(NAN), 0x7fc0u);
}

/* ---- 3: all 16-bit patterns back to float32, and round trips ---- */

Test(half_all_16bit, float16_to_float32_and_round_trip)
{
    mismatch widen = {0}, nan_widen = {0}, round_trip = {0};
    for (uint32_t p = 0; p < 0x10000u; p++) {
        uint16_t h = (uint16_t)p;
        float got = float_from_half(h);
        float want = _cvtsh_ss(h);
        if (is_f16_nan(h)) {
            /* Both NaN with the same payload; F16C also sets the quiet bit of a signalling
             * NaN, which float_from_half leaves clear, so compare with it set. Back to
             * float16 the payload stays and the NaN is quieted (0x0200). */
            if (!isnan(got) || (bits_of(got) | 0x00400000u) != bits_of(want))
                note_mismatch(&nan_widen, p, bits_of(got), bits_of(want));
            if (half_from_float(got) != (h | 0x0200u))
                note_mismatch(&round_trip, p, half_from_float(got), h | 0x0200u);
            continue;
        }
        if (bits_of(got) != bits_of(want))
            note_mismatch(&widen, p, bits_of(got), bits_of(want));
        if (half_from_float(got) != h)
            note_mismatch(&round_trip, p, half_from_float(got), h);
    }
    expect_no_mismatch(&widen, "float_from_half vs F16C");
    expect_no_mismatch(&nan_widen, "float_from_half of a NaN pattern vs F16C, quiet bit aside");
    expect_no_mismatch(&round_trip, "half_from_float(float_from_half(h)) != h (NaN: h quieted)");
}

/* The value of a bfloat16 pattern from its fields: (-1)^s * 1.m * 2^(e-127), or
 * 0.m * 2^-126 when e == 0; mantissa m has 7 bits. NAN for a NaN pattern. */
static double bf16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;
    if (e == 0xff)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, -126 - 7);
    else
        v = ldexp((double)(128 + m), e - 127 - 7);
    return sign ? -v : v;
}

/* The float32 whose high 16 bits are h and low 16 bits zero (little-endian layout). */
static float bf16_bits_as_float(uint16_t h)
{
    union {
        float f;
        uint16_t halves[2];
    } u = {.halves = {0, h}};
    return u.f;
}

Test(half_all_16bit, bfloat16_to_float32_and_round_trip)
{
    mismatch bits = {0}, value = {0}, nan_widen = {0}, round_trip = {0};
    for (uint32_t p = 0; p < 0x10000u; p++) {
        uint16_t h = (uint16_t)p;
        float got = float_from_bf16(h);
        if (bits_of(got) != bits_of(bf16_bits_as_float(h)))
            note_mismatch(&bits, p, bits_of(got), bits_of(bf16_bits_as_float(h)));
        if (is_bf16_nan(h)) {
            if (!isnan(got))
                note_mismatch(&nan_widen, p, bits_of(got), 0x7fc00000u);
            continue;
        }
        float want = (float)bf16_value(h); /* exact: the value has 8 significant bits */
        if (bits_of(got) != bits_of(want))
            note_mismatch(&value, p, bits_of(got), bits_of(want));
        if (bf16_from_float(got) != h)
            note_mismatch(&round_trip, p, bf16_from_float(got), h);
    }
    expect_no_mismatch(&bits, "float_from_bf16 vs pattern in the high half");
    expect_no_mismatch(&value, "float_from_bf16 vs ldexp value");
    expect_no_mismatch(&nan_widen, "float_from_bf16 of a NaN pattern is not NaN");
    expect_no_mismatch(&round_trip, "bf16_from_float(float_from_bf16(h)) != h");
}

/* ---- 4: round_to on hand-worked values ---- */

static void expect_rounds(float x, dtype dt, float want)
{
    float got = round_to(x, dt);
    cr_expect(bits_of(got) == bits_of(want), "round_to(%a, %s) = %a, expected %a", (double)x,
              dtype_name(dt), (double)got, (double)want);
}

Test(half_round_to, float16_hand_worked)
{
    const dtype f16 = DTYPE_FLOAT16;
    /* Largest finite float16 is (2 - 2^-10) * 2^15 = 65504; the step there is 2^(15-10) = 32,
     * so the midpoint to the next value 65536 (not representable: inf) is 65520. */
    expect_rounds(65519.0f, f16, 65504.0f); /* below the midpoint */
    expect_rounds(65520.0f, f16, INFINITY); /* the midpoint: tie, to the even 65536 -> inf */
    expect_rounds(-65520.0f, f16, -INFINITY);
    expect_rounds(65504.0f, f16, 65504.0f);
    expect_rounds(1e30f, f16, INFINITY);
    /* Smallest subnormal is 2^-24; 2^-25 is halfway between 0 and 2^-24: tie, to even 0. */
    expect_rounds(ldexpf(1.0f, -25), f16, 0.0f);
    expect_rounds(-ldexpf(1.0f, -25), f16, -0.0f); /* keeps the sign */
    /* Just above the midpoint goes up to 2^-24. */
    expect_rounds(ldexpf(1.0001f, -25), f16, ldexpf(1.0f, -24));
    expect_rounds(ldexpf(1.0f, -24), f16, ldexpf(1.0f, -24));
    /* 1.5 * 2^-24 is halfway between 1 and 2 units of 2^-24: to even, 2 * 2^-24 = 2^-23;
     * 2.5 * 2^-24 is halfway between 2 and 3 units: to even, 2^-23. */
    expect_rounds(ldexpf(1.5f, -24), f16, ldexpf(1.0f, -23));
    expect_rounds(ldexpf(2.5f, -24), f16, ldexpf(1.0f, -23));
    /* 1e-6 / 2^-24 = 16.777...: the nearest subnormal is 17 * 2^-24. */
    expect_rounds(1e-6f, f16, ldexpf(17.0f, -24));
    /* 2^-14 - 2^-25 = 1023.5 units of 2^-24: tie between 1023 (odd) and 1024 (even) units,
     * so it becomes 1024 * 2^-24 = 2^-14, the smallest normal. */
    expect_rounds(ldexpf(1.0f, -14) - ldexpf(1.0f, -25), f16, ldexpf(1.0f, -14));
    /* Near 1 the step is 2^-10. 1 + 2^-11 is halfway between 1 (mantissa 0, even) and
     * 1 + 2^-10 (mantissa 1): to 1. 1 + 3 * 2^-11 is halfway between mantissas 1 and 2: to 2,
     * i.e. 1 + 2^-9. */
    expect_rounds(1.0f + ldexpf(1.0f, -11), f16, 1.0f);
    expect_rounds(1.0f + ldexpf(3.0f, -11), f16, 1.0f + ldexpf(1.0f, -9));
    /* 0.1f = 0x3DCCCCCD = 1.6 * 2^-4; its mantissa 0x4CCCCD keeps its top 10 bits 0x266 = 614
     * and drops 0xCCD < 0x1000 (half a step): down, to (1 + 614/1024) * 2^-4 = 0.0999755859375. */
    expect_rounds(0.1f, f16, 0.0999755859375f);
    expect_rounds(-0.0f, f16, -0.0f);
    expect_rounds(INFINITY, f16, INFINITY);
    cr_expect(isnan(round_to(NAN, f16)));
}

Test(half_round_to, bfloat16_hand_worked)
{
    const dtype bf16 = DTYPE_BFLOAT16;
    /* bfloat16 keeps 7 mantissa bits: near 1 the step is 2^-7. 1 + 2^-8 is halfway between 1
     * (even) and 1 + 2^-7: to 1. 1 + 3 * 2^-8 is halfway between mantissas 1 and 2: to 2,
     * i.e. 1 + 2^-6. */
    expect_rounds(1.0f + ldexpf(1.0f, -8), bf16, 1.0f);
    expect_rounds(1.0f + ldexpf(3.0f, -8), bf16, 1.0f + ldexpf(1.0f, -6));
    /* Largest finite bfloat16 is 0x7F7F = (2 - 2^-7) * 2^127 = 255 * 2^120 = 3.38953e38; the
     * step there is 2^120 and the one below is 254 * 2^120 = 3.37624e38. 3.3895e38 is nearest
     * to 255 * 2^120 and stays finite. */
    expect_rounds(3.3895e38f, bf16, ldexpf(255.0f, 120));
    /* The midpoint to 2^128 is 2^128 - 2^119 = 511 * 2^119: tie, mantissa 0x7F is odd, so it
     * goes to 2^128: inf. One float32 ulp below it (2^104) stays at 255 * 2^120. FLT_MAX
     * (2^128 - 2^104) is past the midpoint: inf. */
    expect_rounds(ldexpf(511.0f, 119), bf16, INFINITY);
    expect_rounds(ldexpf(511.0f, 119) - ldexpf(1.0f, 104), bf16, ldexpf(255.0f, 120));
    expect_rounds(FLT_MAX, bf16, INFINITY);
    expect_rounds(-FLT_MAX, bf16, -INFINITY);
    /* Subnormals: the smallest bfloat16 subnormal is 2^-126 * 2^-7 = 2^-133. 2^-134 is the
     * tie between 0 and 2^-133: to 0. 1.5 * 2^-133 is the tie between 1 and 2 units: 2^-132.
     * The smallest float32 subnormal 2^-149 is far below half a unit: 0. */
    expect_rounds(ldexpf(1.0f, -133), bf16, ldexpf(1.0f, -133));
    expect_rounds(ldexpf(1.0f, -134), bf16, 0.0f);
    expect_rounds(ldexpf(1.5f, -133), bf16, ldexpf(1.0f, -132));
    expect_rounds(ldexpf(1.0f, -149), bf16, 0.0f);
    /* 0.1f = 0x3DCCCCCD: the dropped low half 0xCCCD > 0x8000, so up to 0x3DCD =
     * (1 + 77/128) * 2^-4 = 0.10009765625. */
    expect_rounds(0.1f, bf16, 0.10009765625f);
    /* 65520 = 0xFFF * 2^4 needs 12 bits; 8 are kept, the step at 2^15 is 2^8 = 256, and
     * 65520 is 16 below 65536: up to 65536, which bfloat16 represents. */
    expect_rounds(65520.0f, bf16, 65536.0f);
    expect_rounds(-0.0f, bf16, -0.0f);
    expect_rounds(-INFINITY, bf16, -INFINITY);
    cr_expect(isnan(round_to(NAN, bf16)));
}

Test(half_round_to, float32_is_identity)
{
    const float values[] = {0.1f, 65520.0f, FLT_MAX, ldexpf(1.0f, -149), -0.0f, INFINITY};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        expect_rounds(values[i], DTYPE_FLOAT32, values[i]);
    cr_expect(isnan(round_to(NAN, DTYPE_FLOAT32)));
}

/* ---- 5a: hist_bin on all 2^32 patterns, against the definition of its bins ---- */

/* 2^k for k = HIST_MIN_EXP .. HIST_MAX_EXP + 1, as doubles (from ldexp, all exact). */
static double pow2_table[HIST_MAX_EXP - HIST_MIN_EXP + 2];

static void fill_pow2_table(void)
{
    for (int k = HIST_MIN_EXP; k <= HIST_MAX_EXP + 1; k++)
        pow2_table[k - HIST_MIN_EXP] = ldexp(1.0, k);
}

/* The bin hist_bin must give a zero, an infinity or a NaN. */
static int special_bin(float x) { return isnan(x) ? HIST_NAN : isinf(x) ? HIST_INF : HIST_ZERO; }

/* Whether `bin` is the right bin for x: for finite non-zero x the k with 2^k <= |x| < 2^(k+1)
 * (k = floor(log2|x|)), compared in double, where float32 subnormals are ordinary values. */
static int hist_bin_is_right(float x, int bin)
{
    double v = fabs((double)x);
    if (v > 0.0 && v < INFINITY) /* false for NaN */
        return bin >= 0 && bin <= HIST_MAX_EXP - HIST_MIN_EXP && pow2_table[bin] <= v &&
               v < pow2_table[bin + 1];
    return bin == special_bin(x);
}

/* floor(log2|x|) from frexp (|x| = m * 2^e with m in [0.5, 1)): e - 1. Used for the expected
 * bin in a failure message only: a libm call per pattern costs more than the whole check. */
static int floor_log2_frexp(float x)
{
    int e;
    frexp(fabs((double)x), &e);
    return e - 1;
}

static void *check_hist_slice(void *arg)
{
    slice *s = arg;
    for (uint64_t i = s->lo; i < s->hi; i++) {
        float x = f32_of((uint32_t)i);
        int bin = hist_bin(x);
        if (!hist_bin_is_right(x, bin))
            note_mismatch(&s->found[0], (uint32_t)i, (uint32_t)bin,
                          (uint32_t)bin_of_exponent(floor_log2_frexp(x)));
    }
    return NULL;
}

Test(half_exhaustive, hist_bin, .timeout = 300)
{
    fill_pow2_table();
    mismatch found[2];
    run_all_patterns(check_hist_slice, found);
    expect_no_mismatch(&found[0], "hist_bin: |x| outside [2^k, 2^(k+1)) (expected: frexp's)");
}

/* ---- 5b: hist_bin on hand-worked values ---- */

Test(half_hist_bin, hand_worked)
{
    cr_expect_eq(hist_bin(1.0f), bin_of_exponent(0));                /* 2^0 <= 1 < 2^1 */
    cr_expect_eq(hist_bin(-1.5f), bin_of_exponent(0));               /* sign ignored */
    cr_expect_eq(hist_bin(0.75f), bin_of_exponent(-1));              /* 2^-1 <= 0.75 < 1 */
    cr_expect_eq(hist_bin(ldexpf(1.0f, -24)), bin_of_exponent(-24)); /* exactly 2^-24 */
    /* 3 * 2^-149 = 1.5 * 2^-148, a float32 subnormal: bin -148. */
    cr_expect_eq(hist_bin(ldexpf(3.0f, -149)), bin_of_exponent(-148));
    cr_expect_eq(hist_bin(f32_of(0x00000001u)), bin_of_exponent(-149)); /* smallest subnormal */
    /* largest subnormal (2^23 - 1) * 2^-149 = (2 - 2^-22) * 2^-127: bin -127; FLT_MIN -126 */
    cr_expect_eq(hist_bin(f32_of(0x007fffffu)), bin_of_exponent(-127));
    cr_expect_eq(hist_bin(FLT_MIN), bin_of_exponent(-126));
    cr_expect_eq(hist_bin(FLT_MAX), bin_of_exponent(127)); /* (2 - 2^-23) * 2^127 */
    cr_expect_eq(bin_of_exponent(HIST_MIN_EXP), 0);
    cr_expect_eq(bin_of_exponent(HIST_MAX_EXP), HIST_ZERO - 1);
    cr_expect_eq(hist_bin(0.0f), HIST_ZERO);
    cr_expect_eq(hist_bin(-0.0f), HIST_ZERO);
    cr_expect_eq(hist_bin(INFINITY), HIST_INF);
    cr_expect_eq(hist_bin(-INFINITY), HIST_INF);
    cr_expect_eq(hist_bin(NAN), HIST_NAN);
    cr_expect_eq(hist_bin(f32_of(0x7f800001u)), HIST_NAN); /* signalling */
    cr_expect_eq(hist_bin(f32_of(0xffc00000u)), HIST_NAN); /* negative quiet */
}

/* ---- 6: round_tally on a scripted sequence ---- */

/* One rounding and the cumulative counts expected after it. */
typedef struct tally_step {
    float pre;
    int64_t zeros, underflow, subnormal, overflow, nan;
    float amax, amin_nonzero;
} tally_step;

static void run_tally_script(const tally_step *steps, size_t n, dtype dt)
{
    round_counts c;
    round_counts_init(&c);
    cr_expect_eq(c.amax, 0.0f);
    cr_expect(isinf(c.amin_nonzero) && c.amin_nonzero > 0);
    for (size_t i = 0; i < n; i++) {
        const tally_step *s = &steps[i];
        round_tally(&c, s->pre, round_to(s->pre, dt), dtype_min_normal(dt));
        cr_expect(c.zeros == s->zeros && c.underflow == s->underflow &&
                      c.subnormal == s->subnormal && c.overflow == s->overflow && c.nan == s->nan,
                  "%s step %zu (pre %a): counts z%" PRId64 " u%" PRId64 " s%" PRId64 " o%" PRId64
                  " n%" PRId64 ", expected z%" PRId64 " u%" PRId64 " s%" PRId64 " o%" PRId64
                  " n%" PRId64,
                  dtype_name(dt), i, (double)s->pre, c.zeros, c.underflow, c.subnormal, c.overflow,
                  c.nan, s->zeros, s->underflow, s->subnormal, s->overflow, s->nan);
        cr_expect(c.amax == s->amax && c.amin_nonzero == s->amin_nonzero,
                  "%s step %zu (pre %a): amax %a amin %a, expected %a %a", dtype_name(dt), i,
                  (double)s->pre, (double)c.amax, (double)c.amin_nonzero, (double)s->amax,
                  (double)s->amin_nonzero);
    }
}

Test(half_round_tally, float16_script)
{
    const float sub17 = ldexpf(17.0f, -24); /* 1e-6 in float16: 16.78 units of 2^-24 -> 17 */
    const float tiny = ldexpf(1.0f, -24);
    /* columns:      pre      zeros undfl subn  ovfl  nan   amax      amin_nonzero */
    const tally_step steps[] = {
        {1e-8f, 1, 1, 0, 0, 0, 0.0f, INFINITY},          /* < 2^-25 (2.98e-8): 0, underflow */
        {1e-6f, 1, 1, 1, 0, 0, sub17, sub17},            /* a subnormal */
        {1.5f, 1, 1, 1, 0, 0, 1.5f, sub17},              /* normal, exact */
        {-3e-5f, 1, 1, 2, 0, 0, 1.5f, sub17},            /* 503.3 units of 2^-24: subnormal 503 */
        {ldexpf(1.0f, -14), 1, 1, 2, 0, 0, 1.5f, sub17}, /* smallest normal: not subnormal */
        {0.0f, 2, 1, 2, 0, 0, 1.5f, sub17},              /* zero, but not an underflow */
        {-0.0f, 3, 1, 2, 0, 0, 1.5f, sub17},
        {-1e-8f, 4, 2, 2, 0, 0, 1.5f, sub17},            /* -0, underflow */
        {ldexpf(1.0f, -25), 5, 3, 2, 0, 0, 1.5f, sub17}, /* tie to even 0: underflow */
        {3e-8f, 5, 3, 3, 0, 0, 1.5f, tiny},              /* just above 2^-25: 2^-24 */
        {65519.0f, 5, 3, 3, 0, 0, 65504.0f, tiny},       /* 65504, no overflow */
        {NAN, 5, 3, 3, 0, 1, 65504.0f, tiny},            /* NaN: only the nan count */
        {-NAN, 5, 3, 3, 0, 2, 65504.0f, tiny},
        {70000.0f, 5, 3, 3, 1, 2, INFINITY, tiny},  /* overflow; amax is over non-NaN: inf */
        {-65520.0f, 5, 3, 3, 2, 2, INFINITY, tiny}, /* the tie to -inf is an overflow too */
        {INFINITY, 5, 3, 3, 2, 2, INFINITY, tiny},  /* inf stays inf: not an overflow */
        {-INFINITY, 5, 3, 3, 2, 2, INFINITY, tiny},
    };
    run_tally_script(steps, sizeof steps / sizeof *steps, DTYPE_FLOAT16);
}

Test(half_round_tally, bfloat16_script)
{
    const float sub1e39 = f32_of(0x000b0000u); /* see below */
    /* columns:      pre      zeros undfl subn  ovfl  nan   amax      amin_nonzero */
    const tally_step steps[] = {
        {1.0f, 0, 0, 0, 0, 0, 1.0f, 1.0f},
        /* 1e-39 = 0x000AE398 (float32 subnormal); bfloat16 keeps 0x000A and the dropped
         * 0xE398 > 0x8000 rounds up: 0x000B, i.e. 11 * 2^-133, below FLT_MIN: subnormal. */
        {1e-39f, 0, 0, 1, 0, 0, 1.0f, sub1e39},
        {ldexpf(1.0f, -149), 1, 1, 1, 0, 0, 1.0f, sub1e39}, /* < 2^-134: 0, underflow */
        {1e-8f, 1, 1, 1, 0, 0, 1.0f, sub1e39},              /* tiny for float16, normal here */
        {70000.0f, 1, 1, 1, 0, 0, 70144.0f, sub1e39},       /* 136.7 steps of 2^9 -> 137 */
        {3.4e38f, 1, 1, 1, 1, 0, INFINITY, sub1e39},        /* >= 2^128 - 2^119: overflow */
        {NAN, 1, 1, 1, 1, 1, INFINITY, sub1e39},
    };
    cr_expect_eq(bits_of(1e-39f), 0x000ae398u);
    run_tally_script(steps, sizeof steps / sizeof *steps, DTYPE_BFLOAT16);
}
