/*
 * round.c: the CPU's rounding store, the parallel chunk loop every elementwise op runs on,
 * and the ops that are only a rounding: cast, mul_scalar, fill, observe. Twin of
 * kernels/round.cu.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* below this many elements one thread does the work */
#define CPU_PARALLEL_MIN (4 * CPU_CHUNK)

/* Stores pre[0..n) into dst[off..] rounded to float16: the processor's F16C instruction,
 * which rounds exactly as half_from_float does (tests/test_half.c checks every float32). */
__attribute__((target("avx,f16c"))) static void store_half_f16c(const float *pre, uint16_t *dst,
                                                                int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(pre + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = half_from_float(pre[i]);
}

/* v[i] = round_to(v[i], dt); F16C rounds float16 eight at a time */
__attribute__((target("avx,f16c"))) static void round_half_f16c(float *v, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(v + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(v + i),
                                                                _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++)
        v[i] = round_to(v[i], DTYPE_FLOAT16);
}

void cpu_round(float *v, int64_t n, dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return;
    case DTYPE_FLOAT16:
        if (cpu_has_f16c())
            round_half_f16c(v, n);
        else
            for (int64_t i = 0; i < n; i++)
                v[i] = round_to(v[i], DTYPE_FLOAT16);
        return;
    case DTYPE_BFLOAT16:
        for (int64_t i = 0; i < n; i++)
            v[i] = round_to(v[i], DTYPE_BFLOAT16);
        return;
    case DTYPE_FLOAT8_E4M3FN:
    case DTYPE_FLOAT8_E5M2:
    case DTYPE_FLOAT4_E2M1FN:
    case DTYPE_FLOAT8_E8M0FNU:
        for (int64_t i = 0; i < n; i++)
            v[i] = round_to(v[i], dt);
        return;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    not_a_format("cpu_round", dt);
}

/* dst[i] = bf16_from_float(pre[i]): a loop the vectoriser handles (pre never aliases a 16-bit
 * store), built for AVX2 too, whose 8 lanes narrow to 16 bits in one instruction, and for
 * AVX-512, 16 lanes; the level the store runs at chooses */
static inline __attribute__((always_inline)) void store_bf16_loop(const float *restrict pre,
                                                                  uint16_t *restrict dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_from_float(pre[i]);
}
__attribute__((target("avx512f,avx512bw,prefer-vector-width=512"))) static void
store_bf16_avx512(const float *restrict pre, uint16_t *restrict dst, int64_t n)
{
    store_bf16_loop(pre, dst, n);
}
__attribute__((target("avx2"))) static void store_bf16_avx2(const float *restrict pre,
                                                            uint16_t *restrict dst, int64_t n)
{
    store_bf16_loop(pre, dst, n);
}
static void store_bf16_x86_64(const float *restrict pre, uint16_t *restrict dst, int64_t n)
{
    store_bf16_loop(pre, dst, n);
}
static void store_bf16(cpu_isa isa, const float *pre, uint16_t *dst, int64_t n)
{
    switch (isa) {
    case CPU_ISA_AVX512:
        store_bf16_avx512(pre, dst, n);
        return;
    case CPU_ISA_AVX2:
        store_bf16_avx2(pre, dst, n);
        return;
    case CPU_ISA_X86_64:
        store_bf16_x86_64(pre, dst, n);
        return;
    case CPU_ISA_COUNT:
        break;
    }
    fprintf(stderr, "store_bf16: %d is not an ISA level\n", (int)isa);
    abort();
}

/* pre[0..n) stored into dst[off..] as dt, at ISA level isa (bfloat16's loop is built per level) */
static void store_values(cpu_isa isa, const float *pre, void *dst, dtype dt, int64_t off,
                         int64_t n)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        if ((float *)dst + off != pre)
            memcpy((float *)dst + off, pre, sizeof(float) * (size_t)n);
        return;
    case DTYPE_FLOAT16:
        if (cpu_has_f16c())
            store_half_f16c(pre, (uint16_t *)dst + off, n);
        else
            for (int64_t i = 0; i < n; i++)
                store_from_float(dst, DTYPE_FLOAT16, off + i, pre[i]);
        return;
    case DTYPE_BFLOAT16:
        store_bf16(isa, pre, (uint16_t *)dst + off, n);
        return;
    case DTYPE_FLOAT8_E4M3FN:
    case DTYPE_FLOAT8_E5M2:
    case DTYPE_FLOAT4_E2M1FN:
    case DTYPE_FLOAT8_E8M0FNU:
        for (int64_t i = 0; i < n; i++)
            store_from_float(dst, dt, off + i, pre[i]);
        return;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    not_a_format("store_values", dt);
}

/*
 * The counts of a rounding, from bit patterns: for IEEE formats the magnitude's bit pattern
 * orders like its value, so amax and amin_nonzero are an integer max and min, and every
 * class is a comparison; the same classes as round_tally() (half.h). `inf` is the pattern of
 * +inf in the stored format, `norm` of its smallest normal (format.h's inf_pattern and
 * min_normal_pattern; the NaNs are the patterns above inf). Alongside, it writes each pre
 * value's exponent field (log2|pre| of a normal float) as one byte for the histogram.
 *
 * The counting and the histogram are plain loops that GCC's vectoriser turns into vector
 * code, compiled once per ISA level (count_chunk_at: AVX-512, AVX2, plain x86-64) so that
 * each runs at its own width: 16, 8 and 4 lanes of 32 bits, 64, 32 and 16 of 8. (Written
 * with 64-byte vector types instead, the AVX2 and x86-64 builds compared lane by lane in
 * scalar code: GCC splits such a type's comparisons where the target has no 64-byte
 * vectors.)
 */
