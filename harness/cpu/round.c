/*
 * round.c: the CPU's rounding store and the elementwise ops that are only a rounding:
 * cast, mul_scalar, fill, observe. Twin of kernels/round.cu.
 */
#include "cpu.h"

void cpu_store(const float *pre, void *dst, dtype dt, int64_t off, int64_t n, round_stats *st)
{
    if (!st) {
        for (int64_t i = 0; i < n; i++)
            store_from_float(dst, dt, off + i, pre[i]);
        return;
    }
    float min_normal = dtype_min_normal(dt);
    round_counts c;
    round_counts_init(&c);
    int64_t *hist = st->hist;
    for (int64_t i = 0; i < n; i++) {
        float x = pre[i];
        float post = store_from_float(dst, dt, off + i, x);
        round_tally(&c, x, post, min_normal);
        hist[hist_bin(x)]++;
    }
    round_counts_merge(&st->counts, &c);
    st->numel += n;
}

/* dst[i] = round(float(src[i]) * s), chunk by chunk (src may be dst) */
static void scale_into(const tensor *src, float s, tensor *dst, round_stats *st)
{
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < src->numel; off += CPU_CHUNK) {
        int64_t n = src->numel - off < CPU_CHUNK ? src->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++)
            buf[i] = load_as_float(src->data, src->dtype, off + i) * s;
        cpu_store(buf, dst->data, dst->dtype, off, n, st);
    }
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

void cpu_fill(backend *be, tensor *dst, float value)
{
    (void)be;
    for (int64_t i = 0; i < dst->numel; i++)
        store_from_float(dst->data, dst->dtype, i, value);
}

void cpu_observe(backend *be, const tensor *t, round_stats *st)
{
    (void)be;
    scale_into(t, 1.0f, (tensor *)t, st); /* rewrites each value with itself */
}
