/*
 * test_report_fp8.c: report.md's float8 section and REPORT.md's float8 line
 * (harness/report/fp8.h) on tests/fixtures/fp8/fp8-fixture, a case folder written by hand:
 * two te.Linear layers (fc 32 -> 64, proj 64 -> 16, batch 16) under format = hybrid and
 * delayed scaling over steps 0 and 1, whose scales start at 1 and then follow
 * largest / the step-0 amax while four operands' amaxes grow between the steps. Every number
 * the tests expect was computed by hand from the fixture's rows (the percentages as
 * report/text.h rounds them), not by the code under test:
 *   proj.weight (numel 1024): saturated 0 + 700 of 2 x 1024 = 34.18%, 700 of 1024 in step 1
 *     = 68.36%; its step-1 scale 3587.35205 = 448 / 0.124883197 maps an amax of 0.1249 to
 *     448, and its step-1 amax 0.510705531 is 4.089 times that;
 *   fc.out.grad (numel 1024, float8_e5m2): underflow 300 (step 0, scale 1) + 4 = 304 of
 *     2048 = 14.84%, subnormal 500 + 4 = 504 of 2048 = 24.61%;
 *   in all: saturated 37 + 120 + 5 + 700 + 2 = 864, underflow 3 + 10 + 304 + 17 + 40 = 374,
 *     step 1's copies subnormal 1 + 0 + 4 + 2 + 0 + 3 = 10.
 * And on tests/fixtures/fp8/fp8-mxfp8, the fp8.csv, tensors.csv, steps.csv and memory.csv of
 * `bin/ampscope run tests/cases/small-fp8-mxfp8.case --device cpu` (recipe = mxfp8, fc1
 * 32 -> 64, fc2 64 -> 32, batch 32, steps 0 to 2), by hand from those rows:
 *   6 operands of 2 layers, 5 with a column-wise copy (all but fc1.weight: fc1's input has no
 *     gradient, so no dgrad reads fc1.weight's column-wise copy);
 *   fc1.input (numel 1024): underflow 51 a step, 153 of 3072 = 4.98%; subnormal 180 a step,
 *     540 of 3072 = 17.58%, step 2 180 of 1024 = 17.58%;
 *   fc1.input (column-wise, `fc1.input@float8_e4m3fn.colwise`, numel 1024): underflow 185 a
 *     step, 555 of 3072 = 18.07%; subnormal 187 a step, 561 of 3072 = 18.26%;
 *   fc1.out.grad (column-wise, numel 2048): underflow 1 in step 0, 1 of 6144 = 0.02%;
 *   fc2.input (column-wise, numel 2048): subnormal 0 + 1 + 3 = 4 of 6144 = 0.07%, step 2 3
 *     of 2048 = 0.15%;
 *   in all: underflow 153 + 555 + 1 = 709; step 2's copies subnormal 180 + 187 + 3 = 370.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "case/load.h"
#include "helpers.h"
#include "report/fp8.h"
#include "report/report.h"
#include "results/read.h"

#define FIXTURE "tests/fixtures/fp8/fp8-fixture"
#define MX_FIXTURE "tests/fixtures/fp8/fp8-mxfp8"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0;
    cr_assert_gt(getdelim(&buf, &cap, '\0', f), 0, "cannot read %s", path);
    cr_assert_eq(fclose(f), 0);
    return buf;
}

/* Copies FIXTURE/name into dir. */
static void copy_in(const char *dir, const char *name)
{
    char src[512], dst[768];
    snprintf(src, sizeof src, "%s/%s", FIXTURE, name);
    char *text = slurp(src);
    write_file(dir, name, text, dst, sizeof dst);
    free(text);
}

/* A case folder's record, through the CSV reader (the fixtures have no config.csv). */
static run_record *read_folder(const char *dir)
{
    run_record *rec = record_new();
    char err[1024] = "";
    cr_assert_not_null(rec);
    cr_assert_eq(results_read_case(dir, rec, err, sizeof err), 0, "%s", err);
    return rec;
}

