/* flatten.c: nn.Flatten (case files: `flatten`): [B, C, H, W] -> [B, C*H*W], a view of the
 * same storage (no memory, no rounding); its backward views the gradient back. */
#include "layer.h"

static void flatten_backward(run *r, node *n)
{
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.grad", n->in[0].name);
    tensor *dx = view_or_fail(r, n->grad, name, n->in[0].ndim, n->in[0].shape);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *flatten_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[2] = {x->shape[0], x->numel / x->shape[0]};
    tensor *y = view_or_fail(r, x, name, 2, shape);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    tape_record(r, "flatten", flatten_backward, y, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, y, stp));
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool flatten_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                          shape_check *sc)
{
    int64_t n = 1;
    for (int i = 0; i < in[0].ndim; i++)
        n = size_mul(n, in[0].dim[i]);
    *out = (layer_shape){1, {n}};
    return true;
}

static int flatten_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "flatten");
}

static const autocast_op flatten_autocast[] = {
    {"flatten",
     AUTOCAST_NONE,
     "not listed: a view, keeps its input's dtype",
     {"flatten.using_ints", "view"}},
};

const layer_def flatten_def = {
    .name = "flatten",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = flatten_shape,
    .params = no_params,
    .autocast = flatten_autocast,
    .n_autocast = COUNT_OF(flatten_autocast),
    .forward = flatten_forward,
    .describe = flatten_describe,
};
