/*
 * optimizer.h: the optimizer over the model's parameters (a kind of optimizers.h's registry,
 * stepped as optim_math.h computes it), its learning-rate schedule, and fp32 master weights.
 *
 * State tensors are created at the first step, in the dtype of what they update (the
 * parameter, or its master), as PyTorch creates them like the parameter, and named after the
 * parameter and the registry's state name ("fc1.weight.exp_avg"). With master
 * weights (Apex O2, llm.c): the optimizer owns a float32 copy of every half parameter
 * ("fc1.weight@float32", made at init); after backward each half .grad is copied up
 * ("fc1.weight.grad@float32"), the scaler unscales those, the step updates the masters,
 * and the half parameters are refreshed from them (a rounding, observed).
 *
 * Gradient accumulation ([train] accumulate = N > 1): after each micro-batch's backward,
 * optimizer_accumulate() takes every parameter's fresh .grad (set to None again, so the
 * next backward makes a new one) and adds it into the step's accumulated gradient:
 *   - without master weights, or with delay_unscale: in the .grad's own dtype, as
 *     AccumulateGrad's `grad += new` rounds (float(a) + float(b), rounded into the dtype);
 *   - with master weights (Apex O2's default, delay_unscale=False): the half .grad is
 *     copied up to float32, unscaled there (GradScaler's unscale, found_inf kept), and added
 *     into the float32 master gradient (an add rounded in float32).
 * Each add counts its lost accumulations: elements where the micro-batch's contribution
 * was non-zero and the stored sum equals what was stored before. optimizer_accumulated()
 * hands the sums to the step.
 */
#ifndef AMPSCOPE_OPTIMIZER_H
#define AMPSCOPE_OPTIMIZER_H

#include "model.h"
#include "scaler.h"

typedef struct optimizer {
    optim_config cfg;
    bool master_weights;
    int n;
    tensor *param[2 * CASE_MAX_LAYERS];  /* the model's */
    tensor *master[2 * CASE_MAX_LAYERS]; /* float32 masters, or NULL */
    tensor *state[2 * CASE_MAX_LAYERS][OPTIM_MAX_STATE];
    tensor *acc[2 * CASE_MAX_LAYERS]; /* accumulation: this step's sums so far */
    bool acc_unscaled;                /* they are unscaled float32 master gradients */
    int64_t steps_taken;
    /* schedule (torch.optim.lr_scheduler) */
    schedule_kind schedule;
    double base_lr, lr, eta_min;
    int64_t t_max, last_epoch;
} optimizer;

void optimizer_init(run *r, optimizer *o, model *m);
/* After backward: the gradients the step will use (the masters' when master weights are on),
 * made ready (copied up) and observed. */
void optimizer_collect_grads(run *r, optimizer *o, tensor **grads);
/* One optimizer.step() on those grads; returns the lost updates. */
int64_t optimizer_step(run *r, optimizer *o, tensor *const *grads);
/* After micro-batch k's backward (accumulation): adds its gradients into the step's, as
 * above; s unscales them in the master-weights path (*found_inf |= what it finds).
 * Returns the lost accumulations. */
int64_t optimizer_accumulate(run *r, optimizer *o, const grad_scaler *s, int64_t k,
                             int *found_inf);
/* After the last micro-batch: the sums become the gradients. Returns true when they are
 * the float32 master gradients, already unscaled (grads[] filled); false when they are the
 * parameters' .grad again, for optimizer_collect_grads and the scaler as one batch's. */
bool optimizer_accumulated(optimizer *o, tensor **grads);
/* The add of accumulation: acc = round(float(acc) + float(g)) into acc's dtype, observed
 * as role; returns the lost accumulations. */
int64_t grad_accumulate_add(run *r, tensor *acc, const tensor *g, tensor_role role);
/* optimizer.zero_grad(set_to_none=True) and the masters' grads likewise */
void optimizer_zero_grad(run *r, optimizer *o, tensor **grads);
/* scheduler.step() */
void scheduler_step(optimizer *o);

#endif
