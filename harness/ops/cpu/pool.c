/*
 * pool.c: max_pool2d and avg_pool2d on the CPU (twin of kernels/pool.cu; adaptive_avg_pool2d
 * to 1x1 is the mean row's, reduce.c). Layout NCHW; the geometry is a conv2d_geom with
 * c_in = c_out and dilation 1; one (n, c) plane at a time. As PyTorch's CUDA kernels
 * (aten/src/ATen/native/cuda/DilatedMaxPool2d.cu, AveragePool2d.cu): float32 accumulation,
 * each output rounded once; the backward passes gather, for each input element, the gradients of
 * the windows that hold it (max: where it was the argmax) and round their float32 sum once.
 */
#include <math.h>

#include "cpu.h"

typedef void (*plane_fn)(const void *ctx, int64_t plane, round_stats *st);

static void for_planes(int64_t planes, int64_t per, plane_fn fn, const void *ctx, round_stats *st)
{
#pragma omp parallel if (planes * per >= (1 << 16))
    {
        round_stats local;
        round_stats *lp = NULL;
        if (st) {
            round_stats_init(&local);
            lp = &local;
        }
#pragma omp for schedule(static)
        for (int64_t p = 0; p < planes; p++)
            fn(ctx, p, lp);
        if (st) {
#pragma omp critical(cpu_stats_merge)
            round_stats_merge(st, &local);
        }
    }
}

typedef struct pool_ctx {
    const conv2d_geom *g;
    const tensor *in, *indices;
    tensor *out, *idx_out;
    bool count_include_pad;
} pool_ctx;

/* the outputs whose windows hold input row (or column) i: [lo, hi) */
static void windows_of(int64_t i, int64_t k, int64_t s, int64_t p, int64_t n_out, int64_t *lo,
                       int64_t *hi)
{
    int64_t a = i + p - k + 1; /* the first o with o * s + k - 1 >= i + p */
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t b = (i + p) / s + 1;
    *hi = b < n_out ? b : n_out;
}

static void max_forward_plane(const void *p, int64_t plane, round_stats *st)
{
    const pool_ctx *c = p;
    const conv2d_geom *g = c->g;
    int64_t in_base = plane * g->h_in * g->w_in, out_base = plane * g->h_out * g->w_out;
    int64_t *idx = c->idx_out->data;
    float buf[CPU_CHUNK];
    int64_t n = 0, at = out_base;
    for (int64_t oh = 0; oh < g->h_out; oh++)
        for (int64_t ow = 0; ow < g->w_out; ow++) {
            int64_t h0 = oh * g->stride - g->padding, w0 = ow * g->stride - g->padding;
            float mx = -INFINITY;
            int64_t arg = (h0 < 0 ? 0 : h0) * g->w_in + (w0 < 0 ? 0 : w0);
            for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + g->kh && h < g->h_in; h++)
                for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + g->kw && w < g->w_in; w++) {
                    float v = load_as_float(c->in->data, c->in->dtype, in_base + h * g->w_in + w);
                    if (v > mx || isnan(v)) { /* max_pool_forward_nchw: the last NaN wins */
                        mx = v;
                        arg = h * g->w_in + w;
                    }
                }
            idx[out_base + oh * g->w_out + ow] = arg;
            buf[n++] = mx;
            if (n == CPU_CHUNK) {
                cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
                at += n, n = 0;
            }
        }
    cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
}

int cpu_max_pool2d_forward(backend *be, const conv2d_geom *g, const tensor *x, tensor *y,
                           tensor *indices, round_stats *st)
{
    (void)be;
    pool_ctx c = {.g = g, .in = x, .out = y, .idx_out = indices};
    for_planes(g->n * g->c_in, g->h_out * g->w_out, max_forward_plane, &c, st);
    return 0;
}

static void max_backward_plane(const void *p, int64_t plane, round_stats *st)
{
    const pool_ctx *c = p;
    const conv2d_geom *g = c->g;
    int64_t in_base = plane * g->h_in * g->w_in, out_base = plane * g->h_out * g->w_out;
    const int64_t *idx = c->indices->data;
    float buf[CPU_CHUNK];
    int64_t n = 0, at = in_base;
    for (int64_t h = 0; h < g->h_in; h++)
        for (int64_t w = 0; w < g->w_in; w++) {
            int64_t oh0, oh1, ow0, ow1;
            windows_of(h, g->kh, g->stride, g->padding, g->h_out, &oh0, &oh1);
            windows_of(w, g->kw, g->stride, g->padding, g->w_out, &ow0, &ow1);
            float acc = 0.0f;
            for (int64_t oh = oh0; oh < oh1; oh++)
                for (int64_t ow = ow0; ow < ow1; ow++) {
                    int64_t o = out_base + oh * g->w_out + ow;
                    if (idx[o] == h * g->w_in + w)
                        acc += load_as_float(c->in->data, c->in->dtype, o);
                }
            buf[n++] = acc;
            if (n == CPU_CHUNK) {
                cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
                at += n, n = 0;
            }
        }
    cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
}

