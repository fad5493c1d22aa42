/*
 * round.c: the CPU's rounding store, the parallel chunk loop every elementwise op runs on,
 * and the ops that are only a rounding: cast, mul_scalar, fill, observe. Twin of
 * kernels/round.cu.
 */
#include <immintrin.h>
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
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    not_a_format("cpu_round", dt);
}

static void store_values(const float *pre, void *dst, dtype dt, int64_t off, int64_t n)
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
        for (int64_t i = 0; i < n; i++)
            store_from_float(dst, DTYPE_BFLOAT16, off + i, pre[i]);
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
 * min_normal_pattern; the NaNs are the patterns above inf). The loop is written once with
 * GCC's vector extensions, 16 lanes, and compiled for AVX-512, AVX2 and plain x86-64 (the
 * loader picks the clone the processor runs). Alongside, it writes each pre value's
 * exponent field (log2|pre| of a normal float) as one byte for the histogram.
 */
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
typedef uint8_t u8x16 __attribute__((vector_size(16)));

typedef struct bit_counts {
    uint32_t zeros, subnormal, overflow, nan, pmax, pmin;
    uint32_t pre_zeros; /* pre == +-0: their exponent byte is 0, as a float32 subnormal's */
} bit_counts;

/* lanes of a comparison (-1 where true) counted into acc */
#define COUNT_LANES(acc, mask) ((acc) -= (u32x16)(mask))
/* lane-wise mask ? a : b (C has no vector ?:) */
#define SELECT(mask, a, b) (((u32x16)(mask) & (a)) | (~(u32x16)(mask) & (b)))

/* post's pattern (magnitude) of element i */
static inline __attribute__((always_inline)) uint32_t post_bits(const float *pre, const void *dst,
                                                                bool wide, int64_t off, int i)
{
    return wide ? float_bits(pre[i]) & 0x7fffffffu : ((const uint16_t *)dst)[off + i] & 0x7fffu;
}

static inline __attribute__((always_inline)) void count_lanes(const float *pre, const void *dst,
                                                              bool wide, int64_t off, int n,
                                                              uint32_t inf, uint32_t norm,
                                                              bit_counts *c, uint8_t *ex)
{
    const u32x16 zero = {0};
    u32x16 zeros = zero, sub = zero, pz = zero, pmax = zero, pmin = ~zero;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        u32x16 a, p;
        memcpy(&a, pre + i, sizeof a);
        a &= 0x7fffffffu;
        if (wide) { /* a float32 store copies pre: the same pattern */
            p = a;
        } else {
            u16x16 h;
            memcpy(&h, (const uint16_t *)dst + off + i, sizeof h);
            p = __builtin_convertvector(h, u32x16) & 0x7fffu;
        }
        COUNT_LANES(zeros, p == 0);
        COUNT_LANES(sub, p - 1u < norm - 1u);
        COUNT_LANES(pz, a == 0);
        pmax = SELECT(p > pmax, p, pmax);                /* NaN patterns too: see below */
        u32x16 nonzero = SELECT(p - 1u < inf, p, ~zero); /* 1 <= p <= inf */
        pmin = SELECT(nonzero < pmin, nonzero, pmin);
        u8x16 e = __builtin_convertvector(a >> 23, u8x16);
        memcpy(ex + i, &e, sizeof e);
    }
    for (int k = 0; k < 16; k++) {
        c->zeros += zeros[k], c->subnormal += sub[k], c->pre_zeros += pz[k];
        c->pmax = pmax[k] > c->pmax ? pmax[k] : c->pmax;
        c->pmin = pmin[k] < c->pmin ? pmin[k] : c->pmin;
    }
    for (; i < n; i++) { /* the tail, one at a time */
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = post_bits(pre, dst, wide, off, i);
        c->zeros += p == 0;
        c->subnormal += p - 1u < norm - 1u;
        c->pre_zeros += a == 0;
        uint32_t nonzero = p - 1u < inf ? p : UINT32_MAX;
        c->pmax = p > c->pmax ? p : c->pmax;
        c->pmin = nonzero < c->pmin ? nonzero : c->pmin;
        ex[i] = (uint8_t)(a >> 23);
    }
    /* Overflows and NaNs are rare: only a chunk that stored an inf or a NaN (its largest
     * pattern is inf's or above) is looked at again for them, and for its largest finite
     * or infinite value. */
    if (c->pmax >= inf) {
        c->pmax = 0;
        for (int i = 0; i < n; i++) {
            uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = post_bits(pre, dst, wide, off, i);
            c->overflow += (p == inf) & (a < 0x7f800000u);
            c->nan += p > inf;
            c->pmax = p <= inf && p > c->pmax ? p : c->pmax;
        }
    }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
