/*
 * autocast.h: autocast's policy, as PyTorch applies it on CUDA (aten/src/ATen/autocast_mode.cpp),
 * in one table that the layers consult and `ampscope ops` prints, and the casts it makes.
 * Each layer's and loss's entries are in its definition (layers/layer.h); autocast.c adds
 * those of the ops that are no layer's (mean, mul).
 *
 * AUTOCAST_LOWER  runs in the autocast dtype: floating inputs, weights and biases are cast
 *                 down (lower_precision_fp); fp32 parameters' copies are cached once per
 *                 forward (cached_cast: leaf, requires_grad, float32 source).
 * AUTOCAST_FP32   runs in float32: half inputs are cast up (fp32, fp32_set_opt_dtype).
 * AUTOCAST_NONE   not in autocast's lists: runs in its input's dtype.
 * The harness reproduces the CUDA lists on both backends (CPU autocast has other lists).
 */
#ifndef AMPSCOPE_AUTOCAST_H
#define AMPSCOPE_AUTOCAST_H

#include <stdio.h>

#include "run.h"

typedef enum autocast_policy { AUTOCAST_LOWER = 0, AUTOCAST_FP32, AUTOCAST_NONE } autocast_policy;

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
 * gradient back to the source dtype); cat is its memory category. */
tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat);
/* Leaves the autocast region: drops the cache of parameter copies (nodes keep theirs). */
void autocast_exit(run *r);

#endif
