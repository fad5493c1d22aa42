/*
 * norm.c: the normalizations' forward and backward on the CPU (twin of kernels/norm.cu):
 * layer_norm's, rms_norm's and group_norm's over x viewed as [n, groups, cpg, inner] (backend.h's
 * norm_geom; one row is one (n, group): its cpg * inner values share a mean and an rstd),
 * and batch_norm's (at the end), whose statistics are per channel over N and HW.
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
    /* Welford, as WelfordOps in aten/src/ATen/native/SharedReduceOps.h; rms_norm's sum of
     * squares, as cuWelfordOnlineSum's rms_norm branch (layer_norm_kernel.cu) */
    float m = 0.0f, m2 = 0.0f;
    for (int64_t j = 0; j < cols; j++) {
        float v = load_as_float(c->x->data, c->x->dtype, base + j);
        if (g->form == NORM_RMS) {
            m2 += v * v;
            continue;
        }
        float d = v - m;
        m += d / (float)(j + 1);
        m2 += d * (v - m);
    }
    float var = m2 / (float)cols; /* rms_norm: the mean of the squares */
    float ms = c->mean_out ? store_from_float(c->mean_out->data, c->mean_out->dtype, r, m) : 0.0f;
    float rs =
        store_from_float(c->rstd_out->data, c->rstd_out->dtype, r, 1.0f / sqrtf(var + g->eps));
    float buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = j0; j < j0 + n; j++) {
            int64_t ch = norm_channel(g, r, j);
            float v = load_as_float(c->x->data, c->x->dtype, base + j);
            float w = weight_at(c->w, ch),
                  b = c->b ? load_as_float(c->b->data, c->b->dtype, ch) : 0.0f;
            switch (g->form) {
            case NORM_CENTERED:
                buf[j - j0] = (v - ms) * rs * w + b;
                break;
            case NORM_FUSED: {
                float a = rs * w;
                buf[j - j0] = v * a + (b - a * ms);
                break;
            }
            case NORM_RMS:
                buf[j - j0] = w * (rs * v);
                break;
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

/* rms_norm's dx, as layer_norm_grad_input_kernel's rms_norm branch: s2 = sum of
 * dy w x rstd over the row, dx = (cols w dy - x rstd s2) (rstd / cols) */
static void rms_backward_input_row(const norm_ctx *c, int64_t r, float rs, round_stats *st)
{
    const norm_geom *g = c->g;
    int64_t cols = g->cpg * g->inner, base = r * cols;
    float s2 = 0.0f;
    for (int64_t j = 0; j < cols; j++)
        s2 += load_as_float(c->dy->data, c->dy->dtype, base + j) *
              weight_at(c->w, norm_channel(g, r, j)) *
              load_as_float(c->x->data, c->x->dtype, base + j) * rs;
    float fh = (float)cols, term1 = 1.0f / fh * rs, buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = j0; j < j0 + n; j++) {
            float x = load_as_float(c->x->data, c->x->dtype, base + j);
            float f = fh * weight_at(c->w, norm_channel(g, r, j)) *
                      load_as_float(c->dy->data, c->dy->dtype, base + j);
            f -= x * rs * s2;
            buf[j - j0] = f * term1;
        }
        cpu_store(buf, c->y->data, c->y->dtype, base + j0, n, st);
    }
}

static void backward_input_row(const void *p, int64_t r, round_stats *st)
{
    const norm_ctx *c = p;
    const norm_geom *g = c->g;
    int64_t cols = g->cpg * g->inner, base = r * cols;
    float rs = load_as_float(c->rstd->data, c->rstd->dtype, r);
    if (g->form == NORM_RMS) {
        rms_backward_input_row(c, r, rs, st);
        return;
    }
    float m = load_as_float(c->mean->data, c->mean->dtype, r);
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
            float m = mean ? load_as_float(mean->data, mean->dtype, r) : 0.0f;
            float rs = load_as_float(rstd->data, rstd->dtype, r);
            for (int64_t i = 0; i < g->inner; i++) {
                int64_t at = r * cols + k * g->inner + i;
                float dyv = load_as_float(dy->data, dy->dtype, at),
                      xv = load_as_float(x->data, x->dtype, at);
                /* rms_norm: dY * X * rstd (GammaBetaBackward's rms_norm branch) */
                acc += g->form == NORM_RMS ? dyv * xv * rs : dyv * ((xv - m) * rs);
            }
        }
        sums[ch] = acc;
    }
    cpu_store(sums, dw->data, dw->dtype, 0, channels, st);
    cpu_scratch_free(be, sums, channels);
    return 0;
}

/* ---- batch_norm: statistics per channel over N and HW (g = {N, C, 1, HW}) ---- */
/* As PyTorch's native CUDA kernels (aten/src/ATen/native/cuda/Normalization.cuh:
 * batch_norm_collect_statistics_kernel, batch_norm_transform_input_kernel,
 * batch_norm_backward_kernel) with float32 accumulation; cuDNN, which PyTorch picks for
 * float32 and for float16 input with float32 parameters, computes the same quantities in
 * its own order. */

