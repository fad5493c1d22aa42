/*
 * l1.c: F.l1_loss(input, target), reduction='mean'. PyTorch 2.x's l1_loss is composite
 * (aten/src/ATen/native/Loss.cpp: apply_loss_reduction((input - target).abs(), reduction)),
 * so autograd records three nodes: sub ("l1.diff"), abs ("l1.out", which saves l1.diff) and
 * mean ("loss"). Under autocast l1_loss is on the float32 list: the prediction and target are
 * cast up before the sub, so every tensor of the loss is float32. Outside autocast the sub
 * promotes (float16 - float32 is float32) and the prediction's gradient is cast down to its
 * dtype by the engine (validate_outputs), as mse's. Backward: mean's dy * (1/N) in every
 * element, abs's grad * sgn(diff) with sgn(0) = 0, then sub's identity (or that cast).
 * Case files: `loss = l1`, with a float target of the output's shape.
 */
#include "layer.h"

/* SubBackward0: the gradient as it is for the input (the engine casts it to the input's
 * dtype); the target needs none */
static void sub_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, n->grad, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static void abs_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->abs_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *l1_forward(run *r, const case_config *cfg, tensor *pred, tensor *target)
{
    const autocast_op *ac = loss_def_of(cfg->loss)->autocast;
    tensor *pa = autocast_arg(r, ac, pred);
    tensor *ta = autocast_arg(r, ac, target);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *diff =
        run_tensor_like(r, pa, "l1.diff", promote_types(pa->dtype, ta->dtype), MEM_ACTIVATIONS);
    tensor *in[2] = {pa, ta};
    autocast_why(r, diff, ac, in, 2);
    run_check(r, r->be->sub_forward(r->be, pa, ta, diff, stp));
    tape_record(r, "sub", sub_backward, diff, in, 2);
    observe_tensor(r->obs, diff, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, pa);
    tensor_release(&r->pool, ta);

    tensor *abs = run_tensor_like(r, diff, "l1.out", diff->dtype, MEM_ACTIVATIONS);
    autocast_why(r, abs, ac, &diff, 1);
    stp = run_stats(r, &st);
    run_check(r, r->be->abs_forward(r->be, diff, abs, stp));
    node *n = tape_record(r, "abs", abs_backward, abs, &diff, 1);
    tape_save(n, 0, diff);
    observe_tensor(r->obs, abs, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, diff);

    tensor *loss =
        reduce_record(r, RD_OP_mean, abs, (1u << abs->ndim) - 1, "loss", 0, NULL, ROLE_LOSS);
    tensor_release(&r->pool, abs);
    return loss;
}

static const autocast_op l1_autocast[] = {
    {"l1_loss",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(l1_loss, fp32)",
     {"l1_loss", "sub.Tensor", "abs", "mean"}},
};

const loss_def l1_def = {
    .name = "l1",
    .autocast = l1_autocast,
    .n_autocast = COUNT_OF(l1_autocast),
    .forward = l1_forward,
};
