/*
 * reduce.cu: the reduction rows (ops/reduce.h), twin of harness/ops/cpu/reduce.c, in the
 * order reduce.h fixes, so that both backends give the same bits. A templated row struct is
 * instantiated for every row of the list, and three kernels run any of them:
 *  - spans_inner (x's innermost dim reduced): a warp per (output, span); lane l holds the
 *    RD_ACCS accumulators of values j = l, l + 32, ... of the span (coalesced along j);
 *  - spans_tile (x's innermost dim kept): a block of 32 lanes x 32 neighbouring outputs per
 *    span, a warp being one lane of 32 outputs (coalesced along the outputs);
 * both then combine a lane's accumulators in order and the lanes pairwise in shared memory
 * into the span's partial result; the finish, one thread per output, combines the spans
 * pairwise, projects, and stores through the counted store (launch_store). The backward is
 * an elementwise store over x (the ties' counts first, by atomics: exact in any order).
 */
#include "cuda.cuh"

#define RD_ROW(op, ...)                                                                            \
    struct rd_row_##op {                                                                           \
        typedef rd_##op##_acc acc;                                                                 \
        static __device__ acc ident(const op_params &p) { return rd_##op##_ident(&p); }            \
        static __device__ acc reduce(acc a, float x, const op_params &p)                           \
        {                                                                                          \
            return rd_##op##_reduce(a, x, &p);                                                     \
        }                                                                                          \
        static __device__ acc combine(acc a, acc b, const op_params &p)                            \
        {                                                                                          \
            return rd_##op##_combine(a, b, &p);                                                    \
        }                                                                                          \
        static __device__ float project(acc a, int64_t R, int64_t n, const op_params &p)           \
        {                                                                                          \
            return rd_##op##_project(a, R, n, &p);                                                 \
        }                                                                                          \
    };
REDUCE_OPS(RD_ROW)

/* a lane's accumulators in order, then the 32 lanes of sh (stride `step`) pairwise, by the
 * thread that calls it; the span's value */
template <class Row>
static __device__ typename Row::acc lanes_tree(typename Row::acc *sh, int step, const op_params &p)
{
    for (int o = 1; o < RD_LANES; o <<= 1)
        for (int l = 0; l + o < RD_LANES; l += 2 * o)
            sh[l * step] = Row::combine(sh[l * step], sh[(l + o) * step], p);
    return sh[0];
}

/* one lane's value: value j of the span (j0 its start) from x at base + offset(j) */
template <class Row>
static __device__ typename Row::acc lane_value(const void *x, dtype dt, const rd_view &v,
                                               int64_t base, int64_t j0, int64_t j1, int lane,
                                               const op_params &p)
{
    typename Row::acc acc[RD_ACCS];
    for (int a = 0; a < RD_ACCS; a++)
        acc[a] = Row::ident(p);
    for (int64_t s = j0; s < j1; s += RD_SWEEP)
        for (int a = 0; a < RD_ACCS; a++) {
            int64_t j = s + a * RD_LANES + lane;
            if (j < j1)
                acc[a] = Row::reduce(acc[a], load_as_float(x, dt, base + rd_offset(&v, j)), p);
        }
    for (int a = 1; a < RD_ACCS; a++)
        acc[0] = Row::combine(acc[0], acc[a], p);
    return acc[0];
}

template <class Row>
__global__ void spans_inner(const void *x, dtype dt, rd_view v, op_params p,
                            typename Row::acc *part)
{
    __shared__ typename Row::acc sh[CUDA_THREADS];
    int warp = threadIdx.x / RD_LANES, lane = threadIdx.x % RD_LANES;
    int64_t w = (int64_t)blockIdx.x * (CUDA_THREADS / RD_LANES) + warp;
    bool live = w < v.n_out * v.spans;
    int64_t o = live ? w / v.spans : 0, s = live ? w % v.spans : 0;
    int64_t j0 = s * v.span, j1 = j0 + v.span < v.R ? j0 + v.span : v.R;
    sh[threadIdx.x] =
        live ? lane_value<Row>(x, dt, v, rd_base(&v, o), j0, j1, lane, p) : Row::ident(p);
    __syncwarp();
    if (live && lane == 0)
        part[o * v.spans + s] = lanes_tree<Row>(&sh[warp * RD_LANES], 1, p);
}

