/*
 * sdpa_math.h: the arithmetic of scaled_dot_product_attention's math path, shared by the CPU
 * backend (harness/ops/cpu/scaled_dot_product_attention.c) and the CUDA kernels
 * (kernels/scaled_dot_product_attention.cu) so that both compute the same float32 values in
 * the same order. PyTorch's _scaled_dot_product_attention_math (aten/src/ATen/native/
 * transformers/attention.cpp) runs it as float32 tensor ops: q * sqrt(scale) and
 * k * sqrt(scale) (mul_scalar, in the layer), bmm(q, k^T), add of an attn_mask (a float32
 * add of the mask's value, as `attn.add_(*attn_mask)` there), then of the causal mask (0 or
 * -inf), _safe_softmax over the keys (rows of -inf only give 0, not NaN), bmm(p, v). Here each
 * product sums in float32 over its inner index in ascending order (cuBLAS's order is its
 * own: the last bits of a sum may differ from PyTorch's); softmax takes the row's max, sums
 * exp(x - max) in float32 in key order, and divides (the CUDA softmax epilogue); its backward
 * is p * (dp - rowsum(dp * p)). exp is the double function rounded to float on both sides.
 * Layout (sdpa_geom): q [n, l, e], k [n, s, e], v [n, s, ev], p [n, l, s], out [n, l, ev].
 */
#ifndef AMPSCOPE_SDPA_MATH_H
#define AMPSCOPE_SDPA_MATH_H

#include <math.h>

#include "backend.h"
#include "core/half.h"

static inline AMP_HD float sdpa_exp(float v) { return (float)exp((double)v); }

/* sum over t < len of a[a0 + t * as] * b[b0 + t * bs], in float32, t ascending */
static inline AMP_HD float sdpa_dot(const void *a, dtype adt, int64_t a0, int64_t as, const void *b,
                                    dtype bdt, int64_t b0, int64_t bs, int64_t len)
{
    float acc = 0.0f;
    for (int64_t t = 0; t < len; t++)
        acc += load_as_float(a, adt, a0 + t * as) * load_as_float(b, bdt, b0 + t * bs);
    return acc;
}

/* the score of query i and key j in attention n: q . k (+ the mask's value), or -inf where
 * the causal mask hides it */
static inline AMP_HD float sdpa_score(const sdpa_geom *g, const void *q, dtype qdt, const void *k,
                                      dtype kdt, const void *m, dtype mdt, int64_t n, int64_t i,
                                      int64_t j)
{
    if (g->causal && j > i)
        return -INFINITY;
    float d = sdpa_dot(q, qdt, (n * g->l + i) * g->e, 1, k, kdt, (n * g->s + j) * g->e, 1, g->e);
    if (!m)
        return d;
    const int64_t *ms = g->mask_stride;
    return d + load_as_float(m, mdt,
                             n / g->heads * ms[0] + n % g->heads * ms[1] + i * ms[2] + j * ms[3]);
}

/* row r = n * l + i of the probabilities: its max and its sum of exp(score - max) */
static inline AMP_HD void sdpa_row_stats(const sdpa_geom *g, const void *q, dtype qdt,
                                         const void *k, dtype kdt, const void *m, dtype mdt,
                                         int64_t r, float *mx, float *sum)
{
    int64_t n = r / g->l, i = r % g->l;
    float top = -INFINITY;
    for (int64_t j = 0; j < g->s; j++) {
        float v = sdpa_score(g, q, qdt, k, kdt, m, mdt, n, i, j);
        top = v > top ? v : top;
    }
    float s = 0.0f;
    for (int64_t j = 0; top != -INFINITY && j < g->s; j++)
        s += sdpa_exp(sdpa_score(g, q, qdt, k, kdt, m, mdt, n, i, j) - top);
    *mx = top;
    *sum = s;
}

/* p[idx] (idx = (n * l + i) * s + j) from its row's stats; 0 in a row the mask hides whole */
static inline AMP_HD float sdpa_prob(const sdpa_geom *g, const void *q, dtype qdt, const void *k,
                                     dtype kdt, const void *m, dtype mdt, int64_t idx, float mx,
                                     float sum)
{
    int64_t j = idx % g->s, r = idx / g->s;
    if (mx == -INFINITY)
        return 0.0f;
    return sdpa_exp(sdpa_score(g, q, qdt, k, kdt, m, mdt, r / g->l, r % g->l, j) - mx) / sum;
}

/* out[idx] = sum_j p[n, i, j] v[n, j, c], idx = (n * l + i) * ev + c */
static inline AMP_HD float sdpa_out(const sdpa_geom *g, const void *p, dtype pdt, const void *v,
                                    dtype vdt, int64_t idx)
{
    int64_t c = idx % g->ev, r = idx / g->ev, n = r / g->l;
    return sdpa_dot(p, pdt, r * g->s, 1, v, vdt, n * g->s * g->ev + c, g->ev, g->s);
}

/* dp[idx] = sum_c dout[n, i, c] v[n, j, c], idx = (n * l + i) * s + j */
static inline AMP_HD float sdpa_dp(const sdpa_geom *g, const void *dout, dtype ddt, const void *v,
                                   dtype vdt, int64_t idx)
{
    int64_t j = idx % g->s, r = idx / g->s, n = r / g->l;
    return sdpa_dot(dout, ddt, r * g->ev, 1, v, vdt, (n * g->s + j) * g->ev, 1, g->ev);
}

/* dv[idx] = sum_i p[n, i, j] dout[n, i, c], idx = (n * s + j) * ev + c */
static inline AMP_HD float sdpa_dv(const sdpa_geom *g, const void *p, dtype pdt, const void *dout,
                                   dtype ddt, int64_t idx)
{
    int64_t c = idx % g->ev, r = idx / g->ev, n = r / g->s, j = r % g->s;
    return sdpa_dot(p, pdt, n * g->l * g->s + j, g->s, dout, ddt, n * g->l * g->ev + c, g->ev,
                    g->l);
}

/* softmax's backward: ds[idx] = p * (dp - rsum), rsum = rowsum(dp * p) of idx's row */
static inline AMP_HD float sdpa_ds(const void *dp, dtype ddt, const void *p, dtype pdt, int64_t idx,
                                   float rsum)
{
    return load_as_float(p, pdt, idx) * (load_as_float(dp, ddt, idx) - rsum);
}

/* dq[idx] = sum_j ds[n, i, j] k[n, j, c], idx = (n * l + i) * e + c; ds float32 */
static inline AMP_HD float sdpa_dq(const sdpa_geom *g, const float *ds, const void *k, dtype kdt,
                                   int64_t idx)
{
    int64_t c = idx % g->e, r = idx / g->e, n = r / g->l;
    return sdpa_dot(ds, DTYPE_FLOAT32, r * g->s, 1, k, kdt, n * g->s * g->e + c, g->e, g->s);
}

/* dk[idx] = sum_i ds[n, i, j] q[n, i, c], idx = (n * s + j) * e + c */
static inline AMP_HD float sdpa_dk(const sdpa_geom *g, const float *ds, const void *q, dtype qdt,
                                   int64_t idx)
{
    int64_t c = idx % g->e, r = idx / g->e, n = r / g->s, j = r % g->s;
    return sdpa_dot(ds, DTYPE_FLOAT32, n * g->l * g->s + j, g->s, q, qdt, n * g->l * g->e + c, g->e,
                    g->l);
}

#endif
