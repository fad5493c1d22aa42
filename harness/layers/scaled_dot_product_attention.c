/*
 * scaled_dot_product_attention.c: F.scaled_dot_product_attention(q, k, v, is_causal=,
 * scale=) as PyTorch's math path computes it (_scaled_dot_product_attention_math in
 * aten/src/ATen/native/transformers/attention.cpp, checked against PyTorch 2.15 forced to
 * SDPBackend.MATH). Case files: `NAME = scaled_dot_product_attention Q K V [causal=yes|no]
 * [scale=S]`, each input [B, H, T, E] ([H, T, E] per sample); the output is [B, H, L, Ev].
 *
 * Under autocast the op is on the lower_precision_fp list (q, k and v cast to the autocast
 * dtype, the output in it). The math path then, as autograd records it:
 *   - half q, k, v are copied to float32 (three ToCopy nodes: "<q>@float32", ...);
 *   - q and k are each multiplied by sqrt(scale) in float32 (MulBackward1, nothing saved):
 *     "<name>.q_scaled", "<name>.k_scaled", scale = 1/sqrt(E) unless given;
 *   - bmm(q, k^T), the causal mask added (0 or -inf, tril of ones(L, S)), _safe_softmax:
 *     "<name>.probs", float32 [B, H, L, S]; BmmBackward0 saves q_scaled and k_scaled,
 *     SafeSoftmaxBackward0 the probabilities (one node here, saving all three);
 *   - bmm(p, v) in float32 (BmmBackward0 saves p and v's float32 copy), then, for half
 *     inputs, `.to(origin_dtype)`: "<name>.out_float32" cast to "<name>.out".
 * So for half inputs the path keeps float32 q_scaled, k_scaled, v and probabilities for
 * backward: the probabilities are a saved float32 tensor the caller never sees. The
 * arithmetic is sdpa_math.h's. The fused kernels PyTorch picks on a GPU by default (flash,
 * memory-efficient, cuDNN) round differently: see docs/SEMANTICS.md.
 */
#include <math.h>
#include <stdio.h>

#include "ops/sdpa_math.h"
#include "layer.h"

#define OP_NAME "scaled_dot_product_attention"
/* the option slots (case.h's layer_spec) */
#define SDPA_CAUSAL opt_bool[0]
#define SDPA_SCALE opt_real[0] /* 0: not given, 1/sqrt(E) */

/* the geometry of a [B, H, L, E] query against [B, H, S, *] keys or values */
static sdpa_geom geom_of(const tensor *q, const tensor *kv, bool causal)
{
    return (sdpa_geom){.n = q->shape[0] * q->shape[1],
                       .l = q->shape[2],
                       .s = kv->shape[2],
                       .e = q->shape[3],
                       .ev = kv->shape[3],
                       .causal = causal};
}

/* the counts of a tensor an op stored uncounted, for its observation */
static round_stats *observed(run *r, const tensor *t, round_stats *st)
{
    round_stats *stp = run_stats(r, st);
    if (stp)
        run_check(r, r->be->observe(r->be, t, stp));
    return stp;
}

/* MulBackward1: grad * sqrt(scale) */
static void scale_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, n->grad, (float)n->scalar, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *scaled(run *r, const layer_spec *l, tensor *x, float sf, const char *what)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", l->name, what);
    tensor *y = run_tensor_like(r, x, name, DTYPE_FLOAT32, MEM_ACTIVATIONS);
    tensor_why(y, DTYPE_REASON_OPMATH, OP_NAME, NULL, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, x, sf, y, stp));
    node *n = tape_record(r, "mul", scale_backward, y, &x, 1);
    if (n)
        n->scalar = sf;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

/* gives the gradient of input i when it needs one */
static void give_or_drop(run *r, node *n, int i, tensor *g)
{
    round_stats st;
    if (node_needs_grad(n, i))
        node_give_grad(r, n, i, g, observed(r, g, &st));
    else
        tensor_release(&r->pool, g);
}

/* BmmBackward0 and SafeSoftmaxBackward0: saved q_scaled, k_scaled, probabilities;
 * n->scalar: causal */
