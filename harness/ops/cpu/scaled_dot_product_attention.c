/*
 * scaled_dot_product_attention.c: the ops of scaled_dot_product_attention's math path on the
 * CPU (twin of kernels/scaled_dot_product_attention.cu): the probabilities (scores, attn_mask
 * or causal mask, _safe_softmax), the output p v, and their backward. The arithmetic is
 * sdpa_math.h's, element by element, so the GPU computes the same float32 values. Rows' softmax
 * statistics and softmax-backward sums go to float32 scratch first, then every element is computed
 * and stored through cpu_store (counted where the op takes stats).
 */
#include "ops/sdpa_math.h"
#include "cpu.h"

typedef struct sdpa_ctx {
    const sdpa_geom *g;
    const tensor *a, *b, *c; /* the op's inputs, in its contract's order */
    const void *mask;        /* probs forward: the attn_mask's data, or NULL */
    dtype mask_dt;
    const float *rows; /* per-row statistics: (max, sum) pairs, or softmax-backward sums */
    float *ds;         /* probs backward: d loss / d scores, [n, l, s] */
    tensor *out;
} sdpa_ctx;

typedef float (*sdpa_elem_fn)(const sdpa_ctx *c, int64_t idx);

typedef struct elem_job {
    const sdpa_ctx *c;
    sdpa_elem_fn fn;
} elem_job;

static void elem_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const elem_job *j = p;
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < n; i++)
        buf[i] = j->fn(j->c, off + i);
    cpu_store(buf, j->c->out->data, j->c->out->dtype, off, n, st);
}

/* every element of c->out from fn, stored and counted */
static void store_all(const sdpa_ctx *c, sdpa_elem_fn fn, round_stats *st)
{
    elem_job j = {c, fn};
    cpu_parallel_chunks(c->out->numel, elem_chunk, &j, st);
}

static float prob_elem(const sdpa_ctx *c, int64_t idx)
{
    const float *rs = &c->rows[2 * (idx / c->g->s)];
    return sdpa_prob(c->g, c->a->data, c->a->dtype, c->b->data, c->b->dtype, c->mask, c->mask_dt,
                     idx, rs[0], rs[1]);
}

int cpu_sdpa_probs_forward(backend *be, const sdpa_geom *g, const tensor *q, const tensor *k,
                           const tensor *mask, tensor *p, round_stats *st)
{
    const void *m = mask ? mask->data : NULL;
    dtype mdt = mask ? mask->dtype : DTYPE_FLOAT32;
    int64_t rows = g->n * g->l;
    float *rs = cpu_scratch(be, 2 * rows);
    if (!rs)
        return -1;
#pragma omp parallel for schedule(static) if (rows * g->s * g->e >= (1 << 16))
    for (int64_t r = 0; r < rows; r++)
        sdpa_row_stats(g, q->data, q->dtype, k->data, k->dtype, m, mdt, r, &rs[2 * r],
                       &rs[2 * r + 1]);
    sdpa_ctx c = {.g = g, .a = q, .b = k, .mask = m, .mask_dt = mdt, .rows = rs, .out = p};
    store_all(&c, prob_elem, st);
    cpu_scratch_free(be, rs, 2 * rows);
    return 0;
}

static float ds_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_ds(c->a->data, c->a->dtype, c->c->data, c->c->dtype, idx, c->rows[idx / c->g->s]);
}

static float dq_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_dq(c->g, c->ds, c->b->data, c->b->dtype, idx); /* b: k */
}

static float dk_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_dk(c->g, c->ds, c->b->data, c->b->dtype, idx); /* b: q */
}

int cpu_sdpa_probs_backward(backend *be, const sdpa_geom *g, const tensor *dp, const tensor *q,
                            const tensor *k, const tensor *p, tensor *dq, tensor *dk,
                            tensor *dscores)
{
    int64_t rows = g->n * g->l, np = rows * g->s;
    float *rsum = cpu_scratch(be, rows), *ds = cpu_scratch(be, np);
    int rc = rsum && ds ? 0 : -1;
    if (rc == 0) {
#pragma omp parallel for schedule(static) if (np >= (1 << 16))
        for (int64_t r = 0; r < rows; r++)
            rsum[r] =
                sdpa_dot(dp->data, dp->dtype, r * g->s, 1, p->data, p->dtype, r * g->s, 1, g->s);
        sdpa_ctx c = {.g = g, .a = dp, .c = p, .rows = rsum};
#pragma omp parallel for schedule(static) if (np >= (1 << 16))
        for (int64_t i = 0; i < np; i++)
            ds[i] = ds_elem(&c, i);
        if (dscores)
            cpu_store(ds, dscores->data, dscores->dtype, 0, np, NULL);
        c = (sdpa_ctx){.g = g, .b = k, .ds = ds, .out = dq};
        store_all(&c, dq_elem, NULL);
        c = (sdpa_ctx){.g = g, .b = q, .ds = ds, .out = dk};
        store_all(&c, dk_elem, NULL);
    }
    cpu_scratch_free(be, ds, np);
    cpu_scratch_free(be, rsum, rows);
    return rc;
}

static float out_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_out(c->g, c->a->data, c->a->dtype, c->b->data, c->b->dtype, idx);
}

int cpu_sdpa_value_forward(backend *be, const sdpa_geom *g, const tensor *p, const tensor *v,
                           tensor *out, round_stats *st)
{
    (void)be;
    sdpa_ctx c = {.g = g, .a = p, .b = v, .out = out};
    store_all(&c, out_elem, st);
    return 0;
}

static float dp_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_dp(c->g, c->a->data, c->a->dtype, c->b->data, c->b->dtype, idx); /* dout, v */
}

static float dv_elem(const sdpa_ctx *c, int64_t idx)
{
    return sdpa_dv(c->g, c->b->data, c->b->dtype, c->a->data, c->a->dtype, idx); /* p, dout */
}

int cpu_sdpa_value_backward(backend *be, const sdpa_geom *g, const tensor *dout, const tensor *p,
                            const tensor *v, tensor *dp, tensor *dv)
{
    (void)be;
    sdpa_ctx c = {.g = g, .a = dout, .b = v, .out = dp};
    store_all(&c, dp_elem, NULL);
    c = (sdpa_ctx){.g = g, .a = dout, .b = p, .out = dv};
    store_all(&c, dv_elem, NULL);
    return 0;
}
