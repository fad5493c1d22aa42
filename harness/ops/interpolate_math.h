/*
 * interpolate_math.h: F.interpolate(mode="nearest")'s index rules, shared by the CPU loops
 * (cpu/interpolate.c) and the CUDA kernels (kernels/interpolate.cu). From PyTorch's
 * aten/src/ATen/native/cuda/UpSample.cuh: the forward reads source index
 * min(floorf(dst * scale), in - 1) with scale = (float)(1.0 / scale_factor)
 * (nearest_neighbor_compute_source_index, compute_scales_value); the backward
 * (UpSampleNearest2d.cu's upsample_nearest2d_backward_out_frame) sums, for input index i,
 * the output indices from min(ceilf(i * s), out) to min(ceilf((i + 1) * s), out) with
 * s = (float)scale_factor (nearest_neighbor_bw_compute_source_index,
 * compute_scales_value_backwards), in float32 (accscalar_t), row by row, and rounds once.
 * The geometry is a conv2d_geom: planes n * c_in, h_in x w_in -> h_out x w_out, the
 * integer scale factor in stride.
 */
#ifndef AMPSCOPE_INTERPOLATE_MATH_H
#define AMPSCOPE_INTERPOLATE_MATH_H

#include <math.h>

#include "backend.h"
#include "core/half.h"

static inline AMP_HD int64_t nearest_source(int64_t dst, int64_t scale_factor, int64_t in)
{
    int64_t s = (int64_t)floorf((float)dst * (float)(1.0 / (double)scale_factor));
    return s < in - 1 ? s : in - 1;
}

static inline AMP_HD int64_t nearest_bw_start(int64_t i, int64_t scale_factor, int64_t out)
{
    int64_t s = (int64_t)ceilf((float)i * (float)scale_factor);
    return s < out ? s : out;
}

/* y at output element o: the input element it copies */
static inline AMP_HD float nearest_forward_at(const conv2d_geom *g, const void *x, dtype x_dt,
                                              int64_t o)
{
    int64_t plane = o / (g->h_out * g->w_out), oh = o / g->w_out % g->h_out, ow = o % g->w_out;
    int64_t h = nearest_source(oh, g->stride, g->h_in), w = nearest_source(ow, g->stride, g->w_in);
    return load_as_float(x, x_dt, (plane * g->h_in + h) * g->w_in + w);
}

/* dx at input element i: the float32 sum of dy over the output elements that copy it */
static inline AMP_HD float nearest_backward_at(const conv2d_geom *g, const void *dy, dtype dy_dt,
                                               int64_t i)
{
    int64_t plane = i / (g->h_in * g->w_in), h = i / g->w_in % g->h_in, w = i % g->w_in;
    int64_t h0 = nearest_bw_start(h, g->stride, g->h_out),
            h1 = nearest_bw_start(h + 1, g->stride, g->h_out);
    int64_t w0 = nearest_bw_start(w, g->stride, g->w_out),
            w1 = nearest_bw_start(w + 1, g->stride, g->w_out);
    float acc = 0.0f;
    for (int64_t oh = h0; oh < h1; oh++)
        for (int64_t ow = w0; ow < w1; ow++)
            acc += load_as_float(dy, dy_dt, (plane * g->h_out + oh) * g->w_out + ow);
    return acc;
}

#endif
