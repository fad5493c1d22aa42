/*
 * half.h: scalar float16 / bfloat16 rounding and the per-value bookkeeping of a rounding,
 * shared by the CPU backend and the CUDA kernels (AMP_HD is __host__ __device__ under nvcc),
 * so the exhaustive tests run here cover the GPU's numerics too.
 *
 * Conventions:
 *  - float16 is IEEE binary16, bfloat16 the top half of a float32; both are stored as their
 *    uint16_t bit patterns. Conversion from float32 rounds to nearest, ties to even, keeps
 *    subnormals (no flush to zero), overflows to inf. NaN stays NaN: float16 keeps the
 *    payload's top bits and sets the quiet bit (as x86 F16C does); bfloat16 gives 0x7FC0
 *    (as c10::BFloat16's round_to_nearest_even does).
 *  - Everything is done with integer operations, so the result does not depend on the
 *    floating-point environment (FTZ, fast-math, rounding mode).
 *  - A "rounding" turns a float32 value `pre` into the value `post` a tensor of dtype dt
 *    stores. round_tally() classifies one (pre, post) pair into the counts that tensors.csv
 *    reports and the log2|pre| histogram bin that hist.csv reports.
 *  - The formats' limits and patterns are format.h's macros. A dtype that is not a number
 *    format (int64) reaching a codec is a caller's bug: not_a_format(). The per-element
 *    codecs (round_to, load_as_float, store_from_float) test the dtype with ifs, not a
 *    switch: loops that call them with a dtype known only at run time are then unswitched
 *    by GCC (12 unswitches on ifs only) and vectorise; a static_assert on DTYPE_COUNT stands
 *    in for -Wswitch there. The other dispatches are switches without a default.
 */
#ifndef AMPSCOPE_HALF_H
#define AMPSCOPE_HALF_H

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "format.h"

#ifdef __CUDACC__
#define AMP_HD __host__ __device__
#else
#define AMP_HD
#endif

/* A codec was asked for dtype dt, which is not a number format (int64): says which function
 * on the host, traps on the device; never returns. */
static inline AMP_HD float not_a_format(const char *fn, dtype dt)
{
#ifdef __CUDA_ARCH__
    (void)fn;
    (void)dt;
    __trap();
#else
    fprintf(stderr, "ampscope: %s: dtype %s is not a number format\n", fn, dtype_name(dt));
    abort();
#endif
    return 0.0f;
}

static inline AMP_HD uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline AMP_HD float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline AMP_HD uint16_t half_from_float(float f)
{
    uint32_t x = float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet it, keep the payload's top 10 bits */
        return (uint16_t)(sign | FORMAT_FLOAT16_NAN_PATTERN | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 (and inf): inf */
        return (uint16_t)(sign | FORMAT_FLOAT16_INF_PATTERN);
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal float16; rebias and round at bit 13 */
        uint32_t odd = (ax >> 13) & 1u;
        ax += 0xc8000fffu + odd;
        return (uint16_t)(sign | (ax >> 13));
    }
    if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 is a tie, to even 0) */
        return sign;
    /* subnormal float16: value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e) */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

static inline AMP_HD float float_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f)
        return bits_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float32 */
        float v = (float)m * FORMAT_FLOAT16_SMALLEST_SUBNORMAL;
        return sign ? -v : v;
    }
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

