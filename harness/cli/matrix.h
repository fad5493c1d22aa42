/*
 * matrix.h: `ampscope matrix CASE`: the precision matrix. The case runs in eight
 * configurations, all from the same seed (so the same float32 draws of the initial
 * parameters and data, rounded into each configuration's dtypes):
 *   fp32                   float32 parameters, no autocast, no GradScaler
 *   autocast-fp16-scaler   float32 parameters, autocast float16, GradScaler
 *   autocast-fp16          ... without the GradScaler
 *   autocast-bf16-scaler   float32 parameters, autocast bfloat16, GradScaler
 *   autocast-bf16          ... without the GradScaler
 *   half                   model.half() and a float16 input, no autocast
 *   bf16-params            bfloat16 parameters and input, no autocast
 *   half-master-weights    float16 model, fp32 master weights, autocast float16, GradScaler
 * each into its own results folder OUT/<case>.matrix-<config>, as a run would, and writes
 * OUT/<case>.matrix/: matrix.csv (one row per configuration: the dtypes of the output, the
 * loss and .grad, gradient underflow, lost updates, skipped steps, peak memory by category,
 * step time), errors.csv (per parameter gradient and for the loss, the error of step 0's
 * value against the fp32 run's: max relative error over the elements whose fp32 value is
 * not 0, and SQNR = 10 log10(sum r^2 / sum (x - r)^2) dB, in double on the exact values;
 * the gradients are those the optimizer receives, after unscale_), and report.md.
 *
 * Pairs of configurations whose step-0 gradients are bit-identical are named. For the
 * bfloat16 autocast pair with and without a GradScaler the report checks the condition
 * under which they must be: the scale is a power of two and, in step 0 of both runs, no
 * gradient value (backward pass and unscale_, every dtype) was subnormal, underflowed or
 * overflowed (tensors.csv's counts); it says whether the condition held and whether the
 * gradients were identical, so a break of either is seen, not assumed.
 */
#ifndef AMPSCOPE_MATRIX_H
#define AMPSCOPE_MATRIX_H

#include <stdio.h>

#include "train/train.h"

#define MATRIX_CONFIGS 8

/* the configurations' names, in the table's order */
extern const char *const matrix_config_names[MATRIX_CONFIGS];

/* Runs the matrix of the case at path (sets: the user's --set overrides, applied first) on
 * be into out; progress lines on log. Returns 0, 2 on bad input or a failure to write. */
int matrix_run(const char *path, const char *const *sets, int n_sets, backend *be,
               const train_options *opt, const char *out, FILE *log);

/* The error of x against the reference r (n values): max relative error over r != 0 (NAN
 * when every r is 0) and SQNR in dB (INFINITY when x equals r). */
void matrix_error(const float *x, const float *r, int64_t n, double *max_rel, double *sqnr_db);

#endif