/* The float8 section of a case folder, as report.md gets it from a run of [fp8] recipe
 * (-1: no [fp8] in the config: the recipe inferred). */
static char *section_with(const char *dir, int recipe)
{
    run_record *rec = read_folder(dir);
    rec->config.fp8 = recipe >= 0;
    rec->config.fp8_recipe = recipe;
    char err[1024] = "";
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(report_put_fp8(f, rec, err, sizeof err), 0, "%s", err);
    cr_assert_eq(fclose(f), 0);
    record_free(rec);
    return text;
}

static char *section_of(const char *dir) { return section_with(dir, -1); }

/* report.md of OUT's only case, re-made from its folder's files (as `ampscope report`) */
static void report_again(const char *out)
{
    csv_table sum;
    char err[1024] = "", dir[1024];
    cr_assert_eq(results_read_summary(out, &sum, err, sizeof err), 0, "%s", err);
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    cr_assert_eq(results_read(out, &sum, 0, rec, err, sizeof err), 0, "%s", err);
    snprintf(dir, sizeof dir, "%s/%s", out, rec->result.name);
    cr_assert_eq(report_case(rec, dir, err, sizeof err), 0, "%s", err);
    record_free(rec);
    csv_table_free(&sum);
}

static void expect_has(const char *text, const char *want)
{
    cr_expect_not_null(strstr(text, want), "the section lacks\n%s\nin\n%s", want, text);
}

Test(report_fp8, counts_each_gemm_operand_by_hand)
{
    char *md = section_of(FIXTURE);
    expect_has(md, "## Float8\n\n6 GEMM operands of 2 layers ran in float8");
    expect_has(md, "2 steps from step 0 to 1");
    expect_has(md, "| operand | format | steps | saturated | saturated, step 1 | underflow | "
                   "underflow, step 1 | subnormal (observed steps) | subnormal, step 1 | scale, "
                   "smallest to largest |");
    /* each layer's operands together, input, weight, output gradient; layers as they ran */
    static const char *const rows[] = {
        "| `fc.input` | float8_e4m3fn | 2 | 0 | 0 | 0.29% (3) | 0 | 2.05% (21) | 0.20% (1) | 1 "
        "to 130.161163 |",
        "| `fc.weight` | float8_e4m3fn | 2 | 0.90% (37) | 1.81% (37) | 0.24% (10) | 0 | 7.32% "
        "(300) | 0 | 1 to 2534.44629 |",
        "| `fc.out.grad` | float8_e5m2 | 2 | 5.86% (120) | 11.72% (120) | 14.84% (304) | 0.39% "
        "(4) | 24.61% (504) | 0.39% (4) | 1 to 8464181 |",
        "| `proj.input` | float8_e4m3fn | 2 | 0.24% (5) | 0.49% (5) | 0 | 0 | 0.10% (2) | 0.20% "
        "(2) | 1 to 213.970154 |",
        "| `proj.weight` | float8_e4m3fn | 2 | 34.18% (700) | 68.36% (700) | 0.83% (17) | 0 | "
        "19.53% (400) | 0 | 1 to 3587.35205 |",
        "| `proj.out.grad` | float8_e5m2 | 2 | 0.39% (2) | 0.78% (2) | 7.81% (40) | 0 | 20.12% "
        "(103) | 1.17% (3) | 1 to 2936012.75 |",
    };
    const char *at = md;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const char *row = strstr(md, rows[i]);
        cr_expect_not_null(row, "the table lacks\n%s\nin\n%s", rows[i], md);
        cr_expect(row == NULL || row > at, "row %zu is out of order", i);
        at = row ? row : at;
    }
    expect_has(md, "**In words:** 864 values saturated over the steps. Most in `proj.weight` "
                   "(float8_e4m3fn): in step 1, 700 of its 1024 values (68.36%) were clamped to "
                   "±448: its scale, 3587.35205, maps an amax of 0.1249 to 448 (448 / scale), and "
                   "the tensor's own amax in that step was 0.510705531, 4.089× that, so every "
                   "value above 0.1249 saturated.");
    expect_has(md, "delayed scaling computes it from the amax history of the steps before");
    expect_has(md, "Also `fc.out.grad` 120 in step 1 (amax 6.631× the one its scale maps to "
                   "57344), `fc.weight` 37 in step 1 (amax 1.934× the one its scale maps to 448)");
    expect_has(md, "374 values underflowed to zero over the steps; most in `fc.out.grad` "
                   "(float8_e5m2): 304 (14.84% of the values quantized), of which 300 in step 0 "
                   "with scale 1 (the initial scale: no amax was recorded before the first "
                   "step): multiplied by the scale they lay at or below half float8_e5m2's "
                   "smallest subnormal, 2^-17, and rounded to zero; 4 in step 1.");
    expect_has(md, "In step 1, 10 values of the quantized copies were subnormal (non-zero and, "
                   "after scaling, below 2^-6 in float8_e4m3fn, 2^-14 in float8_e5m2");
    expect_has(md, "in bfloat16, as `fc.weight.grad@bfloat16` and `proj.weight.grad@bfloat16`, "
                   "and were cast into the parameters' `.grad`.");
    expect_has(md, "](fp8_hist.png)");
    expect_has(md, "](fp8_scale.png)");
    free(md);
}

