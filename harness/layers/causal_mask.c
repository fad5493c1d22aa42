/*
 * causal_mask.c: the mask of a hand-written causal attention (`causal_mask`):
 * x.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float('-inf')) on the last two
 * dims [.., T, S]: every column s > row t becomes -inf, the rest is x. masked_fill is on no
 * autocast list (aten/src/ATen/autocast_mode.h's AT_FORALL_* lists name none of its
 * overloads), so autocast_mode.cpp's fallthrough runs it in its input's dtype. Its backward
 * (derivatives.yaml, masked_fill.Scalar: grad.masked_fill(mask, 0)) zeroes those positions
 * of the gradient; PyTorch keeps the [T, S] bool mask for it (T * S bytes, made once by the
 * user's code), the harness keeps nothing: the positions follow from the shape.
 */
#include "layer.h"

#include <math.h>

static void causal_mask_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->causal_fill(r->be, n->grad, 0.0f, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *causal_mask_forward(run *r, const layer_spec *l, tensor *const *in,
                                   tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->causal_fill(r->be, x, -INFINITY, y, stp));
    tape_record(r, "causal_mask", causal_mask_backward, y, &x, 1);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

/* [.., T, S] per sample: the mask is over a sample's last two dims */
static bool causal_mask_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                              shape_check *sc)
{
    if (in[0].ndim < 2) {
        char s[64];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT,
                   "causal_mask masks the last two dims [.., T, S] of each sample; the input is %s",
                   s);
        return false;
    }
    *out = in[0];
    return true;
}

static int causal_mask_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "causal_mask (-inf above the diagonal)");
}

static const autocast_op causal_mask_autocast[] = {
    {"causal_mask",
     AUTOCAST_NONE,
     "not listed: masked_fill; autocast_mode.cpp's fallthrough runs it in its input's dtype",
     {"masked_fill.Scalar"}},
};

const layer_def causal_mask_def = {
    .name = "causal_mask",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = causal_mask_shape,
    .params = no_params,
    .autocast = causal_mask_autocast,
    .n_autocast = COUNT_OF(causal_mask_autocast),
    .forward = causal_mask_forward,
    .describe = causal_mask_describe,
};
