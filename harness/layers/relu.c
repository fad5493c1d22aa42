/* relu.c: nn.ReLU. Runs in its input's dtype (not in autocast's lists); saves its result,
 * as threshold_backward(grad, result, 0) reads it. */
#include "layers.h"

static void relu_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->relu_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

tensor *relu_forward(run *r, const layer_spec *l, tensor *x)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->relu_forward(r->be, x, y, stp));
    node *n = tape_record(r, "relu", relu_backward, y, &x, 1);
    tape_save(n, 0, y);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}