static inline AMP_HD uint16_t bf16_from_float(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return FORMAT_BFLOAT16_NAN_PATTERN;
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline AMP_HD float float_from_bf16(uint16_t h) { return bits_float((uint32_t)h << 16); }

/*
 * float32 to a float8 format of `man` mantissa bits and bias `bias`, round to nearest even,
 * subnormals kept, as c10/util/Float8_e4m3fn.h and Float8_e5m2.h convert (PyTorch's
 * c10::Float8_e4m3fn(float) and c10::Float8_e5m2(float)): a NaN gives nan (the sign kept),
 * |x| above the float32 pattern overflow_above gives overflow (e4m3fn: NaN, e5m2: inf).
 * Written from the layout, not from c10's bit tricks; tests/test_fp8_format.c checks every
 * float32 against a third formulation and every float16 and bfloat16 against ml_dtypes.
 */
static inline AMP_HD uint8_t fp8_from_float(float f, int man, int bias, uint32_t overflow_above,
                                            uint8_t overflow, uint8_t nan)
{
    uint32_t x = float_bits(f);
    uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint8_t)(sign | nan);
    if (ax > overflow_above)
        return (uint8_t)(sign | overflow);
    int shift = 23 - man;
    if (ax >= (uint32_t)(128 - bias) << 23) { /* normal: rebias, round at bit `shift` */
        uint32_t odd = (ax >> shift) & 1u;
        ax += ((uint32_t)(bias - 127) << 23) + (1u << (shift - 1)) - 1u + odd;
        return (uint8_t)(sign | (ax >> shift));
    }
    if (ax <= (uint32_t)(127 - bias - man) << 23) /* <= half the smallest subnormal: zero */
        return sign;
    /* subnormal: value = m * 2^(e-150), in units of 2^(1-bias-man) that is m >> sh */
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t sh = (uint32_t)(151 - bias - man) - e;
    uint32_t q = m >> sh;
    uint32_t rem = m & ((1u << sh) - 1u);
    uint32_t halfway = 1u << (sh - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u)))
        q++;
    return (uint8_t)(sign | q);
}

static inline AMP_HD uint8_t e4m3fn_from_float(float f)
{
    return fp8_from_float(f, FORMAT_FLOAT8_E4M3FN_MAN_BITS, FORMAT_FLOAT8_E4M3FN_BIAS,
                          FORMAT_FLOAT8_E4M3FN_OVERFLOW_ABOVE, FORMAT_FLOAT8_E4M3FN_NAN_PATTERN,
                          FORMAT_FLOAT8_E4M3FN_NAN_PATTERN);
}

static inline AMP_HD uint8_t e5m2_from_float(float f)
{
    return fp8_from_float(f, FORMAT_FLOAT8_E5M2_MAN_BITS, FORMAT_FLOAT8_E5M2_BIAS,
                          FORMAT_FLOAT8_E5M2_OVERFLOW_ABOVE, FORMAT_FLOAT8_E5M2_INF_PATTERN,
                          FORMAT_FLOAT8_E5M2_NAN_PATTERN);
}

static inline AMP_HD float float_from_e4m3fn(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t e = (b >> 3) & 0xfu, m = b & 0x7u;
    if ((b & 0x7fu) == FORMAT_FLOAT8_E4M3FN_NAN_PATTERN)
        return bits_float(sign | 0x7fc00000u);
    if (e == 0) { /* zero or subnormal: m * 2^-9, exact */
        float v = (float)m * FORMAT_FLOAT8_E4M3FN_SMALLEST_SUBNORMAL;
        return sign ? -v : v;
    }
    return bits_float(sign | ((e + 120u) << 23) | (m << 20));
}

/* e5m2 is float16's top byte: every e5m2 value is a float16 */
static inline AMP_HD float float_from_e5m2(uint8_t b) { return float_from_half((uint16_t)(b << 8)); }

/*
 * float32 to float4_e2m1fn (format.h): fp8_from_float's rounding with 1 mantissa bit and bias
 * 1 (round to nearest even, subnormal 0.5 kept), |x| from 7 up and +-inf saturated to +-6
 * as cvt.rn.satfinite does, the sign moved to bit 3; a NaN stores NAN_PATTERN (+6).
 */
static inline AMP_HD uint8_t e2m1_from_float(float f)
{
    if ((float_bits(f) & 0x7fffffffu) > 0x7f800000u)
        return FORMAT_FLOAT4_E2M1FN_NAN_PATTERN;
    uint8_t b = fp8_from_float(f, FORMAT_FLOAT4_E2M1FN_MAN_BITS, FORMAT_FLOAT4_E2M1FN_BIAS,
                               FORMAT_FLOAT4_E2M1FN_OVERFLOW_ABOVE,
                               FORMAT_FLOAT4_E2M1FN_MAX_PATTERN, FORMAT_FLOAT4_E2M1FN_MAX_PATTERN);
    return (uint8_t)((b & FORMAT_FLOAT4_E2M1FN_MAG_MASK) | ((b >> 4) & 0x8u));
}

