/*
 * fp8_recipe.h: the scaling recipes that choose each float8 tensor's scale from its amax, as
 * Transformer Engine defines them (the files cited at each function). A quantized copy is
 * float8(x * scale); its GEMM multiplies the float32 accumulator by scale_inv = 1 / scale
 * (TE stores scale_inv in float32).
 *  - delayed scaling: per tensor an amax history of amax_history_len rows; the scale a step
 *    uses was computed from the history before the step, and the step's own amax is recorded
 *    into row 0 and enters the next update;
 *  - current scaling: the scale from this tensor's own amax;
 *  - MXFP8 (the CPU only): one E8M0 scale (a power of two) per 32 consecutive values along
 *    the reduction dimension, rounded as TE's float_to_e8m0 does.
 */
#ifndef AMPSCOPE_FP8_RECIPE_H
#define AMPSCOPE_FP8_RECIPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum fp8_amax_algo {
    FP8_AMAX_MAX,         /* the largest amax in the history */
    FP8_AMAX_MOST_RECENT, /* the history's row 0 */
} fp8_amax_algo;

/* one tensor's delayed-scaling state */
typedef struct fp8_delayed {
    int history_len; /* amax_history_len: TE's DelayedScaling default is 1024 */
    fp8_amax_algo algo;
    int margin;
    float fp8_max; /* the format's largest finite: 448 (E4M3), 57344 (E5M2) */
    float *history; /* history_len rows, row 0 the amax of the step now running */
    float scale, scale_inv;
} fp8_delayed;

/* A state with an all-zero history and scale 1 (TE's initial scale); false when out of memory. */
bool fp8_delayed_init(fp8_delayed *d, int history_len, fp8_amax_algo algo, int margin,
                      float fp8_max);
void fp8_delayed_free(fp8_delayed *d);
/* the step's amax, recorded into row 0 (TE keeps the largest of a step's quantizations) */
void fp8_delayed_record(fp8_delayed *d, float amax);
/* after the step: the amax from the history (algo), the new scale from it, then the history
 * rolled (transformer_engine/pytorch/fp8.py's _default_get_amax_and_update_history and
 * _update_amax_history; transformer_engine/common/recipe/delayed_scaling.cu on the GPU):
 *   scale = fp8_max / amax / 2^margin when amax is finite and > 0, else the previous scale;
 *   an infinite scale becomes FLT_MAX;
 *   history = roll(history, -1) and then row 0 = 0. Returns the amax used. */
float fp8_delayed_update(fp8_delayed *d);

/* current scaling (compute_scale_from_amax in transformer_engine/common/recipe/
 * recipe_common.cuh): fp8_max / amax as an IEEE division; amax 0, inf or NaN gives 1; an
 * infinite scale becomes FLT_MAX; pow2: rounded down to a power of two by clearing the
 * mantissa (the sign and exponent bits kept). */
float fp8_scale_from_amax(float amax, float fp8_max, bool pow2);

/* MXFP8's block scale, as TE's float_to_e8m0 (transformer_engine/common/util/ptx.cuh) of
 * amax * (1 / fp8_max): the biased E8M0 exponent of that value rounded UP to a power of two
 * (a NaN gives 0xff, 0 or a subnormal-small value the smallest, +inf or above 2^127 0xfe).
 * The OCP MX specification (v1.0, section 6.3) instead takes floor(log2 amax) - emax
 * (emax = 8 for E4M3): fp8_e8m0_ocp. The block's values are then multiplied by 2^-(e - 127). */
uint8_t fp8_e8m0_te(float amax, float fp8_max);
uint8_t fp8_e8m0_ocp(float amax, int emax);
/* the value of a biased E8M0 exponent: 2^(e - 127); NaN for 0xff */
float fp8_e8m0_value(uint8_t e);
/* what TE's MXFP8 cast multiplies a block's values by before the saturating cast
 * (exp2f_rcp in transformer_engine/common/util/ptx.cuh, used by the cast kernels of
 * common/util/cast_kernels.cuh, cast/mxfp8/ in later releases): 1 for e = 0 (not 2^127), else
 * the float whose bits are (254 - e) << 23, which is 2^(127 - e) for e <= 253 and 0 for e = 254
 * (an infinite amax: finite values become 0, inf NaN). NaN for 0xff (no finite amax gives it). */
float fp8_e8m0_multiplier(uint8_t e);
/* MXFP8's block size: one E8M0 scale per 32 consecutive values (MXFP8_BLOCK_SCALING_SIZE in
 * transformer_engine/pytorch/constants.py) */
#define FP8_MX_BLOCK 32

#endif