int cpu_max_pool2d_backward(backend *be, const conv2d_geom *g, const tensor *dy,
                            const tensor *indices, tensor *dx, round_stats *st)
{
    (void)be;
    pool_ctx c = {.g = g, .in = dy, .indices = indices, .out = dx};
    for_planes(g->n * g->c_in, g->h_in * g->w_in, max_backward_plane, &c, st);
    return 0;
}

/* avg_pool2d's divisor of output (oh, ow) (avg_pool2d_out_cuda_frame) */
static float avg_divisor(const conv2d_geom *g, bool count_include_pad, int64_t oh, int64_t ow)
{
    int64_t h0 = oh * g->stride - g->padding, w0 = ow * g->stride - g->padding;
    int64_t h1 = h0 + g->kh < g->h_in + g->padding ? h0 + g->kh : g->h_in + g->padding;
    int64_t w1 = w0 + g->kw < g->w_in + g->padding ? w0 + g->kw : g->w_in + g->padding;
    if (count_include_pad)
        return (float)((h1 - h0) * (w1 - w0));
    h0 = h0 < 0 ? 0 : h0, w0 = w0 < 0 ? 0 : w0;
    h1 = h1 < g->h_in ? h1 : g->h_in, w1 = w1 < g->w_in ? w1 : g->w_in;
    return (float)((h1 - h0) * (w1 - w0));
}

static void avg_forward_plane(const void *p, int64_t plane, round_stats *st)
{
    const pool_ctx *c = p;
    const conv2d_geom *g = c->g;
    int64_t in_base = plane * g->h_in * g->w_in, out_base = plane * g->h_out * g->w_out;
    float buf[CPU_CHUNK];
    int64_t n = 0, at = out_base;
    for (int64_t oh = 0; oh < g->h_out; oh++)
        for (int64_t ow = 0; ow < g->w_out; ow++) {
            int64_t h0 = oh * g->stride - g->padding, w0 = ow * g->stride - g->padding;
            float sum = 0.0f;
            for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + g->kh && h < g->h_in; h++)
                for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + g->kw && w < g->w_in; w++)
                    sum += load_as_float(c->in->data, c->in->dtype, in_base + h * g->w_in + w);
            buf[n++] = sum / avg_divisor(g, c->count_include_pad, oh, ow);
            if (n == CPU_CHUNK) {
                cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
                at += n, n = 0;
            }
        }
    cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
}

int cpu_avg_pool2d_forward(backend *be, const conv2d_geom *g, bool count_include_pad,
                           const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    pool_ctx c = {.g = g, .in = x, .out = y, .count_include_pad = count_include_pad};
    for_planes(g->n * g->c_in, g->h_out * g->w_out, avg_forward_plane, &c, st);
    return 0;
}

static void avg_backward_plane(const void *p, int64_t plane, round_stats *st)
{
    const pool_ctx *c = p;
    const conv2d_geom *g = c->g;
    int64_t in_base = plane * g->h_in * g->w_in, out_base = plane * g->h_out * g->w_out;
    float buf[CPU_CHUNK];
    int64_t n = 0, at = in_base;
    for (int64_t h = 0; h < g->h_in; h++)
        for (int64_t w = 0; w < g->w_in; w++) {
            int64_t oh0, oh1, ow0, ow1;
            windows_of(h, g->kh, g->stride, g->padding, g->h_out, &oh0, &oh1);
            windows_of(w, g->kw, g->stride, g->padding, g->w_out, &ow0, &ow1);
            float acc = 0.0f;
            for (int64_t oh = oh0; oh < oh1; oh++)
                for (int64_t ow = ow0; ow < ow1; ow++)
                    acc += load_as_float(c->in->data, c->in->dtype, out_base + oh * g->w_out + ow) /
                           avg_divisor(g, c->count_include_pad, oh, ow);
            buf[n++] = acc;
            if (n == CPU_CHUNK) {
                cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
                at += n, n = 0;
            }
        }
    cpu_store(buf, c->out->data, c->out->dtype, at, n, st);
}

int cpu_avg_pool2d_backward(backend *be, const conv2d_geom *g, bool count_include_pad,
                            const tensor *dy, tensor *dx, round_stats *st)
{
    (void)be;
    pool_ctx c = {.g = g, .in = dy, .out = dx, .count_include_pad = count_include_pad};
    for_planes(g->n * g->c_in, g->h_in * g->w_in, avg_backward_plane, &c, st);
    return 0;
}
