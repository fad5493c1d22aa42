/* activation.cu: gelu, silu, sigmoid and tanh, forward and backward (twin of
 * harness/ops/cpu/activation.c). Each element is activation_math.h's formula (float32 opmath,
 * or for sigmoid's and tanh's backward the dtype's own arithmetic), stored once into the
 * output's dtype by the counted store. */
#include "ops/activation_math.h"
#include "cuda.cuh"

struct gelu_op {
    const void *x;
    dtype dt;
    gelu_approximate a;
    __device__ float operator()(int64_t i) const { return gelu_elem(load_as_float(x, dt, i), a); }
};

struct gelu_grad_op {
    const void *dy, *x;
    dtype dy_dt, x_dt;
    gelu_approximate a;
    __device__ float operator()(int64_t i) const
    {
        return gelu_grad_elem(load_as_float(dy, dy_dt, i), load_as_float(x, x_dt, i), a);
    }
};

struct silu_op {
    const void *x;
    dtype dt;
    __device__ float operator()(int64_t i) const { return silu_elem(load_as_float(x, dt, i)); }
};

struct silu_grad_op {
    const void *dy, *x;
    dtype dy_dt, x_dt;
    __device__ float operator()(int64_t i) const
    {
        return silu_grad_elem(load_as_float(dy, dy_dt, i), load_as_float(x, x_dt, i));
    }
};

struct sigmoid_op {
    const void *x;
    dtype dt;
    __device__ float operator()(int64_t i) const { return sigmoid_elem(load_as_float(x, dt, i)); }
};

struct sigmoid_grad_op {
    const void *dy, *y;
    dtype dy_dt, y_dt, dx_dt;
    __device__ float operator()(int64_t i) const
    {
        return sigmoid_grad_elem(load_as_float(dy, dy_dt, i), load_as_float(y, y_dt, i), dx_dt);
    }
};

struct tanh_op {
    const void *x;
    dtype dt;
    __device__ float operator()(int64_t i) const { return act_tanh(load_as_float(x, dt, i)); }
};

struct tanh_grad_op {
    const void *dy, *y;
    dtype dy_dt, y_dt, dx_dt;
    __device__ float operator()(int64_t i) const
    {
        return tanh_grad_elem(load_as_float(dy, dy_dt, i), load_as_float(y, y_dt, i), dx_dt);
    }
};

int cuda_gelu_forward(backend *be, const tensor *x, gelu_approximate a, tensor *y, round_stats *st)
{
    launch_store(be, gelu_op{x->data, x->dtype, a}, y, st);
    return 0;
}

int cuda_gelu_backward(backend *be, const tensor *dy, const tensor *x, gelu_approximate a,
                       tensor *dx, round_stats *st)
{
    launch_store(be, gelu_grad_op{dy->data, x->data, dy->dtype, x->dtype, a}, dx, st);
    return 0;
}

int cuda_silu_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, silu_op{x->data, x->dtype}, y, st);
    return 0;
}

int cuda_silu_backward(backend *be, const tensor *dy, const tensor *x, tensor *dx, round_stats *st)
{
    launch_store(be, silu_grad_op{dy->data, x->data, dy->dtype, x->dtype}, dx, st);
    return 0;
}

int cuda_sigmoid_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, sigmoid_op{x->data, x->dtype}, y, st);
    return 0;
}

int cuda_sigmoid_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                          round_stats *st)
{
    launch_store(be, sigmoid_grad_op{dy->data, y->data, dy->dtype, y->dtype, dx->dtype}, dx, st);
    return 0;
}

int cuda_tanh_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    launch_store(be, tanh_op{x->data, x->dtype}, y, st);
    return 0;
}

int cuda_tanh_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx, round_stats *st)
{
    launch_store(be, tanh_grad_op{dy->data, y->data, dy->dtype, y->dtype, dx->dtype}, dx, st);
    return 0;
}
