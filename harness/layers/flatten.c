/* flatten.c: nn.Flatten: [B, C, H, W] -> [B, C*H*W], a view of the same storage (no
 * memory, no rounding); its backward views the gradient back. */
#include "layers.h"

static tensor *view_or_fail(run *r, tensor *base, const char *name, int ndim, const int64_t *shape)
{
    char err[512];
    tensor *v = tensor_view(&r->pool, base, name, ndim, shape, err, sizeof err);
    if (!v)
        run_fail(r, "%s", err);
    return v;
}

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

tensor *flatten_forward(run *r, const layer_spec *l, tensor *x)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[2] = {x->shape[0], x->numel / x->shape[0]};
    tensor *y = view_or_fail(r, x, name, 2, shape);
    tape_record(r, "flatten", flatten_backward, y, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, y, stp));
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}
