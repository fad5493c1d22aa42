/*
 * scaled_dot_product_attention.c: F.scaled_dot_product_attention(q, k, v, is_causal=,
 * scale=) as PyTorch's math path computes it (_scaled_dot_product_attention_math in
 * aten/src/ATen/native/transformers/attention.cpp, checked against PyTorch 2.15 forced to
 * SDPBackend.MATH). Case files: `NAME = scaled_dot_product_attention Q K V [MASK]
 * [causal=yes|no] [scale=S] [enable_gqa=yes|no]`, each of q, k, v [B, H, T, E] ([H, T, E]
 * per sample); the output is [B, H, L, Ev]. MASK, an additive float attn_mask, has a
 * per-sample shape that broadcasts to the scores' [H, L, S] (PyTorch's bool mask has no
 * dtype here: write it as 0 and -inf); it may not go with causal=yes, as PyTorch refuses.
 * enable_gqa=yes lets k and v have fewer heads than q (a divisor of q's): grouped-query
 * attention, k and v repeated as pre_process_group_query_attention_input does.
 *
 * Under autocast the op is on the lower_precision_fp list (q, k and v cast to the autocast
 * dtype, the output in it). The math path then, as autograd records it:
 *   - under autocast a float32 mask is cast to the autocast dtype too (cached_cast of
 *     the optional attn_mask); its dtype must be float32 or q's, else PyTorch's message;
 *   - half q, k, v are copied to float32 (three ToCopy nodes: "<q>@float32", ...);
 *   - with enable_gqa and fewer k, v heads, the float32 k and v are repeated over the head
 *     dim, `repeat_interleave(H / Hkv, -3)` (unsqueeze, expand, clone, view: its backward
 *     is ExpandBackward0, a float32 sum over each head's copies): "<name>.k_repeated";
 *   - q and k are each multiplied by sqrt(scale) in float32 (MulBackward1, nothing saved):
 *     "<name>.q_scaled", "<name>.k_scaled", scale = 1/sqrt(E) unless given;
 *   - bmm(q, k^T), the mask added (a float32 add, `attn.add_(*attn_mask)`: its gradient is
 *     the scores' summed over the dims it broadcasts along) or the causal one (0 or -inf,
 *     tril of ones(L, S)), _safe_softmax:
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
#define SDPA_GQA opt_bool[1]
#define SDPA_MASKED(l) ((l)->n_inputs > 3) /* the line names an attn_mask */
#define SDPA_MASK_WHOLE 1 /* node.index of the probabilities' node: its mask has no batch dim */

/* the geometry of a [B, H, L, E] query against [B, H, S, *] keys or values */
static sdpa_geom geom_of(const tensor *q, const tensor *kv, bool causal)
{
    return (sdpa_geom){.n = q->shape[0] * q->shape[1],
                       .l = q->shape[2],
                       .s = kv->shape[2],
                       .e = q->shape[3],
                       .ev = kv->shape[3],
                       .causal = causal,
                       .heads = q->shape[1]};
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

/* the mask's size along each of the scores' [B, H, L, S]: its first dim is the batch's, the
 * others (its per-sample dims) right-aligned to [H, L, S]; a mask without a batch dim (whole:
 * a constant's) right-aligned to [B, H, L, S], as PyTorch broadcasts it */
static void mask_sizes(const tensor *mask, bool whole, int64_t *size)
{
    size[0] = whole ? 1 : mask->shape[0];
    for (int d = whole ? 0 : 1; d < 4; d++) {
        int md = d - (4 - mask->ndim);
        size[d] = md >= (whole ? 0 : 1) ? mask->shape[md] : 1;
    }
}

/* the dims of the scores [B, H, L, S] the mask broadcasts along, as a reduction's mask */
static unsigned mask_broadcast_dims(const tensor *mask, bool whole, const tensor *scores)
{
    int64_t size[4];
    mask_sizes(mask, whole, size);
    unsigned dims = 0;
    for (int d = 0; d < 4; d++)
        if (size[d] == 1 && scores->shape[d] > 1)
            dims |= 1u << d;
    return dims;
}

/* AddBackward0's gradient of the mask: the scores' gradient ds (float32 [B, H, L, S])
 * summed to the mask's shape (sum_to_size), in the mask's dtype */
static void give_mask_grad(run *r, node *n, const tensor *ds)
{
    tensor *dm = node_grad_tensor(r, n, 2);
    unsigned dims = mask_broadcast_dims(dm, n->index == SDPA_MASK_WHOLE, ds);
    const op_params none = {.seed = 0};
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, dims ? r->be->reduce_forward(r->be, RD_OP_sum, &none, ds, dims, dm, stp)
                      : r->be->cast(r->be, ds, dm, stp));
    node_give_grad(r, n, 2, dm, stp);
}

