/*
 * scaled_dot_product_attention.cu: the ops of scaled_dot_product_attention's math path (twin
 * of harness/ops/cpu/scaled_dot_product_attention.c, element by element sdpa_math.h's
 * arithmetic, so both compute the same float32 values). Per-row statistics (softmax's max and
 * sum, softmax backward's row sums) and the scores' gradient go to float32 scratch first,
 * one thread per row or element; then every output element is one thread of launch_store.
 */
#include "ops/sdpa_math.h"
#include "cuda.cuh"

__global__ void sdpa_row_stats_kernel(sdpa_geom g, const void *q, dtype qdt, const void *k,
                                      dtype kdt, const void *m, dtype mdt, float *rs)
{
    GRID_STRIDE(r, g.n * g.l)
    {
        sdpa_row_stats(&g, q, qdt, k, kdt, m, mdt, r, &rs[2 * r], &rs[2 * r + 1]);
    }
}

struct prob_op {
    sdpa_geom g;
    const void *q, *k, *m;
    dtype qdt, kdt, mdt;
    const float *rs;
    __device__ float operator()(int64_t idx) const
    {
        const float *r = &rs[2 * (idx / g.s)];
        return sdpa_prob(&g, q, qdt, k, kdt, m, mdt, idx, r[0], r[1]);
    }
};

int cuda_sdpa_probs_forward(backend *be, const sdpa_geom *g, const tensor *q, const tensor *k,
                            const tensor *mask, tensor *p, round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    const void *m = mask ? mask->data : NULL;
    dtype mdt = mask ? mask->dtype : DTYPE_FLOAT32;
    int64_t rows = g->n * g->l, bytes = 2 * rows * (int64_t)sizeof(float);
    float *rs = (float *)cuda_scratch_alloc(be, bytes);
    if (!rs)
        return -1;
    sdpa_row_stats_kernel<<<cuda_grid(x, rows), CUDA_THREADS, 0, x->stream>>>(
        *g, q->data, q->dtype, k->data, k->dtype, m, mdt, rs);
    LAUNCH_CHECK();
    launch_store(be, prob_op{*g, q->data, k->data, m, q->dtype, k->dtype, mdt, rs}, p, st);
    cuda_scratch_free(be, rs, bytes);
    return 0;
}

/* rsum[r] = rowsum(dp * p) */
__global__ void sdpa_rowsum_kernel(sdpa_geom g, const void *dp, dtype ddt, const void *p, dtype pdt,
                                   float *rsum)
{
    GRID_STRIDE(r, g.n * g.l) { rsum[r] = sdpa_dot(dp, ddt, r * g.s, 1, p, pdt, r * g.s, 1, g.s); }
}

/* ds = p * (dp - rsum of the row) */
__global__ void sdpa_ds_kernel(sdpa_geom g, const void *dp, dtype ddt, const void *p, dtype pdt,
                               const float *rsum, float *ds)
{
    GRID_STRIDE(i, g.n * g.l * g.s) { ds[i] = sdpa_ds(dp, ddt, p, pdt, i, rsum[i / g.s]); }
}

struct dq_op {
    sdpa_geom g;
    const float *ds;
    const void *k;
    dtype kdt;
    __device__ float operator()(int64_t idx) const { return sdpa_dq(&g, ds, k, kdt, idx); }
};

struct dk_op {
    sdpa_geom g;
    const float *ds;
    const void *q;
    dtype qdt;
    __device__ float operator()(int64_t idx) const { return sdpa_dk(&g, ds, q, qdt, idx); }
};

/* the scores' gradient as it is, for the mask's */
struct ds_copy_op {
    const float *ds;
    __device__ float operator()(int64_t idx) const { return ds[idx]; }
};

int cuda_sdpa_probs_backward(backend *be, const sdpa_geom *g, const tensor *dp, const tensor *q,
                             const tensor *k, const tensor *p, tensor *dq, tensor *dk,
                             tensor *dscores)
{
    cuda_ctx *x = cuda_ctx_of(be);
    int64_t rows = g->n * g->l, np = rows * g->s;
    int64_t rbytes = rows * (int64_t)sizeof(float), dbytes = np * (int64_t)sizeof(float);
    float *rsum = (float *)cuda_scratch_alloc(be, rbytes);
    float *ds = rsum ? (float *)cuda_scratch_alloc(be, dbytes) : NULL;
    int rc = -1;
    if (ds) {
        sdpa_rowsum_kernel<<<cuda_grid(x, rows), CUDA_THREADS, 0, x->stream>>>(
            *g, dp->data, dp->dtype, p->data, p->dtype, rsum);
        LAUNCH_CHECK();
        sdpa_ds_kernel<<<cuda_grid(x, np), CUDA_THREADS, 0, x->stream>>>(
            *g, dp->data, dp->dtype, p->data, p->dtype, rsum, ds);
        LAUNCH_CHECK();
        if (dscores)
            launch_store(be, ds_copy_op{ds}, dscores, NULL);
        launch_store(be, dq_op{*g, ds, k->data, k->dtype}, dq, NULL);
        launch_store(be, dk_op{*g, ds, q->data, q->dtype}, dk, NULL);
        rc = 0;
    }
    cuda_scratch_free(be, ds, dbytes);
    cuda_scratch_free(be, rsum, rbytes);
    return rc;
}

struct out_op {
    sdpa_geom g;
    const void *p, *v;
    dtype pdt, vdt;
    __device__ float operator()(int64_t idx) const { return sdpa_out(&g, p, pdt, v, vdt, idx); }
};

struct dp_op {
    sdpa_geom g;
    const void *dout, *v;
    dtype ddt, vdt;
    __device__ float operator()(int64_t idx) const { return sdpa_dp(&g, dout, ddt, v, vdt, idx); }
};

struct dv_op {
    sdpa_geom g;
    const void *p, *dout;
    dtype pdt, ddt;
    __device__ float operator()(int64_t idx) const { return sdpa_dv(&g, p, pdt, dout, ddt, idx); }
};

int cuda_sdpa_value_forward(backend *be, const sdpa_geom *g, const tensor *p, const tensor *v,
                            tensor *out, round_stats *st)
{
    launch_store(be, out_op{*g, p->data, v->data, p->dtype, v->dtype}, out, st);
    return 0;
}

int cuda_sdpa_value_backward(backend *be, const sdpa_geom *g, const tensor *dout, const tensor *p,
                             const tensor *v, tensor *dp, tensor *dv)
{
    launch_store(be, dp_op{*g, dout->data, v->data, dout->dtype, v->dtype}, dp, NULL);
    launch_store(be, dv_op{*g, p->data, dout->data, p->dtype, dout->dtype}, dv, NULL);
    return 0;
}