typedef struct bit_counts {
    uint32_t zeros, subnormal, overflow, nan, pmax, pmin;
    uint32_t pre_zeros; /* pre == +-0: their exponent byte is 0, as a float32 subnormal's */
} bit_counts;

/* post's pattern (magnitude) of element i */
static inline __attribute__((always_inline)) uint32_t post_bits(const float *pre, const void *dst,
                                                                bool wide, int64_t off, int i)
{
    return wide ? float_bits(pre[i]) & 0x7fffffffu : ((const uint16_t *)dst)[off + i] & 0x7fffu;
}

/* a float32 store, whose pattern is pre's: zeros, the largest and the least non-zero pattern
 * and the exponent bytes (its subnormals are counted apart: count_subnormals); the store
 * itself too, pre copied into out on the same read, unless out is NULL (pre is the
 * destination: an observe) */
static inline __attribute__((always_inline)) void count_wide(const float *pre, int n, uint32_t inf,
                                                             bit_counts *c, uint8_t *restrict ex,
                                                             float *restrict out)
{
    uint32_t zeros = 0, pmax = 0, pmin = UINT32_MAX;
#define COUNT_WIDE_LANE(i)                                                                             do {                                                                                                   uint32_t p = float_bits(pre[i]) & 0x7fffffffu;                                                     zeros += p == 0;                                                                                   pmax = p > pmax ? p : pmax;                    /* NaN patterns too: count_special */               uint32_t nonzero = p | (0u - (p - 1u >= inf)); /* 1 <= p <= inf, else all ones */                 pmin = nonzero < pmin ? nonzero : pmin;                                                            ex[i] = (uint8_t)(p >> 23);                                                                    } while (0)
    if (out)
        for (int i = 0; i < n; i++) {
            out[i] = pre[i];
            COUNT_WIDE_LANE(i);
        }
    else
        for (int i = 0; i < n; i++)
            COUNT_WIDE_LANE(i);
#undef COUNT_WIDE_LANE
    c->zeros += zeros, c->pre_zeros += zeros;
    c->pmax = pmax > c->pmax ? pmax : c->pmax;
    c->pmin = pmin < c->pmin ? pmin : c->pmin;
}

/* the float32 subnormals among pre[0..n) (looked for in a chunk whose exponent bytes 0 are not
 * all zeros') */
static inline __attribute__((always_inline)) void count_subnormals(const float *pre, int n,
                                                                   bit_counts *c)
{
    uint32_t sub = 0;
    for (int i = 0; i < n; i++)
        sub += (float_bits(pre[i]) & 0x7fffffffu) - 1u < 0x007fffffu;
    c->subnormal += sub;
}

/* pre's zeros and exponent bytes, for a 16-bit store */
static inline __attribute__((always_inline)) void
count_exponents(const float *pre, int n, bit_counts *c, uint8_t *restrict ex)
{
    uint32_t pz = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu;
        pz += a == 0;
        ex[i] = (uint8_t)(a >> 23);
    }
    c->pre_zeros += pz;
}

/* The counts of a 16-bit store's patterns h[0..n), as count_wide's, on 16-bit lanes (twice as
 * many to a vector; sums <= n < 2^16). normal: the chunk's exponents say that no value stores
 * as a zero but pre's zeros, nor as a subnormal (count_chunk), so that its largest and least
 * non-zero patterns are all there is to find. */
static inline __attribute__((always_inline)) void
count_half(const uint16_t *h, int n, bool normal, uint32_t inf, uint32_t norm, bit_counts *c)
{
    uint16_t z16 = 0, s16 = 0, max16 = 0, min16 = UINT16_MAX;
    if (normal) {
        for (int i = 0; i < n; i++) {
            uint16_t p = h[i] & 0x7fffu;
            max16 = p > max16 ? p : max16;
            uint16_t nonzero = p | (uint16_t)(0u - (p == 0)); /* never UINT16_MAX */
            min16 = nonzero < min16 ? nonzero : min16;
        }
        z16 = (uint16_t)c->pre_zeros;
    } else {
        uint16_t inf16 = (uint16_t)inf, norm16_1 = (uint16_t)(norm - 1u);
        for (int i = 0; i < n; i++) {
            uint16_t p = h[i] & 0x7fffu, p_1 = (uint16_t)(p - 1u);
            z16 += p == 0;
            s16 += p_1 < norm16_1;
            max16 = p > max16 ? p : max16;
            uint16_t nonzero = p | (uint16_t)(0u - (p_1 >= inf16)); /* never UINT16_MAX */
            min16 = nonzero < min16 ? nonzero : min16;
        }
    }
    c->zeros += z16, c->subnormal += s16;
    c->pmax = max16 > c->pmax ? max16 : c->pmax;
    c->pmin = min16 != UINT16_MAX && min16 < c->pmin ? min16 : c->pmin;
}

/* Overflows and NaNs are rare: only a chunk that stored an inf or a NaN (its largest pattern
 * is inf's or above) is looked at again for them, and for its largest finite or infinite
 * value. wide: a float32 store, else a 16-bit one read from dst. */
