/*
 * bce_with_logits.c: F.binary_cross_entropy_with_logits(input, target), reduction='mean'.
 * One autograd node (derivatives.yaml: binary_cross_entropy_with_logits_backward) that saves
 * the logits and the target; its elementwise loss and the mean inside it are temporaries the
 * user never sees. Under autocast it is on the float32 list, so half logits (and the target)
 * are cast up and the loss and the logits' gradient are float32, the gradient then cast down
 * by the cast node's backward. Outside autocast the elementwise ops run in the target's dtype
 * (`(1 - target).mul_(input)` is in place) after log_sigmoid(input) in the input's, and the
 * gradient `input.sigmoid().sub_(target)...` is in the input's dtype (loss_math.h).
 * PyTorch does not check the target's range, nor does the harness: a case gives 0/1 labels
 * with `target = file PATH.npy` (float32, the output's shape), or any randn target.
 * Case files: `loss = bce_with_logits`, with a float target of the output's shape.
 */
#include "layer.h"

static void bce_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->bce_logits_backward(r->be, n->grad, n->saved[0], n->saved[1], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *bce_forward(run *r, const case_config *cfg, tensor *logits, tensor *target)
{
    const autocast_op *ac = loss_def_of(cfg->loss)->autocast;
    tensor *xa = autocast_arg(r, ac, logits);
    tensor *ta = autocast_arg(r, ac, target);
    tensor *elem = run_tensor_like(r, xa, "bce_with_logits.out", ta->dtype, MEM_ACTIVATIONS);
    run_check(r, r->be->bce_logits_forward(r->be, xa, ta, elem, NULL)); /* not observed */
    tensor *loss = run_tensor(r, "loss", ta->dtype, 0, NULL, MEM_ACTIVATIONS);
    autocast_why(r, loss, ac, &ta, 1); /* the target's dtype */
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, reduce_all(r->be, RD_OP_mean, elem, loss, stp)); /* apply_loss_reduction */
    tensor_release(&r->pool, elem);
    tensor *in[2] = {xa, ta};
    node *n = tape_record(r, "binary_cross_entropy_with_logits", bce_backward, loss, in, 2);
    tape_save(n, 0, xa);
    tape_save(n, 1, ta);
    observe_tensor(r->obs, loss, ROLE_LOSS, stp);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, ta);
    return loss;
}

static const autocast_op bce_autocast[] = {
    {"binary_cross_entropy_with_logits",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(binary_cross_entropy_with_logits, fp32)",
     {"binary_cross_entropy_with_logits"}},
};

const loss_def bce_with_logits_def = {
    .name = "bce_with_logits",
    .autocast = bce_autocast,
    .n_autocast = COUNT_OF(bce_autocast),
    .forward = bce_forward,
};
