/*
 * conv2d.c: nn.Conv2d (groups = 1), x [N, C_in, H, W] -> y [N, C_out, H_out, W_out].
 * Under autocast x, w and b are cast to the autocast dtype. Saves the input and the weight.
 * Outside autocast, mismatched dtypes fail with PyTorch's texts (ConvUtils.h,
 * check_input_same_type_as_parameters; with a bias the text names the bias, as checked on
 * PyTorch 1.13's CPU path; the no-bias text is the CUDA one and was not checked on a GPU).
 */
#include "../autocast.h"
#include "layers.h"

static void conv2d_backward(run *r, node *n)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *w = n->saved[1];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->conv2d_backward_input(be, &n->geom, dy, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->conv2d_backward_weight(be, &n->geom, dy, x, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->channel_sum(be, dy, n->geom.n, n->geom.h_out * n->geom.w_out, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

tensor *conv2d_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b)
{
    tensor *xa = autocast_arg(r, "conv2d", x);
    tensor *wa = autocast_arg(r, "conv2d", w);
    tensor *ba = b ? autocast_arg(r, "conv2d", b) : NULL;
    if (ba && ba->dtype != xa->dtype)
        run_fail(r, "Input type (%s) and bias type (%s) should be the same",
                 type_meta_name(xa->dtype), type_meta_name(ba->dtype));
    if (wa->dtype != xa->dtype)
        run_fail(r, "Input type (%s) and weight type (%s) should be the same",
                 cuda_tensor_type_name(xa->dtype), cuda_tensor_type_name(wa->dtype));
    conv2d_geom g = {
        .n = xa->shape[0],
        .c_in = xa->shape[1],
        .h_in = xa->shape[2],
        .w_in = xa->shape[3],
        .c_out = l->out,
        .h_out = l->out_shape[1],
        .w_out = l->out_shape[2],
        .kh = l->kernel,
        .kw = l->kernel,
        .stride = l->stride,
        .padding = l->padding,
        .dilation = l->dilation,
    };
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {g.n, g.c_out, g.h_out, g.w_out};
    tensor *y = run_tensor(r, name, xa->dtype, 4, shape, MEM_ACTIVATIONS);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->conv2d_forward(r->be, &g, xa, wa, ba, y, stp));
    tensor *in[3] = {xa, wa, ba};
    node *n = tape_record(r, "conv2d", conv2d_backward, y, in, 3);
    if (n) {
        n->geom = g;
        tape_save(n, 0, xa);
        tape_save(n, 1, wa);
    }
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, wa);
    tensor_release(&r->pool, ba);
    return y;
}
