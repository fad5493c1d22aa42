/*
 * cross_entropy.c: F.cross_entropy = log_softmax + nll_loss (mean reduction), both in
 * float32 under autocast. The logits' upcast is a cast node ("fc3.out@float32"): PyTorch's
 * CUDA path fuses it into _log_softmax(half_to_float=true), whose backward rounds the
 * gradient to half at the same point with the same values, so the counts agree.
 * Case files: `loss = cross_entropy`, with int64 class labels as the target.
 */
#include "layer.h"

static void log_softmax_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->log_softmax_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static void nll_loss_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->nll_loss_backward(r->be, n->grad, n->saved[1], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *cross_entropy_forward(run *r, const case_config *cfg, tensor *logits, tensor *target)
{
    const autocast_op *ac = loss_def_of(cfg->loss)->autocast; /* log_softmax, nll_loss */
    tensor *xa = autocast_arg(r, &ac[0], logits);
    tensor *logp = run_tensor_like(r, xa, "log_softmax.out", xa->dtype, MEM_ACTIVATIONS);
    autocast_why(r, logp, &ac[0], &xa, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->log_softmax_forward(r->be, xa, logp, stp));
    node *n = tape_record(r, "log_softmax", log_softmax_backward, logp, &xa, 1);
    tape_save(n, 0, logp);
    observe_tensor(r->obs, logp, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xa);

    tensor *lp = autocast_arg(r, &ac[1], logp);
    tensor *loss = run_tensor(r, "loss", lp->dtype, 0, NULL, MEM_ACTIVATIONS);
    autocast_why(r, loss, &ac[1], &lp, 1);
    stp = run_stats(r, &st);
    run_check(r, r->be->nll_loss_forward(r->be, lp, target, loss, stp));
    tensor *in[2] = {lp, target};
    n = tape_record(r, "nll_loss", nll_loss_backward, loss, in, 2);
    tape_save(n, 1, target);
    observe_tensor(r->obs, loss, ROLE_LOSS, stp);
    tensor_release(&r->pool, lp);
    tensor_release(&r->pool, logp);
    return loss;
}

static const autocast_op cross_entropy_autocast[] = {
    {"log_softmax",
     AUTOCAST_FP32_SET_OPT_DTYPE,
     "fp32_set_opt_dtype: KERNEL_CUDA(log_softmax, fp32_set_opt_dtype) (cross_entropy's first op)",
     {"log_softmax.int", "_log_softmax", "_log_softmax_backward_data"}},
    {"nll_loss",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(nll_loss, fp32) (cross_entropy's second op)",
     {"nll_loss", "nll_loss_forward", "nll_loss_backward"}},
};

const loss_def cross_entropy_def = {
    .name = "cross_entropy",
    .class_target = true,
    .autocast = cross_entropy_autocast,
    .n_autocast = COUNT_OF(cross_entropy_autocast),
    .forward = cross_entropy_forward,
};
