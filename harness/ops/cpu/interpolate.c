/*
 * interpolate.c: F.interpolate's upsampling on the CPU, NCHW: upsample_nearest2d forward
 * (a copy) and backward (float32 sums rounded once), with interpolate_math.h's index rules
 * (those of PyTorch's CUDA kernels), stored through the counting store.
 */
#include "cpu.h"
#include "ops/interpolate_math.h"

/* out[i] = at(g, src, i) for every element of out, stored in chunks */
static void store_each(const conv2d_geom *g,
                       float (*at)(const conv2d_geom *, const void *, dtype, int64_t),
                       const tensor *src, tensor *out, round_stats *st)
{
    float buf[CPU_CHUNK];
    for (int64_t i0 = 0; i0 < out->numel; i0 += CPU_CHUNK) {
        int64_t n = out->numel - i0 < CPU_CHUNK ? out->numel - i0 : CPU_CHUNK;
        for (int64_t k = 0; k < n; k++)
            buf[k] = at(g, src->data, src->dtype, i0 + k);
        cpu_store(buf, out->data, out->dtype, i0, n, st);
    }
}

int cpu_upsample_nearest2d_forward(backend *be, const conv2d_geom *g, const tensor *x, tensor *y,
                                   round_stats *st)
{
    (void)be;
    store_each(g, nearest_forward_at, x, y, st);
    return 0;
}

int cpu_upsample_nearest2d_backward(backend *be, const conv2d_geom *g, const tensor *dy,
                                    tensor *dx, round_stats *st)
{
    (void)be;
    store_each(g, nearest_backward_at, dy, dx, st);
    return 0;
}
