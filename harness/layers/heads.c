/*
 * heads.c: attention's head split and merge. `NAME = split_heads H`: [B, T, C] ->
 * [B, H, T, C/H], x.view(B, T, H, C/H).transpose(1, 2): a view in PyTorch, a contiguous
 * copy here (the copy PyTorch's matmul makes of it; see transpose.c). `NAME = merge_heads`:
 * [B, H, T, D] -> [B, T, H*D], y.transpose(1, 2).contiguous().view(B, T, H*D): the copy
 * .contiguous() makes, in PyTorch too. Neither is on any autocast list (views and a copy
 * keep their input's dtype); neither saves anything; each one's gradient is the other's
 * dim swap.
 */
#include "layer.h"

/* t [B, T, C] viewed as [B, T, H, C/H] */
static tensor as_heads(const tensor *t, int64_t h)
{
    const int64_t shape[4] = {t->shape[0], t->shape[1], h, t->shape[2] / h};
    return reshaped(t, 4, shape);
}

/* swaps dims 1 and 2 of src (viewed as 4-d) into a new tensor of dst_like's shape */
static tensor *swap_heads(run *r, const tensor *src4, const tensor *dst_shape, const char *name,
                          mem_category cat, round_stats *st)
{
    tensor *y = run_tensor(r, name, src4->dtype, dst_shape->ndim, dst_shape->shape, cat);
    int64_t s4[4] = {src4->shape[0], src4->shape[2], src4->shape[1], src4->shape[3]};
    tensor y4 = reshaped(y, 4, s4);
    run_check(r, r->be->transpose(r->be, src4, 1, 2, &y4, st));
    return y;
}

static void heads_backward(run *r, node *n, bool split)
{
    char name[TENSOR_NAME_MAX + 8];
    node_grad_name(r, n, 0, name, sizeof name);
    int64_t h = split ? n->grad->shape[1] : n->in[0].shape[1];
    tensor g4 = split ? *n->grad : as_heads(n->grad, h);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *dx = swap_heads(r, &g4, &n->in[0], name, MEM_GRADS, stp);
    node_give_grad(r, n, 0, dx, stp);
}

static void split_heads_backward(run *r, node *n) { heads_backward(r, n, true); }

static void merge_heads_backward(run *r, node *n) { heads_backward(r, n, false); }

static tensor *heads_forward(run *r, const layer_spec *l, tensor *x, bool split)
{
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor x4 = split ? as_heads(x, l->opt_int[0]) : *x;
    int64_t b = x->shape[0];
    tensor like = split ? reshaped(x, 4, (int64_t[4]){b, x4.shape[2], x4.shape[1], x4.shape[3]})
                        : reshaped(x, 3, (int64_t[3]){b, x->shape[2], x->shape[1] * x->shape[3]});
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *y = swap_heads(r, &x4, &like, name, MEM_ACTIVATIONS, stp);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    tape_record(r, split ? "split_heads" : "merge_heads",
                split ? split_heads_backward : merge_heads_backward, y, &x, 1);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static tensor *split_heads_forward(run *r, const layer_spec *l, tensor *const *in,
                                   tensor *const *params)
{
    return heads_forward(r, l, in[0], true);
}

static tensor *merge_heads_forward(run *r, const layer_spec *l, tensor *const *in,
                                   tensor *const *params)
{
    return heads_forward(r, l, in[0], false);
}

static bool split_heads_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                              shape_check *sc)
{
    char s[128];
    shape_text(&in[0], s, sizeof s);
    if (in[0].ndim != 2) {
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; split_heads takes [T, C]", s);
        return false;
    }
    if (in[0].dim[1] % l->opt_int[0] != 0) {
        shape_fail(sc, SHAPE_INPUT,
                   "input has shape %s: %lld channels do not split into %lld "
                   "heads",
                   s, (long long)in[0].dim[1], (long long)l->opt_int[0]);
        return false;
    }
    *out = (layer_shape){3, {l->opt_int[0], in[0].dim[0], in[0].dim[1] / l->opt_int[0]}};
    return true;
}

static bool merge_heads_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                              shape_check *sc)
{
    if (in[0].ndim != 3) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; merge_heads takes [H, T, D]", s);
        return false;
    }
    *out = (layer_shape){2, {in[0].dim[1], size_mul(in[0].dim[0], in[0].dim[2])}};
    return true;
}

static int split_heads_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "split_heads %lld", (long long)l->opt_int[0]);
}

static int merge_heads_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "merge_heads");
}

static const kind_arg split_heads_args[] = {
    {"heads", "heads", offsetof(layer_spec, opt_int[0]), 1},
};
static const autocast_op split_heads_autocast[] = {
    {"split_heads",
     AUTOCAST_NONE,
     "not listed (view + transpose): keeps its input's dtype",
     {"view", "transpose.int", "clone"}},
};
static const autocast_op merge_heads_autocast[] = {
    {"merge_heads",
     AUTOCAST_NONE,
     "not listed (transpose + contiguous + view): keeps its input's dtype",
     {"transpose.int", "clone", "view"}},
};

const layer_def split_heads_def = {
    .name = "split_heads",
    .signature = "H",
    .args = split_heads_args,
    .n_args = COUNT_OF(split_heads_args),
    .input_shape = no_input_shape,
    .shape = split_heads_shape,
    .params = no_params,
    .autocast = split_heads_autocast,
    .n_autocast = COUNT_OF(split_heads_autocast),
    .forward = split_heads_forward,
    .describe = split_heads_describe,
};

const layer_def merge_heads_def = {
    .name = "merge_heads",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = merge_heads_shape,
    .params = no_params,
    .autocast = merge_heads_autocast,
    .n_autocast = COUNT_OF(merge_heads_autocast),
    .forward = merge_heads_forward,
    .describe = merge_heads_describe,
};
