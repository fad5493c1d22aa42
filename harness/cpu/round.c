/*
 * round.c: the CPU's rounding store, the parallel chunk loop every elementwise op runs on,
 * and the ops that are only a rounding: cast, mul_scalar, fill, observe. Twin of
 * kernels/round.cu.
 */
#include "cpu.h"

/* below this many elements one thread does the work */
#define CPU_PARALLEL_MIN (4 * CPU_CHUNK)

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