Test(report_fp8, report_md_has_the_section_only_with_fp8_csv)
{
    char out[256], dir[512], path[768];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-fp32.case", out, &res, NULL);
    snprintf(dir, sizeof dir, "%s/%.200s", out, res.name);
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = slurp(path);
    cr_expect_null(strstr(md, "## Float8"), "a case without fp8.csv has no float8 section");
    free(md);
    /* the fixture's fp8.csv in this folder: its operands have no quantized copies in this
     * tensors.csv, so the section has fp8.csv's counts and no subnormals */
    copy_in(dir, "fp8.csv");
    report_again(out);
    md = slurp(path);
    const char *sec = strstr(md, "## Float8\n\n6 GEMM operands of 2 layers");
    cr_expect_not_null(sec, "%s", md);
    cr_expect(sec && sec < strstr(md, "## GradScaler"), "the section comes before the scaler's");
    cr_expect_not_null(strstr(md, "| `proj.weight` | float8_e4m3fn | 2 | 700 | 700 | 17 | 0 | – "
                                  "| – | 1 to 3587.35205 |"),
                       "%s", md);
    cr_expect_not_null(strstr(md, "tensors.csv has no counted row of the quantized copies in "
                                  "step 1"));
    cr_expect_null(strstr(md, "fp8_hist.png"), "no histogram without the copies' rows");
    free(md);
    rm_rf(out);
}