static inline __attribute__((always_inline)) void count_special(const float *pre, const void *dst,
                                                                bool wide, int64_t off, int n,
                                                                uint32_t inf, bit_counts *c)
{
    if (c->pmax < inf)
        return;
    c->pmax = 0;
    for (int i = 0; i < n; i++) {
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = post_bits(pre, dst, wide, off, i);
        c->overflow += (p == inf) & (a < 0x7f800000u);
        c->nan += p > inf;
        c->pmax = p <= inf && p > c->pmax ? p : c->pmax;
    }
}

/*
 * count_lanes for a float8 store (one byte a value, read from dst). With infinities (e5m2)
 * the patterns order as IEEE's, `special` is +inf's and the NaNs lie above it; without
 * (e4m3fn) `special` is the only NaN, S.1111.111, and a finite pre stored as it overflowed
 * (format.h: such a NaN counts in both overflow and nan).
 */
static inline __attribute__((always_inline)) void count_lanes8(const float *pre, const void *dst,
                                                               int64_t off, int n, bool has_inf,
                                                               uint32_t special, uint32_t norm,
                                                               bit_counts *c, uint8_t *restrict ex)
{
    const uint8_t *b = (const uint8_t *)dst + off;
    uint32_t top = has_inf ? special : special - 1u; /* the largest non-NaN pattern */
    uint32_t zeros = 0, sub = 0, pz = 0, pmax = 0, pmin = UINT32_MAX;
    for (int i = 0; i < n; i++) {
        uint32_t p = b[i] & 0x7fu;
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu;
        zeros += p == 0;
        sub += p - 1u < norm - 1u;
        pmax = p > pmax ? p : pmax;
        uint32_t nonzero = p | (0u - (p - 1u >= top)); /* 1 <= p <= top, else all ones */
        pmin = nonzero < pmin ? nonzero : pmin;
        pz += a == 0;
        ex[i] = (uint8_t)(a >> 23);
    }
    c->zeros += zeros, c->subnormal += sub, c->pre_zeros += pz;
    c->pmax = pmax > c->pmax ? pmax : c->pmax;
    c->pmin = pmin < c->pmin ? pmin : c->pmin;
    if (c->pmax >= special) { /* an inf or a NaN: looked at again, as count_lanes does */
        c->pmax = 0;
        for (int i = 0; i < n; i++) {
            uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = b[i] & 0x7fu;
            bool nan = has_inf ? p > special : p == special;
            c->overflow += (p == special) & (a < 0x7f800000u);
            c->nan += nan;
            c->pmax = !nan && p > c->pmax ? p : c->pmax;
        }
    }
}

/*
 * The counts of a float4_e2m1fn or float8_e8m0fnu store (a byte a value, read from dst), one
 * value at a time: their patterns do not order as count_lanes8's. float4_e2m1fn: the sign is
 * bit 3; a finite |pre| above 6 saturated (overflow) and a NaN stored +6 (nan), neither
 * taking part in amax. float8_e8m0fnu: no zero (pattern 0 is 2^-127, its least value) and no
 * subnormal; a finite pre stored as the NaN overflowed. Its zeros are pre's zeros here, so
 * that tally's underflow (zeros - pre_zeros) is 0; tally then reports no zeros.
 */
static inline __attribute__((always_inline)) void count_bytes(const float *pre, const void *dst,
                                                              dtype dt, int64_t off, int n,
                                                              bit_counts *c, uint8_t *restrict ex)
{
    const format_info *f = format_of(dt);
    const uint8_t *b = (const uint8_t *)dst + off;
    bool e2m1 = dt == DTYPE_FLOAT4_E2M1FN;
    uint32_t big = float_bits(f->largest);
    for (int i = 0; i < n; i++) {
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = b[i] & f->magnitude_mask;
        ex[i] = (uint8_t)(a >> 23);
        c->pre_zeros += a == 0;
        bool nan = e2m1 ? a > 0x7f800000u : p == f->nan_pattern;
        c->nan += nan;
        c->overflow += (e2m1 ? a > big : nan) && a < 0x7f800000u;
        if (e2m1) {
            c->zeros += p == 0;
            c->subnormal += p != 0 && p < f->min_normal_pattern;
        } else {
            c->zeros += a == 0;
        }
        if (nan || (e2m1 && (p == 0 || a > big)))
            continue;
        c->pmax = p > c->pmax ? p : c->pmax;
        c->pmin = p < c->pmin ? p : c->pmin;
    }
}

/* a histogram of exponent bytes: n[e] for e in [lo, hi] (1 <= lo, hi <= 254), zero elsewhere;
 * `rest` bytes are 0 or 255 (zeros and float32 subnormals, inf and NaN: tally bins them) */
typedef struct exp_hist {
    uint32_t n[256];
    int lo, hi;
    uint32_t rest;
} exp_hist;

/*
 * How many of ex[0..nv) (nv a multiple of 64) equal base + j, for j < 8 (AVX2) or 16
 * (AVX-512, below; the window's width is the function's result): the AVX2 and AVX-512
 * builds' histogram, whose cost does not grow with the exponents a window holds. Each byte
 * becomes a one-hot byte, 1 << (x - base) or 0 outside the window (a table lookup by
 * vpshufb); the one-hot vectors are summed by carry-save adders into bit-sliced counters
 * (Harley and Seal's scheme, as in Muła, Kurz and Lemire's "Faster population counts", 2018):
 * eight bit planes p[k], vector lane by lane, hold count = sum of p[k]'s bits << k, so that 16
 * vectors cost 15 carry-save adds and one ripple of the sixteens; each count is then the
 * popcount of a bit across the lanes of each plane. At most 128 vectors of 32 bytes (4096
 * bytes) fit in eight planes.
 */