/* BmmBackward0 and SafeSoftmaxBackward0 (and the mask's AddBackward0): saved q_scaled,
 * k_scaled, probabilities; n->scalar: causal */
static void probs_backward(run *r, node *n)
{
    tensor *q = n->saved[0], *k = n->saved[1], *p = n->saved[2];
    sdpa_geom g = geom_of(q, k, n->scalar != 0);
    tensor *dq = node_grad_tensor(r, n, 0), *dk = node_grad_tensor(r, n, 1);
    tensor *ds = NULL;
    if (node_needs_grad(n, 2)) {
        char name[TENSOR_NAME_MAX];
        snprintf(name, sizeof name, "%.*s.scores_grad", TENSOR_NAME_MAX - 13, p->name);
        ds = run_tensor_like(r, p, name, DTYPE_FLOAT32, MEM_WORKSPACE);
    }
    run_check(r, r->be->sdpa_probs_backward(r->be, &g, n->grad, q, k, p, dq, dk, ds));
    give_or_drop(r, n, 0, dq);
    give_or_drop(r, n, 1, dk);
    if (ds) {
        give_mask_grad(r, n, ds);
        tensor_release(&r->pool, ds);
    }
}

/* ExpandBackward0 of repeat_interleave(rep, -3): the gradient [B, H, S, E] summed over each
 * head's rep copies, viewed [B * H / rep, rep, S * E]; n->scalar: rep */
static void repeat_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    int64_t rep = (int64_t)n->scalar;
    int64_t vs[3] = {dx->shape[0] * dx->shape[1], rep, dx->shape[2] * dx->shape[3]};
    tensor v = reshaped(n->grad, 3, vs);
    const op_params none = {.seed = 0};
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->reduce_forward(r->be, RD_OP_sum, &none, &v, 1u << 1, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

/* x [B, Hkv, S, E] repeated rep times over the head dim, each head's copies together
 * (repeat_interleave): the expand as sum's backward computes it (every element of dx is
 * dy's), exact */
static tensor *repeated(run *r, const layer_spec *l, tensor *x, int64_t rep, const char *what)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", l->name, what);
    int64_t ys[4] = {x->shape[0], x->shape[1] * rep, x->shape[2], x->shape[3]};
    tensor *y = run_tensor(r, name, DTYPE_FLOAT32, 4, ys, MEM_ACTIVATIONS);
    tensor_why(y, DTYPE_REASON_OPMATH, OP_NAME, NULL, 0);
    int64_t outer = x->shape[0] * x->shape[1], inner = x->shape[2] * x->shape[3];
    int64_t xs[3] = {outer, 1, inner}, vs[3] = {outer, rep, inner};
    tensor xv = reshaped(x, 3, xs), yv = reshaped(y, 3, vs);
    const op_params none = {.seed = 0};
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r,
              r->be->reduce_backward(r->be, RD_OP_sum, &none, &xv, NULL, NULL, 1u << 1, &yv, stp));
    node *n = tape_record(r, "repeat_interleave", repeat_backward, y, &x, 1);
    if (n)
        n->scalar = (double)rep;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

/* k or v (float32) as the query's heads read it: itself, or repeated (enable_gqa) */
static tensor *query_heads(run *r, const layer_spec *l, tensor *x, int64_t heads, const char *what)
{
    if (x->shape[1] == heads)
        return x;
    tensor *y = repeated(r, l, x, heads / x->shape[1], what);
    tensor_release(&r->pool, x);
    return y;
}

