/*
 * report/reasons.h: report.md's paragraph that says, under autocast, why each float32
 * activation is float32, from the layer registry rather than a list of tensor names: the
 * autocast policy of the op that produced it (layer_def and loss_def autocast entries,
 * autocast_mode.h's list it cites), or PyTorch's type promotion of its inputs
 * (promote_types) for an op on no list, or the dtype of the weight it reads.
 */
#ifndef AMPSCOPE_REPORT_REASONS_H
#define AMPSCOPE_REPORT_REASONS_H

#include <stdint.h>
#include <stdio.h>

#include "config/case.h"
#include "files.h"

/* Writes "**Why float32:** `ln1.out` is float32 because layer_norm runs in float32 under
 * autocast (...). ..." for the forward activations of `step` that are float32, or nothing
 * when the case has no autocast or no such activation. */
void report_put_float32_reasons(FILE *f, const case_config *cfg, const case_files *c, int64_t step);

#endif
