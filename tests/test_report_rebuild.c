/*
 * test_report_rebuild.c: `ampscope report DIR` rebuilds a run's report.md files and
 * REPORT.md from its CSV files alone, byte for byte as the run wrote them from its record
 * in memory: the CSV files carry everything the reports tell. The run takes cases that
 * reach every part of report.md: autocast's reasons, float8 (MXFP8), a run ending in an
 * expected error, one whose expectation fails, a GradScaler skipping steps, gradient
 * accumulation with master weights, clipping, and (with MPI) a data-parallel case's
 * all-reduce section.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "distributed/distributed.h"
#include "helpers.h"

/* runs `ampscope ARGS` through the shell, its output into the log; the exit status (without
 * LeakSanitizer: the data-parallel case's ranks run under mpirun, see NO_LEAK_CHECK) */
static int ampscope(const char *args)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[8192];
    snprintf(cmd, sizeof cmd, NO_LEAK_CHECK " %s %s >/dev/null 2>&1", bin, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* the whole file, NUL-terminated; NULL when it cannot be read */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* true when a and b hold the same bytes; the first differing line is logged */
static bool same_file(const char *a, const char *b)
{
    char *x = slurp(a), *y = slurp(b);
    bool same = x && y && strcmp(x, y) == 0;
    if (!same && x && y) {
        size_t i = 0, line = 1;
        for (; x[i] && x[i] == y[i]; i++)
            line += x[i] == '\n';
        cr_log_error("%s and %s differ from line %zu", a, b, line);
    }
    free(x), free(y);
    return same;
}

Test(report_rebuild, ampscope_report_rebuilds_the_runs_own_reports_byte_for_byte,
     .timeout = 300)
{
    char dir[256], path[1024], args[4096];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "wrong.case",
               "[case]\nname = wrong\n[model]\nfc = linear 4 -> 2\n[data]\nbatch = 2\n"
               "[expect]\ndtype fc.out = float16\n",
               path, sizeof path);
    static const char *const cases[] = {
        "tests/cases/small-fp32.case",          "tests/cases/small-gpt-block.case",
        "tests/cases/small-fp8-mxfp8.case",     "tests/cases/small-fp16-input.case",
        "tests/cases/small-scaler-backoff.case", "cases/accumulate-master.case",
        "cases/clip-before-unscale.case",       "cases/dist8-small000-fp16-compress.case",
    };
    int n = (int)(sizeof cases / sizeof *cases) - (distributed_have_mpi() ? 0 : 1);
    int off = snprintf(args, sizeof args, "run %s", path);
    for (int i = 0; i < n; i++)
        off += snprintf(args + off, sizeof args - (size_t)off, " %s", cases[i]);
    snprintf(args + off, sizeof args - (size_t)off, " --device cpu --quiet --out %s/run", dir);
    cr_assert_eq(ampscope(args), 1, "the run: every case ran, `wrong` failed its expectation");

    /* a copy of the results without a report, re-reported */
    snprintf(args, sizeof args, "cp -r %s/run %s/again && find %s/again -name '*.md' -delete",
             dir, dir, dir);
    cr_assert_eq(system(args), 0);
    snprintf(args, sizeof args, "report %s/again", dir);
    cr_assert_eq(ampscope(args), 0);

    csv sum;
    snprintf(path, sizeof path, "%s/run/summary.csv", dir);
    cr_assert(csv_read(path, &sum));
    cr_assert_eq(sum.n_rows, n + 1);
    char a[1024], b[1024];
    for (int r = 0; r < sum.n_rows; r++) {
        const char *name = sum.rows[r][csv_col(&sum, "case")];
        snprintf(a, sizeof a, "%s/run/%s/report.md", dir, name);
        snprintf(b, sizeof b, "%s/again/%s/report.md", dir, name);
        cr_expect(same_file(a, b), "%s's report.md rebuilt from its CSV files differs", name);
    }
    csv_free(&sum);
    snprintf(a, sizeof a, "%s/run/REPORT.md", dir);
    snprintf(b, sizeof b, "%s/again/REPORT.md", dir);
    cr_expect(same_file(a, b), "REPORT.md rebuilt from the CSV files differs");
    snprintf(a, sizeof a, "%s/run/wrong/report.md", dir);
    char *md = slurp(a);
    cr_assert_not_null(md);
    cr_expect_not_null(strstr(md, ":8: expectation failed: dtype fc.out: expected float16, got "
                                  "float32\n```"),
                       "the failure is in the report: %s", md);
    free(md);
    rm_rf(dir);
}
