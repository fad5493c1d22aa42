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
/* optimizer.zero_grad(set_to_none=True) and the masters' grads likewise */
void optimizer_zero_grad(run *r, optimizer *o, tensor **grads);
/* scheduler.step() */
void scheduler_step(optimizer *o);

#endif
