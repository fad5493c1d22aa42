/*
 * report/reasons.h: report.md's paragraph that says, under autocast, why each float32
 * activation is float32: the reason the code that made it recorded (ops/dtype_reason.h),
 * with the op whose rule gave the dtype (its autocast list, as autocast_mode.cpp registers
 * it) or the operands whose dtypes gave it (their own, or type promotion of theirs).
 */
#ifndef AMPSCOPE_REPORT_REASONS_H
#define AMPSCOPE_REPORT_REASONS_H

#include <stdint.h>
#include <stdio.h>

#include "record/record.h"

/* Writes "**Why float32 under autocast:** `ln1.out` is float32 because layer_norm runs in
 * float32 under autocast (...). ..." for the forward activations of `step` that are
 * float32, or nothing when the case has no autocast or no such activation. */
void report_put_float32_reasons(FILE *f, const run_record *rec, int64_t step);

#endif
