/*
 * expect.c: a case's [expect] held against its run (see expect.h): dtypes from the
 * observer, saturations from fp8.csv (an operand's rows and, under MXFP8, its column-wise
 * copy's), the error from the run's result.
 */
#include "expect.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "columns.h"
#include "csv_table.h"

/* fp8.csv's rows of one operand: how many (colwise of them MXFP8's column-wise copy's), the
 * values they clamped, the first step that clamped any (-1: none) */
typedef struct saturations {
    int rows, colwise;
    int64_t saturated, first_step;
} saturations;

/* true when fp8.csv's tensor is the operand's, "L.input", or its MXFP8 column-wise copy's,
 * "L.input.colwise" (fp8_linear.h): a user asking whether fc1's input saturated means
 * either copy of it */
static bool is_operand_row(const char *name, const char *tensor, bool *colwise)
{
    size_t n = strlen(tensor);
    *colwise = strncmp(name, tensor, n) == 0 && strcmp(name + n, ".colwise") == 0;
    return *colwise || strcmp(name, tensor) == 0;
}

/* The rows of `tensor` and its column-wise copy in t (fp8.csv read whole); false with a
 * message in why when a field is not a number. */
static bool saturations_of(const csv_table *t, const int *col, const char *tensor, saturations *out,
                           char *why, size_t len)
{
    *out = (saturations){0, 0, 0, -1};
    for (int r = 0; r < t->n_rows; r++) {
        char **row = t->rows[r];
        bool colwise;
        if (!is_operand_row(row[col[FP8_COL_TENSOR]], tensor, &colwise))
            continue;
        int64_t step, n;
        if (!csv_parse_i64(row[col[FP8_COL_STEP]], &step) ||
            !csv_parse_i64(row[col[FP8_COL_SATURATED]], &n)) {
            snprintf(why, len, "saturated %s: %s row %d: step or saturated is not an integer",
                     tensor, csv_fp8.file, r + 1);
            return false;
        }
        out->rows++;
        out->colwise += colwise;
        out->saturated += n;
        if (n > 0 && out->first_step < 0)
            out->first_step = step;
    }
    return true;
}

/* why: "" when `saturated e->tensor = yes|no` holds in t (the column-wise copy's rows
 * counted with the operand's), else what the run showed */
static void check_saturated(const expect_spec *e, const csv_table *t, const int *col,
                            const char *read_err, bool ok, char *why, size_t len)
{
    saturations s;
    if (read_err[0]) {
        snprintf(why, len, "saturated %s: %s", e->tensor, read_err);
        return;
    }
    if (!saturations_of(t, col, e->tensor, &s, why, len))
        return;
    char copies[256] = ""; /* under MXFP8: how many rows were the column-wise copy's */
    if (s.colwise > 0)
        snprintf(copies, sizeof copies, ", %d of them of %s.colwise", s.colwise, e->tensor);
    if (s.rows == 0)
        snprintf(why, len, "saturated %s: fp8.csv has no row of %s%s", e->tensor, e->tensor,
                 ok ? "" : " (the run ended in an error first)");
    else if (e->saturated && s.saturated == 0)
        snprintf(why, len,
                 "saturated %s: expected yes, no value saturated in its %d quantizations%s "
                 "(fp8.csv)",
                 e->tensor, s.rows, copies);
    else if (!e->saturated && s.saturated > 0)
        snprintf(why, len,
                 "saturated %s: expected no, %" PRId64 " values saturated in its %d "
                 "quantizations%s, first in step %" PRId64 " (fp8.csv)",
                 e->tensor, s.saturated, s.rows, copies, s.first_step);
}

/* dir's fp8.csv into t and its columns into col, once, when a saturated expectation needs
 * it; a failure's message stays in err (every such expectation then fails with it) */
static void read_fp8_csv(const char *dir, csv_table *t, int *col, char *err, size_t len)
{
    static const int want[] = {FP8_COL_STEP, FP8_COL_TENSOR, FP8_COL_SATURATED};
    char msg[1024] = "";
    int rc = csv_table_read_in(t, dir, csv_fp8.file, true, NULL, NULL, msg, sizeof msg);
    if (rc == 1)
        snprintf(msg, sizeof msg, "%s/%s does not exist", dir, csv_fp8.file);
    else if (rc == 0)
        csv_table_find(t, &csv_fp8, want, 3, col, msg, sizeof msg);
    snprintf(err, len, "%s", msg);
}

void expect_check(const case_config *cfg, const observer *obs, const char *dir, case_result *res)
{
    bool error_expected = false, fp8_read = false;
    csv_table fp8 = {0};
    int fp8_col[FP8_N_COLS];
    char fp8_err[1024] = "";
    int off = 0;
    res->expect_total = cfg->n_expects;
    for (int i = 0; i < cfg->n_expects; i++) {
        const expect_spec *e = &cfg->expects[i];
        char why[2048] = "";
        switch (e->kind) {
        case EXPECT_DTYPE: {
            dtype got;
            if (!observe_find(obs, e->tensor, &got))
                snprintf(why, sizeof why, "dtype %s: the run has no tensor named %s%s", e->tensor,
                         e->tensor, res->ok ? "" : " (it ended in an error first)");
            else if (got != e->dt)
                snprintf(why, sizeof why, "dtype %s: expected %s, got %s", e->tensor,
                         dtype_name(e->dt), dtype_name(got));
            break;
        }
        case EXPECT_SATURATED:
            if (!fp8_read)
                read_fp8_csv(dir, &fp8, fp8_col, fp8_err, sizeof fp8_err);
            fp8_read = true;
            check_saturated(e, &fp8, fp8_col, fp8_err, res->ok, why, sizeof why);
            break;
        case EXPECT_ERROR:
            error_expected = true;
            if (e->text[0] && res->ok)
                snprintf(why, sizeof why,
                         "error: expected an error containing '%s', the run "
                         "finished without one",
                         e->text);
            else if (e->text[0] && !strstr(res->error, e->text))
                snprintf(why, sizeof why, "error: expected '%s', got '%s'", e->text, res->error);
            else if (!e->text[0] && !res->ok) /* error = none */
                snprintf(why, sizeof why, "error: expected none, got '%s'", res->error);
            break;
        }
        if (why[0])
            off += snprintf(res->failures + off, sizeof res->failures - (size_t)off,
                            "%s:%d: expectation failed: %s\n", cfg->path, e->line, why);
        else
            res->expect_passed++;
        if (off >= (int)sizeof res->failures)
            off = (int)sizeof res->failures - 1;
    }
    csv_table_free(&fp8);
    res->passed = res->expect_passed == res->expect_total && (res->ok || error_expected);
    if (!res->ok && !error_expected)
        snprintf(res->failures + off, sizeof res->failures - (size_t)off,
                 "%s: the run ended in an error no expectation names: %s\n", cfg->path, res->error);
}