count_rounding(const float *pre, const void *dst, dtype dt, int64_t off, int n, bit_counts *c,
               uint8_t *ex)
{
    const format_info *f = format_of(dt);
    switch (dt) {
    case DTYPE_FLOAT32: /* the stored pattern is pre's */
        count_lanes(pre, dst, true, off, n, f->inf_pattern, f->min_normal_pattern, c, ex);
        return;
    case DTYPE_FLOAT16:
    case DTYPE_BFLOAT16:
        count_lanes(pre, dst, false, off, n, f->inf_pattern, f->min_normal_pattern, c, ex);
        return;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    not_a_format("count_rounding", dt);
}

typedef uint8_t u8x32 __attribute__((vector_size(32)));
typedef uint64_t u64x4 __attribute__((vector_size(32)));
#define SELECT8(mask, a, b) (((u8x32)(mask) & (a)) | (~(u8x32)(mask) & (b)))

/* the sum of a vector's 32 bytes */
static inline __attribute__((always_inline)) uint32_t sum_bytes(u8x32 v)
{
    u64x4 x = (u64x4)v;
    x = (x & 0x00ff00ff00ff00ffull) + ((x >> 8) & 0x00ff00ff00ff00ffull);
    x = (x & 0x0000ffff0000ffffull) + ((x >> 16) & 0x0000ffff0000ffffull);
    x = (x & 0x00000000ffffffffull) + (x >> 32);
    return (uint32_t)(x[0] + x[1] + x[2] + x[3]);
}

/*
 * he[e] = how many of ex[0..n) equal e, n <= CPU_CHUNK. A chunk's exponents usually span
 * 10 to 25 values: when those other than 0 and 255 span at most HIST_SPAN, every value in
 * the span (and 0 and 255) is counted by vector compares over all the bytes, four values
 * per pass, in byte counters (at most CPU_CHUNK / 32 = 128 per lane); otherwise one
 * increment per byte in eight tables in turn, so that runs of equal bytes do not wait on
 * each other.
 */
#define HIST_SPAN 32
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
hist_bytes(const uint8_t *ex, int n, uint32_t *he)
{
    memset(he, 0, 256 * sizeof *he);
    int nv = n / 32;
    const u8x32 none = {0}, all = ~none;
    u8x32 lo = all, hi = none;
    for (int v = 0; v < nv; v++) {
        u8x32 x;
        memcpy(&x, ex + 32 * v, sizeof x);
        u8x32 x_lo = SELECT8(x == 0, all, x), x_hi = SELECT8(x == 255, none, x);
        lo = SELECT8(x_lo < lo, x_lo, lo);
        hi = SELECT8(x_hi > hi, x_hi, hi);
    }
    int e_lo = 255, e_hi = 0;
    for (int k = 0; k < 32; k++) {
        e_lo = lo[k] < e_lo ? lo[k] : e_lo;
        e_hi = hi[k] > e_hi ? hi[k] : e_hi;
    }
    if (e_hi - e_lo < HIST_SPAN) {
        int values[HIST_SPAN + 5], nval = 0;
        values[nval++] = 0;
        values[nval++] = 255;
        for (int e = e_lo; e <= e_hi; e++)
            values[nval++] = e;
        while (nval % 4) /* padding: counted again into a scratch slot */
            values[nval++] = -1;
        for (int q = 0; q < nval; q += 4) {
            u8x32 acc[4] = {none, none, none, none};
            for (int v = 0; v < nv; v++) {
                u8x32 x;
                memcpy(&x, ex + 32 * v, sizeof x);
                for (int k = 0; k < 4; k++)
                    acc[k] -= (u8x32)(x == (uint8_t)values[q + k]);
            }
            for (int k = 0; k < 4; k++)
                if (values[q + k] >= 0)
                    he[values[q + k]] += sum_bytes(acc[k]);
        }
    } else {
        uint32_t t[8][256];
        memset(t, 0, sizeof t);
        for (int i = 0; i < 32 * nv; i += 8)
            for (int k = 0; k < 8; k++)
                t[k][ex[i + k]]++;
        for (int k = 0; k < 8; k++)
            for (int e = 0; e < 256; e++)
                he[e] += t[k][e];
    }
    for (int i = 32 * nv; i < n; i++)
        he[ex[i]]++;
}

/* the bookkeeping of n <= CPU_CHUNK stored values: counts, then the histogram of pre */
static void tally(const float *pre, const void *dst, dtype dt, int64_t off, int n, round_stats *st)
{
    uint8_t ex[CPU_CHUNK];
    bit_counts b = {.pmin = UINT32_MAX};
    count_rounding(pre, dst, dt, off, n, &b, ex);
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
    round_counts_merge(&st->counts, &c);
    /* Byte 0 holds zeros (counted above) and float32 subnormals, byte 255 inf and NaN: when
     * there are any of the latter, they are binned one by one. */
    uint32_t he[256];
    hist_bytes(ex, n, he);
    for (int e = 1; e < 255; e++)
        st->hist[e - 127 - HIST_MIN_EXP] += he[e];
    uint32_t e0 = he[0], e255 = he[255];
    st->hist[HIST_ZERO] += b.pre_zeros;
    if (e0 != b.pre_zeros || e255)
        for (int i = 0; i < n; i++) {
            uint32_t a = float_bits(pre[i]) & 0x7fffffffu;
            if (a != 0 && (a < 0x00800000u || a >= 0x7f800000u))
                st->hist[hist_bin(pre[i])]++;
        }
    st->numel += n;
}

void cpu_store(const float *pre, void *dst, dtype dt, int64_t off, int64_t n, round_stats *st)
{
    store_values(pre, dst, dt, off, n);
    for (int64_t k = 0; st && k < n; k += CPU_CHUNK)
        tally(pre + k, dst, dt, off + k, (int)(n - k < CPU_CHUNK ? n - k : CPU_CHUNK), st);
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
    for (int64_t i = 0; i < n; i++)
        buf[i] = c->v;
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