/* element i of channel ch's values: n-th sample, i-th position */
static inline int64_t bn_at(const norm_geom *g, int64_t n, int64_t ch, int64_t i)
{
    return (n * g->groups + ch) * g->inner + i;
}

int cpu_batch_norm_stats(backend *be, const norm_geom *g, const tensor *x, float momentum,
                         tensor *mean, tensor *invstd, tensor *running_mean, tensor *running_var,
                         round_stats *st_mean, round_stats *st_var)
{
    int64_t channels = g->groups, count = g->n * g->inner;
    float *rm = cpu_scratch(be, channels), *rv = cpu_scratch(be, channels);
    int rc = rm && rv ? 0 : -1;
    if (rc == 0) {
#pragma omp parallel for schedule(static) if (count * channels >= (1 << 16))
        for (int64_t ch = 0; ch < channels; ch++) {
            float m = 0.0f, m2 = 0.0f, k = 0.0f;
            for (int64_t n = 0; n < g->n; n++)
                for (int64_t i = 0; i < g->inner; i++) {
                    float v = load_as_float(x->data, x->dtype, bn_at(g, n, ch, i));
                    k += 1.0f;
                    float d = v - m;
                    m += d / k;
                    m2 += d * (v - m);
                }
            float var = m2 / (float)count, unbiased = m2 / (float)(count - 1);
            store_from_float(mean->data, mean->dtype, ch, m);
            store_from_float(invstd->data, invstd->dtype, ch, 1.0f / sqrtf(var + g->eps));
            rm[ch] = momentum * m +
                     (1.0f - momentum) * load_as_float(running_mean->data, running_mean->dtype, ch);
            rv[ch] = momentum * unbiased +
                     (1.0f - momentum) * load_as_float(running_var->data, running_var->dtype, ch);
        }
        cpu_store(rm, running_mean->data, running_mean->dtype, 0, channels, st_mean);
        cpu_store(rv, running_var->data, running_var->dtype, 0, channels, st_var);
    }
    cpu_scratch_free(be, rv, channels);
    cpu_scratch_free(be, rm, channels);
    return rc;
}

typedef struct bn_ctx {
    const norm_geom *g;
    const tensor *x, *dy, *mean, *invstd, *w, *b;
    tensor *out;
} bn_ctx;

/* one (n, channel) plane of HW values */
static void bn_forward_plane(const void *p, int64_t plane, round_stats *st)
{
    const bn_ctx *c = p;
    const norm_geom *g = c->g;
    int64_t ch = plane % g->groups, base = plane * g->inner;
    float m = load_as_float(c->mean->data, c->mean->dtype, ch);
    float is = load_as_float(c->invstd->data, c->invstd->dtype, ch);
    float w = weight_at(c->w, ch), b = c->b ? load_as_float(c->b->data, c->b->dtype, ch) : 0.0f;
    float buf[CPU_CHUNK];
    for (int64_t i0 = 0; i0 < g->inner; i0 += CPU_CHUNK) {
        int64_t n = g->inner - i0 < CPU_CHUNK ? g->inner - i0 : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++)
            buf[i] = w * (load_as_float(c->x->data, c->x->dtype, base + i0 + i) - m) * is + b;
        cpu_store(buf, c->out->data, c->out->dtype, base + i0, n, st);
    }
}

int cpu_batch_norm_forward(backend *be, const norm_geom *g, const tensor *x, const tensor *mean,
                           const tensor *invstd, const tensor *w, const tensor *b, tensor *y,
                           round_stats *st)
{
    (void)be;
    bn_ctx c = {.g = g, .x = x, .mean = mean, .invstd = invstd, .w = w, .b = b, .out = y};
    for_norm_rows(g->n * g->groups, g->inner, bn_forward_plane, &c, st);
    return 0;
}

/* sum(dy) and sum(dy (x - mean)) of each channel, in float32 in (n, i) order */
static int bn_channel_sums(backend *be, const norm_geom *g, const tensor *dy, const tensor *x,
                           const tensor *mean, float **sum_dy, float **dot)
{
    int64_t channels = g->groups;
    *sum_dy = cpu_scratch(be, channels);
    *dot = cpu_scratch(be, channels);
    if (!*sum_dy || !*dot)
        return -1;
#pragma omp parallel for schedule(static) if (g->n * g->inner * channels >= (1 << 16))
    for (int64_t ch = 0; ch < channels; ch++) {
        float m = load_as_float(mean->data, mean->dtype, ch), s = 0.0f, d = 0.0f;
        for (int64_t n = 0; n < g->n; n++)
            for (int64_t i = 0; i < g->inner; i++) {
                int64_t at = bn_at(g, n, ch, i);
                float v = load_as_float(dy->data, dy->dtype, at);
                s += v;
                d += v * (load_as_float(x->data, x->dtype, at) - m);
            }
        (*sum_dy)[ch] = s;
        (*dot)[ch] = d;
    }
    return 0;
}