/* float4_e2m1fn's eight magnitudes: 0, 0.5 (the subnormal), then 1.M * 2^(E - 1) */
static inline AMP_HD float float_from_e2m1(uint8_t b)
{
    uint32_t e = (b >> 1) & 0x3u, m = b & 0x1u;
    float v = e == 0 ? (float)m * FORMAT_FLOAT4_E2M1FN_SMALLEST_SUBNORMAL
                     : bits_float(((e + 126u) << 23) | (m << 22));
    return (b & 0x8u) ? -v : v;
}

/*
 * float32 to float8_e8m0fnu as c10/util/Float8_e8m0fnu-inl.h's fp8e8m0_from_fp32_value
 * (format.h): the biased exponent field of |x| kept, plus one when the guard bit (bit 22) is
 * set and the round or sticky bits (21..0) are, or when the implicit bit (the field non-zero)
 * is: round to nearest with the tie 1.5 * 2^e going up to 2^(e+1). inf and NaN give NaN, and
 * so does rounding up from field 254.
 */
static inline AMP_HD uint8_t e8m0_from_float(float f)
{
    uint32_t x = float_bits(f), e = (x >> 23) & 0xffu;
    if (e == 0xffu)
        return FORMAT_FLOAT8_E8M0FNU_NAN_PATTERN;
    uint32_t guard = (x >> 22) & 1u, rest = (x & 0x3fffffu) != 0, lsb = e != 0;
    return (uint8_t)(e + (guard & (rest | lsb)));
}

/* 2^(b - 127); 0xff NaN; 0x00 is 2^-127, a float32 subnormal */
static inline AMP_HD float float_from_e8m0(uint8_t b)
{
    if (b == FORMAT_FLOAT8_E8M0FNU_NAN_PATTERN)
        return bits_float(0x7fc00000u);
    return bits_float(b ? (uint32_t)b << 23 : 0x00400000u);
}

/*
 * float_from_half(half_from_float(x)) without a branch, so that loops over it vectorise:
 * x plus and minus a power of two c whose float32 ulp is float16's ulp at x's magnitude
 * (2^-24 below 2^-14, else 2^(e-10)), so that float32's own round to nearest even rounds
 * to float16's precision (C11 without -ffast-math keeps the two operations apart);
 * infinite from 65520 up; a NaN quieted and cut to float16's ten payload bits, as F16C does.
 * tests/test_half.c checks all 2^32 inputs against F16C.
 */
static inline AMP_HD float half_round(float x)
{
    uint32_t b = float_bits(x), a = b & 0x7fffffffu;
    float c = bits_float(a < 0x38800000u ? 0x3f000000u : (a & 0x7f800000u) + (13u << 23));
    uint32_t r = float_bits((bits_float(a) + c) - c);
    r = a >= 0x477ff000u ? 0x7f800000u : r;
    r = a > 0x7f800000u ? (a | 0x00400000u) & 0xffffe000u : r;
    return bits_float((b & 0x80000000u) | r);
}

/* ---- the per-element codecs: one branch per number format (see the top of the file) ---- */
static_assert(DTYPE_COUNT == 8, "a new dtype: give round_to, load_as_float and store_from_float "
                                "its branch, then count it here");

/* The value a float32 `x` becomes when stored in dt and read back (dt float32: x itself). */
static inline AMP_HD float round_to(float x, dtype dt)
{
    if (dt == DTYPE_FLOAT16)
        return half_round(x);
    if (dt == DTYPE_BFLOAT16)
        return float_from_bf16(bf16_from_float(x));
    if (dt == DTYPE_FLOAT32)
        return x;
    if (dt == DTYPE_FLOAT8_E4M3FN)
        return float_from_e4m3fn(e4m3fn_from_float(x));
    if (dt == DTYPE_FLOAT8_E5M2)
        return float_from_e5m2(e5m2_from_float(x));
    if (dt == DTYPE_FLOAT4_E2M1FN)
        return float_from_e2m1(e2m1_from_float(x));
    if (dt == DTYPE_FLOAT8_E8M0FNU)
        return float_from_e8m0(e8m0_from_float(x));
    return not_a_format("round_to", dt);
}

