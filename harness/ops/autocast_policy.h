/*
 * autocast_policy.h: what CUDA autocast does with an op, as one of the lists of PyTorch's
 * aten/src/ATen/autocast_mode.h (the CastPolicy enum of autocast_mode.h, and the
 * AT_FORALL_* lists autocast_mode.cpp registers with KERNEL_CUDA(op, policy)). Every op of
 * the harness names its policy in its table entry (ops/pointwise.h's rows, ops/reduce.h's
 * rows, the layers' and losses' autocast entries); the value 0 means "not given", which the
 * start-up checks refuse, naming the op. The harness reproduces the CUDA lists on both of
 * its backends (CPU autocast has other lists).
 *
 *   lower_precision_fp  floating inputs cast to the autocast dtype (parameters' copies cached)
 *   fp32                floating inputs cast to float32
 *   fp32_set_opt_dtype  called with dtype=float32 when no dtype is given: a float32 output
 *                       from half inputs (softmax, log_softmax, sum, cumsum, ...)
 *   fp32_append_dtype   the same through an overload that takes a dtype (the norms)
 *   promote             inputs cast to the widest of their dtypes and the autocast dtype
 *   banned              refused under autocast (binary_cross_entropy)
 *   none                on no list: autocast_mode.cpp's fallthrough, the op runs in its
 *                       inputs' dtypes (type promotion where they differ)
 */
#ifndef AMPSCOPE_AUTOCAST_POLICY_H
#define AMPSCOPE_AUTOCAST_POLICY_H

#include <stdbool.h>
#include <stddef.h>

typedef enum autocast_policy {
    AUTOCAST_UNSET = 0, /* an entry left without its policy: refused at start-up */
    AUTOCAST_LOWER_PRECISION_FP,
    AUTOCAST_FP32,
    AUTOCAST_FP32_SET_OPT_DTYPE,
    AUTOCAST_FP32_APPEND_DTYPE,
    AUTOCAST_PROMOTE,
    AUTOCAST_BANNED,
    AUTOCAST_NONE,
    AUTOCAST_POLICY_COUNT
} autocast_policy;

/* The list's name in autocast_mode.h ("lower_precision_fp", ..., "none"); NULL for
 * AUTOCAST_UNSET and values out of range. */
static inline const char *autocast_policy_name(autocast_policy p)
{
    switch (p) {
    case AUTOCAST_LOWER_PRECISION_FP:
        return "lower_precision_fp";
    case AUTOCAST_FP32:
        return "fp32";
    case AUTOCAST_FP32_SET_OPT_DTYPE:
        return "fp32_set_opt_dtype";
    case AUTOCAST_FP32_APPEND_DTYPE:
        return "fp32_append_dtype";
    case AUTOCAST_PROMOTE:
        return "promote";
    case AUTOCAST_BANNED:
        return "banned";
    case AUTOCAST_NONE:
        return "none";
    case AUTOCAST_UNSET:
    case AUTOCAST_POLICY_COUNT:
        break;
    }
    return NULL;
}

/* Where autocast_mode.h lists an op of each policy (the table's words for a row's entry):
 * AUTOCAST_LIST(AUTOCAST_NONE) in a constant, autocast_policy_list(p) at run time */
#define AUTOCAST_LOWER_PRECISION_FP_LIST "lower_precision_fp: AT_FORALL_LOWER_PRECISION_FP"
#define AUTOCAST_FP32_LIST "fp32: AT_FORALL_FP32"
#define AUTOCAST_FP32_SET_OPT_DTYPE_LIST "fp32_set_opt_dtype: AT_FORALL_FP32_SET_OPT_DTYPE"
#define AUTOCAST_FP32_APPEND_DTYPE_LIST                                                            \
    "fp32_append_dtype: AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE"
#define AUTOCAST_PROMOTE_LIST "promote: AT_FORALL_PROMOTE"
#define AUTOCAST_BANNED_LIST "banned: autocast_mode.cpp refuses it under autocast"
#define AUTOCAST_NONE_LIST                                                                         \
    "not listed: autocast_mode.cpp's fallthrough runs it in its inputs' dtype (type promotion "    \
    "where they differ)"
#define AUTOCAST_LIST(policy) policy##_LIST

static inline const char *autocast_policy_list(autocast_policy p)
{
    switch (p) {
    case AUTOCAST_LOWER_PRECISION_FP:
        return AUTOCAST_LOWER_PRECISION_FP_LIST;
    case AUTOCAST_FP32:
        return AUTOCAST_FP32_LIST;
    case AUTOCAST_FP32_SET_OPT_DTYPE:
        return AUTOCAST_FP32_SET_OPT_DTYPE_LIST;
    case AUTOCAST_FP32_APPEND_DTYPE:
        return AUTOCAST_FP32_APPEND_DTYPE_LIST;
    case AUTOCAST_PROMOTE:
        return AUTOCAST_PROMOTE_LIST;
    case AUTOCAST_BANNED:
        return AUTOCAST_BANNED_LIST;
    case AUTOCAST_NONE:
        return AUTOCAST_NONE_LIST;
    case AUTOCAST_UNSET:
    case AUTOCAST_POLICY_COUNT:
        break;
    }
    return NULL;
}

/* Whether the policy makes the op's floating result float32 under autocast (the three fp32
 * lists) */
static inline bool autocast_policy_is_fp32(autocast_policy p)
{
    return p == AUTOCAST_FP32 || p == AUTOCAST_FP32_SET_OPT_DTYPE ||
           p == AUTOCAST_FP32_APPEND_DTYPE;
}

#endif
