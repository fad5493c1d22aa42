/*
 * kinds.h: the kinds of layers and losses a case can name. Each kind has one definition,
 * in its own file (layers/<kind>.c: its name, options, shape rule, parameters, autocast
 * entries, forward and description), and one entry in registry.c's arrays, whose lengths
 * the compiler checks against the counts below; a pointwise row (ops/pointwise.h) is a
 * kind with no file of its own, its definition made from the row (layers/pointwise.c).
 * Code outside those files looks kinds up in the registry (layer.h) and names none.
 */
#ifndef AMPSCOPE_KINDS_H
#define AMPSCOPE_KINDS_H

#include "ops/pointwise.h"
#include "ops/reduce.h"

typedef enum layer_kind {
    LAYER_LINEAR = 0,
    LAYER_CONV2D,
    LAYER_FLATTEN,
    /* softmax and the causal mask */
    LAYER_SOFTMAX,
    LAYER_LOG_SOFTMAX,
    LAYER_CAUSAL_MASK,
    /* scaled_dot_product_attention */
    LAYER_SCALED_DOT_PRODUCT_ATTENTION,
    /* normalization and pooling */
    LAYER_LAYER_NORM,
    LAYER_GROUP_NORM,
    LAYER_RMS_NORM,
    LAYER_BATCH_NORM2D,
    LAYER_MAX_POOL2D,
    LAYER_AVG_POOL2D,
    LAYER_ADAPTIVE_AVG_POOL2D,
    LAYER_INTERPOLATE,
    /* graph models */
    LAYER_EMBEDDING,
    LAYER_POSITION_EMBEDDING,
    LAYER_MATMUL,
    LAYER_TRANSPOSE,
    LAYER_SPLIT_HEADS,
    LAYER_MERGE_HEADS,
    /* explicit casts */
    LAYER_TO,
    /* shape ops */
    LAYER_SLICE,
    LAYER_CAT,
    LAYER_UNSQUEEZE,
    LAYER_SQUEEZE,
    LAYER_PAD,
    LAYER_SELECT,
    LAYER_STACK,
    LAYER_PERMUTE,
    LAYER_EXPAND,
    LAYER_REPEAT_INTERLEAVE,
    /* tensors without a batch dim (constant.c, parameter.c) */
    LAYER_CONSTANT,
    LAYER_PARAMETER,
    LAYER_RESHAPE,
    /* the pointwise rows (ops/pointwise.h), a kind each: row op is kind LAYER_POINTWISE + op */
    LAYER_POINTWISE,
    /* the reduction rows (ops/reduce.h), a kind each: row op is kind LAYER_REDUCE + op */
    LAYER_REDUCE = LAYER_POINTWISE + PW_OP_COUNT,
    LAYER_KIND_COUNT = LAYER_REDUCE + RD_OP_COUNT
} layer_kind;
/* the kind of row `name` (LAYER_ROW(relu)) */
#define LAYER_ROW(name) ((layer_kind)(LAYER_POINTWISE + PW_OP_##name))

typedef enum loss_kind {
    LOSS_CROSS_ENTROPY = 0,
    LOSS_MSE,
    /* losses bce_with_logits and l1 */
    LOSS_BCE_WITH_LOGITS,
    LOSS_L1,
    LOSS_KIND_COUNT
} loss_kind;

/* A loss's reduction= (PyTorch's `reduction` argument); names in registry.c. */
typedef enum loss_reduction { REDUCTION_MEAN = 0, REDUCTION_NONE, REDUCTION_COUNT } loss_reduction;

#endif
