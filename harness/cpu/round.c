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

static void store_values(const float *pre, void *dst, dtype dt, int64_t off, int64_t n)
{
    static int f16c = -1;
    if (f16c < 0)
        f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    if (dt == DTYPE_FLOAT16 && f16c) {
        store_half_f16c(pre, (uint16_t *)dst + off, n);
    } else if (dt == DTYPE_FLOAT32) {
        if ((float *)dst + off != pre)
            memcpy((float *)dst + off, pre, sizeof(float) * (size_t)n);
    } else {
        for (int64_t i = 0; i < n; i++)
            store_from_float(dst, dt, off + i, pre[i]);
    }
}

/*
 * The counts of a rounding, from bit patterns: for IEEE formats the magnitude's bit pattern
 * orders like its value, so amax and amin_nonzero are an integer max and min, and every
 * class is a comparison; the same classes as round_tally() (half.h). `inf` is the pattern of
 * +inf in the stored format, `norm` of its smallest normal.
 */
typedef struct bit_counts {
    uint32_t zeros, underflow, subnormal, overflow, nan, pmax, pmin;
} bit_counts;

static void count_bits(const float *pre, const uint32_t *post, int n, uint32_t inf, uint32_t norm,
                       bit_counts *c)
{
    for (int i = 0; i < n; i++) {
        uint32_t a = float_bits(pre[i]) & 0x7fffffffu, p = post[i];
        uint32_t finite = a < 0x7f800000u, zero = p == 0;
        c->zeros += zero;
        c->underflow += zero & (a != 0) & finite;
        c->subnormal += p - 1u < norm - 1u;
        c->overflow += (p == inf) & finite;
        c->nan += p > inf;
        uint32_t value = p > inf ? 0 : p, nonzero = p - 1u < inf ? p : UINT32_MAX;
        c->pmax = value > c->pmax ? value : c->pmax;
        c->pmin = nonzero < c->pmin ? nonzero : c->pmin;
    }
}

/* count_bits, eight elements at a time */
__attribute__((target("avx2"))) static void count_bits_avx2(const float *pre, const uint32_t *post,
                                                            int n, uint32_t inf, uint32_t norm,
                                                            bit_counts *c)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
    const __m256i f_inf = _mm256_set1_epi32(0x7f800000), v_inf = _mm256_set1_epi32((int)inf);
    const __m256i v_norm1 = _mm256_set1_epi32((int)(norm - 1)), zero = _mm256_setzero_si256();
    const __m256i flip = _mm256_set1_epi32(INT32_MIN); /* unsigned compares via signed ones */
    __m256i zeros = zero, under = zero, sub = zero, over = zero, nans = zero;
    __m256i pmax = zero, pmin = _mm256_set1_epi32(-1);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(pre + i)), abs_mask);
        __m256i p = _mm256_loadu_si256((const __m256i *)(post + i));
        __m256i finite = _mm256_cmpgt_epi32(f_inf, a); /* a < inf (both non-negative) */
        __m256i is_zero = _mm256_cmpeq_epi32(p, zero);
        __m256i a_nonzero = _mm256_xor_si256(_mm256_cmpeq_epi32(a, zero), _mm256_set1_epi32(-1));
        __m256i pm1 = _mm256_sub_epi32(p, one);
        __m256i is_sub =
            _mm256_cmpgt_epi32(_mm256_xor_si256(v_norm1, flip), _mm256_xor_si256(pm1, flip));
        __m256i is_inf = _mm256_cmpeq_epi32(p, v_inf);
        __m256i is_nan = _mm256_cmpgt_epi32(p, v_inf); /* p < 2^31: a signed compare is fine */
        zeros = _mm256_sub_epi32(zeros, is_zero);
        under =
            _mm256_sub_epi32(under, _mm256_and_si256(_mm256_and_si256(is_zero, a_nonzero), finite));
        sub = _mm256_sub_epi32(sub, is_sub);
        over = _mm256_sub_epi32(over, _mm256_and_si256(is_inf, finite));
        nans = _mm256_sub_epi32(nans, is_nan);
        pmax = _mm256_max_epu32(pmax, _mm256_andnot_si256(is_nan, p));
        __m256i in_range =
            _mm256_cmpgt_epi32(_mm256_xor_si256(v_inf, flip), _mm256_xor_si256(pm1, flip));
        __m256i nonzero = _mm256_or_si256(_mm256_and_si256(in_range, p),
                                          _mm256_andnot_si256(in_range, _mm256_set1_epi32(-1)));
        /* p - 1 < inf also holds for p == inf: in_range is p - 1 < inf, i.e. 1 <= p <= inf */
        pmin = _mm256_min_epu32(pmin, nonzero);
    }
    uint32_t lanes[7][8];
    _mm256_storeu_si256((__m256i *)lanes[0], zeros);
    _mm256_storeu_si256((__m256i *)lanes[1], under);
    _mm256_storeu_si256((__m256i *)lanes[2], sub);
    _mm256_storeu_si256((__m256i *)lanes[3], over);
    _mm256_storeu_si256((__m256i *)lanes[4], nans);
    _mm256_storeu_si256((__m256i *)lanes[5], pmax);
    _mm256_storeu_si256((__m256i *)lanes[6], pmin);
    for (int k = 0; k < 8; k++) {
        c->zeros += lanes[0][k], c->underflow += lanes[1][k], c->subnormal += lanes[2][k];
        c->overflow += lanes[3][k], c->nan += lanes[4][k];
        c->pmax = lanes[5][k] > c->pmax ? lanes[5][k] : c->pmax;
        c->pmin = lanes[6][k] < c->pmin ? lanes[6][k] : c->pmin;
    }
    count_bits(pre + i, post + i, n - i, inf, norm, c);
}

