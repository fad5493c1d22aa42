/*
 * report/fp8.h: report.md's float8 section and REPORT.md's float8 line, for a case with
 * [fp8] (its record's float8 rows, fp8.csv: one row per quantization per step, made by the
 * fp8 layers). Nothing is written for a case without it.
 *
 * Per GEMM operand of each fp8 layer L (fp8.csv's tensor: L.input, L.weight, L.out.grad),
 * in fp8.csv's order of first appearance grouped by layer, and under MXFP8 per column-wise
 * copy (fp8.csv's L.input.colwise, ...: a row "`L.input` (column-wise)" after its operand's):
 *   saturated, underflow  fp8.csv's counts, summed over its rows and over the last step's
 *                         rows (the last step fp8.csv has for any operand);
 *   subnormal             the tensor rows' counts of the quantized copy `L.<operand>@<format>`
 *                         (`...@<format>.colwise` for a column-wise copy), summed over its
 *                         observed steps and in that last step;
 *   scale                 the smallest and largest scale of its rows;
 * then sentences in words: for each operand that saturated, the step in which most of its
 * values did, the amax its scale maps to the format's largest finite value (largest /
 * scale) against the step's own amax; for the operand that underflowed most, the step in
 * which most did and where its values lay; the dtype the fp8 layers' weight gradients came
 * out of the wgrad GEMM in. Percentages are of numel (tensors.csv's row of the quantized copy)
 * times the rows counted, rounded as report/text.h says; without a tensors.csv row the counts
 * alone. The recipe (what the scale column is, and how the GEMM undoes it) is the case's
 * [fp8] recipe when the record has it (config.csv's fp8); without it, MXFP8 when fp8.csv has
 * column-wise copies (only MXFP8 makes them), else "per-tensor" (delayed or current), as the
 * section then says.
 */
#ifndef AMPSCOPE_REPORT_FP8_H
#define AMPSCOPE_REPORT_FP8_H

#include <stdint.h>
#include <stdio.h>

#include "record/record.h"

/* the recipe the section describes */
typedef enum fp8_report_recipe {
    FP8_REPORT_PER_TENSOR = 0, /* delayed or current scaling, which fp8.csv does not tell */
    FP8_REPORT_DELAYED,
    FP8_REPORT_CURRENT,
    FP8_REPORT_MXFP8,
    FP8_REPORT_NVFP4,
    FP8_REPORT_MXFP4
} fp8_report_recipe;

/* a te.Linear's GEMM operands, in the order the report lists a layer's */
typedef enum fp8_operand_kind {
    FP8_OPERAND_INPUT = 0, /* L.input */
    FP8_OPERAND_WEIGHT,    /* L.weight */
    FP8_OPERAND_OUT_GRAD,  /* L.out.grad */
    FP8_OPERAND_OTHER      /* a name with none of these suffixes, listed last */
} fp8_operand_kind;

/* One GEMM operand's float8 rows and its quantized copy's tensor rows. */
typedef struct fp8_operand {
    const char *tensor; /* "fc.out.grad" */
    dtype format;       /* float8_e5m2 */
    int layer_rank;              /* its layer's first appearance among the operands */
    fp8_operand_kind kind;
    bool colwise; /* MXFP8's column-wise copy: tensor ends in ".colwise" */
    int name_len; /* the operand's name, tensor without ".colwise" */
    int n_rows;
    int64_t saturated, underflow;           /* over every row */
    int64_t last_saturated, last_underflow; /* over the rows of the last step */
    float scale_lo, scale_hi;
    /* the row with the most saturated values (the first of equals) */
    int64_t worst_step, worst_saturated;
    float worst_amax, worst_scale;
    /* the row with the most underflow (the first of equals) */
    int64_t under_step, under_most;
    float under_scale;
    /* tensors.csv: numel 0 when it has no counted row of the copy */
    int64_t numel, subnormal, last_subnormal;
    int observed;      /* counted rows of the copy */
    bool last_counted; /* the last step has one */
    /* a weight's gradient as the wgrad GEMM made it: the row "L.weight.grad@<dtype>"; NULL
     * when none */
    const char *wgrad_name;
    dtype wgrad_dtype;
} fp8_operand;

typedef struct fp8_summary {
    fp8_operand *ops;
    int n_ops;
    const fp8_operand **by_saturated; /* the operands that saturated, most first */
    int n_saturated;
    int64_t first_step, last_step;
    int n_steps;                  /* distinct steps */
    int64_t saturated, underflow; /* over every row */
    int64_t last_subnormal;       /* of the copies' tensors.csv rows of the last step */
    int n_colwise;                /* ops that are column-wise copies */
    fp8_report_recipe recipe;
    bool recipe_inferred; /* from the column-wise copies, not the case's config */
} fp8_summary;

/* The record's float8 rows and the matching tensor rows. Returns 0; 1 when the case has no
 * [fp8] (s is then empty); -1 with a message in err. */
int fp8_summary_of(fp8_summary *s, const run_record *rec, char *err, int errlen);
void fp8_summary_free(fp8_summary *s);

/* true when some quantized copy has a counted tensors.csv row: plot.py then draws
 * fp8_hist.png (fp8_scale.png it draws for every fp8.csv with rows) */
bool fp8_summary_has_hist(const fp8_summary *s);
/* report.md's "## Float8" section (the table, the sentences, the plots' links). */
void fp8_summary_put(FILE *f, const fp8_summary *s);
/* REPORT.md's line: "Float8 (fp8.csv): 6 GEMM operands over 3 steps; 730 values saturated
 * (most in `fc2.weight`), 12 underflowed (most in `fc2.out.grad`)." */
void fp8_summary_line(const fp8_summary *s, char *buf, size_t len);

/* report_case's call: the section, nothing for a case without [fp8]; the recipe from the
 * record's config (without one: inferred, see above). Returns 0, or -1 with a message in
 * err. */
int report_put_fp8(FILE *f, const run_record *rec, char *err, int errlen);

#endif