Test(report_fp8, report_all_has_the_float8_line)
{
    char out[256], dir[512], path[768], err[1024];
    make_temp_dir(out, sizeof out);
    snprintf(dir, sizeof dir, "%s/fp8-fixture", out);
    cr_assert_eq(mkdir(dir, 0700), 0);
    static const char *const files[] = {"tensors.csv", "steps.csv", "memory.csv", "hist.csv",
                                        "fp8.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        copy_in(dir, files[i]);
    write_file(out, "summary.csv",
               "case,device,status,error,params,autocast,input_dtype,output_dtype,loss_dtype,"
               "param_grad_dtypes,cast_grad_dtypes,activation_grad_dtypes,grad_underflow,"
               "grad_numel,final_loss,peak_bytes,step_ms,expect_passed,expect_total\n"
               "fp8-fixture,cpu,ok,,float32,bfloat16,float32,bfloat16,float32,float32,"
               "float8_e5m2,bfloat16,348,5376,2.22789955,45056,1.5,0,0\n",
               path, sizeof path);
    cr_assert_eq(report_all(out, NULL, 0, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/REPORT.md", out);
    char *md = slurp(path);
    cr_expect_not_null(strstr(md, "[memory](fp8-fixture/memory.png), [float8 copies](fp8-fixture/"
                                  "fp8_hist.png), [float8 scales](fp8-fixture/fp8_scale.png). "
                                  "Float8 (fp8.csv): 6 GEMM "
                                  "operands over 2 steps; 864 values saturated (most in "
                                  "`proj.weight`), 374 underflowed (most in `fc.out.grad`).\n"),
                       "%s", md);
    free(md);
    rm_rf(out);
}

Test(report_fp8, a_bad_number_names_the_file_and_row)
{
    char out[256], path[768], err[1024] = "";
    make_temp_dir(out, sizeof out);
    static const char *const files[] = {"tensors.csv", "steps.csv", "memory.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        copy_in(out, files[i]);
    write_file(out, "fp8.csv",
               "case,step,tensor,format,amax,scale,saturated,underflow\n"
               "fp8-fixture,0,fc.input,float8_e4m3fn,3.4418869,1,0,3\n"
               "fp8-fixture,1,fc.input,float8_e4m3fn,3.4418869,130.161163,many,0\n",
               path, sizeof path);
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    cr_expect_eq(results_read_case(out, rec, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "fp8.csv: row 2: saturated is not a number"), "%s", err);
    write_file(out, "fp8.csv", "case,step,tensor,format,amax,scale,underflow\n", path, sizeof path);
    cr_expect_eq(results_read_case(out, rec, err, sizeof err), -1);
    cr_expect_not_null(strstr(err, "has no column saturated"), "%s", err);
    record_free(rec);
    rm_rf(out);
}

/* Current scaling's scale is largest / amax rounded to float32: amax x scale can round just
 * above the largest value (0.0363841951 x 12313.0391 = 448.0000169 here), and the one value
 * that large is clamped; the report must not blame an amax that grew. */
Test(report_fp8, a_clamp_by_rounding_is_not_told_as_growth)
{
    char out[256], path[768];
    make_temp_dir(out, sizeof out);
    static const char *const files[] = {"tensors.csv", "steps.csv", "memory.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        copy_in(out, files[i]);
    write_file(out, "fp8.csv",
               "case,step,tensor,format,amax,scale,saturated,underflow\n"
               "fp8-fixture,0,fc.weight,float8_e4m3fn,0.0363841951,12313.0391,1,0\n",
               path, sizeof path);
    char *md = section_of(out);
    expect_has(md, "1 value saturated over the steps. Most in `fc.weight` (float8_e4m3fn): in "
                   "step 0, 1 of its 2048 values (0.05%) was clamped to ±448: its scale, "
                   "12313.0391, is 448 / the step's own amax, 0.0363841951, rounded to float32");
    cr_expect_null(strstr(md, "delayed scaling"), "%s", md);
    free(md);
    rm_rf(out);
}

/* MXFP8: each column-wise copy is a row of its operand, right after the row-wise one, with
 * the subnormals of its own tensors.csv rows; the layers are two, not one per copy */
Test(report_fp8, mxfp8_column_wise_copies_are_rows_of_their_operand)
{
    char *md = section_of(MX_FIXTURE);
    expect_has(md, "## Float8\n\n6 GEMM operands of 2 layers ran in float8");
    expect_has(md, "Recipe: MXFP8 block scaling (CPU only), inferred from fp8.csv's column-wise "
                   "copies. Each operand has a row-wise copy, and 5 of them also a column-wise "
                   "copy");
    expect_has(md, "the scale column is the multiplier of the block that holds the tensor's amax");
    cr_expect_null(strstr(md, "multiplied by the two operands' `1 / scale`"), "%s", md);
    static const char *const raw[] = {"input.colwise`", "weight.colwise`", "grad.colwise`"};
    for (int i = 0; i < 3; i++)
        cr_expect_null(strstr(md, raw[i]), "no copy named by fp8.csv's tensor:\n%s", md);
    static const char *const rows[] = {
        "| `fc1.input` | float8_e4m3fn | 3 | 0 | 0 | 4.98% (153) | 4.98% (51) | 17.58% (540) | "
        "17.58% (180) | 4 to 4 |",
        "| `fc1.input` (column-wise) | float8_e4m3fn | 3 | 0 | 0 | 18.07% (555) | 18.07% (185) | "
        "18.26% (561) | 18.26% (187) | 4 to 4 |",
        "| `fc1.weight` | float8_e4m3fn | 3 | 0 | 0 | 0 | 0 | 0 | 0 | 1024 to 2048 |",
        "| `fc1.out.grad` | float8_e4m3fn |",
        "| `fc1.out.grad` (column-wise) | float8_e4m3fn | 3 | 0 | 0 | 0.02% (1) | 0 | 0 | 0 | "
        "32768 to 65536 |",
        "| `fc2.input` | float8_e4m3fn |",
        "| `fc2.input` (column-wise) | float8_e4m3fn | 3 | 0 | 0 | 0 | 0 | 0.07% (4) | 0.15% (3) | "
        "16 to 32 |",
        "| `fc2.weight` | float8_e4m3fn |",
        "| `fc2.weight` (column-wise) | float8_e4m3fn |",
        "| `fc2.out.grad` | float8_e4m3fn |",
        "| `fc2.out.grad` (column-wise) | float8_e4m3fn |",
    };
    const char *at = md;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const char *row = strstr(md, rows[i]);
        cr_expect_not_null(row, "the table lacks\n%s\nin\n%s", rows[i], md);
        cr_expect(row == NULL || row > at, "row %zu is out of order", i);
        at = row ? row : at;
    }
    expect_has(md, "709 values underflowed to zero over the steps; most in `fc1.input` "
                   "(column-wise, float8_e4m3fn): 555 (18.07% of the values quantized), of which "
                   "185 in step 0 with scale 4 (the block holding the amax; every other block's "
                   "multiplier is that or larger): multiplied by their block's scale");
    expect_has(md, "In step 2, 370 values of the quantized copies were subnormal");
    /* the weight gradients once each, not once per copy of the weight */
    expect_has(md, "as `fc1.weight.grad@bfloat16` and `fc2.weight.grad@bfloat16`, and were");
    free(md);

    char err[1024] = "", line[512];
    run_record *rec = read_folder(MX_FIXTURE);
    fp8_summary s;
    cr_assert_eq(fp8_summary_of(&s, rec, err, sizeof err), 0, "%s", err);
    fp8_summary_line(&s, line, sizeof line);
    cr_expect_str_eq(line, "Float8 (fp8.csv): 6 GEMM operands (5 of them with a column-wise copy, "
                           "MXFP8) over 3 steps; 0 values saturated, 709 underflowed (most in "
                           "`fc1.input` (column-wise)).");
    fp8_summary_free(&s);
    record_free(rec);
}

/* With the case's config the section names its recipe, and says of the scales what that
 * recipe does: only delayed scaling has an initial scale no amax chose */
Test(report_fp8, the_recipe_comes_from_the_case)
{
    char *md = section_with(FIXTURE, FP8_RECIPE_DELAYED);
    expect_has(md, "Recipe: delayed scaling (each scale from its tensor's amax history of the "
                   "steps before). The scale multiplies the values before the cast; the GEMM's "
                   "output is multiplied by the two operands' `1 / scale`.");
    expect_has(md, "(the initial scale: no amax was recorded before the first step)");
    free(md);
    md = section_with(FIXTURE, FP8_RECIPE_CURRENT);
    expect_has(md, "Recipe: current scaling (each scale from the quantized tensor's own amax).");
    cr_expect_null(strstr(md, "the initial scale"), "%s", md);
    free(md);
    md = section_with(MX_FIXTURE, FP8_RECIPE_MXFP8);
    expect_has(md, "Recipe: MXFP8 block scaling (CPU only). Each operand");
    free(md);
    /* without a config and without column-wise copies: no recipe named */
    md = section_of(FIXTURE);
    cr_expect_null(strstr(md, "Recipe:"), "%s", md);
    free(md);
}