static float pattern_value(uint32_t p, dtype dt)
{
    return dt == DTYPE_FLOAT16    ? float_from_half((uint16_t)p)
           : dt == DTYPE_BFLOAT16 ? float_from_bf16((uint16_t)p)
                                  : bits_float(p);
}

/* the bookkeeping of n <= CPU_CHUNK stored values: counts, then the histogram of pre */
static void tally(const float *pre, const void *dst, dtype dt, int64_t off, int n, round_stats *st)
{
    static int avx2 = -1;
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2");
    uint32_t post[CPU_CHUNK];
    uint32_t inf = 0x7f800000u, norm = 0x00800000u;
    if (dt == DTYPE_FLOAT32) {
        for (int i = 0; i < n; i++)
            post[i] = float_bits(((const float *)dst)[off + i]) & 0x7fffffffu;
    } else {
        for (int i = 0; i < n; i++)
            post[i] = ((const uint16_t *)dst)[off + i] & 0x7fffu;
        inf = dt == DTYPE_FLOAT16 ? 0x7c00u : 0x7f80u;
        norm = dt == DTYPE_FLOAT16 ? 0x0400u : 0x0080u;
    }
    bit_counts b = {.pmin = UINT32_MAX};
    (avx2 ? count_bits_avx2 : count_bits)(pre, post, n, inf, norm, &b);
    round_counts c = {b.zeros,
                      b.underflow,
                      b.subnormal,
                      b.overflow,
                      b.nan,
                      pattern_value(b.pmax, dt),
                      b.pmin == UINT32_MAX ? bits_float(0x7f800000u) : pattern_value(b.pmin, dt)};
    round_counts_merge(&st->counts, &c);
    /* log2|pre| of a normal float is its exponent field, so the histogram is first taken of
     * the 8-bit field (four copies in turn, so that runs of equal bins do not wait on each
     * other); zeros, subnormals (field 0), inf and NaN (field 255) are then binned one by
     * one. */
    uint32_t he[4][256];
    memset(he, 0, sizeof he);
    for (int i = 0; i < n; i++)
        he[i & 3][(float_bits(pre[i]) >> 23) & 0xffu]++;
    for (int e = 1; e < 255; e++)
        st->hist[e - 127 - HIST_MIN_EXP] += (int64_t)he[0][e] + he[1][e] + he[2][e] + he[3][e];
    if (he[0][0] + he[1][0] + he[2][0] + he[3][0] + he[0][255] + he[1][255] + he[2][255] +
        he[3][255])
        for (int i = 0; i < n; i++) {
            uint32_t e = (float_bits(pre[i]) >> 23) & 0xffu;
            if (e == 0 || e == 255)
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
    for (int64_t i = 0; i < n; i++)
        buf[i] = load_as_float(c->src->data, c->src->dtype, off + i) * c->s;
    cpu_store(buf, c->dst->data, c->dst->dtype, off, n, st);
}

static void scale_into(const tensor *src, float s, tensor *dst, round_stats *st)
{
    scale_ctx c = {src, s, dst};
    cpu_parallel_chunks(src->numel, scale_chunk, &c, st);
}

void cpu_cast(backend *be, const tensor *src, tensor *dst, round_stats *st)
{
    (void)be;
    scale_into(src, 1.0f, dst, st);
}

void cpu_mul_scalar(backend *be, const tensor *src, float s, tensor *dst, round_stats *st)
{
    (void)be;
    scale_into(src, s, dst, st);
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

void cpu_fill(backend *be, tensor *dst, float value)
{
    (void)be;
    cpu_fill_counted(dst, value, NULL);
}

void cpu_observe(backend *be, const tensor *t, round_stats *st)
{
    (void)be;
    scale_into(t, 1.0f, (tensor *)t, st); /* rewrites each value with itself */
}
