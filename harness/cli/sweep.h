/*
 * sweep.h: `ampscope run CASE --sweep SECTION.KEY=V1,V2,...`: every combination of the
 * swept values (one axis per --sweep, the cartesian product of all), each run as
 * `--set SECTION.KEY=V` runs it (its own results in OUT/<case>+<key>=<value>...), then
 * one table of them: OUT/<case>.sweep/sweep.csv (columns.h) and report.md. A value list
 * is comma-separated; an item `2^A..2^B` stands for the powers of two 2^A, 2^A+1, ..., 2^B
 * (A <= B, integers in [-126, 127]).
 *
 * Per variant the table has, from its run's record: the steps skipped, and over the
 * backward passes of the observed steps the gradients' underflows, subnormals and overflows
 * and their element count (the tensor rows with pass backward and a grad_* role: the values
 * summary.csv's grad_underflow sums), and the final loss. For a sweep of
 * scaler.init_scale alone the report names the safe window: the scales at which no
 * gradient overflowed and no step was skipped, among them those where the fewest
 * gradient values underflowed, and among those the ones with the fewest subnormals.
 */
#ifndef AMPSCOPE_SWEEP_H
#define AMPSCOPE_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "record/record.h"

#define SWEEP_MAX_AXES 4
#define SWEEP_MAX_VALUES 256
#define SWEEP_VALUE_MAX 64

typedef struct sweep_axis {
    char key[128]; /* "scaler.init_scale" */
    int n;
    char values[SWEEP_MAX_VALUES][SWEEP_VALUE_MAX];
} sweep_axis;

typedef struct sweep_row {
    char variant[CASE_NAME_MAX + 512]; /* the variant's results folder name */
    char settings[512];                /* "scaler.init_scale=1024 train.steps=2" */
    bool ok;                           /* the run finished without an error */
    int64_t steps, steps_skipped;
    int64_t grad_underflow, grad_subnormal, grad_overflow, grad_numel;
    double final_loss;
} sweep_row;

/* Parses one --sweep argument; returns 0, or -1 with a message in err. */
int sweep_parse(const char *arg, sweep_axis *ax, char *err, int errlen);
/* The number of variants (the product of the axes' value counts). */
int64_t sweep_count(const sweep_axis *axes, int n_axes);
/* Variant v's settings: sets[i] = "KEY=VALUE" for axis i (buffers of 192 bytes). */
void sweep_variant(const sweep_axis *axes, int n_axes, int64_t v, char (*sets)[192]);
/* The figures of a variant's row from its run's record (row's names are the caller's). */
void sweep_collect(const run_record *rec, sweep_row *row);
/* Writes OUT/<name>.sweep/sweep.csv and report.md. */
int sweep_write(const char *out, const char *name, const sweep_axis *axes, int n_axes,
                const sweep_row *rows, int n_rows, char *err, int errlen);

#endif