#define WINDOW_MAX 16 /* window_avx512's; window_avx2's is WINDOW */
#define WINDOW 8
typedef int (*window_fn)(const uint8_t *ex, int nv, int base, uint32_t count[WINDOW_MAX]);
#define CSA_AVX2(h, l, a, b, c)                                                                    \
    do {                                                                                           \
        __m256i u_ = _mm256_xor_si256(a, b), c_ = (c);                                             \
        h = _mm256_or_si256(_mm256_and_si256(a, b), _mm256_and_si256(u_, c_));                     \
        l = _mm256_xor_si256(u_, c_);                                                              \
    } while (0)
__attribute__((target("avx2,popcnt"))) static int window_avx2(const uint8_t *ex, int nv, int base,
                                                              uint32_t count[WINDOW_MAX])
{
    const __m256i lut = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2,
                                         4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i b = _mm256_set1_epi8((char)base), out = _mm256_set1_epi8(WINDOW);
#define ONEHOT_AVX2(k)                                                                             \
    _mm256_shuffle_epi8(                                                                           \
        lut, _mm256_min_epu8(                                                                      \
                 _mm256_sub_epi8(_mm256_loadu_si256((const __m256i *)(ex + 32 * (k))), b), out))
    __m256i p[8];
    for (int k = 0; k < 8; k++)
        p[k] = _mm256_setzero_si256();
    int nx = nv / 32, i = 0;
    for (; i + 16 <= nx; i += 16) {
        __m256i twos_a, twos_b, fours_a, fours_b, eights_a, eights_b, sixteens;
        CSA_AVX2(twos_a, p[0], p[0], ONEHOT_AVX2(i), ONEHOT_AVX2(i + 1));
        CSA_AVX2(twos_b, p[0], p[0], ONEHOT_AVX2(i + 2), ONEHOT_AVX2(i + 3));
        CSA_AVX2(fours_a, p[1], p[1], twos_a, twos_b);
        CSA_AVX2(twos_a, p[0], p[0], ONEHOT_AVX2(i + 4), ONEHOT_AVX2(i + 5));
        CSA_AVX2(twos_b, p[0], p[0], ONEHOT_AVX2(i + 6), ONEHOT_AVX2(i + 7));
        CSA_AVX2(fours_b, p[1], p[1], twos_a, twos_b);
        CSA_AVX2(eights_a, p[2], p[2], fours_a, fours_b);
        CSA_AVX2(twos_a, p[0], p[0], ONEHOT_AVX2(i + 8), ONEHOT_AVX2(i + 9));
        CSA_AVX2(twos_b, p[0], p[0], ONEHOT_AVX2(i + 10), ONEHOT_AVX2(i + 11));
        CSA_AVX2(fours_a, p[1], p[1], twos_a, twos_b);
        CSA_AVX2(twos_a, p[0], p[0], ONEHOT_AVX2(i + 12), ONEHOT_AVX2(i + 13));
        CSA_AVX2(twos_b, p[0], p[0], ONEHOT_AVX2(i + 14), ONEHOT_AVX2(i + 15));
        CSA_AVX2(fours_b, p[1], p[1], twos_a, twos_b);
        CSA_AVX2(eights_b, p[2], p[2], fours_a, fours_b);
        CSA_AVX2(sixteens, p[3], p[3], eights_a, eights_b);
        for (int k = 4; k < 8; k++) { /* sixteens rippled into planes 4..7 */
            __m256i carry = _mm256_and_si256(p[k], sixteens);
            p[k] = _mm256_xor_si256(p[k], sixteens);
            sixteens = carry;
        }
    }
    for (; i < nx; i++) { /* the last vectors, rippled one by one */
        __m256i x = ONEHOT_AVX2(i);
        for (int k = 0; k < 8; k++) {
            __m256i carry = _mm256_and_si256(p[k], x);
            p[k] = _mm256_xor_si256(p[k], x);
            x = carry;
        }
    }
#undef ONEHOT_AVX2
    for (int j = 0; j < WINDOW; j++)
        count[j] = 0;
    for (int k = 0; k < 8; k++) /* bit j of each byte shifted to its top bit; planes of zeros
                                   (few values a lane) skipped */
        for (int j = 0; j < WINDOW && !_mm256_testz_si256(p[k], p[k]); j++)
            count[j] += (uint32_t)__builtin_popcount(
                            (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(p[k], 7 - j)))
                        << k;
    return WINDOW;
}

/* window_avx2 on 64-byte vectors, 16 exponents a pass: x - base saturated up by 0x70 is
 * 0x70..0x7f inside the window, a byte with its top bit set (vpshufb's zero) outside, and two
 * tables give its one-hot halves, each summed into eight planes of its own (32 registers hold
 * both); carry-save adds in two ternary-logic instructions (0x96 a ^ b ^ c, 0xe8 the
 * majority), the counts' bits tested into mask registers */
#define CSA_AVX512(h, l, a, b, c)                                                                  \
    do {                                                                                           \
        __m512i a_ = (a), b_ = (b), c_ = (c);                                                      \
        h = _mm512_ternarylogic_epi64(a_, b_, c_, 0xe8);                                           \
        l = _mm512_ternarylogic_epi64(a_, b_, c_, 0x96);                                           \
    } while (0)