/* block (32 outputs, 32 lanes): threadIdx.x the output of the tile, threadIdx.y the lane */
template <class Row>
__global__ void spans_tile(const void *x, dtype dt, rd_view v, op_params p, typename Row::acc *part)
{
    __shared__ typename Row::acc sh[RD_LANES][RD_LANES + 1];
    int64_t inner = v.kdim[v.nk - 1], per = (inner + RD_LANES - 1) / RD_LANES;
    int64_t tile = blockIdx.x / v.spans, s = blockIdx.x % v.spans;
    int64_t t0 = tile % per * RD_LANES, o = tile / per * inner + t0 + threadIdx.x;
    bool live = t0 + threadIdx.x < inner;
    int64_t j0 = s * v.span, j1 = j0 + v.span < v.R ? j0 + v.span : v.R;
    sh[threadIdx.y][threadIdx.x] =
        live ? lane_value<Row>(x, dt, v, rd_base(&v, o), j0, j1, threadIdx.y, p) : Row::ident(p);
    __syncthreads();
    if (live && threadIdx.y == 0)
        part[o * v.spans + s] = lanes_tree<Row>(&sh[0][threadIdx.x], RD_LANES + 1, p);
}

/* output o: its spans pairwise, projected */
template <class Row> struct rd_finish_op {
    typename Row::acc *part;
    rd_view v;
    op_params p;
    __device__ float operator()(int64_t o) const
    {
        typename Row::acc *q = part + o * v.spans;
        for (int d = 1; d < v.spans; d <<= 1)
            for (int g = 0; g + d < v.spans; g += 2 * d)
                q[g] = Row::combine(q[g], q[g + d], p);
        return Row::project(q[0], v.R, v.n_out, p);
    }
};

template <class Row>
static int reduce_run(backend *be, const op_params *p, const tensor *x, unsigned dims, tensor *y,
                      round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    rd_view v = rd_view_of(x->ndim, x->shape, dims);
    int64_t bytes = v.n_out * v.spans * (int64_t)sizeof(typename Row::acc);
    typename Row::acc *part = (typename Row::acc *)cuda_scratch_alloc(be, bytes);
    if (!part)
        return -1;
    if (v.inner_reduced) {
        int64_t warps = v.n_out * v.spans, per_block = CUDA_THREADS / RD_LANES;
        spans_inner<Row>
            <<<(unsigned)((warps + per_block - 1) / per_block), CUDA_THREADS, 0, c->stream>>>(
                x->data, x->dtype, v, *p, part);
    } else {
        int64_t inner = v.kdim[v.nk - 1], tiles = v.n_out / inner * ((inner + 31) / 32);
        spans_tile<Row><<<(unsigned)(tiles * v.spans), dim3(RD_LANES, RD_LANES), 0, c->stream>>>(
            x->data, x->dtype, v, *p, part);
    }
    LAUNCH_CHECK();
    launch_store(be, rd_finish_op<Row>{part, v, *p}, y, st);
    cuda_scratch_free(be, part, bytes);
    return 0;
}

int cuda_reduce_forward(backend *be, rd_op op, const op_params *p, const tensor *x, unsigned dims,
                        tensor *y, round_stats *st)
{
    switch (op) {
#define RD_FORWARD_CASE(name, ...)                                                                 \
    case RD_OP_##name:                                                                             \
        return reduce_run<rd_row_##name>(be, p, x, dims, y, st);
        REDUCE_OPS(RD_FORWARD_CASE)
    case RD_OP_COUNT:
        break;
    }
    fprintf(stderr, "ampscope: reduce_forward: no reduction row %d\n", (int)op);
    abort();
}

/* ---- backward ---- */

