/*
 * linear.c: nn.Linear, y[B,O] = x[B,I] w[O,I]^T + b[O], as F.linear runs it (addmm with a
 * bias, mm without). Under autocast x, w and b are cast to the autocast dtype. Saved for
 * backward: the input and the weight (as AddmmBackward0 keeps mat1 and mat2).
 */
#include "../autocast.h"
#include "../format.h"
#include "layers.h"

/* PyTorch's names of a dtype in its error messages: the number formats' from format.h's
 * table, int64's (class labels) here */
const char *scalar_type_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_scalar : dt == DTYPE_INT64 ? "Long" : "?";
}

const char *type_meta_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_cpp : dt == DTYPE_INT64 ? "long int" : "?";
}

const char *cuda_tensor_type_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_cuda_tensor : dt == DTYPE_INT64 ? "torch.cuda.LongTensor" : "?";
}

static void linear_backward(run *r, node *n)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *w = n->saved[1];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->linear_backward_input(be, dy, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->linear_backward_weight(be, dy, x, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->channel_sum(be, dy, dy->shape[0], 1, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

tensor *linear_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b)
{
    tensor *xa = autocast_arg(r, "linear", x);
    tensor *wa = autocast_arg(r, "linear", w);
    tensor *ba = b ? autocast_arg(r, "linear", b) : NULL;
    /* ADDMM_META and mm's meta function in aten/src/ATen/native/LinearAlgebra.cpp */
    if (ba && ba->dtype != wa->dtype)
        run_fail(r, "self and mat2 must have the same dtype, but got %s and %s",
                 scalar_type_name(ba->dtype), scalar_type_name(wa->dtype));
    if (xa->dtype != wa->dtype) {
        if (ba)
            run_fail(r, "mat1 and mat2 must have the same dtype, but got %s and %s",
                     scalar_type_name(xa->dtype), scalar_type_name(wa->dtype));
        run_fail(r, "expected mat1 and mat2 to have the same dtype, but got: %s != %s",
                 type_meta_name(xa->dtype), type_meta_name(wa->dtype));
    }
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[2] = {xa->shape[0], wa->shape[0]};
    tensor *y = run_tensor(r, name, xa->dtype, 2, shape, MEM_ACTIVATIONS);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->linear_forward(r->be, xa, wa, ba, y, stp));
    tensor *in[3] = {xa, wa, ba};
    node *n = tape_record(r, "linear", linear_backward, y, in, 3);
    tape_save(n, 0, xa);
    tape_save(n, 1, wa);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, wa);
    tensor_release(&r->pool, ba);
    return y;
}
