/*
 * autocast.h: autocast's policy, as PyTorch applies it on CUDA (aten/src/ATen/autocast_mode.cpp),
 * in one table that the layers consult and `ampscope ops` prints, and the casts it makes.
 * Each layer's and loss's entries are in its definition (layers/layer.h); autocast.c adds
 * those of the ops that are no layer's (mean, mul).
 *
 * AUTOCAST_LOWER  runs in the autocast dtype: floating inputs, weights and biases are cast
 *                 down (lower_precision_fp); fp32 parameters' copies are cached once per
 *                 forward (cached_cast: leaf, requires_grad, float32 source).
 * AUTOCAST_FP32   runs in float32: half inputs are cast up (fp32).
 * AUTOCAST_FP32_SET_OPT_DTYPE  the same through the op's dtype argument (fp32_set_opt_dtype:
 *                 softmax, log_softmax): a float32 output.
 * AUTOCAST_NONE   not in autocast's lists: runs in its input's dtype.
 * The harness reproduces the CUDA lists on both backends (CPU autocast has other lists).
 */
#ifndef AMPSCOPE_AUTOCAST_H
#define AMPSCOPE_AUTOCAST_H

#include <stdio.h>

#include "run.h"

typedef enum autocast_policy {
    AUTOCAST_LOWER = 0,
    AUTOCAST_FP32,
    AUTOCAST_FP32_SET_OPT_DTYPE,
    AUTOCAST_NONE
} autocast_policy;

typedef struct autocast_op {
    const char *op; /* the harness's op */
    autocast_policy policy;
    const char *pytorch_list; /* where autocast_mode.cpp lists it */
} autocast_op;

autocast_policy autocast_policy_of(const char *op);
void autocast_print_table(FILE *f);

/* The tensor `op` receives for argument t (a new reference): t itself, or its cast under
 * the active autocast policy, recorded as a cast node and observed. */
tensor *autocast_arg(run *r, const char *op, tensor *t);
/* An explicit cast: a new tensor "<name>@<dtype>" and its cast node (backward casts the
 * gradient back to the source dtype); cat is its memory category, why and op say why it
 * has dt (dtype_reason.h; the source is its operand). */
tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat, dtype_reason why, const char *op);
/* Why the output of `op` has its dtype, from the op's autocast policy and the operands it
 * computed from (as it received them, after autocast's casts; NULL and int64 ones
 * skipped): under autocast, the op's list (lower_precision_fp, fp32, fp32_set_opt_dtype);
 * for an op on no list, or with autocast off, its operands' dtype ("input"), or type
 * promotion when they differ; for an op on a list run outside the autocast region of a
 * case that has one, "autocast_off". */
dtype_reason autocast_reason(const run *r, const char *op, tensor *const *in, int n);
/* tensor_why(y, autocast_reason(r, op, in, n), op, ...): the one call an op's forward makes
 * for its output; the operands are named where they, not a list, gave the dtype. */
void autocast_why(const run *r, tensor *y, const char *op, tensor *const *in, int n);
/* Leaves the autocast region: drops the cache of parameter copies (nodes keep theirs). */
void autocast_exit(run *r);

#endif