__attribute__((target("avx512f,avx512bw,popcnt"))) static int
window_avx512(const uint8_t *ex, int nv, int base, uint32_t count[WINDOW_MAX])
{
    const __m512i lut_lo = _mm512_broadcast_i32x4(
                      _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0)),
                  lut_hi = _mm512_broadcast_i32x4(
                      _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128));
    const __m512i b = _mm512_set1_epi8((char)base), up = _mm512_set1_epi8(0x70);
#define INDEX_AVX512(k)                                                                            \
    _mm512_adds_epu8(_mm512_sub_epi8(_mm512_loadu_si512((const void *)(ex + 64 * (k))), b), up)
    __m512i p[2][8]; /* the planes of base + 0..7 and of base + 8..15 */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++)
            p[h][k] = _mm512_setzero_si512();
    int nx = nv / 64, i = 0;
    for (; i + 16 <= nx; i += 16) {
        __m512i twos_a[2], twos_b[2], fours_a[2], fours_b[2], eights_a[2], eights_b[2], sixteens[2];
        /* vectors j and j + 1 into twos[] (each half's plane 0 carried) */
#define PAIR_AVX512(twos, j)                                                                       \
    do {                                                                                           \
        __m512i x_ = INDEX_AVX512(i + (j)), y_ = INDEX_AVX512(i + (j) + 1);                        \
        CSA_AVX512(twos[0], p[0][0], p[0][0], _mm512_shuffle_epi8(lut_lo, x_),                     \
                   _mm512_shuffle_epi8(lut_lo, y_));                                               \
        CSA_AVX512(twos[1], p[1][0], p[1][0], _mm512_shuffle_epi8(lut_hi, x_),                     \
                   _mm512_shuffle_epi8(lut_hi, y_));                                               \
    } while (0)
#define BOTH_AVX512(hi, plane, x, y)                                                               \
    do {                                                                                           \
        CSA_AVX512(hi[0], p[0][plane], p[0][plane], x[0], y[0]);                                   \
        CSA_AVX512(hi[1], p[1][plane], p[1][plane], x[1], y[1]);                                   \
    } while (0)
        PAIR_AVX512(twos_a, 0);
        PAIR_AVX512(twos_b, 2);
        BOTH_AVX512(fours_a, 1, twos_a, twos_b);
        PAIR_AVX512(twos_a, 4);
        PAIR_AVX512(twos_b, 6);
        BOTH_AVX512(fours_b, 1, twos_a, twos_b);
        BOTH_AVX512(eights_a, 2, fours_a, fours_b);
        PAIR_AVX512(twos_a, 8);
        PAIR_AVX512(twos_b, 10);
        BOTH_AVX512(fours_a, 1, twos_a, twos_b);
        PAIR_AVX512(twos_a, 12);
        PAIR_AVX512(twos_b, 14);
        BOTH_AVX512(fours_b, 1, twos_a, twos_b);
        BOTH_AVX512(eights_b, 2, fours_a, fours_b);
        BOTH_AVX512(sixteens, 3, eights_a, eights_b);
#undef PAIR_AVX512
#undef BOTH_AVX512
        for (int h = 0; h < 2; h++)
            for (int k = 4; k < 8; k++) {
                __m512i carry = _mm512_and_si512(p[h][k], sixteens[h]);
                p[h][k] = _mm512_xor_si512(p[h][k], sixteens[h]);
                sixteens[h] = carry;
            }
    }
    for (; i < nx; i++) {
        __m512i idx = INDEX_AVX512(i);
        for (int h = 0; h < 2; h++) {
            __m512i x = _mm512_shuffle_epi8(h ? lut_hi : lut_lo, idx);
            for (int k = 0; k < 8; k++) {
                __m512i carry = _mm512_and_si512(p[h][k], x);
                p[h][k] = _mm512_xor_si512(p[h][k], x);
                x = carry;
            }
        }
    }
#undef INDEX_AVX512
    for (int j = 0; j < 16; j++)
        count[j] = 0;
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < 8 && _mm512_test_epi64_mask(p[h][k], p[h][k]); j++)
                count[8 * h + j] += (uint32_t)__builtin_popcountll(_mm512_test_epi8_mask(
                                        p[h][k], _mm512_set1_epi8((char)(1 << j))))
                                    << k;
    return 16;
}

/*
 * he = the histogram of ex[0..n), n <= CPU_CHUNK. A chunk's exponents usually span 10 to 30
 * values: when those other than 0 and 255 span at most HIST_SPAN, they are counted window by
 * window (win: window_avx2 or window_avx512, each a pass over the bytes for 8 or 16 values)
 * or, where the target has no byte shuffle (plain x86-64, win NULL) and they span at most
 * HIST_SPAN_COMPARE,
 * by comparisons over all the bytes, HIST_PASS values per pass, in byte counters over blocks of
 * HIST_BLOCK bytes (at most CPU_CHUNK / HIST_BLOCK = 64 per counter); otherwise one increment per
 * byte in eight tables in turn, so that runs of equal bytes do not wait on each other.
 */
