/*
 * report/rows.h: what a run's record says, as the reports ask it: the step a report
 * describes, whether plot.py draws the gradient histogram, a row or a step by name and
 * number, the loss scale of a step, and the histogram's values below a bound.
 *
 * "The step" of a case is the first step whose backward pass has gradient rows with counts
 * (the one hist_grads.png shows; plot.py picks it by the same rule); without one, the first
 * step the record has rows of.
 */
#ifndef AMPSCOPE_REPORT_ROWS_H
#define AMPSCOPE_REPORT_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "record/record.h"

/* a backward-pass row of a gradient: of an activation, of an autocast copy, of a parameter */
bool row_is_backward_grad(const record_tensor *r);
/* The step the report describes (see above); -1 when the record has no tensor rows. */
int64_t report_step_of(const run_record *rec);
/* true when plot.py draws hist_grads.png for the case */
bool report_has_hist_plot(const run_record *rec);
/* the row of tensor `name` in that step and pass; NULL when none */
const record_tensor *report_row(const run_record *rec, int64_t step, pass_kind pass,
                                const char *name);
const record_step *report_step_row(const run_record *rec, int64_t step);
/* The scale of the step and its log2 when it is a power of two, when the step scaled its
 * loss (a loss.scaled row) and completed (a step row); false otherwise. plot.py's lower
 * histogram panel uses the same rule. */
bool report_step_scale(const run_record *rec, int64_t step, int *log2_scale);
/* The values of the step's half-dtype backward gradient rows that would round to zero if
 * they were 2^shift times their size (their histograms' bins moved by shift). */
int64_t report_hist_below(const run_record *rec, int64_t step, int shift);

#endif
