/* compare.c: the memory comparison table (see compare.h). The files are read through
 * csv_table.h, their columns found by the names in columns.h. */
#include "compare.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csv_table.h"
#include "core/memory.h"

typedef struct case_numbers {
    double peak[MEM_CATEGORY_COUNT];
    double total;
    long long lost_updates;
    long long grad_underflow, grad_numel;
} case_numbers;

/* Reads dir/file into t, with the columns want (ids of cols) into k. Returns 0, 1 when the
 * file does not exist and `optional`, or -1 with a message in err. */
static int read_table(csv_table *t, const char *dir, const csv_columns *cols, bool optional,
                      const int *want, int n, int *k, char *err, int errlen)
{
    int rc = csv_table_read_in(t, dir, cols->file, optional, NULL, NULL, err, errlen);
    if (rc == 0 && csv_table_find(t, cols, want, n, k, err, errlen)) {
        csv_table_free(t);
        rc = -1;
    }
    return rc;
}

static int bad_number(const csv_table *t, int row, const char *col, char *err, int errlen)
{
    snprintf(err, (size_t)errlen, "%s: row %d: %s is not a number", t->path, row + 1, col);
    return -1;
}

/* The peaks by category (memory.csv, which must be there), the lost updates (steps.csv) and
 * the gradient underflow (summary.csv's row of the case), the last two 0 when missing. */
static int read_files(const char *out, const char *name, case_numbers *c, char *err, int errlen)
{
    char dir[CSV_PATH_LEN];
    snprintf(dir, sizeof dir, "%s/%s", out, name);
    csv_table t;
    int64_t v;

    static const int mem_want[] = {MEMORY_COL_CATEGORY, MEMORY_COL_PEAK_BYTES};
    int km[MEMORY_N_COLS];
    int rc = read_table(&t, dir, &csv_memory, true, mem_want, 2, km, err, errlen);
    if (rc == 1)
        snprintf(err, (size_t)errlen, "%s/%s: no results for case %s (run it first): %s", dir,
                 csv_memory.file, name, strerror(ENOENT));
    if (rc)
        return -1;
    for (int r = 0; rc == 0 && r < t.n_rows; r++) {
        const char *category = t.rows[r][km[MEMORY_COL_CATEGORY]];
        if (!csv_parse_i64(t.rows[r][km[MEMORY_COL_PEAK_BYTES]], &v)) {
            rc = bad_number(&t, r, csv_memory.names[MEMORY_COL_PEAK_BYTES], err, errlen);
            continue;
        }
        for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
            if (strcmp(category, mem_category_name((mem_category)k)) == 0)
                c->peak[k] = (double)v;
        if (strcmp(category, "total") == 0)
            c->total = (double)v;
    }
    csv_table_free(&t);
    if (rc)
        return -1;

    static const int steps_want[] = {STEPS_COL_LOST_UPDATES};
    int ks[STEPS_N_COLS];
    rc = read_table(&t, dir, &csv_steps, true, steps_want, 1, ks, err, errlen);
    if (rc < 0)
        return -1;
    for (int r = 0; rc == 0 && r < t.n_rows; r++) {
        if (!csv_parse_i64(t.rows[r][ks[STEPS_COL_LOST_UPDATES]], &v))
            rc = bad_number(&t, r, csv_steps.names[STEPS_COL_LOST_UPDATES], err, errlen);
        else
            c->lost_updates += v;
    }
    csv_table_free(&t);
    if (rc < 0)
        return -1;

    static const int sum_want[] = {SUMMARY_COL_CASE, SUMMARY_COL_GRAD_UNDERFLOW,
                                   SUMMARY_COL_GRAD_NUMEL};
    int ku[SUMMARY_N_COLS];
    rc = read_table(&t, out, &csv_summary, true, sum_want, 3, ku, err, errlen);
    if (rc < 0)
        return -1;
    for (int r = 0; rc == 0 && r < t.n_rows; r++) {
        char **row = t.rows[r];
        int64_t under, numel;
        if (strcmp(row[ku[SUMMARY_COL_CASE]], name))
            continue;
        if (!csv_parse_i64(row[ku[SUMMARY_COL_GRAD_UNDERFLOW]], &under) ||
            !csv_parse_i64(row[ku[SUMMARY_COL_GRAD_NUMEL]], &numel)) {
            rc = bad_number(&t, r, "grad_underflow or grad_numel", err, errlen);
        } else {
            c->grad_underflow = under;
            c->grad_numel = numel;
        }
    }
    csv_table_free(&t);
    return rc < 0 ? -1 : 0;
}

static int read_numbers(const char *out, const char *name, case_numbers *c)
{
    char err[CSV_PATH_LEN + 256];
    memset(c, 0, sizeof *c);
    if (read_files(out, name, c, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        return -1;
    }
    return 0;
}
int compare_cases(const case_config *cfgs, int n, const char *out, FILE *f)
{
    case_numbers *nums = calloc((size_t)n, sizeof *nums);
    if (!nums)
        return 2;
    for (int i = 0; i < n; i++)
        if (read_numbers(out, cfgs[i].name, &nums[i])) {
            free(nums);
            return 2;
        }
    const double mib = 1024.0 * 1024.0;
    fprintf(f, "peak MiB by category; ratio = total / the baseline's total\n");
    fprintf(f, "%-30s", "case");
    for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
        fprintf(f, " %10.10s", mem_category_name((mem_category)k));
    fprintf(f, " %10s %8s %12s %10s\n", "total", "ratio", "lost_upd", "underflow");
    for (int i = 0; i < n; i++) {
        const case_numbers *c = &nums[i];
        fprintf(f, "%-30.30s", cfgs[i].name);
        for (int k = 0; k < MEM_CATEGORY_COUNT; k++)
            fprintf(f, " %10.1f", c->peak[k] / mib);
        case_numbers base;
        char ratio[32] = "-";
        if (cfgs[i].baseline[0] && read_numbers(out, cfgs[i].baseline, &base) == 0 &&
            base.total > 0)
            snprintf(ratio, sizeof ratio, "%.3f", c->total / base.total);
        char under[32] = "-";
        if (c->grad_numel)
            snprintf(under, sizeof under, "%.4f%%",
                     100.0 * (double)c->grad_underflow / (double)c->grad_numel);
        fprintf(f, " %10.1f %8s %12lld %10s\n", c->total / mib, ratio, c->lost_updates, under);
    }
    free(nums);
    return 0;
}