/* The value of a stored bit pattern p of dtype dt (16- and 8-bit formats in its low bits). */
static inline AMP_HD float float_from_pattern(uint32_t p, dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return bits_float(p);
    case DTYPE_FLOAT16:
        return float_from_half((uint16_t)p);
    case DTYPE_BFLOAT16:
        return float_from_bf16((uint16_t)p);
    case DTYPE_FLOAT8_E4M3FN:
        return float_from_e4m3fn((uint8_t)p);
    case DTYPE_FLOAT8_E5M2:
        return float_from_e5m2((uint8_t)p);
    case DTYPE_FLOAT4_E2M1FN:
        return float_from_e2m1((uint8_t)p);
    case DTYPE_FLOAT8_E8M0FNU:
        return float_from_e8m0((uint8_t)p);
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    return not_a_format("float_from_pattern", dt);
}

/* Element i of a buffer of dtype dt (a number format), as float32 (exact). */
static inline AMP_HD float load_as_float(const void *p, dtype dt, int64_t i)
{
    if (dt == DTYPE_FLOAT16)
        return float_from_half(((const uint16_t *)p)[i]);
    if (dt == DTYPE_BFLOAT16)
        return float_from_bf16(((const uint16_t *)p)[i]);
    if (dt == DTYPE_FLOAT32)
        return ((const float *)p)[i];
    if (dt == DTYPE_FLOAT8_E4M3FN)
        return float_from_e4m3fn(((const uint8_t *)p)[i]);
    if (dt == DTYPE_FLOAT8_E5M2)
        return float_from_e5m2(((const uint8_t *)p)[i]);
    if (dt == DTYPE_FLOAT4_E2M1FN)
        return float_from_e2m1(((const uint8_t *)p)[i]);
    if (dt == DTYPE_FLOAT8_E8M0FNU)
        return float_from_e8m0(((const uint8_t *)p)[i]);
    return not_a_format("load_as_float", dt);
}

/* Rounds x into element i of a buffer of dtype dt; returns the stored value as float32. */
static inline AMP_HD float store_from_float(void *p, dtype dt, int64_t i, float x)
{
    if (dt == DTYPE_FLOAT16) {
        uint16_t h = half_from_float(x);
        ((uint16_t *)p)[i] = h;
        return float_from_half(h);
    }
    if (dt == DTYPE_BFLOAT16) {
        uint16_t h = bf16_from_float(x);
        ((uint16_t *)p)[i] = h;
        return float_from_bf16(h);
    }
    if (dt == DTYPE_FLOAT32) {
        ((float *)p)[i] = x;
        return x;
    }
    if (dt == DTYPE_FLOAT8_E4M3FN) {
        uint8_t b = e4m3fn_from_float(x);
        ((uint8_t *)p)[i] = b;
        return float_from_e4m3fn(b);
    }
    if (dt == DTYPE_FLOAT8_E5M2) {
        uint8_t b = e5m2_from_float(x);
        ((uint8_t *)p)[i] = b;
        return float_from_e5m2(b);
    }
    if (dt == DTYPE_FLOAT4_E2M1FN) {
        uint8_t b = e2m1_from_float(x);
        ((uint8_t *)p)[i] = b;
        return float_from_e2m1(b);
    }
    if (dt == DTYPE_FLOAT8_E8M0FNU) {
        uint8_t b = e8m0_from_float(x);
        ((uint8_t *)p)[i] = b;
        return float_from_e8m0(b);
    }
    return not_a_format("store_from_float", dt);
}

/* ---- histogram of log2|pre|: bin k holds 2^k <= |x| < 2^(k+1), k = -149..127 ---- */
#define HIST_MIN_EXP (-149)
#define HIST_MAX_EXP 127
#define HIST_ZERO (HIST_MAX_EXP - HIST_MIN_EXP + 1) /* 277 */
#define HIST_INF (HIST_ZERO + 1)
#define HIST_NAN (HIST_ZERO + 2)
#define HIST_BINS (HIST_ZERO + 3)