#define RD_COUNT_KERNEL(op, ...)                                                                   \
    __global__ void op##_count_kernel(const void *x, dtype x_dt, const void *y, dtype y_dt,        \
                                      rd_view v, int64_t n, unsigned long long *count)             \
    {                                                                                              \
        GRID_STRIDE(i, n)                                                                          \
        {                                                                                          \
            int64_t o = rd_output_of(&v, i);                                                       \
            if (rd_##op##_counts(load_as_float(x, x_dt, i), load_as_float(y, y_dt, o)))            \
                atomicAdd(&count[o], 1ull);                                                        \
        }                                                                                          \
    }                                                                                              \
    struct op##_backward_op {                                                                      \
        const void *dy, *x, *y;                                                                    \
        dtype dy_dt, x_dt, y_dt, dt;                                                               \
        rd_view v;                                                                                 \
        op_params p;                                                                               \
        const unsigned long long *count;                                                           \
        const void *mean; /* in x_dt */                                                            \
        __device__ float operator()(int64_t i) const                                               \
        {                                                                                          \
            int64_t o = rd_output_of(&v, i);                                                       \
            return rd_##op##_backward(                                                             \
                load_as_float(dy, dy_dt, o), x ? load_as_float(x, x_dt, i) : 0.0f,                 \
                y ? load_as_float(y, y_dt, o) : 0.0f, count ? (int64_t)count[o] : 0,               \
                mean ? load_as_float(mean, x_dt, o) : 0.0f, v.R, &p, dt);                          \
        }                                                                                          \
    };
REDUCE_OPS(RD_COUNT_KERNEL)

int cuda_reduce_backward(backend *be, rd_op op, const op_params *p, const tensor *dy,
                         const tensor *x, const tensor *y, unsigned dims, tensor *dx,
                         round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    rd_view v = rd_view_of(dx->ndim, dx->shape, dims);
    unsigned long long *count = NULL;
    int64_t bytes = v.n_out * (int64_t)sizeof *count;
    if (rd_rows[op].backward & RD_COUNT) {
        if (!(count = (unsigned long long *)cuda_scratch_alloc(be, bytes)))
            return -1;
        CUDA_CHECK(cudaMemsetAsync(count, 0, (size_t)bytes, c->stream));
    }
    const void *xd = x ? x->data : nullptr, *yd = y ? y->data : nullptr;
    dtype xdt = x ? x->dtype : DTYPE_FLOAT32, ydt = y ? y->dtype : DTYPE_FLOAT32;
    /* RD_MEAN: the mean row's result in x's dtype, one value per output (at most 4 bytes) */
    tensor mean = {};
    int64_t mean_bytes = v.n_out * (int64_t)sizeof(float);
    if (rd_rows[op].backward & RD_MEAN) {
        mean = *x;
        mean.ndim = 1, mean.shape[0] = mean.numel = v.n_out;
        const op_params none = {};
        if (!(mean.data = cuda_scratch_alloc(be, mean_bytes)) ||
            reduce_run<rd_row_mean>(be, &none, x, dims, &mean, NULL)) {
            cuda_scratch_free(be, count, bytes);
            cuda_scratch_free(be, mean.data, mean_bytes);
            return -1;
        }
    }
    switch (op) {
#define RD_BACKWARD_CASE(name, ...)                                                                \
    case RD_OP_##name:                                                                             \
        if (count) {                                                                               \
            name##_count_kernel<<<cuda_grid(c, dx->numel), CUDA_THREADS, 0, c->stream>>>(          \
                xd, xdt, yd, ydt, v, dx->numel, count);                                            \
            LAUNCH_CHECK();                                                                        \
        }                                                                                          \
        launch_store(be,                                                                           \
                     name##_backward_op{dy->data, xd, yd, dy->dtype, xdt, ydt, dx->dtype, v, *p,   \
                                        count, mean.data},                                         \
                     dx, st);                                                                      \
        cuda_scratch_free(be, count, bytes);                                                       \
        cuda_scratch_free(be, mean.data, mean_bytes);                                              \
        return 0;
        REDUCE_OPS(RD_BACKWARD_CASE)
    case RD_OP_COUNT:
        break;
    }
    fprintf(stderr, "ampscope: reduce_backward: no reduction row %d\n", (int)op);
    abort();
}
