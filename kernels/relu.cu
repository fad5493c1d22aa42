/* relu.cu: relu forward and backward (twin of harness/ops/cpu/relu.c). Both run in their
 * input's dtype; neither loses a value, but both are counted like any other store. */
#include "cuda.cuh"

struct relu_op {
    const void *x;
    dtype dt;
    __device__ float operator()(int64_t i) const
    {
        float v = load_as_float(x, dt, i);
        return v > 0.0f ? v : (v != v ? v : 0.0f); /* NaN propagates, as torch.relu */
    }
};

/* threshold_backward(dy, y, 0): dx = y <= 0 ? 0 : dy */
struct relu_grad_op {
    const void *dy, *y;
    dtype dy_dt, y_dt;
    __device__ float operator()(int64_t i) const
    {
        return load_as_float(y, y_dt, i) <= 0.0f ? 0.0f : load_as_float(dy, dy_dt, i);
    }
};

int cuda_relu_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, relu_op{x->data, x->dtype}, y, st);
    return 0;
}

int cuda_relu_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx, round_stats *st)
{
    launch_store(be, relu_grad_op{dy->data, y->data, dy->dtype, y->dtype}, dx, st);
    return 0;
}
