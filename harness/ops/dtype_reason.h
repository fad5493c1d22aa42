/*
 * dtype_reason.h: why a tensor has its dtype. The code that makes a tensor says it, once,
 * when it makes it (tensor_why() in tensor.h): a layer's forward for its output, autocast
 * for its casts, the tape for a gradient, the trainer for data and parameters. The
 * observer copies it into the run's record, and tensors.csv carries it in three columns:
 * dtype_reason (the word below), op (the op whose rule gave the dtype) and dtype_from (the
 * operands whose dtypes gave it, "a|b"; empty where a list or the data decided).
 *
 * The words, with the op and operands each names:
 *   data                the input batch or the target, in the dtype [data] gives them
 *   param               a parameter or buffer, in [precision] params; an optimizer state,
 *                       made like its parameter (from: the parameter)
 *   input               an op on no autocast list, or run with autocast off, keeps its
 *                       floating operands' dtype (from: them)
 *   promote             type promotion of operands of different dtypes (c10's
 *                       promoteTypes; from: them), or under autocast an op on the promote
 *                       list, its arguments cast to the widest of their dtypes
 *   lower_precision_fp  under autocast, an op on autocast_mode.h's lower_precision_fp list:
 *                       its output and the casts of its arguments are in the autocast dtype
 *   fp32                under autocast, an op on the fp32 list: float32
 *   fp32_set_opt_dtype  under autocast, an op on the fp32_set_opt_dtype list: its output is
 *                       float32 by its dtype argument
 *   fp32_append_dtype   under autocast, an op on the fp32_append_dtype list (the norms'
 *                       overloads that take a dtype): float32 the same way
 *   autocast_off        an op on an autocast list, run where the case's autocast is disabled
 *                       (the loss outside the region, a layer with autocast=no): its
 *                       operands' dtype (from: them)
 *   opmath              a float32 tensor inside an op, its accumulate type (the attention
 *                       math's float32 path, a norm's statistics)
 *   cast                an explicit cast: the optimizer's float32 master copy of a
 *                       parameter or of its gradient, a `to` layer's output
 *                       (x.to(torch.float32)), a softmax's
 *                       output given dtype= and the cast of its input (from: the source)
 *   grad                a gradient, in the dtype of the tensor it is the gradient of (the
 *                       autograd engine's validate_outputs; op: the op whose backward made
 *                       it; from: that tensor)
 *   fp8                 te.Linear's quantization into the [fp8] format's float8 dtype
 *                       (from: the source)
 *   index               int64 indices an op makes (max_pool2d's argmax)
 * A tensor no code gave a reason has the empty word (tensors.csv's empty field); the tests
 * look for it.
 */
#ifndef AMPSCOPE_DTYPE_REASON_H
#define AMPSCOPE_DTYPE_REASON_H

#include <stdbool.h>

#define DTYPE_REASONS(X)                                                                           \
    X(DTYPE_REASON_UNSET, "")                                                                      \
    X(DTYPE_REASON_DATA, "data")                                                                   \
    X(DTYPE_REASON_PARAM, "param")                                                                 \
    X(DTYPE_REASON_INPUT, "input")                                                                 \
    X(DTYPE_REASON_PROMOTE, "promote")                                                             \
    X(DTYPE_REASON_LOWER_PRECISION_FP, "lower_precision_fp")                                       \
    X(DTYPE_REASON_FP32, "fp32")                                                                   \
    X(DTYPE_REASON_FP32_SET_OPT_DTYPE, "fp32_set_opt_dtype")                                       \
    X(DTYPE_REASON_FP32_APPEND_DTYPE, "fp32_append_dtype")                                         \
    X(DTYPE_REASON_AUTOCAST_OFF, "autocast_off")                                                   \
    X(DTYPE_REASON_OPMATH, "opmath")                                                               \
    X(DTYPE_REASON_CAST, "cast")                                                                   \
    X(DTYPE_REASON_GRAD, "grad")                                                                   \
    X(DTYPE_REASON_FP8, "fp8")                                                                     \
    X(DTYPE_REASON_INDEX, "index")

#define DTYPE_REASON_ID(id, word) id,
typedef enum dtype_reason { DTYPE_REASONS(DTYPE_REASON_ID) DTYPE_REASON_COUNT } dtype_reason;
#undef DTYPE_REASON_ID

#ifdef __cplusplus
extern "C" {
#endif

/* tensors.csv's word for r ("" for DTYPE_REASON_UNSET) */
const char *dtype_reason_name(dtype_reason r);
/* the reason whose word is s; false when none is */
bool dtype_reason_parse(const char *s, dtype_reason *r);

#ifdef __cplusplus
}
#endif

#endif
