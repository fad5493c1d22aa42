/*
 * l1.cu: the ops of l1_loss (twin of harness/ops/cpu/l1.c): sub, abs, and abs's backward
 * dy * sgn(x) (loss_math.h's sgn_elem: 0 at 0 and NaN).
 */
#include "ops/loss_math.h"
#include "cuda.cuh"

struct sub_op {
    const void *a, *b;
    dtype a_dt, b_dt;
    __device__ float operator()(int64_t i) const
    {
        return load_as_float(a, a_dt, i) - load_as_float(b, b_dt, i);
    }
};

struct abs_op {
    const void *x;
    dtype dt;
    __device__ float operator()(int64_t i) const { return fabsf(load_as_float(x, dt, i)); }
};

struct abs_grad_op {
    const void *dy, *x;
    dtype dy_dt, x_dt;
    __device__ float operator()(int64_t i) const
    {
        return load_as_float(dy, dy_dt, i) * sgn_elem(load_as_float(x, x_dt, i));
    }
};

int cuda_sub_forward(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    launch_store(be, sub_op{a->data, b->data, a->dtype, b->dtype}, y, st);
    return 0;
}

int cuda_abs_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, abs_op{x->data, x->dtype}, y, st);
    return 0;
}

int cuda_abs_backward(backend *be, const tensor *dy, const tensor *x, tensor *dx, round_stats *st)
{
    launch_store(be, abs_grad_op{dy->data, x->data, dy->dtype, x->dtype}, dx, st);
    return 0;
}
