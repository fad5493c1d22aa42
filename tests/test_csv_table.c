/*
 * test_csv_table.c: the CSV reader every part shares (harness/results/csv_table.h), on small files
 * written here: quoted fields with commas and quotes, CRLF line ends and empty lines, a
 * column looked up by name (and the error naming the file and the missing column), an
 * optional file that is not there, rows of the wrong length, a broken quote, an empty file,
 * a row filter, and the number parsers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "results/csv_table.h"
#include "helpers.h"

/* Writes text to a fresh folder's t.csv; the folder's path in dir, the file's in path. */
static void fixture(const char *text, char *dir, char *path)
{
    make_temp_dir(dir, 256);
    write_file(dir, "t.csv", text, path, 512);
}

Test(csv_table, quoted_fields_keep_their_commas_and_quotes)
{
    char dir[256], path[512], err[1024];
    fixture("name,text,n\n\"a,b\",\"say \"\"hi\"\"\",3\n\"\",plain,\"4\"\n", dir, path);
    csv_table t;
    cr_assert_eq(csv_table_read(&t, path, false, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_cols, 3);
    cr_assert_eq(t.n_rows, 2);
    cr_expect_str_eq(t.rows[0][0], "a,b");
    cr_expect_str_eq(t.rows[0][1], "say \"hi\"");
    cr_expect_str_eq(t.rows[0][2], "3");
    cr_expect_str_eq(t.rows[1][0], "");
    cr_expect_str_eq(t.rows[1][1], "plain");
    cr_expect_str_eq(t.rows[1][2], "4");
    csv_table_free(&t);
    rm_rf(dir);
}

Test(csv_table, crlf_line_ends_and_empty_lines)
{
    char dir[256], path[512], err[1024];
    fixture("a,b\r\n1,2\r\n\r\n3,4\n\n", dir, path);
    csv_table t;
    cr_assert_eq(csv_table_read(&t, path, false, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n_rows, 2);
    cr_expect_str_eq(t.header[1], "b");
    cr_expect_str_eq(t.rows[0][1], "2");
    cr_expect_str_eq(t.rows[1][0], "3");
    cr_expect_str_eq(t.rows[1][1], "4");
    csv_table_free(&t);
    rm_rf(dir);
}

Test(csv_table, columns_by_name_and_the_missing_one_named)
{
    char dir[256], path[512], err[1024], want_err[1024];
    fixture("loss,case,step\n0.5,x,0\n", dir, path);
    csv_table t;
    cr_assert_eq(csv_table_read(&t, path, false, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_expect_eq(csv_table_col(&t, "step"), 2);
    cr_expect_eq(csv_table_col(&t, "loss"), 0);
    cr_expect_eq(csv_table_col(&t, "found_inf"), -1);

    int k[STEPS_N_COLS];
    static const int present[] = {STEPS_COL_STEP, STEPS_COL_CASE, STEPS_COL_LOSS};
    cr_assert_eq(csv_table_find(&t, &csv_steps, present, 3, k, err, sizeof err), 0, "%s", err);
    cr_expect_eq(k[STEPS_COL_CASE], 1);
    cr_expect_eq(k[STEPS_COL_STEP], 2);
    cr_expect_eq(k[STEPS_COL_LOSS], 0);
    cr_expect_eq(k[STEPS_COL_LOSS_SCALE], -1, "a column not asked for is -1");

    static const int missing[] = {STEPS_COL_STEP, STEPS_COL_LOSS_SCALE, STEPS_COL_SKIPPED};
    cr_expect_eq(csv_table_find(&t, &csv_steps, missing, 3, k, err, sizeof err), -1);
    snprintf(want_err, sizeof want_err, "%s has no column loss_scale", path);
    cr_expect_str_eq(err, want_err);
    csv_table_free(&t);
    rm_rf(dir);
}

Test(csv_table, an_optional_file_may_be_missing)
{
    char dir[256], err[1024] = "", want_err[1024];
    make_temp_dir(dir, sizeof dir);
    csv_table t;
    cr_expect_eq(csv_table_read_in(&t, dir, "none.csv", true, NULL, NULL, err, sizeof err), 1);
    cr_expect_eq(t.n_rows, 0);
    cr_expect_null(t.header);
    cr_expect_str_eq(err, "", "no message for a missing optional file");
    csv_table_free(&t);
    cr_expect_eq(csv_table_read_in(&t, dir, "none.csv", false, NULL, NULL, err, sizeof err), -1);
    snprintf(want_err, sizeof want_err, "cannot read %s/none.csv: No such file or directory", dir);
    cr_expect_str_eq(err, want_err);
    rm_rf(dir);
}

Test(csv_table, malformed_files_name_the_file_and_line)
{
    static const struct {
        const char *text, *message; /* the message after "<path>" */
    } bad[] = {
        {"a,b\n1,2\n3\n", ":3: 1 fields, the header has 2"},
        {"a,b\n1,2,3\n", ":2: 3 fields, the header has 2"},
        {"a,b\n\"1,2\n", ":2: malformed CSV line"},
        {"a,b\n\"1\"x,2\n", ":2: malformed CSV line"},
        {"", " is empty"},
        {"\n\r\n", " is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[256], path[512], err[1024], want_err[1024];
        fixture(bad[i].text, dir, path);
        csv_table t;
        cr_expect_eq(csv_table_read(&t, path, true, NULL, NULL, err, sizeof err), -1, "%zu", i);
        snprintf(want_err, sizeof want_err, "%s%s", path, bad[i].message);
        cr_expect_str_eq(err, want_err, "case %zu", i);
        cr_expect_null(t.rows, "nothing is kept after an error");
        rm_rf(dir);
    }
}

typedef struct filter_ctx {
    int seen;
    int k; /* the column compared */
} filter_ctx;

static bool keep_x(const csv_table *t, char **fields, void *p)
{
    filter_ctx *c = p;
    if (c->seen++ == 0)
        c->k = csv_table_col(t, "tag");
    return !strcmp(fields[c->k], "x");
}

Test(csv_table, a_filter_keeps_the_rows_it_returns_true_for)
{
    char dir[256], path[512], err[1024];
    fixture("n,tag\n1,x\n2,y\n3,x\n4,z\n", dir, path);
    csv_table t;
    filter_ctx c = {0};
    cr_assert_eq(csv_table_read(&t, path, false, keep_x, &c, err, sizeof err), 0, "%s", err);
    cr_expect_eq(c.seen, 4, "the filter sees every row, not the header");
    cr_assert_eq(t.n_rows, 2);
    cr_expect_str_eq(t.rows[0][0], "1");
    cr_expect_str_eq(t.rows[1][0], "3");
    csv_table_free(&t);
    rm_rf(dir);
}

Test(csv_table, numbers_parse_whole_or_not_at_all)
{
    int64_t i = 0;
    double d = 0;
    cr_expect(csv_parse_i64("12", &i) && i == 12);
    cr_expect(csv_parse_i64("-3", &i) && i == -3);
    cr_expect(!csv_parse_i64("", &i));
    cr_expect(!csv_parse_i64("1x", &i));
    cr_expect(!csv_parse_i64("1.5", &i));
    cr_expect(!csv_parse_i64("99999999999999999999", &i), "out of range");
    cr_expect(csv_parse_f64("0.5", &d) && d == 0.5);
    cr_expect(csv_parse_f64("65536", &d) && d == 65536.0);
    cr_expect(!csv_parse_f64("", &d));
    cr_expect(!csv_parse_f64("2 ", &d));
}