typedef struct bn_grad_ctx {
    bn_ctx c;
    const float *sum_dy, *dot;
} bn_grad_ctx;

static void bn_backward_plane(const void *p, int64_t plane, round_stats *st)
{
    const bn_grad_ctx *gc = p;
    const bn_ctx *c = &gc->c;
    const norm_geom *g = c->g;
    int64_t ch = plane % g->groups, base = plane * g->inner;
    float count = (float)(g->n * g->inner);
    float m = load_as_float(c->mean->data, c->mean->dtype, ch);
    float is = load_as_float(c->invstd->data, c->invstd->dtype, ch);
    /* batch_norm_backward_kernel's grad_mean, proj_scale and grad_scale */
    float grad_mean = gc->sum_dy[ch] / count, proj_scale = gc->dot[ch] / count * is * is;
    float grad_scale = is * weight_at(c->w, ch), buf[CPU_CHUNK];
    for (int64_t i0 = 0; i0 < g->inner; i0 += CPU_CHUNK) {
        int64_t n = g->inner - i0 < CPU_CHUNK ? g->inner - i0 : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++) {
            int64_t at = base + i0 + i;
            float proj = (load_as_float(c->x->data, c->x->dtype, at) - m) * proj_scale;
            buf[i] = (load_as_float(c->dy->data, c->dy->dtype, at) - proj - grad_mean) * grad_scale;
        }
        cpu_store(buf, c->out->data, c->out->dtype, base + i0, n, st);
    }
}

int cpu_batch_norm_backward_input(backend *be, const norm_geom *g, const tensor *dy,
                                  const tensor *x, const tensor *mean, const tensor *invstd,
                                  const tensor *w, tensor *dx, round_stats *st)
{
    float *sum_dy, *dot;
    int rc = bn_channel_sums(be, g, dy, x, mean, &sum_dy, &dot);
    if (rc == 0) {
        bn_grad_ctx c = {
            {.g = g, .x = x, .dy = dy, .mean = mean, .invstd = invstd, .w = w, .out = dx},
            sum_dy,
            dot};
        for_norm_rows(g->n * g->groups, g->inner, bn_backward_plane, &c, st);
    }
    cpu_scratch_free(be, dot, g->groups);
    cpu_scratch_free(be, sum_dy, g->groups);
    return rc;
}

int cpu_batch_norm_backward_weight(backend *be, const norm_geom *g, const tensor *dy,
                                   const tensor *x, const tensor *mean, const tensor *invstd,
                                   tensor *dw, round_stats *st)
{
    float *sum_dy, *dot;
    int rc = bn_channel_sums(be, g, dy, x, mean, &sum_dy, &dot);
    if (rc == 0) {
        for (int64_t ch = 0; ch < g->groups; ch++)
            dot[ch] *= load_as_float(invstd->data, invstd->dtype, ch);
        cpu_store(dot, dw->data, dw->dtype, 0, g->groups, st);
    }
    cpu_scratch_free(be, dot, g->groups);
    cpu_scratch_free(be, sum_dy, g->groups);
    return rc;
}

/* ---- batch_norm in eval mode: the running stats, read and not updated ---- */

int cpu_batch_norm_eval_stats(backend *be, const norm_geom *g, const tensor *running_mean,
                              const tensor *running_var, tensor *mean, tensor *invstd)
{
    (void)be;
    for (int64_t ch = 0; ch < g->groups; ch++) {
        float v = load_as_float(running_var->data, running_var->dtype, ch);
        store_from_float(mean->data, mean->dtype, ch,
                         load_as_float(running_mean->data, running_mean->dtype, ch));
        store_from_float(invstd->data, invstd->dtype, ch, 1.0f / sqrtf(v + g->eps));
    }
    return 0;
}

static void bn_backward_eval_plane(const void *p, int64_t plane, round_stats *st)
{
    const bn_ctx *c = p;
    const norm_geom *g = c->g;
    int64_t ch = plane % g->groups, base = plane * g->inner;
    float grad_scale = load_as_float(c->invstd->data, c->invstd->dtype, ch) * weight_at(c->w, ch);
    float buf[CPU_CHUNK];
    for (int64_t i0 = 0; i0 < g->inner; i0 += CPU_CHUNK) {
        int64_t n = g->inner - i0 < CPU_CHUNK ? g->inner - i0 : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++)
            buf[i] = load_as_float(c->dy->data, c->dy->dtype, base + i0 + i) * grad_scale;
        cpu_store(buf, c->out->data, c->out->dtype, base + i0, n, st);
    }
}

int cpu_batch_norm_backward_eval_input(backend *be, const norm_geom *g, const tensor *dy,
                                       const tensor *invstd, const tensor *w, tensor *dx,
                                       round_stats *st)
{
    (void)be;
    bn_ctx c = {.g = g, .dy = dy, .invstd = invstd, .w = w, .out = dx};
    for_norm_rows(g->n * g->groups, g->inner, bn_backward_eval_plane, &c, st);
    return 0;
}