static void probs_backward(run *r, node *n)
{
    tensor *q = n->saved[0], *k = n->saved[1], *p = n->saved[2];
    sdpa_geom g = geom_of(q, k, n->scalar != 0);
    tensor *dq = node_grad_tensor(r, n, 0), *dk = node_grad_tensor(r, n, 1);
    run_check(r, r->be->sdpa_probs_backward(r->be, &g, n->grad, q, k, p, dq, dk));
    give_or_drop(r, n, 0, dq);
    give_or_drop(r, n, 1, dk);
}

/* BmmBackward0 of p v: saved p and v */
static void value_backward(run *r, node *n)
{
    tensor *p = n->saved[0], *v = n->saved[1];
    sdpa_geom g = geom_of(p, v, false);
    g.e = 0; /* p's last dim is the keys: no head dim of q here */
    tensor *dp = node_grad_tensor(r, n, 0), *dv = node_grad_tensor(r, n, 1);
    run_check(r, r->be->sdpa_value_backward(r->be, &g, n->grad, p, v, dp, dv));
    give_or_drop(r, n, 0, dp);
    give_or_drop(r, n, 1, dv);
}

/* ToCopyBackward0 of the output's cast back to the inputs' dtype */
static void to_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, n->grad, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

/* t itself (float32) or its float32 copy: a new reference */
static tensor *as_float32(run *r, tensor *t)
{
    if (t->dtype == DTYPE_FLOAT32) {
        tensor_retain(t);
        return t;
    }
    return cast_to(r, t, DTYPE_FLOAT32, MEM_ACTIVATIONS, DTYPE_REASON_OPMATH, OP_NAME);
}

static tensor *sdpa_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    (void)params;
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *qa = autocast_arg(r, ac, in[0]), *ka = autocast_arg(r, ac, in[1]),
           *va = autocast_arg(r, ac, in[2]);
    if (qa->dtype != ka->dtype || qa->dtype != va->dtype) /* PyTorch 2.15's message */
        run_fail(r,
                 "Expected query, key, and value to have the same dtype, but got query.dtype: "
                 "%s key.dtype: %s and value.dtype: %s instead.",
                 type_meta_name(qa->dtype), type_meta_name(ka->dtype), type_meta_name(va->dtype));
    dtype dt = qa->dtype;
    tensor out_why = {.dtype = dt}; /* the output's reason, while the operands are at hand */
    tensor *operands[3] = {qa, ka, va};
    autocast_why(r, &out_why, ac, operands, 3);
    double scale = l->SDPA_SCALE > 0 ? l->SDPA_SCALE : 1.0 / sqrt((double)qa->shape[3]);
    float sf = (float)sqrt(scale); /* calculate_scale(...).sqrt(), a double, multiplied in */
    tensor *q32 = as_float32(r, qa), *k32 = as_float32(r, ka), *v32 = as_float32(r, va);
    tensor_release(&r->pool, qa);
    tensor_release(&r->pool, ka);
    tensor_release(&r->pool, va);
    tensor *qs = scaled(r, l, q32, sf, "q_scaled"), *ks = scaled(r, l, k32, sf, "k_scaled");
    tensor_release(&r->pool, q32);
    tensor_release(&r->pool, k32);

    sdpa_geom g = geom_of(qs, ks, l->SDPA_CAUSAL);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.probs", l->name);
    int64_t ps[4] = {qs->shape[0], qs->shape[1], g.l, g.s};
    tensor *p = run_tensor(r, name, DTYPE_FLOAT32, 4, ps, MEM_ACTIVATIONS);
    tensor_why(p, DTYPE_REASON_OPMATH, OP_NAME, NULL, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->sdpa_probs_forward(r->be, &g, qs, ks, p, stp));
    tensor *qk[2] = {qs, ks};
    node *n = tape_record(r, "bmm+_safe_softmax", probs_backward, p, qk, 2);
    if (n)
        n->scalar = g.causal;
    tape_save(n, 0, qs);
    tape_save(n, 1, ks);
    tape_save(n, 2, p);
    observe_tensor(r->obs, p, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, qs);
    tensor_release(&r->pool, ks);

    g.ev = v32->shape[3];
    snprintf(name, sizeof name, dt == DTYPE_FLOAT32 ? "%s.out" : "%s.out_float32", l->name);
    int64_t os[4] = {ps[0], ps[1], g.l, g.ev};
    tensor *o = run_tensor(r, name, DTYPE_FLOAT32, 4, os, MEM_ACTIVATIONS);
    if (dt == DTYPE_FLOAT32)
        o->why = out_why.why;
    else
        tensor_why(o, DTYPE_REASON_OPMATH, OP_NAME, NULL, 0);
    stp = run_stats(r, &st);
    run_check(r, r->be->sdpa_value_forward(r->be, &g, p, v32, o, stp));
    tensor *pv[2] = {p, v32};
    n = tape_record(r, "bmm", value_backward, o, pv, 2);
    tape_save(n, 0, p);
    tape_save(n, 1, v32);
    observe_tensor(r->obs, o, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, p);
    tensor_release(&r->pool, v32);
    if (dt == DTYPE_FLOAT32)
        return o;

    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, o, name, dt, MEM_ACTIVATIONS);
    y->why = out_why.why;
    stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, o, y, stp));
    tape_record(r, "to", to_backward, y, &o, 1);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, o);
    return y;
}

