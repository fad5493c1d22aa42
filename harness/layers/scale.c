/*
 * scale.c: `NAME = scale S`, x * S with S a Python float (attention's `q * 0.125`). A
 * Python scalar takes no part in type promotion: the result is in x's dtype, computed in
 * float32 (opmath) and rounded once. Not on any autocast list (mul's fallthrough). Saves
 * nothing; MulBackward1 (tools/autograd/derivatives.yaml: `self: grad * other`) gives
 * dx = dy * S in dy's dtype.
 */
#include "layer.h"

static void scale_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, n->grad, (float)n->scalar, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *scale_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, "scale", &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, x, (float)l->opt_real[0], y, stp));
    node *n = tape_record(r, "scale", scale_backward, y, &x, 1);
    if (n)
        n->scalar = l->opt_real[0];
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static int scale_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "scale %g", l->opt_real[0]);
}

static const kind_arg scale_args[] = {
    {"factor", "factor", offsetof(layer_spec, opt_real[0]), KIND_ARG_REAL},
};
static const autocast_op scale_autocast[] = {
    {"scale", AUTOCAST_NONE,
     "not listed (mul's fallthrough): a Python float does not promote, x's dtype"},
};

const layer_def scale_def = {
    .name = "scale",
    .signature = "S",
    .args = scale_args,
    .n_args = COUNT_OF(scale_args),
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = scale_autocast,
    .n_autocast = COUNT_OF(scale_autocast),
    .forward = scale_forward,
    .describe = scale_describe,
};
