/*
 * loss.cu: log_softmax, nll_loss and mse, forward and backward (twin of harness/ops/cpu/loss.c,
 * with the same formulas and rounding points; the mean of a loss is the mean row's,
 * reduce.cu). Rows are over the last dim: x [B, C]; log_softmax runs one block per row. Sums
 * accumulate in double, as the CPU does, in a block tree, so they are deterministic and
 * differ from the CPU's sequential order only in the last bits of a double. exp and log are
 * evaluated in double and rounded to float32, which gives the correctly rounded float results that
 * glibc's expf gives the CPU (CUDA's own expf may be 2 ulp off). mse rounds after every operation
 * in its dtype (loss_math.h).
 */
#include "ops/loss_math.h"
#include "cuda.cuh"

__global__ void log_softmax_kernel(const void *x, dtype x_dt, void *y, dtype y_dt, int64_t rows,
                                   int64_t cols, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, y_dt);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        float mx;
        double sum = row_max_expsum(x, x_dt, base, cols, &mx);
        float lse = mx + (float)log(sum);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            tally_store(&t, y, y_dt, base + j, load_as_float(x, x_dt, base + j) - lse);
    }
    tally_flush(&t);
}

/* dx = dy - exp(y) * sum(dy) per row */
__global__ void log_softmax_backward_kernel(const void *dy, dtype dy_dt, const void *y,
                                            dtype y_dt, void *dx, dtype dx_dt, int64_t rows,
                                            int64_t cols, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, dx_dt);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            sum += load_as_float(dy, dy_dt, base + j);
        float s = (float)block_reduce(sum, sum_op());
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            int64_t i = base + j;
            tally_store(&t, dx, dx_dt, i,
                        load_as_float(dy, dy_dt, i) - exp_f32(load_as_float(y, y_dt, i)) * s);
        }
    }
    tally_flush(&t);
}

static void rows_cols(const tensor *t, int64_t *rows, int64_t *cols)
{
    *cols = t->shape[t->ndim - 1];
    *rows = t->numel / *cols;
}

static int row_grid(const cuda_ctx *x, int64_t rows)
{
    return rows < 1 ? 1 : rows < x->max_blocks ? (int)rows : x->max_blocks;
}

int cuda_log_softmax_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t rows, cols;
    rows_cols(x, &rows, &cols);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    log_softmax_kernel<<<row_grid(c, rows), CUDA_THREADS, 0, c->stream>>>(
        x->data, x->dtype, y->data, y->dtype, rows, cols, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, y->numel);
    return 0;
}

int cuda_log_softmax_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                              round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t rows, cols;
    rows_cols(y, &rows, &cols);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    log_softmax_backward_kernel<<<row_grid(c, rows), CUDA_THREADS, 0, c->stream>>>(
        dy->data, dy->dtype, y->data, y->dtype, dx->data, dx->dtype, rows, cols, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, dx->numel);
    return 0;
}

/* one block: loss = -(sum_r logp[r, target[r]]) / rows */
__global__ void nll_forward_kernel(const void *logp, dtype dt, const int64_t *target,
                                   int64_t rows, int64_t cols, void *loss, dtype loss_dt,
                                   dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, loss_dt);
    double sum = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
        sum += load_as_float(logp, dt, r * cols + target[r]);
    sum = block_reduce(sum, sum_op());
    if (threadIdx.x == 0)
        tally_store(&t, loss, loss_dt, 0, (float)(-sum / (double)rows));
    tally_flush(&t);
}

int cuda_nll_loss_forward(backend *be, const tensor *logp, const tensor *target, tensor *loss,
                          round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t rows, cols;
    rows_cols(logp, &rows, &cols);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    nll_forward_kernel<<<1, CUDA_THREADS, 0, c->stream>>>(
        logp->data, logp->dtype, (const int64_t *)target->data, rows, cols, loss->data,
        loss->dtype, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, 1);
    return 0;
}

/* dlogp[r, target[r]] = -(dloss / rows) in dlogp's dtype (NLLLoss2d/LossNLL.cu), 0 elsewhere */
struct nll_grad_op {
    const void *dloss;
    dtype dloss_dt, dt;
    const int64_t *target;
    int64_t rows, cols;
    __device__ float operator()(int64_t i) const
    {
        int64_t r = i / cols;
        float g = -round_to(load_as_float(dloss, dloss_dt, 0) / (float)rows, dt);
        return i - r * cols == target[r] ? g : 0.0f;
    }
};

int cuda_nll_loss_backward(backend *be, const tensor *dloss, const tensor *target, tensor *dlogp,
                           round_stats *st)
{
    int64_t rows, cols;
    rows_cols(dlogp, &rows, &cols);
    launch_store(be,
                 nll_grad_op{dloss->data, dloss->dtype, dlogp->dtype,
                             (const int64_t *)target->data, rows, cols},
                 dlogp, st);
    return 0;
}

struct mse_op {
    const void *a, *b;
    dtype a_dt, b_dt, dt;
    __device__ float operator()(int64_t i) const
    {
        return mse_elem(load_as_float(a, a_dt, i), load_as_float(b, b_dt, i), dt);
    }
};

int cuda_mse_forward(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    launch_store(be, mse_op{a->data, b->data, a->dtype, b->dtype, y->dtype}, y, st);
    return 0;
}

struct mse_grad_op {
    const void *dy, *a, *b;
    dtype dy_dt, a_dt, b_dt, dt;
    bool scalar; /* dy is one value broadcast */
    float alpha; /* already rounded to dt */
    __device__ float operator()(int64_t i) const
    {
        return mse_grad_elem(load_as_float(a, a_dt, i), load_as_float(b, b_dt, i),
                             load_as_float(dy, dy_dt, scalar ? 0 : i), alpha, dt);
    }
};

int cuda_mse_backward(backend *be, const tensor *dy, const tensor *a, const tensor *b, double alpha,
                      tensor *da, round_stats *st)
{
    launch_store(be,
                 mse_grad_op{dy->data, a->data, b->data, dy->dtype, a->dtype, b->dtype, da->dtype,
                             dy->numel == 1, round_to((float)alpha, da->dtype)},
                 da, st);
    return 0;
}
