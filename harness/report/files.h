/*
 * report/files.h: a case folder's tensors.csv, steps.csv and memory.csv as the reports read
 * them, and what their rows say: the step a report describes, whether plot.py draws the
 * gradient histogram, the loss scale of a step, and the hist.csv values below a bound.
 *
 * "The step" of a case is the first step whose backward pass has gradient rows with counts
 * (the one hist_grads.png shows; plot.py picks it by the same rule); without one, the first
 * step tensors.csv has. The rows' text fields point into the tables the folder was read
 * into, and live until case_files_free().
 */
#ifndef AMPSCOPE_REPORT_FILES_H
#define AMPSCOPE_REPORT_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "results/csv_table.h"

typedef struct tensor_row {
    int64_t step, numel;
    const char *pass, *name, *role, *dtype, *shape, *amax;
    bool counted; /* counts present (absent for int64 labels and with --observe off) */
    int64_t zeros, underflow, subnormal, overflow, nan;
} tensor_row;

typedef struct step_row {
    int64_t step, lost_updates;
    const char *loss, *loss_scale, *first_nonfinite;
    /* the appended columns: "" where the case does not accumulate or clip */
    const char *lost_accumulations, *total_norm, *clip_coef;
    const char *first_nonfinite_op, *first_nonfinite_input; /* "cast backward", "fc3.out" */
    double scale;
    bool found_inf, skipped;
} step_row;

typedef struct mem_row {
    const char *category;
    int64_t peak, end;
} mem_row;

typedef struct case_files {
    csv_table tensors_csv, steps_csv, memory_csv;
    tensor_row *rows;
    int n_rows;
    step_row *steps;
    int n_steps;
    mem_row *mem;
    int n_mem;
} case_files;

/* Reads a case folder's tensors.csv, steps.csv and memory.csv. Returns 0, 1 when the folder
 * has no tensors.csv and `optional`, or -1 with a message in err. */
int case_files_read(case_files *c, const char *dir, bool optional, char *err, int errlen);
void case_files_free(case_files *c);

/* true for a dtype name of a half-precision format (float16, bfloat16) */
bool is_half_name(const char *dtype);
/* a backward-pass row of a gradient: of an activation, of an autocast copy, of a parameter */
bool row_is_backward_grad(const tensor_row *r);
/* The step the report describes (see above); -1 when tensors.csv is empty. */
int64_t case_files_report_step(const case_files *c);
/* true when plot.py draws hist_grads.png for the case */
bool case_files_has_hist_plot(const case_files *c);
const tensor_row *case_files_row(const case_files *c, int64_t step, const char *pass,
                                 const char *name);
const step_row *case_files_step(const case_files *c, int64_t step);
/* The scale of the step and its log2 when it is a power of two, when the step scaled its
 * loss (a loss.scaled row) and completed (a steps.csv row); false otherwise. plot.py's lower
 * histogram panel uses the same rule. */
bool case_files_step_scale(const case_files *c, int64_t step, int *log2_scale);
/* The values of the step's half-dtype backward gradient rows that would round to zero if
 * they were 2^shift times their size (DIR/hist.csv's bins moved by shift). */
int case_files_hist_below(const case_files *c, const char *dir, int64_t step, int shift,
                          int64_t *below, char *err, int errlen);

#endif