#define HIST_SPAN 64
/* beyond, x86-64's tables are faster (27 exponents: 0.67 against 0.82 ns a value) */
#define HIST_SPAN_COMPARE 16
#define HIST_BLOCK 64
#define HIST_PASS 4
static inline __attribute__((always_inline)) void hist_bytes(const uint8_t *ex, int n,
                                                             window_fn win, exp_hist *he)
{
    memset(he->n, 0, sizeof he->n);
    int nv = n / HIST_BLOCK * HIST_BLOCK;
    uint8_t lo_1 = 255, hi_1 = 0; /* the least x - 1 and the largest x + 1, modulo 256 */
    for (int i = 0; i < nv; i++) {
        uint8_t x_1 = (uint8_t)(ex[i] - 1), x1 = (uint8_t)(ex[i] + 1);
        lo_1 = x_1 < lo_1 ? x_1 : lo_1;
        hi_1 = x1 > hi_1 ? x1 : hi_1;
    }
    int lo = lo_1 + 1, hi = hi_1 - 1; /* of the bytes but 0 and 255; lo > hi when none */
    uint32_t counted = 0;
    if (hi - lo < HIST_SPAN && win) {
        for (int base = lo, w; base <= hi; base += w) {
            uint32_t c[WINDOW_MAX];
            w = win(ex, nv, base, c);
            for (int j = 0; j < w && base + j <= hi; j++) /* above hi: only 255s */
                he->n[base + j] = c[j], counted += c[j];
        }
        he->rest = (uint32_t)nv - counted;
    } else if (hi - lo < HIST_SPAN_COMPARE) {
        int values[HIST_SPAN_COMPARE + HIST_PASS], nval = 0;
        for (int e = lo; e <= hi; e++)
            values[nval++] = e;
        while (nval % HIST_PASS) /* padding: counted again, added nowhere */
            values[nval++] = -1;
        for (int q = 0; q < nval; q += HIST_PASS) {
            uint8_t acc[HIST_PASS][HIST_BLOCK] = {{0}};
            uint8_t v[HIST_PASS];
            for (int k = 0; k < HIST_PASS; k++)
                v[k] = (uint8_t)values[q + k];
            for (int b = 0; b < nv / HIST_BLOCK; b++)
                for (int k = 0; k < HIST_PASS; k++)
                    for (int j = 0; j < HIST_BLOCK; j++) /* a compare's all-ones lanes subtracted */
                        acc[k][j] += ex[HIST_BLOCK * b + j] == v[k];
            for (int k = 0; k < HIST_PASS; k++) {
                uint32_t sum = 0;
                for (int j = 0; j < HIST_BLOCK; j++)
                    sum += acc[k][j];
                if (values[q + k] >= 0)
                    he->n[values[q + k]] = sum, counted += sum;
            }
        }
        he->rest = (uint32_t)nv - counted;
    } else {
        uint32_t t[8][256];
        memset(t, 0, sizeof t);
        for (int i = 0; i < nv; i += 8)
            for (int k = 0; k < 8; k++)
                t[k][ex[i + k]]++;
        for (int k = 0; k < 8; k++)
            for (int e = 0; e < 256; e++)
                he->n[e] += t[k][e];
        he->rest = he->n[0] + he->n[255];
        he->n[0] = he->n[255] = 0;
        lo = 1, hi = 254;
    }
    for (int i = nv; i < n; i++) { /* the tail */
        int x = ex[i];
        if (x == 0 || x == 255) {
            he->rest++;
            continue;
        }
        he->n[x]++;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    he->lo = lo, he->hi = hi;
}

/* the counts of n <= CPU_CHUNK values stored into dst[off..] and the histogram of their
 * exponent bytes (ex, n bytes of scratch); win: see hist_bytes. A float32 store is made here
 * (count_wide), the others before. */
static inline __attribute__((always_inline)) void count_chunk(const float *pre, void *dst,
                                                              dtype dt, int64_t off, int n,
                                                              bit_counts *c, uint8_t *ex,
                                                              window_fn win, exp_hist *he)
{
    const format_info *f = format_of(dt);
    switch (dt) { /* the exponent bytes, and what does not need the histogram */
    case DTYPE_FLOAT32:
        count_wide(pre, n, f->inf_pattern, c, ex,
                   (float *)dst + off != pre ? (float *)dst + off : NULL);
        break;
    case DTYPE_FLOAT16:
    case DTYPE_BFLOAT16:
        count_exponents(pre, n, c, ex);
        break;
    case DTYPE_FLOAT8_E4M3FN:
    case DTYPE_FLOAT8_E5M2:
        count_lanes8(pre, dst, off, n, f->has_inf, f->has_inf ? f->inf_pattern : f->nan_pattern,
                     f->min_normal_pattern, c, ex);
        break;
    case DTYPE_FLOAT4_E2M1FN:
    case DTYPE_FLOAT8_E8M0FNU:
        count_bytes(pre, dst, dt, off, n, c, ex);
        break;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        not_a_format("count_chunk", dt);
        return;
    }
    hist_bytes(ex, n, win, he); /* one call: the histogram's code is inlined once */
    if (dt == DTYPE_FLOAT32) {
        if (he->rest != c->pre_zeros) /* exponent bytes 0 that are not zeros, or 255s */
            count_subnormals(pre, n, c);
        count_special(pre, dst, true, off, n, f->inf_pattern, c);
    } else if (dt == DTYPE_FLOAT16 || dt == DTYPE_BFLOAT16) {
        /* Bytes 0 and 255 only of zeros, the others from the smallest normal's exponent up:
         * no value stores as a zero but the zeros, none as a subnormal (2^(e - 127) >= the
         * smallest normal); overflows are count_special's, as in every chunk. */
        bool normal = he->rest == c->pre_zeros &&
                      (he->lo > he->hi || he->lo >= (int)(float_bits(f->smallest_normal) >> 23));
        count_half((const uint16_t *)dst + off, n, normal, f->inf_pattern, f->min_normal_pattern,
                   c);
        count_special(pre, dst, false, off, n, f->inf_pattern, c);
    }
}

/* count_chunk built for each ISA level */
typedef void (*count_chunk_fn)(const float *pre, void *dst, dtype dt, int64_t off, int n,
                               bit_counts *c, uint8_t *ex, exp_hist *he);
#define COUNT_CHUNK_ARGS                                                                           \
    const float *pre, void *dst, dtype dt, int64_t off, int n, bit_counts *c, uint8_t *ex,         \
        exp_hist *he
__attribute__((target("avx512f,avx512bw,popcnt,prefer-vector-width=512"))) static void
count_chunk_avx512(COUNT_CHUNK_ARGS)
{
    count_chunk(pre, dst, dt, off, n, c, ex, window_avx512, he);
}
__attribute__((target("avx2,popcnt"))) static void count_chunk_avx2(COUNT_CHUNK_ARGS)
{
    count_chunk(pre, dst, dt, off, n, c, ex, window_avx2, he);
}
static void count_chunk_x86_64(COUNT_CHUNK_ARGS)
{
    count_chunk(pre, dst, dt, off, n, c, ex, NULL, he);
}

static const struct {
    const char *name;
    count_chunk_fn fn;
} isa_levels[CPU_ISA_COUNT] = {
    [CPU_ISA_X86_64] = {"x86-64", count_chunk_x86_64},
    [CPU_ISA_AVX2] = {"avx2", count_chunk_avx2},
    [CPU_ISA_AVX512] = {"avx512", count_chunk_avx512},
};

const char *cpu_isa_name(cpu_isa isa) { return isa_levels[isa].name; }

static bool processor_runs(cpu_isa isa)
{
    switch (isa) {
    case CPU_ISA_X86_64:
        return true;
    case CPU_ISA_AVX2: /* every AVX2 processor has F16C, which this level's conversions use */
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") &&
               __builtin_cpu_supports("f16c");
    case CPU_ISA_AVX512:
        return processor_runs(CPU_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw");
    case CPU_ISA_COUNT:
        break;
    }
    return false;
}

/* the level the harness runs at: the best the processor runs, or AMPSCOPE_CPU_ISA's (set
 * once, before main, by isa_from_environment) */
static cpu_isa isa_active = CPU_ISA_X86_64, isa_processor = CPU_ISA_X86_64;

/* AMPSCOPE_CPU_ISA, read before main so that every thread sees one level; a value that is not
 * a level, or a level this processor cannot run, stops the program (exit 2) */
__attribute__((constructor)) static void isa_from_environment(void)
{
    __builtin_cpu_init(); /* __builtin_cpu_supports before main needs it */
    cpu_isa best = CPU_ISA_X86_64;
    for (int l = 0; l < CPU_ISA_COUNT; l++)
        best = processor_runs((cpu_isa)l) ? (cpu_isa)l : best;
    isa_active = isa_processor = best;
    const char *want = getenv(CPU_ISA_ENV);
    if (!want || !*want)
        return;
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (strcmp(want, isa_levels[l].name) != 0)
            continue;
        if (!processor_runs((cpu_isa)l)) {
            fprintf(stderr,
                    "%s=%s: this processor cannot run that level (it runs up to %s); unset it or "
                    "name a lower one\n",
                    CPU_ISA_ENV, want, isa_levels[best].name);
            exit(2);
        }
        isa_active = (cpu_isa)l;
        return;
    }
    fprintf(stderr, "%s=%s: not an ISA level; expected avx512, avx2 or x86-64\n", CPU_ISA_ENV,
            want);
    exit(2);
}

bool cpu_isa_runs(cpu_isa isa) { return isa <= isa_active && processor_runs(isa); }

cpu_isa cpu_isa_best(void) { return isa_active; }

cpu_isa cpu_isa_processor(void) { return isa_processor; }

/* the bookkeeping of n <= CPU_CHUNK stored values (and a float32 store: count_chunk): counts,
 * then the histogram of pre */
static void tally(count_chunk_fn count, const float *pre, void *dst, dtype dt, int64_t off,
                  int n, round_stats *st)
{
    uint8_t ex[CPU_CHUNK];
    exp_hist he;
    bit_counts b = {.pmin = UINT32_MAX};
    count(pre, dst, dt, off, n, &b, ex, &he);
    /* a zero store comes from a zero, or from a finite non-zero value that underflowed (an
     * infinite or NaN one stays so) */
    round_counts c = {b.zeros,
                      b.zeros - b.pre_zeros,
                      b.subnormal,
                      b.overflow,
                      b.nan,
                      float_from_pattern(b.pmax, dt),
                      b.pmin == UINT32_MAX ? bits_float(0x7f800000u)
                                           : float_from_pattern(b.pmin, dt)};
    if (dt == DTYPE_FLOAT8_E8M0FNU)
        c.zeros = 0; /* count_bytes: no zero is stored */
    round_counts_merge(&st->counts, &c);
    /* Byte 0 holds zeros (counted above) and float32 subnormals, byte 255 inf and NaN: when
     * there are any of the latter, they are binned one by one. */
    for (int e = he.lo; e <= he.hi; e++)
        st->hist[e - 127 - HIST_MIN_EXP] += he.n[e];
    st->hist[HIST_ZERO] += b.pre_zeros;
    if (he.rest != b.pre_zeros)
        for (int i = 0; i < n; i++) {
            uint32_t a = float_bits(pre[i]) & 0x7fffffffu;
            if (a != 0 && (a < 0x00800000u || a >= 0x7f800000u))
                st->hist[hist_bin(pre[i])]++;
        }
    st->numel += n;
}

void cpu_store_at(cpu_isa isa, const float *pre, void *dst, dtype dt, int64_t off, int64_t n,
                  round_stats *st)
{
    if (dt != DTYPE_FLOAT32 || !st) /* a counted float32 store is count_wide's copy */
        store_values(isa, pre, dst, dt, off, n);
    for (int64_t k = 0; st && k < n; k += CPU_CHUNK)
        tally(isa_levels[isa].fn, pre + k, dst, dt, off + k,
              (int)(n - k < CPU_CHUNK ? n - k : CPU_CHUNK), st);
}

void cpu_count(const float *pre, const void *dst, dtype dt, int64_t off, int64_t n,
               round_stats *st)
{
    for (int64_t k = 0; k < n; k += CPU_CHUNK)
        tally(isa_levels[cpu_isa_best()].fn, pre + k, (void *)dst, dt, off + k,
              (int)(n - k < CPU_CHUNK ? n - k : CPU_CHUNK), st);
}

void cpu_store(const float *pre, void *dst, dtype dt, int64_t off, int64_t n, round_stats *st)
{
    if (st)
        cpu_store_at(cpu_isa_best(), pre, dst, dt, off, n, st);
    else
        store_values(cpu_isa_best(), pre, dst, dt, off, n);
}

void cpu_parallel_chunks(int64_t total, cpu_chunk_fn fn, void *ctx, round_stats *st)
{
    int64_t chunks = (total + CPU_CHUNK - 1) / CPU_CHUNK;
#pragma omp parallel if (total >= CPU_PARALLEL_MIN)
    {
        round_stats local;
        round_stats *lp = NULL;
        if (st) {
            round_stats_init(&local);
            lp = &local;
        }
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t off = c * CPU_CHUNK;
            fn(ctx, off, total - off < CPU_CHUNK ? total - off : CPU_CHUNK, lp);
        }
        if (st) {
#pragma omp critical(cpu_stats_merge)
            round_stats_merge(st, &local);
        }
    }
}

