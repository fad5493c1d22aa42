/*
 * kinds.h: the kinds of layers and losses a case can name. Each kind has one definition,
 * in its own file (layers/<kind>.c: its name, options, shape rule, parameters, autocast
 * entries, forward and description), and one entry in registry.c's arrays, whose lengths
 * the compiler checks against the counts below. Code outside those files looks kinds up
 * in the registry (layer.h) and names none.
 */
#ifndef AMPSCOPE_KINDS_H
#define AMPSCOPE_KINDS_H

typedef enum layer_kind {
    LAYER_LINEAR = 0,
    LAYER_RELU,
    LAYER_CONV2D,
    LAYER_FLATTEN,
    /* graph models */
    LAYER_EMBEDDING,
    LAYER_ADD,
    LAYER_MUL,
    LAYER_SCALE,
    LAYER_POSITION_EMBEDDING,
    LAYER_MATMUL,
    LAYER_TRANSPOSE,
    LAYER_SPLIT_HEADS,
    LAYER_MERGE_HEADS,
    LAYER_KIND_COUNT
} layer_kind;

typedef enum loss_kind { LOSS_CROSS_ENTROPY = 0, LOSS_MSE, LOSS_KIND_COUNT } loss_kind;

/* A loss's reduction= (PyTorch's `reduction` argument); names in registry.c. */
typedef enum loss_reduction { REDUCTION_MEAN = 0, REDUCTION_NONE, REDUCTION_COUNT } loss_reduction;

#endif