/* the mask's strides over the scores' [b, h, i, j] (mask_sizes' alignment), 0 along the
 * dims it broadcasts */
static void mask_strides(const tensor *mask, bool whole, int64_t *stride)
{
    int64_t size[4], s = 1;
    mask_sizes(mask, whole, size);
    for (int d = 3; d >= 0; d--) {
        stride[d] = size[d] == 1 ? 0 : s;
        s *= size[d];
    }
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
    tensor *ma = SDPA_MASKED(l) ? autocast_arg(r, ac, in[3]) : NULL;
    if (qa->dtype != ka->dtype || qa->dtype != va->dtype) /* PyTorch 2.15's message */
        run_fail(r,
                 "Expected query, key, and value to have the same dtype, but got query.dtype: "
                 "%s key.dtype: %s and value.dtype: %s instead.",
                 type_meta_name(qa->dtype), type_meta_name(ka->dtype), type_meta_name(va->dtype));
    /* validate_sdpa_input (aten/src/ATen/native/transformers/sdp_utils_cpp.h) */
    if (ma && ma->dtype != DTYPE_FLOAT32 && ma->dtype != qa->dtype)
        run_fail(r,
                 "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                 "attn_mask.dtype: %s and  query.dtype: %s instead.",
                 type_meta_name(ma->dtype), type_meta_name(qa->dtype));
    dtype dt = qa->dtype;
    tensor out_why = {.dtype = dt}; /* the output's reason, while the operands are at hand */
    tensor *operands[4] = {qa, ka, va, ma};
    autocast_why(r, &out_why, ac, operands, ma ? 4 : 3);
    double scale = l->SDPA_SCALE > 0 ? l->SDPA_SCALE : 1.0 / sqrt((double)qa->shape[3]);
    float sf = (float)sqrt(scale); /* calculate_scale(...).sqrt(), a double, multiplied in */
    int64_t heads = qa->shape[1];
    tensor *q32 = as_float32(r, qa);
    tensor *k32 = query_heads(r, l, as_float32(r, ka), heads, "k_repeated");
    tensor *v32 = query_heads(r, l, as_float32(r, va), heads, "v_repeated");
    tensor_release(&r->pool, qa);
    tensor_release(&r->pool, ka);
    tensor_release(&r->pool, va);
    tensor *qs = scaled(r, l, q32, sf, "q_scaled"), *ks = scaled(r, l, k32, sf, "k_scaled");
    tensor_release(&r->pool, q32);
    tensor_release(&r->pool, k32);

    sdpa_geom g = geom_of(qs, ks, l->SDPA_CAUSAL);
    /* a mask without a batch dim (a constant's), which the probabilities' node keeps */
    bool whole = ma && l->inputs[3] != LAYER_INPUT && r->cfg->layers[l->inputs[3]].out_whole;
    if (ma)
        mask_strides(ma, whole, g.mask_stride);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.probs", l->name);
    int64_t ps[4] = {qs->shape[0], qs->shape[1], g.l, g.s};
    tensor *p = run_tensor(r, name, DTYPE_FLOAT32, 4, ps, MEM_ACTIVATIONS);
    tensor_why(p, DTYPE_REASON_OPMATH, OP_NAME, NULL, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->sdpa_probs_forward(r->be, &g, qs, ks, ma, p, stp));
    tensor *qkm[3] = {qs, ks, ma};
    node *n = tape_record(r, ma ? "bmm+add+_safe_softmax" : "bmm+_safe_softmax", probs_backward, p,
                          qkm, ma ? 3 : 2);
    if (n) {
        n->scalar = g.causal;
        n->index = whole ? SDPA_MASK_WHOLE : 0;
    }
    tape_save(n, 0, qs);
    tape_save(n, 1, ks);
    tape_save(n, 2, p);
    observe_tensor(r->obs, p, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, qs);
    tensor_release(&r->pool, ks);
    if (ma)
        tensor_release(&r->pool, ma);

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

/* the mask's per-sample shape against the scores' [H, L, S]: PyTorch's message of the add
 * (its dims counted in [B, H, L, S]) where a dim neither matches nor is 1 */
static bool mask_fits(const layer_shape *m, const int64_t *scores, shape_check *sc)
{
    if (m->ndim > 3) {
        shape_fail(sc, SHAPE_INPUT, "attn_mask has %d dims per sample; the scores have 3", m->ndim);
        return false;
    }
    for (int d = 2; d >= 0; d--) {
        int md = d - (3 - m->ndim);
        if (md >= 0 && m->dim[md] != 1 && m->dim[md] != scores[d]) {
            shape_fail(sc, SHAPE_INPUT,
                       "The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                       "non-singleton dimension %d",
                       (long long)scores[d], (long long)m->dim[md], d + 1);
            return false;
        }
    }
    return true;
}

/* q [H, L, E], k [Hkv, S, E], v [Hkv, S, Ev] per sample, Hkv = H or (enable_gqa) a divisor
 * of it, the mask broadcast to [H, L, S]: out [H, L, Ev] */
static bool sdpa_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                       shape_check *sc)
{
    static const char *const names[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++)
        if (in[i].ndim != 3 || (l->whole_inputs >> i & 1u)) {
            char s[128];
            shape_text(&in[i], s, sizeof s);
            shape_fail(sc, SHAPE_INPUT,
                       "%s has shape %s per sample; scaled_dot_product_attention needs "
                       "[heads, tokens, head dim] (split_heads makes it)",
                       names[i], s);
            return false;
        }
    const int64_t *q = in[0].dim, *k = in[1].dim, *v = in[2].dim;
    bool grouped = l->SDPA_GQA && (k[0] != q[0] || v[0] != q[0]);
    if (grouped && (k[0] < 1 || v[0] < 1 || q[0] % k[0] || q[0] % v[0])) /* attention.cpp */
        shape_fail(sc, SHAPE_INPUT,
                   "Number of heads in key and value must divide the number of heads in query");
    else if (!grouped && (k[0] != q[0] || v[0] != q[0]))
        shape_fail(sc, SHAPE_INPUT,
                   "query, key and value have %lld, %lld and %lld heads (enable_gqa=yes lets "
                   "key and value have fewer)",
                   (long long)q[0], (long long)k[0], (long long)v[0]);
    else if (k[2] != q[2])
        shape_fail(sc, SHAPE_INPUT, "query's head dim is %lld, key's %lld", (long long)q[2],
                   (long long)k[2]);
    else if (v[1] != k[1])
        shape_fail(sc, SHAPE_INPUT, "key has %lld tokens, value %lld", (long long)k[1],
                   (long long)v[1]);
    else if (SDPA_MASKED(l) && l->SDPA_CAUSAL)
        shape_fail(sc, SHAPE_LAYER,
                   "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
                   "is_causal=True");
    else if (SDPA_MASKED(l)) {
        const int64_t scores[3] = {q[0], q[1], k[1]};
        mask_fits(&in[3], scores, sc);
    }
    *out = (layer_shape){3, {q[0], q[1], v[2]}};
    return true;
}

static int sdpa_describe(const layer_spec *l, char *buf, size_t len)
{
    char scale[48] = "";
    if (l->SDPA_SCALE > 0)
        snprintf(scale, sizeof scale, " (scale %g)", l->SDPA_SCALE);
    return snprintf(buf, len, OP_NAME "%s%s%s%s", l->SDPA_CAUSAL ? " causal" : "",
                    SDPA_MASKED(l) ? " masked" : "", l->SDPA_GQA ? " gqa" : "", scale);
}

static const kind_opt sdpa_opts[] = {
    {"causal", KIND_OPT_BOOL, offsetof(layer_spec, SDPA_CAUSAL), .def = 0},
    {"scale", KIND_OPT_REAL, offsetof(layer_spec, SDPA_SCALE), .range = POSITIVE, .real_def = 0},
    {"enable_gqa", KIND_OPT_BOOL, offsetof(layer_spec, SDPA_GQA), .def = 0},
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
    .n_inputs = 4,
    .n_optional_inputs = 1,
    .whole_inputs = true, /* the mask's: q, k and v are refused by the shape rule */
};
