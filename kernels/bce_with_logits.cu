/*
 * bce_with_logits.cu: binary_cross_entropy_with_logits's elementwise loss and its gradient
 * (twin of harness/ops/cpu/bce_with_logits.c, the same loss_math.h arithmetic and roundings).
 */
#include "ops/loss_math.h"
#include "cuda.cuh"

struct bce_op {
    const void *x, *t;
    dtype x_dt, t_dt, y_dt;
    __device__ float operator()(int64_t i) const
    {
        float x_ = load_as_float(x, x_dt, i);
        return bce_logits_elem(x_, load_as_float(t, t_dt, i), round_to(log_sigmoid_elem(x_), x_dt),
                               y_dt);
    }
};

struct bce_grad_op {
    const void *dy, *x, *t; /* dy: the loss's gradient, one element */
    dtype dy_dt, x_dt, t_dt, dx_dt;
    float inv_n;
    __device__ float operator()(int64_t i) const
    {
        return bce_logits_grad_elem(load_as_float(x, x_dt, i), load_as_float(t, t_dt, i),
                                    load_as_float(dy, dy_dt, 0), inv_n, dx_dt);
    }
};

int cuda_bce_logits_forward(backend *be, const tensor *x, const tensor *t, tensor *y,
                            round_stats *st)
{
    launch_store(be, bce_op{x->data, t->data, x->dtype, t->dtype, y->dtype}, y, st);
    return 0;
}

int cuda_bce_logits_backward(backend *be, const tensor *dy, const tensor *x, const tensor *t,
                             tensor *dx, round_stats *st)
{
    launch_store(be,
                 bce_grad_op{dy->data, x->data, t->data, dy->dtype, x->dtype, t->dtype, dx->dtype,
                             1.0f / (float)x->numel},
                 dx, st);
    return 0;
}
