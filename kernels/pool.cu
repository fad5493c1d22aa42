/*
 * pool.cu: max_pool2d and avg_pool2d (twin of harness/ops/cpu/pool.c, with the same formulas,
 * loop orders and rounding points): one thread per output in the forward passes, one per
 * input element in the backward passes (the windows that hold it, gathered in float32), as
 * PyTorch's DilatedMaxPool2d.cu and AveragePool2d.cu do. (adaptive_avg_pool2d to 1x1 is the
 * mean row's, reduce.cu.)
 */
#include "cuda.cuh"

static __device__ inline void windows_of(int64_t i, int64_t k, int64_t s, int64_t p, int64_t n_out,
                                         int64_t *lo, int64_t *hi)
{
    int64_t a = i + p - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t b = (i + p) / s + 1;
    *hi = b < n_out ? b : n_out;
}

__global__ void max_pool_forward_kernel(conv2d_geom g, const void *x, dtype x_dt, void *y,
                                        dtype y_dt, int64_t *indices, int64_t n, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, y_dt);
    GRID_STRIDE(o, n)
    {
        int64_t plane = o / (g.h_out * g.w_out), oh = o / g.w_out % g.h_out, ow = o % g.w_out;
        int64_t in_base = plane * g.h_in * g.w_in;
        int64_t h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
        float mx = bits_float(0xff800000u); /* -inf */
        int64_t arg = (h0 < 0 ? 0 : h0) * g.w_in + (w0 < 0 ? 0 : w0);
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + g.kh && h < g.h_in; h++)
            for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + g.kw && w < g.w_in; w++) {
                float v = load_as_float(x, x_dt, in_base + h * g.w_in + w);
                if (v > mx || v != v) {
                    mx = v;
                    arg = h * g.w_in + w;
                }
            }
        indices[o] = arg;
        tally_store(&t, y, y_dt, o, mx);
    }
    tally_flush(&t);
}

int cuda_max_pool2d_forward(backend *be, const conv2d_geom *g, const tensor *x, tensor *y,
                            tensor *indices, round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    max_pool_forward_kernel<<<cuda_grid(c, y->numel), CUDA_THREADS, 0, c->stream>>>(
        *g, x->data, x->dtype, y->data, y->dtype, (int64_t *)indices->data, y->numel, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, y->numel);
    return 0;
}

struct max_pool_grad_op {
    conv2d_geom g;
    const void *dy;
    dtype dy_dt;
    const int64_t *indices;
    __device__ float operator()(int64_t i) const
    {
        int64_t plane = i / (g.h_in * g.w_in), h = i / g.w_in % g.h_in, w = i % g.w_in;
        int64_t out_base = plane * g.h_out * g.w_out, oh0, oh1, ow0, ow1;
        windows_of(h, g.kh, g.stride, g.padding, g.h_out, &oh0, &oh1);
        windows_of(w, g.kw, g.stride, g.padding, g.w_out, &ow0, &ow1);
        float acc = 0.0f;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++) {
                int64_t o = out_base + oh * g.w_out + ow;
                if (indices[o] == h * g.w_in + w)
                    acc += load_as_float(dy, dy_dt, o);
            }
        return acc;
    }
};

int cuda_max_pool2d_backward(backend *be, const conv2d_geom *g, const tensor *dy,
                             const tensor *indices, tensor *dx, round_stats *st)
{
    launch_store(be, max_pool_grad_op{*g, dy->data, dy->dtype, (const int64_t *)indices->data}, dx,
                 st);
    return 0;
}

static __device__ inline float avg_divisor(const conv2d_geom &g, bool count_include_pad, int64_t oh,
                                           int64_t ow)
{
    int64_t h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
    int64_t h1 = h0 + g.kh < g.h_in + g.padding ? h0 + g.kh : g.h_in + g.padding;
    int64_t w1 = w0 + g.kw < g.w_in + g.padding ? w0 + g.kw : g.w_in + g.padding;
    if (count_include_pad)
        return (float)((h1 - h0) * (w1 - w0));
    h0 = h0 < 0 ? 0 : h0, w0 = w0 < 0 ? 0 : w0;
    h1 = h1 < g.h_in ? h1 : g.h_in, w1 = w1 < g.w_in ? w1 : g.w_in;
    return (float)((h1 - h0) * (w1 - w0));
}

struct avg_pool_op {
    conv2d_geom g;
    bool count_include_pad;
    const void *x;
    dtype x_dt;
    __device__ float operator()(int64_t o) const
    {
        int64_t plane = o / (g.h_out * g.w_out), oh = o / g.w_out % g.h_out, ow = o % g.w_out;
        int64_t in_base = plane * g.h_in * g.w_in;
        int64_t h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
        float sum = 0.0f;
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + g.kh && h < g.h_in; h++)
            for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + g.kw && w < g.w_in; w++)
                sum += load_as_float(x, x_dt, in_base + h * g.w_in + w);
        return sum / avg_divisor(g, count_include_pad, oh, ow);
    }
};

int cuda_avg_pool2d_forward(backend *be, const conv2d_geom *g, bool count_include_pad,
                            const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, avg_pool_op{*g, count_include_pad, x->data, x->dtype}, y, st);
    return 0;
}

struct avg_pool_grad_op {
    conv2d_geom g;
    bool count_include_pad;
    const void *dy;
    dtype dy_dt;
    __device__ float operator()(int64_t i) const
    {
        int64_t plane = i / (g.h_in * g.w_in), h = i / g.w_in % g.h_in, w = i % g.w_in;
        int64_t out_base = plane * g.h_out * g.w_out, oh0, oh1, ow0, ow1;
        windows_of(h, g.kh, g.stride, g.padding, g.h_out, &oh0, &oh1);
        windows_of(w, g.kw, g.stride, g.padding, g.w_out, &ow0, &ow1);
        float acc = 0.0f;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++)
                acc += load_as_float(dy, dy_dt, out_base + oh * g.w_out + ow) /
                       avg_divisor(g, count_include_pad, oh, ow);
        return acc;
    }
};

int cuda_avg_pool2d_backward(backend *be, const conv2d_geom *g, bool count_include_pad,
                             const tensor *dy, tensor *dx, round_stats *st)
{
    launch_store(be, avg_pool_grad_op{*g, count_include_pad, dy->data, dy->dtype}, dx, st);
    return 0;
}
