/*
 * autocast.h: the casts autocast makes, as PyTorch makes them on CUDA
 * (aten/src/ATen/autocast_mode.cpp), for an op whose table entry (autocast_op) names its
 * policy (ops/autocast_policy.h): the layers' and losses' entries are in their definitions
 * (layers/layer.h), the pointwise and reduction rows' in ops/pointwise.h and ops/reduce.h.
 * `ampscope ops` prints them all (cli/ops.c).
 *
 * lower_precision_fp  floating inputs, weights and biases are cast to the autocast dtype;
 *                     float32 parameters' copies are cached once per autocast region
 *                     (cached_cast: a leaf that requires grad, float32 source).
 * fp32, fp32_set_opt_dtype, fp32_append_dtype  half inputs are cast up to float32 (a cast
 *                     node; softmax.c makes float16's upcast inside the op, as
 *                     half_to_float does).
 * banned              the run fails under autocast, as PyTorch raises.
 * promote, none       no cast of a single argument (promote's casts need all of an op's
 *                     arguments: autocast_args).
 * The harness reproduces the CUDA lists on both backends (CPU autocast has other lists).
 * A layer with `autocast=no` runs with r->autocast off (train/model.c), as inside
 * `torch.autocast(device_type, enabled=False)`: no casts, and the cache of parameter copies
 * is kept (the outer region's nesting count stays above 0, so leaving it clears nothing).
 */
#ifndef AMPSCOPE_AUTOCAST_H
#define AMPSCOPE_AUTOCAST_H

#include "ops/autocast_policy.h"
#include "run.h"

#define AUTOCAST_MAX_ATEN 4

typedef struct autocast_op {
    const char *op; /* the op as reports name it */
    autocast_policy policy;
    const char *pytorch_list; /* where autocast_mode.cpp lists it, or why it is on none */
    /* the ATen ops it stands for (NULL-terminated): aten[0] is the one autocast's dispatcher
     * sees, with the policy above; the others are what it runs (its kernels, its backward) */
    const char *aten[AUTOCAST_MAX_ATEN];
} autocast_op;

/* The tensor op receives for argument t (a new reference): t itself, or its cast under the
 * active autocast policy, recorded as a cast node and observed; fails the run for a banned
 * op under autocast. */
tensor *autocast_arg(run *r, const autocast_op *op, tensor *t);
/* The tensors op receives for its tensor arguments in[0..n), as new references into out:
 * autocast_arg's for each, but for promote, whose arguments are cast together to the widest
 * of their dtypes (autocast_mode.h's prioritize: float32 wins; two lower precision dtypes
 * that differ fail the run with PyTorch's text). */
void autocast_args(run *r, const autocast_op *op, tensor *const *in, int n, tensor **out);

/* The dtype of an op's output: the promotion of the floating operands args[0..n) as
 * autocast_args gave them (a Python scalar takes no part); autocast_why says why. */
dtype autocast_output_dtype(tensor *const *args, int n);
/* An explicit cast: a new tensor "<name>@<dtype>" and its cast node (backward casts the
 * gradient back to the source dtype); cat is its memory category, why and op say why it
 * has dt (dtype_reason.h; the source is its operand). */
tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat, dtype_reason why, const char *op);
/* cast_to's cast under another name, observed with `role`: a layer's output
 * (`y = to float32`, "y.out", an activation); a ROLE_CAST tensor's gradient is grad_cast */
tensor *cast_named(run *r, tensor *src, dtype dt, mem_category cat, const char *name,
                   dtype_reason why, const char *op, tensor_role role);
/* Why the output of `op` has its dtype, from the op's autocast policy and the operands it
 * computed from (as it received them, after autocast's casts; NULL and int64 ones
 * skipped): under autocast, the op's list (lower_precision_fp, fp32, fp32_set_opt_dtype);
 * for an op on no list, or with autocast off, its operands' dtype ("input"), or type
 * promotion when they differ; for an op on a list run outside the autocast region of a
 * case that has one, "autocast_off". */
dtype_reason autocast_reason(const run *r, const autocast_op *op, tensor *const *in, int n);
/* tensor_why(y, autocast_reason(r, op, in, n), op's name, ...): the one call an op's forward
 * makes for its output; the operands are named where they, not a list, gave the dtype. */
void autocast_why(const run *r, tensor *y, const autocast_op *op, tensor *const *in, int n);
/* Leaves the autocast region: drops the cache of parameter copies (nodes keep theirs). */
void autocast_exit(run *r);

#endif
