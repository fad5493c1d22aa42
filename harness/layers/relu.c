/* relu.c: nn.ReLU (case files: `relu`). Runs in its input's dtype (not in autocast's lists);
 * saves its result, as threshold_backward(grad, result, 0) reads it. */
#include "layer.h"

static void relu_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->relu_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *relu_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, "relu", &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->relu_forward(r->be, x, y, stp));
    node *n = tape_record(r, "relu", relu_backward, y, &x, 1);
    tape_save(n, 0, y);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static int relu_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "relu");
}

static const autocast_op relu_autocast[] = {
    {"relu", AUTOCAST_NONE, "not listed: runs in its input's dtype"},
};

const layer_def relu_def = {
    .name = "relu",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = relu_autocast,
    .n_autocast = COUNT_OF(relu_autocast),
    .forward = relu_forward,
    .describe = relu_describe,
};
