/*
 * op_params.h: the scalar parameters of one call of a row (a pointwise row, pointwise.h, or
 * a reduction, reduce.h): the case's numbers and options in the slots the row's description
 * gives them (layer_spec's opt_real and opt_choice, layers/layer.h), and the seed of the
 * call's random draws (the layer's: the case's seed, the output's name and the step).
 */
#ifndef AMPSCOPE_OP_PARAMS_H
#define AMPSCOPE_OP_PARAMS_H

#include <stdint.h>

#define OP_MAX_PARAMS 4 /* real and choice parameters of a row (layer_spec's slots) */

typedef struct op_params {
    double real[OP_MAX_PARAMS];
    int choice[OP_MAX_PARAMS];
    uint64_t seed;
} op_params;

#endif
