/*
 * test_expect.c: [expect] held against a run (harness/results/expect.h), here its `saturated OPERAND`
 * key on tests/cases/small-fp8-delayed.case. Which operands saturate, how many values and
 * from which step come from tools/fp8_linear_reference.py's PyTorch emulation of the case
 * (tests/references/fp8/small-fp8-delayed.fp8.csv), not from the run's own fp8.csv; and
 * MXFP8's column-wise copies counted with their operand, on float8 rows written by hand.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/expect.h"
#include "helpers.h"

#define CASE_FILE "tests/cases/small-fp8-delayed.case"

/* the reference's values saturated in OPERAND over the case's steps, and the first step
 * with any (-1: none) */
static int64_t reference_saturated(const char *operand, int64_t *first_step)
{
    csv c;
    cr_assert(csv_read("tests/references/fp8/small-fp8-delayed.fp8.csv", &c));
    int ct = csv_col(&c, "tensor"), cs = csv_col(&c, "saturated"), cst = csv_col(&c, "step");
    int64_t n = 0;
    *first_step = -1;
    for (int r = 0; r < c.n_rows; r++) {
        if (strcmp(c.rows[r][ct], operand) != 0)
            continue;
        int64_t k = atoll(c.rows[r][cs]);
        if (k > 0 && *first_step < 0)
            *first_step = atoll(c.rows[r][cst]);
        n += k;
    }
    csv_free(&c);
    return n;
}

static void run_with(const char *const *sets, int n_sets, case_result *res)
{
    char out[512];
    make_temp_dir(out, sizeof out);
    train_options opt = {.quiet = true};
    run_case_file_set(CASE_FILE, sets, n_sets, out, res, &opt);
    cr_assert(res->ok, "%s", res->error);
    rm_rf(out);
}

/* yes where PyTorch's emulation saturated the operand, no where it did not: every one holds */
Test(expect, saturated_holds_where_fp8_csv_saturated)
{
    static const char *const operands[] = {"fc1.input",  "fc1.weight",   "fc2.input",
                                           "fc2.weight", "fc2.out.grad", "fc1.out.grad"};
    char sets[6][96];
    const char *set_ptrs[6];
    int yes = 0;
    for (int i = 0; i < 6; i++) {
        int64_t first;
        bool saturated = reference_saturated(operands[i], &first) > 0;
        yes += saturated;
        snprintf(sets[i], sizeof sets[i], "expect.saturated %s=%s", operands[i],
                 saturated ? "yes" : "no");
        set_ptrs[i] = sets[i];
    }
    cr_assert(yes > 0 && yes < 6, "the reference saturates some operands and not others");
    case_result res;
    run_with(set_ptrs, 6, &res);
    cr_expect(res.passed, "%d/%d held:\n%s", res.expect_passed, res.expect_total, res.failures);
    cr_expect_eq(res.expect_passed, res.expect_total);
}

/* the opposite claims fail, each saying what fp8.csv showed; a float8 copy's dtype too */
Test(expect, saturated_fails_and_says_what_fp8_csv_shows)
{
    int64_t w_first, g_first;
    int64_t w = reference_saturated("fc2.weight", &w_first);
    int64_t g = reference_saturated("fc1.out.grad", &g_first);
    cr_assert(w > 0 && g == 0, "the reference saturates fc2.weight, not fc1.out.grad");
    const char *sets[] = {"expect.saturated fc2.weight=no", "expect.saturated fc1.out.grad=yes",
                          "expect.dtype fc2.out.grad@float8_e5m2=float8_e4m3fn"};
    case_result res;
    run_with(sets, 3, &res);
    cr_expect_not(res.passed);
    cr_expect_eq(res.expect_passed, res.expect_total - 3, "%s", res.failures);
    cr_expect(strstr(res.failures, ":0: expectation failed: dtype fc2.out.grad@float8_e5m2: "
                                   "expected float8_e4m3fn, got float8_e5m2\n"),
              "%s", res.failures);
    char want[512];
    snprintf(want, sizeof want,
             CASE_FILE ":0: expectation failed: saturated fc2.weight: expected no, %lld values "
                       "saturated in its 3 quantizations, first in step %lld (fp8.csv)\n",
             (long long)w, (long long)w_first);
    cr_expect(strstr(res.failures, want), "want\n%s\nin\n%s", want, res.failures);
    snprintf(want, sizeof want,
             CASE_FILE ":0: expectation failed: saturated fc1.out.grad: expected yes, no value "
                       "saturated in its 3 quantizations (fp8.csv)\n");
    cr_expect(strstr(res.failures, want), "want\n%s\nin\n%s", want, res.failures);
}

/* Under MXFP8 `saturated L.input` means either copy of fc1's input: the rows of
 * L.input.colwise count with L.input's. A record's float8 rows written by hand, in which
 * only fc1.input's column-wise copy clamped (2 values in step 1) and fc2.input's copies
 * clamped nothing. */
Test(expect, saturated_counts_the_column_wise_copy)
{
    static const struct {
        int64_t step;
        const char *tensor;
        float amax, scale;
        int64_t saturated, underflow;
    } rows[] = {
        {0, "fc1.input", 58, 4, 0, 51},           {0, "fc1.input.colwise", 58, 4, 0, 185},
        {0, "fc2.input", 15.4375f, 16, 0, 0},     {0, "fc2.input.colwise", 15.4375f, 16, 0, 0},
        {1, "fc1.input", 58, 4, 0, 51},           {1, "fc1.input.colwise", 58, 4, 2, 185},
        {1, "fc2.input", 15.5625f, 16, 0, 0},     {1, "fc2.input.colwise", 15.5625f, 16, 0, 0},
    };
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        record_fp8 *q = record_add_fp8(rec);
        cr_assert_not_null(q);
        *q = (record_fp8){.step = rows[i].step,
                          .tensor = record_intern(rec, rows[i].tensor),
                          .format = DTYPE_FLOAT8_E4M3FN,
                          .amax = rows[i].amax,
                          .scale = rows[i].scale,
                          .saturated = rows[i].saturated,
                          .underflow = rows[i].underflow};
    }
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    snprintf(cfg->path, sizeof cfg->path, "mx.case");
    snprintf(rec->config.path, sizeof rec->config.path, "mx.case");
    static const struct {
        const char *tensor;
        bool saturated;
    } claims[] = {
        {"fc1.input", true}, {"fc2.input", false}, {"fc1.input", false}, {"fc2.input", true}};
    for (int i = 0; i < 4; i++) {
        expect_spec *e = &cfg->expects[cfg->n_expects++];
        *e = (expect_spec){
            .kind = EXPECT_SATURATED, .saturated = claims[i].saturated, .line = 10 + i};
        snprintf(e->tensor, sizeof e->tensor, "%s", claims[i].tensor);
    }
    rec->result.ok = true;
    expect_check(cfg, rec);
    const case_result *res = &rec->result;
    cr_expect_eq(res->expect_total, 4);
    cr_expect_eq(res->expect_passed, 2, "%s", res->failures);
    cr_expect_not(res->passed);
    cr_expect_str_eq(res->failures,
                     "mx.case:12: expectation failed: saturated fc1.input: expected no, 2 values "
                     "saturated in its 4 quantizations, 2 of them of fc1.input.colwise, first in "
                     "step 1 (fp8.csv)\n"
                     "mx.case:13: expectation failed: saturated fc2.input: expected yes, no value "
                     "saturated in its 4 quantizations, 2 of them of fc2.input.colwise "
                     "(fp8.csv)\n");
    free(cfg);
    record_free(rec);
}