static inline AMP_HD int count_leading_zeros32(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return __clz((int)x);
#else
    return __builtin_clz(x);
#endif
}

static inline AMP_HD int hist_bin(float x)
{
    uint32_t b = float_bits(x) & 0x7fffffffu;
    if (b == 0)
        return HIST_ZERO;
    if (b == 0x7f800000u)
        return HIST_INF;
    if (b > 0x7f800000u)
        return HIST_NAN;
    int e = (int)(b >> 23);
    if (e)
        return e - 127 - HIST_MIN_EXP;
    return (31 - count_leading_zeros32(b)) - 149 - HIST_MIN_EXP; /* float32 subnormal */
}

/* ---- counts of one rounding ---- */
typedef struct round_counts {
    int64_t zeros;      /* post == 0 */
    int64_t underflow;  /* pre finite and non-zero, post == 0 */
    int64_t subnormal;  /* post non-zero and below dt's smallest normal */
    int64_t overflow;   /* pre finite, post infinite, or NaN in a format without infinities */
    int64_t nan;        /* post is NaN */
    float amax;         /* max |post| over non-NaN values (0 when none) */
    float amin_nonzero; /* min |post| over non-zero non-NaN values (+inf when none) */
} round_counts;

static inline AMP_HD float dtype_min_normal(dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return FORMAT_FLOAT32_SMALLEST_NORMAL;
    case DTYPE_FLOAT16:
        return FORMAT_FLOAT16_SMALLEST_NORMAL;
    case DTYPE_BFLOAT16:
        return FORMAT_BFLOAT16_SMALLEST_NORMAL;
    case DTYPE_FLOAT8_E4M3FN:
        return FORMAT_FLOAT8_E4M3FN_SMALLEST_NORMAL;
    case DTYPE_FLOAT8_E5M2:
        return FORMAT_FLOAT8_E5M2_SMALLEST_NORMAL;
    case DTYPE_FLOAT4_E2M1FN:
        return FORMAT_FLOAT4_E2M1FN_SMALLEST_NORMAL;
    case DTYPE_FLOAT8_E8M0FNU:
        return FORMAT_FLOAT8_E8M0FNU_SMALLEST_NORMAL;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    return not_a_format("dtype_min_normal", dt);
}

static inline AMP_HD void round_counts_init(round_counts *c)
{
    c->zeros = c->underflow = c->subnormal = c->overflow = c->nan = 0;
    c->amax = 0.0f;
    c->amin_nonzero = bits_float(0x7f800000u);
}

/* Classifies one rounding of `pre` into `post`; min_normal = dtype_min_normal(dt). */
static inline AMP_HD void round_tally(round_counts *c, float pre, float post, float min_normal)
{
    uint32_t apre = float_bits(pre) & 0x7fffffffu;
    uint32_t apost = float_bits(post) & 0x7fffffffu;
    if (apost > 0x7f800000u) { /* from a finite pre only in a format without inf: overflow */
        c->nan++;
        if (apre < 0x7f800000u)
            c->overflow++;
        return;
    }
    float a = bits_float(apost);
    if (apost == 0) {
        c->zeros++;
        if (apre != 0 && apre < 0x7f800000u)
            c->underflow++;
        return;
    }
    if (apost == 0x7f800000u && apre < 0x7f800000u)
        c->overflow++;
    if (a < min_normal)
        c->subnormal++;
    if (a > c->amax)
        c->amax = a;
    if (a < c->amin_nonzero)
        c->amin_nonzero = a;
}

static inline AMP_HD void round_counts_merge(round_counts *into, const round_counts *c)
{
    into->zeros += c->zeros;
    into->underflow += c->underflow;
    into->subnormal += c->subnormal;
    into->overflow += c->overflow;
    into->nan += c->nan;
    if (c->amax > into->amax)
        into->amax = c->amax;
    if (c->amin_nonzero < into->amin_nonzero)
        into->amin_nonzero = c->amin_nonzero;
}

#endif
