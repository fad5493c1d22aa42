/*
 * test_compare.c: `ampscope compare` reads memory.csv, steps.csv and summary.csv by their
 * columns' names: a results folder written here with every file's columns in another order
 * gives the numbers put in, and a case without results is named in the error.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/compare.h"
#include "helpers.h"

Test(compare, finds_columns_by_name_in_any_order)
{
    char out[256], dir[512], path[1024];
    make_temp_dir(out, sizeof out);
    snprintf(dir, sizeof dir, "%s/shuffled", out);
    cr_assert_eq(mkdir(dir, 0777), 0);
    write_file(dir, "memory.csv",
               "peak_bytes,end_bytes,category,case\n"
               "1048576,0,params,shuffled\n"
               "3145728,0,activations,shuffled\n"
               "2097152,0,total,shuffled\n",
               path, sizeof path);
    write_file(dir, "steps.csv", "lost_updates,step,case\n3,0,shuffled\n4,1,shuffled\n", path,
               sizeof path);
    write_file(out, "summary.csv", "grad_numel,case,grad_underflow\n100,other,99\n4,shuffled,1\n",
               path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    snprintf(cfg->name, sizeof cfg->name, "shuffled");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(compare_cases(cfg, 1, out, f), 0);
    cr_assert_eq(fclose(f), 0);
    /* params 1.0 MiB, activations 3.0, total 2.0, no baseline, 3 + 4 lost updates, 1 of 4 */
    char row[256];
    snprintf(row, sizeof row, " %10.1f %8s %12d %10s\n", 2.0, "-", 7, "25.0000%");
    cr_expect_not_null(strstr(text, row), "no \"%s\" in:\n%s", row, text);
    snprintf(row, sizeof row, "%-30.30s %10.1f", "shuffled", 1.0);
    cr_expect_not_null(strstr(text, row), "no \"%s\" in:\n%s", row, text);
    snprintf(row, sizeof row, " %10.1f", 3.0);
    cr_expect_not_null(strstr(text, row), "no \"%s\" in:\n%s", row, text);
    free(text);
    free(cfg);
    rm_rf(out);
}

Test(compare, a_case_without_results_is_named, .init = cr_redirect_stderr)
{
    char out[256], want[1024];
    make_temp_dir(out, sizeof out);
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    snprintf(cfg->name, sizeof cfg->name, "never-run");
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    cr_expect_eq(compare_cases(cfg, 1, out, f), 2);
    fclose(f);
    fflush(stderr);
    snprintf(want, sizeof want,
             "ampscope: %s/never-run/memory.csv: no results for case never-run (run it first): "
             "No such file or directory\n",
             out);
    cr_expect_stderr_eq_str(want);
    free(cfg);
    rm_rf(out);
}
