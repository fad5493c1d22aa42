/*
 * round.cu: the rounding store's host side (resetting the device counters of an op's
 * output and adding them to the caller's round_stats when it ends), the widening of half
 * operands to float32 scratch, and the elementwise ops that are only a rounding: cast,
 * mul_scalar, fill, observe. Twin of harness/ops/cpu/round.c. The device side of the store
 * (tally_begin / tally_store / tally_flush, store_kernel) is in cuda.cuh.
 */
#include "cuda.cuh"

__global__ void stats_reset_kernel(dev_stats *s)
{
    for (int b = threadIdx.x; b < HIST_BINS; b += blockDim.x)
        s->hist[b] = 0;
    if (threadIdx.x < TALLY_COUNTS)
        s->counts[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        s->amax_bits = 0;
        s->amin_bits = 0x7f800000u;
    }
}

dev_stats *cuda_stats_begin(backend *be, int slot, const round_stats *st)
{
    if (!st)
        return NULL;
    cuda_ctx *x = cuda_ctx_of(be);
    dev_stats *s = &x->scratch->stats[slot];
    stats_reset_kernel<<<1, CUDA_THREADS, 0, x->stream>>>(s);
    LAUNCH_CHECK();
    return s;
}

void cuda_stats_end(backend *be, int slot, round_stats *st, int64_t numel)
{
    if (!st)
        return;
    cuda_ctx *x = cuda_ctx_of(be);
    dev_stats *h = &x->host->stats[slot];
    CUDA_CHECK(cudaMemcpyAsync(h, &x->scratch->stats[slot], sizeof *h, cudaMemcpyDeviceToHost,
                               x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
    round_counts c;
    c.zeros = (int64_t)h->counts[TALLY_ZEROS];
    c.underflow = (int64_t)h->counts[TALLY_UNDERFLOW];
    c.subnormal = (int64_t)h->counts[TALLY_SUBNORMAL];
    c.overflow = (int64_t)h->counts[TALLY_OVERFLOW];
    c.nan = (int64_t)h->counts[TALLY_NAN];
    c.amax = bits_float(h->amax_bits);
    c.amin_nonzero = bits_float(h->amin_bits);
    round_counts_merge(&st->counts, &c);
    for (int b = 0; b < HIST_BINS; b++)
        st->hist[b] += (int64_t)h->hist[b];
    st->numel += numel;
}

/* ---- widening (exact, not counted: a copy, not a rounding of the op) ---- */
__global__ void widen_kernel(const void *src, dtype dt, float *dst, int64_t n)
{
    GRID_STRIDE(i, n)
    dst[i] = load_as_float(src, dt, i);
}

const float *cuda_as_f32(backend *be, const tensor *t, float **owned)
{
    *owned = NULL;
    if (t->dtype == DTYPE_FLOAT32)
        return (const float *)t->data;
    float *p = (float *)cuda_scratch_alloc(be, t->numel * (int64_t)sizeof(float));
    if (!p)
        return NULL;
    cuda_ctx *x = cuda_ctx_of(be);
    widen_kernel<<<cuda_grid(x, t->numel), CUDA_THREADS, 0, x->stream>>>(t->data, t->dtype, p,
                                                                        t->numel);
    LAUNCH_CHECK();
    *owned = p;
    return p;
}

/* ---- the ops ---- */
/* float(src[i]) * s; cast and observe use the value itself (s = 1 would turn a NaN's
 * payload into the GPU's canonical NaN) */
struct scale_op {
    const void *src;
    dtype dt;
    float s;
    bool scale;
    __device__ float operator()(int64_t i) const
    {
        float v = load_as_float(src, dt, i);
        return scale ? v * s : v;
    }
};

int cuda_cast(backend *be, const tensor *src, tensor *dst, round_stats *st)
{
    launch_store(be, scale_op{src->data, src->dtype, 1.0f, false}, dst, st);
    return 0;
}

int cuda_mul_scalar(backend *be, const tensor *src, float s, tensor *dst, round_stats *st)
{
    launch_store(be, scale_op{src->data, src->dtype, s, true}, dst, st);
    return 0;
}

struct value_op {
    float v;
    __device__ float operator()(int64_t) const { return v; }
};

int cuda_fill(backend *be, tensor *dst, float value)
{
    launch_store(be, value_op{value}, dst, NULL);
    return 0;
}

int cuda_observe(backend *be, const tensor *t, round_stats *st)
{
    /* rewrites each value with itself */
    launch_store(be, scale_op{t->data, t->dtype, 1.0f, false}, (tensor *)t, st);
    return 0;
}
