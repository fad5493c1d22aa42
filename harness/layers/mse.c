/*
 * mse.c: F.mse_loss and Tensor.mean. Under autocast mse_loss runs in float32 (its inputs
 * are cast up); outside autocast it runs in the promoted dtype of its inputs. A float16
 * prediction against a float32 target then gets a float32 gradient that the autograd
 * engine casts down to float16 (validate_outputs; checked with PyTorch 2.15 on the CPU,
 * where 1.13 raised "Found dtype Float but expected Half" instead). With
 * reduction='mean' the loss is one node whose backward scales by alpha = 2/N; with
 * reduction='none' the elementwise loss "mse.out" is followed by a separate mean node,
 * whose backward stores dtype(1/N computed in float32) in every element.
 * Case files: `loss = mse [reduction=mean|none]`, with a float target of the output's shape.
 */
#include "layer.h"

static void mse_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (n->in[0].dtype == n->out.dtype) {
        run_check(
            r, r->be->mse_backward(r->be, n->grad, n->saved[0], n->saved[1], n->scalar, dx, stp));
    } else { /* computed in the promoted dtype, then cast to the input's */
        tensor *wide = run_tensor_like(r, dx, dx->name, n->out.dtype, MEM_GRADS);
        run_check(r, r->be->mse_backward(r->be, n->grad, n->saved[0], n->saved[1], n->scalar, wide,
                                         NULL));
        run_check(r, r->be->cast(r->be, wide, dx, stp));
        tensor_release(&r->pool, wide);
    }
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *mse_loss_forward(run *r, const autocast_op *ac, tensor *pred, tensor *target,
                                bool reduction_none)
{
    tensor *pa = autocast_arg(r, ac, pred);
    tensor *ta = autocast_arg(r, ac, target);
    dtype dt = promote_types(pa->dtype, ta->dtype);
    tensor *elem = run_tensor_like(r, pa, "mse.out", dt, MEM_ACTIVATIONS);
    tensor *in[2] = {pa, ta};
    autocast_why(r, elem, ac, in, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mse_forward(r->be, pa, ta, elem, stp));
    tensor *out = elem;
    if (!reduction_none) { /* apply_loss_reduction: the elementwise loss, then its mean */
        out = run_tensor(r, "loss", dt, 0, NULL, MEM_ACTIVATIONS);
        autocast_why(r, out, ac, in, 2);
        stp = run_stats(r, &st);
        run_check(r, reduce_all(r->be, RD_OP_mean, elem, out, stp));
        tensor_release(&r->pool, elem);
    }
    node *n = tape_record(r, "mse_loss", mse_backward, out, in, 2);
    if (n) {
        n->scalar = reduction_none ? 2.0 : 2.0 / (double)pa->numel;
        tape_save(n, 0, pa);
        tape_save(n, 1, ta);
    }
    observe_tensor(r->obs, out, reduction_none ? ROLE_ACTIVATION : ROLE_LOSS, stp);
    tensor_release(&r->pool, pa);
    tensor_release(&r->pool, ta);
    return out;
}

/* reduction='none' then .mean(), as the question's code writes it, or reduction='mean' */
static tensor *mse_forward(run *r, const case_config *cfg, tensor *pred, tensor *target)
{
    bool none = cfg->loss_reduction == REDUCTION_NONE;
    tensor *loss = mse_loss_forward(r, loss_def_of(cfg->loss)->autocast, pred, target, none);
    if (none) {
        tensor *mean =
            reduce_record(r, RD_OP_mean, loss, (1u << loss->ndim) - 1, "loss", 0, NULL, ROLE_LOSS);
        tensor_release(&r->pool, loss);
        loss = mean;
    }
    return loss;
}

static const kind_opt mse_opts[] = {
    {"reduction", KIND_OPT_CHOICE, offsetof(case_config, loss_reduction), .def = REDUCTION_MEAN,
     .choices = reduction_names, .n_choices = REDUCTION_COUNT},
};
static const autocast_op mse_autocast[] = {
    {"mse_loss",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(mse_loss, fp32)",
     {"mse_loss", "mse_loss_backward"}},
};

const loss_def mse_def = {
    .name = "mse",
    .opts = mse_opts,
    .n_opts = COUNT_OF(mse_opts),
    .autocast = mse_autocast,
    .n_autocast = COUNT_OF(mse_autocast),
    .forward = mse_forward,
};
