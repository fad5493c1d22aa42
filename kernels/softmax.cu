/* softmax.cu: softmax over the last dim, forward and backward, and the causal mask's fill
 * (twin of harness/ops/cpu/softmax.c, with its formulas and rounding points). One block per
 * row; sums accumulate in double in a block tree (deterministic; the CPU's sequential
 * order differs in the last bits of a double); exp is pointwise_math.h's exp_f32 (double,
 * rounded to float32). */
#include "cuda.cuh"

__global__ void softmax_kernel(const void *x, dtype x_dt, void *y, dtype y_dt, int64_t rows,
                               int64_t cols, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, y_dt);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        float mx;
        float s = (float)row_max_expsum(x, x_dt, base, cols, &mx);
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            tally_store(&t, y, y_dt, base + j, exp_f32(load_as_float(x, x_dt, base + j) - mx) / s);
    }
    tally_flush(&t);
}

/* tmp = dy * y rounded to dy's dtype (softmax_backward_cuda_out's `grad * output`) */
static __device__ inline float softmax_grad_tmp(const void *dy, dtype dy_dt, const void *y,
                                                dtype y_dt, int64_t i)
{
    return round_to(load_as_float(dy, dy_dt, i) * load_as_float(y, y_dt, i), dy_dt);
}

/* dx = tmp - y * sum(tmp) per row */
__global__ void softmax_backward_kernel(const void *dy, dtype dy_dt, const void *y, dtype y_dt,
                                        void *dx, dtype dx_dt, int64_t rows, int64_t cols,
                                        dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, dx_dt);
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        int64_t base = r * cols;
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            sum += softmax_grad_tmp(dy, dy_dt, y, y_dt, base + j);
        float s = (float)block_reduce(sum, sum_op());
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
            int64_t i = base + j;
            tally_store(&t, dx, dx_dt, i,
                        softmax_grad_tmp(dy, dy_dt, y, y_dt, i) - load_as_float(y, y_dt, i) * s);
        }
    }
    tally_flush(&t);
}

static int row_grid(const cuda_ctx *c, int64_t rows)
{
    return rows < 1 ? 1 : rows < c->max_blocks ? (int)rows : c->max_blocks;
}

int cuda_softmax_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    softmax_kernel<<<row_grid(c, rows), CUDA_THREADS, 0, c->stream>>>(x->data, x->dtype, y->data,
                                                                      y->dtype, rows, cols, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, y->numel);
    return 0;
}

int cuda_softmax_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                          round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    int64_t cols = y->shape[y->ndim - 1], rows = y->numel / cols;
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    softmax_backward_kernel<<<row_grid(c, rows), CUDA_THREADS, 0, c->stream>>>(
        dy->data, dy->dtype, y->data, y->dtype, dx->data, dx->dtype, rows, cols, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, dx->numel);
    return 0;
}

/* [.., T, S]: column s > row t takes value */
struct causal_fill_op {
    const void *src;
    dtype dt;
    float value;
    int64_t rows, cols;
    __device__ float operator()(int64_t i) const
    {
        int64_t col = i % cols, row = (i / cols) % rows;
        return col > row ? value : load_as_float(src, dt, i);
    }
};

int cuda_causal_fill(backend *be, const tensor *src, float value, tensor *dst, round_stats *st)
{
    int64_t rows = src->ndim >= 2 ? src->shape[src->ndim - 2] : 1;
    launch_store(be, causal_fill_op{src->data, src->dtype, value, rows, src->shape[src->ndim - 1]},
                 dst, st);
    return 0;
}
