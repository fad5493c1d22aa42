/*
 * expect.c: a case's [expect] held against its run's record (see expect.h): dtypes from
 * the names it saw, saturations from its float8 rows (an operand's and, under MXFP8, its
 * column-wise copy's), the error from its result.
 */
#include "expect.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* the float8 rows of one operand: how many (colwise of them MXFP8's column-wise copy's), the
 * values they clamped, the first step that clamped any (-1: none) */
typedef struct saturations {
    int rows, colwise;
    int64_t saturated, first_step;
} saturations;

/* true when a float8 row's tensor is the operand's, "L.input", or its MXFP8 column-wise
 * copy's, "L.input.colwise" (fp8_linear.h): a user asking whether fc1's input saturated
 * means either copy of it */
static bool is_operand_row(const char *name, const char *tensor, bool *colwise)
{
    size_t n = strlen(tensor);
    *colwise = strncmp(name, tensor, n) == 0 && strcmp(name + n, ".colwise") == 0;
    return *colwise || strcmp(name, tensor) == 0;
}

static saturations saturations_of(const run_record *rec, const char *tensor)
{
    saturations s = {0, 0, 0, -1};
    for (int64_t i = 0; i < rec->n_fp8; i++) {
        const record_fp8 *q = &rec->fp8[i];
        bool colwise;
        if (!is_operand_row(q->tensor, tensor, &colwise))
            continue;
        s.rows++;
        s.colwise += colwise;
        s.saturated += q->saturated;
        if (q->saturated > 0 && s.first_step < 0)
            s.first_step = q->step;
    }
    return s;
}

/* why: "" when `saturated e->tensor = yes|no` holds (the column-wise copy's rows counted
 * with the operand's), else what the run showed */
static void check_saturated(const expect_spec *e, const run_record *rec, char *why, size_t len)
{
    saturations s = saturations_of(rec, e->tensor);
    char copies[256] = ""; /* under MXFP8: how many rows were the column-wise copy's */
    if (s.colwise > 0)
        snprintf(copies, sizeof copies, ", %d of them of %s.colwise", s.colwise, e->tensor);
    if (s.rows == 0)
        snprintf(why, len, "saturated %s: fp8.csv has no row of %s%s", e->tensor, e->tensor,
                 rec->result.ok ? "" : " (the run ended in an error first)");
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

/* the [expect] line as a case file writes it */
static void expectation_text(const expect_spec *e, char *buf, size_t len)
{
    switch (e->kind) {
    case EXPECT_DTYPE:
        snprintf(buf, len, "dtype %s = %s", e->tensor, dtype_name(e->dt));
        return;
    case EXPECT_SATURATED:
        snprintf(buf, len, "saturated %s = %s", e->tensor, e->saturated ? "yes" : "no");
        return;
    case EXPECT_ERROR:
        snprintf(buf, len, "error = %s", e->text[0] ? e->text : "none");
        return;
    }
    snprintf(buf, len, "?");
}

static void add_row(run_record *rec, int line, const char *expectation, const char *why)
{
    record_expect *x = record_add_expect(rec);
    if (x)
        *x = (record_expect){.line = line,
                             .expectation = record_intern(rec, expectation),
                             .held = !why[0],
                             .failure = record_intern(rec, why)};
}

void expect_check(const case_config *cfg, run_record *rec)
{
    const case_result *res = &rec->result;
    bool error_expected = false;
    for (int i = 0; i < cfg->n_expects; i++) {
        const expect_spec *e = &cfg->expects[i];
        char why[2048] = "", text[CASE_TEXT_MAX + CASE_NAME_MAX + 32];
        switch (e->kind) {
        case EXPECT_DTYPE: {
            dtype got;
            if (!record_find(rec, e->tensor, &got))
                snprintf(why, sizeof why, "dtype %s: the run has no tensor named %s%s", e->tensor,
                         e->tensor, res->ok ? "" : " (it ended in an error first)");
            else if (got != e->dt)
                snprintf(why, sizeof why, "dtype %s: expected %s, got %s", e->tensor,
                         dtype_name(e->dt), dtype_name(got));
            break;
        }
        case EXPECT_SATURATED:
            check_saturated(e, rec, why, sizeof why);
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
        expectation_text(e, text, sizeof text);
        add_row(rec, e->line, text, why);
    }
    if (!res->ok && !error_expected) {
        char why[1200];
        snprintf(why, sizeof why, "the run ended in an error no expectation names: %s",
                 res->error);
        add_row(rec, -1, "", why);
    }
    rec->has_expect = true;
    record_expect_result(rec);
}
