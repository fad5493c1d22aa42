/*
 * interpolate.cu: F.interpolate's upsampling on CUDA, NCHW: upsample_nearest2d forward (a
 * copy) and backward (float32 sums rounded once), one thread per stored element through
 * launch_store, with interpolate_math.h's index rules (those of PyTorch's UpSample.cuh and
 * UpSampleNearest2d.cu), the same functions as the CPU's loops.
 */
#include "cuda.cuh"
#include "ops/interpolate_math.h"

struct nearest_forward_op {
    conv2d_geom g;
    const void *x;
    dtype x_dt;
    __device__ float operator()(int64_t o) const { return nearest_forward_at(&g, x, x_dt, o); }
};

int cuda_upsample_nearest2d_forward(backend *be, const conv2d_geom *g, const tensor *x, tensor *y,
                                    round_stats *st)
{
    launch_store(be, nearest_forward_op{*g, x->data, x->dtype}, y, st);
    return 0;
}

struct nearest_backward_op {
    conv2d_geom g;
    const void *dy;
    dtype dy_dt;
    __device__ float operator()(int64_t i) const { return nearest_backward_at(&g, dy, dy_dt, i); }
};

int cuda_upsample_nearest2d_backward(backend *be, const conv2d_geom *g, const tensor *dy,
                                     tensor *dx, round_stats *st)
{
    launch_store(be, nearest_backward_op{*g, dy->data, dy->dtype}, dx, st);
    return 0;
}