typedef struct store_ctx {
    const float *pre;
    void *dst;
    dtype dt;
    int64_t off;
} store_ctx;

static void store_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const store_ctx *c = p;
    cpu_store(c->pre + off, c->dst, c->dt, c->off + off, n, st);
}

void cpu_store_parallel(const float *pre, void *dst, dtype dt, int64_t off, int64_t n,
                        round_stats *st)
{
    store_ctx c = {pre, dst, dt, off};
    cpu_parallel_chunks(n, store_chunk, &c, st);
}

typedef struct scale_ctx {
    const tensor *src;
    float s;
    tensor *dst;
} scale_ctx;

/* dst[i] = round(float(src[i]) * s) (src may be dst: each chunk is read before it is written) */
static void scale_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const scale_ctx *c = p;
    float buf[CPU_CHUNK];
    const float *pre = cpu_view(c->src, off, n, buf); /* a cast reads float32 in place */
    if (c->s != 1.0f) {
        for (int64_t i = 0; i < n; i++)
            buf[i] = pre[i] * c->s;
        pre = buf;
    }
    cpu_store(pre, c->dst->data, c->dst->dtype, off, n, st);
}

static void scale_into(const tensor *src, float s, tensor *dst, round_stats *st)
{
    scale_ctx c = {src, s, dst};
    cpu_parallel_chunks(src->numel, scale_chunk, &c, st);
}