/* q [H, L, E], k [H, S, E], v [H, S, Ev] per sample: out [H, L, Ev] */
static bool sdpa_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                       shape_check *sc)
{
    (void)l;
    static const char *const names[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++)
        if (in[i].ndim != 3) {
            char s[128];
            shape_text(&in[i], s, sizeof s);
            shape_fail(sc, SHAPE_INPUT,
                       "%s has shape %s per sample; scaled_dot_product_attention needs "
                       "[heads, tokens, head dim] (split_heads makes it)",
                       names[i], s);
            return false;
        }
    const int64_t *q = in[0].dim, *k = in[1].dim, *v = in[2].dim;
    if (k[0] != q[0] || v[0] != q[0])
        shape_fail(sc, SHAPE_INPUT, "query, key and value have %lld, %lld and %lld heads",
                   (long long)q[0], (long long)k[0], (long long)v[0]);
    else if (k[2] != q[2])
        shape_fail(sc, SHAPE_INPUT, "query's head dim is %lld, key's %lld", (long long)q[2],
                   (long long)k[2]);
    else if (v[1] != k[1])
        shape_fail(sc, SHAPE_INPUT, "key has %lld tokens, value %lld", (long long)k[1],
                   (long long)v[1]);
    *out = (layer_shape){3, {q[0], q[1], v[2]}};
    return true;
}

static int sdpa_describe(const layer_spec *l, char *buf, size_t len)
{
    if (l->SDPA_SCALE > 0)
        return snprintf(buf, len, OP_NAME "%s (scale %g)", l->SDPA_CAUSAL ? " causal" : "",
                        l->SDPA_SCALE);
    return snprintf(buf, len, OP_NAME "%s", l->SDPA_CAUSAL ? " causal" : "");
}

static const kind_opt sdpa_opts[] = {
    {"causal", KIND_OPT_BOOL, offsetof(layer_spec, SDPA_CAUSAL), .def = 0},
    {"scale", KIND_OPT_REAL, offsetof(layer_spec, SDPA_SCALE), .range = POSITIVE, .real_def = 0},
};
static const autocast_op sdpa_autocast[] = {
    {OP_NAME,
     AUTOCAST_LOWER_PRECISION_FP,
     "lower_precision_fp: KERNEL_CUDA(scaled_dot_product_attention, lower_precision_fp)",
     {"scaled_dot_product_attention", "_scaled_dot_product_attention_math"}},
};

const layer_def scaled_dot_product_attention_def = {
    .name = OP_NAME,
    .signature = "",
    .opts = sdpa_opts,
    .n_opts = COUNT_OF(sdpa_opts),
    .shape = sdpa_shape,
    .input_shape = no_input_shape,
    .params = no_params,
    .autocast = sdpa_autocast,
    .n_autocast = COUNT_OF(sdpa_autocast),
    .forward = sdpa_forward,
    .describe = sdpa_describe,
    .n_inputs = 3,
};
