/*
 * shape.cu: the shape ops' copies on the GPU (twins of harness/ops/cpu/shape.c):
 * narrow_copy (a slice), narrow_place (a slice's gradient, a constant pad), cat and
 * strided_copy (permute, expand, repeat_interleave). Each output value is loaded as float32
 * from where ops/shape.h says and stored through the counted store (launch_store): a copy
 * within one dtype, or a widening cast, exact.
 */
#include "cuda.cuh"
#include "ops/shape.h"

struct narrow_op {
    const void *x;
    dtype dt;
    narrow_geom g;
    bool place;
    float fill;
    __device__ float operator()(int64_t i) const
    {
        int64_t src = place ? narrow_place_src(&g, i) : narrow_copy_src(&g, i);
        return src < 0 ? fill : load_as_float(x, dt, src);
    }
};

int cuda_narrow_copy(backend *be, const tensor *x, int d, int64_t start, int64_t step, tensor *y,
                     round_stats *st)
{
    launch_store(
        be, narrow_op{x->data, x->dtype, narrow_geom_of(x, d, start, step, y), false, 0.0f}, y, st);
    return 0;
}

int cuda_narrow_place(backend *be, const tensor *x, int d, int64_t start, int64_t step, float fill,
                      tensor *y, round_stats *st)
{
    launch_store(be, narrow_op{x->data, x->dtype, narrow_geom_of(x, d, start, step, y), true, fill},
                 y, st);
    return 0;
}

struct cat_op {
    const void *x[BACKEND_CAT_MAX];
    dtype dt[BACKEND_CAT_MAX];
    cat_geom g;
    __device__ float operator()(int64_t i) const
    {
        int w;
        int64_t src = cat_src(&g, i, &w);
        return load_as_float(x[w], dt[w], src);
    }
};

int cuda_cat(backend *be, const tensor *const *x, int n, int d, tensor *y, round_stats *st)
{
    if (n < 1 || n > BACKEND_CAT_MAX) {
        snprintf(be->err, sizeof be->err, "cat of %d inputs (1 to %d)", n, BACKEND_CAT_MAX);
        return -1;
    }
    cat_op op = {{NULL}, {DTYPE_FLOAT32}, cat_geom_of(x, n, d, y)};
    for (int k = 0; k < n; k++)
        op.x[k] = x[k]->data, op.dt[k] = x[k]->dtype;
    launch_store(be, op, y, st);
    return 0;
}

struct strided_op {
    const void *x;
    dtype dt;
    strided_geom g;
    __device__ float operator()(int64_t i) const { return load_as_float(x, dt, strided_src(&g, i)); }
};

int cuda_strided_copy(backend *be, const tensor *x, const strided_geom *g, tensor *y,
                      round_stats *st)
{
    launch_store(be, strided_op{x->data, x->dtype, *g}, y, st);
    return 0;
}
