/* dropout.cu: dropout forward and backward (twin of harness/ops/cpu/dropout.c): the mask is a
 * function of (seed, element index) (activation_math.h), drawn again in the backward. */
#include "ops/activation_math.h"
#include "cuda.cuh"

/* src * mask * scale, as PyTorch's kernel: a dropped inf is NaN there too */
struct dropout_op {
    const void *src;
    dtype dt;
    uint64_t seed;
    uint32_t threshold;
    float scale;
    __device__ float operator()(int64_t i) const
    {
        float m = dropout_keeps(seed, i, threshold) ? 1.0f : 0.0f;
        return load_as_float(src, dt, i) * m * scale;
    }
};

static void run_dropout(backend *be, const tensor *src, double p, uint64_t seed, tensor *out,
                        round_stats *st)
{
    launch_store(be,
                 dropout_op{src->data, src->dtype, seed, dropout_threshold(p), dropout_scale(p)},
                 out, st);
}

int cuda_dropout_forward(backend *be, const tensor *x, double p, uint64_t seed, tensor *y,
                         round_stats *st)
{
    run_dropout(be, x, p, seed, y, st);
    return 0;
}

int cuda_dropout_backward(backend *be, const tensor *dy, double p, uint64_t seed, tensor *dx,
                          round_stats *st)
{
    run_dropout(be, dy, p, seed, dx, st);
    return 0;
}
