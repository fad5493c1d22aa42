/*
 * norm.c: layer_norm's and group_norm's forward and backward on the CPU (twin of
 * kernels/norm.cu), over x viewed as [n, groups, cpg, inner] (backend.h's norm_geom). One
 * row is one (n, group): its cpg * inner values share a mean and an rstd.
 *
 * As PyTorch's CUDA kernels (aten/src/ATen/native/cuda/layer_norm_kernel.cu,
 * group_norm_kernel.cu): the statistics are float32 Welford sums over the row (the biased
 * variance), rstd = 1 / sqrt(var + eps), mean and rstd stored in their tensors' dtype (float32
 * for layer_norm; group_norm's are its input's dtype outside autocast), the output computed
 * from the stored values in float32 and rounded once. The backward's row sums and dw's
 * channel sums accumulate in float32, sequentially; dx and dw are rounded once.
 * PyTorch's CUDA rstd uses rsqrtf (within 2 ulp); here it is the correctly rounded 1 / sqrt.
 */
#include <math.h>

#include "cpu.h"

/* the affine channel of element j of row r */
static inline int64_t norm_channel(const norm_geom *g, int64_t r, int64_t j)
{
    return r % g->groups * g->cpg + j / g->inner;
}

static inline float weight_at(const tensor *w, int64_t c)
{
    return w ? load_as_float(w->data, w->dtype, c) : 1.0f;
}

typedef void (*norm_row_fn)(const void *ctx, int64_t row, round_stats *st);

/* rows in parallel, each thread with its own stats, merged at the end */
static void for_norm_rows(int64_t rows, int64_t cols, norm_row_fn fn, const void *ctx,
                          round_stats *st)
{
#pragma omp parallel if (rows * cols >= (1 << 16))
    {
        round_stats local;
        round_stats *lp = NULL;
        if (st) {
            round_stats_init(&local);
            lp = &local;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            fn(ctx, r, lp);
        if (st) {
#pragma omp critical(cpu_stats_merge)
            round_stats_merge(st, &local);
        }
    }
}

typedef struct norm_ctx {
    const norm_geom *g;
    const tensor *x, *w, *b, *dy, *mean, *rstd;
    tensor *y, *mean_out, *rstd_out;
} norm_ctx;

static void forward_row(const void *p, int64_t r, round_stats *st)
{
    const norm_ctx *c = p;
    const norm_geom *g = c->g;
    int64_t cols = g->cpg * g->inner, base = r * cols;
    /* Welford, as WelfordOps in aten/src/ATen/native/SharedReduceOps.h */
    float m = 0.0f, m2 = 0.0f;
    for (int64_t j = 0; j < cols; j++) {
        float v = load_as_float(c->x->data, c->x->dtype, base + j);
        float d = v - m;
        m += d / (float)(j + 1);
        m2 += d * (v - m);
    }
    float var = m2 / (float)cols;
    float ms = store_from_float(c->mean_out->data, c->mean_out->dtype, r, m);
    float rs = store_from_float(c->rstd_out->data, c->rstd_out->dtype, r, 1.0f / sqrtf(var + g->eps));
    float buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = j0; j < j0 + n; j++) {
            int64_t ch = norm_channel(g, r, j);
            float v = load_as_float(c->x->data, c->x->dtype, base + j);
            float w = weight_at(c->w, ch), b = c->b ? load_as_float(c->b->data, c->b->dtype, ch) : 0.0f;
            switch (g->form) {
            case NORM_CENTERED:
                buf[j - j0] = (v - ms) * rs * w + b;
                break;
            case NORM_FUSED: {
                float a = rs * w;
                buf[j - j0] = v * a + (b - a * ms);
                break;
            }
            }
        }
        cpu_store(buf, c->y->data, c->y->dtype, base + j0, n, st);
    }
}

int cpu_norm_forward(backend *be, const norm_geom *g, const tensor *x, const tensor *w,
                     const tensor *b, tensor *y, tensor *mean, tensor *rstd, round_stats *st)
{
    (void)be;
    norm_ctx c = {.g = g, .x = x, .w = w, .b = b, .y = y, .mean_out = mean, .rstd_out = rstd};
    for_norm_rows(g->n * g->groups, g->cpg * g->inner, forward_row, &c, st);
    return 0;
}

static void backward_input_row(const void *p, int64_t r, round_stats *st)
{
    const norm_ctx *c = p;
    const norm_geom *g = c->g;
    int64_t cols = g->cpg * g->inner, base = r * cols;
    float m = load_as_float(c->mean->data, c->mean->dtype, r);
    float rs = load_as_float(c->rstd->data, c->rstd->dtype, r);
    float s1 = 0.0f, s2 = 0.0f; /* sum(w dy), sum(w dy xhat) */
    for (int64_t j = 0; j < cols; j++) {
        float wdy = weight_at(c->w, norm_channel(g, r, j)) *
                    load_as_float(c->dy->data, c->dy->dtype, base + j);
        float xhat = (load_as_float(c->x->data, c->x->dtype, base + j) - m) * rs;
        s1 += wdy;
        s2 += wdy * xhat;
    }
    float inv_n = 1.0f / (float)cols, buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = j0; j < j0 + n; j++) {
            float wdy = weight_at(c->w, norm_channel(g, r, j)) *
                        load_as_float(c->dy->data, c->dy->dtype, base + j);
            float xhat = (load_as_float(c->x->data, c->x->dtype, base + j) - m) * rs;
            buf[j - j0] = rs * (wdy - s1 * inv_n - xhat * (s2 * inv_n));
        }
        cpu_store(buf, c->y->data, c->y->dtype, base + j0, n, st);
    }
}

int cpu_norm_backward_input(backend *be, const norm_geom *g, const tensor *dy, const tensor *x,
                            const tensor *mean, const tensor *rstd, const tensor *w, tensor *dx,
                            round_stats *st)
{
    (void)be;
    norm_ctx c = {.g = g, .x = x, .w = w, .dy = dy, .mean = mean, .rstd = rstd, .y = dx};
    for_norm_rows(g->n * g->groups, g->cpg * g->inner, backward_input_row, &c, st);
    return 0;
}

int cpu_norm_backward_weight(backend *be, const norm_geom *g, const tensor *dy, const tensor *x,
                             const tensor *mean, const tensor *rstd, tensor *dw, round_stats *st)
{
    int64_t channels = g->groups * g->cpg, cols = g->cpg * g->inner;
    float *sums = cpu_scratch(be, channels);
    if (!sums)
        return -1;
#pragma omp parallel for schedule(static) if (g->n * cols * g->groups >= (1 << 16))
    for (int64_t ch = 0; ch < channels; ch++) {
        int64_t grp = ch / g->cpg, k = ch % g->cpg;
        float acc = 0.0f;
        for (int64_t s = 0; s < g->n; s++) {
            int64_t r = s * g->groups + grp;
            float m = load_as_float(mean->data, mean->dtype, r);
            float rs = load_as_float(rstd->data, rstd->dtype, r);
            for (int64_t i = 0; i < g->inner; i++) {
                int64_t at = r * cols + k * g->inner + i;
                acc += load_as_float(dy->data, dy->dtype, at) *
                       ((load_as_float(x->data, x->dtype, at) - m) * rs);
            }
        }
        sums[ch] = acc;
    }
    cpu_store(sums, dw->data, dw->dtype, 0, channels, st);
    cpu_scratch_free(be, sums, channels);
    return 0;
}