int cpu_cast(backend *be, const tensor *src, tensor *dst, round_stats *st)
{
    (void)be;
    scale_into(src, 1.0f, dst, st);
    return 0;
}

int cpu_mul_scalar(backend *be, const tensor *src, float s, tensor *dst, round_stats *st)
{
    (void)be;
    scale_into(src, s, dst, st);
    return 0;
}

typedef struct fill_ctx {
    float v;
    tensor *dst;
} fill_ctx;

static void fill_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const fill_ctx *c = p;
    float buf[CPU_CHUNK];
    int64_t i = 0;
    do /* a chunk has n >= 1 (GCC 12 takes a for loop's buffer for one it may store unset) */
        buf[i] = c->v;
    while (++i < n);
    cpu_store(buf, c->dst->data, c->dst->dtype, off, n, st);
}

void cpu_fill_counted(tensor *dst, float value, round_stats *st)
{
    fill_ctx c = {value, dst};
    cpu_parallel_chunks(dst->numel, fill_chunk, &c, st);
}

int cpu_fill(backend *be, tensor *dst, float value)
{
    (void)be;
    cpu_fill_counted(dst, value, NULL);
    return 0;
}

int cpu_observe(backend *be, const tensor *t, round_stats *st)
{
    (void)be;
    scale_into(t, 1.0f, (tensor *)t, st); /* rewrites each value with itself */
    return 0;
}
