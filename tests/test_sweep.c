/*
 * test_sweep.c: `ampscope run CASE --sweep ...`: the value lists (2^A..2^B, the cartesian
 * product of two axes), and the table against the variants' own results: each row of
 * sweep.csv must hold what that variant's steps.csv (skipped steps) and summary.csv
 * (grad_underflow, final_loss) say, overflow only where the GradScaler found an inf, and
 * the report's safe window must be the scales without overflow.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/sweep.h"
#include "helpers.h"

Test(sweep, value_lists)
{
    sweep_axis ax[2];
    char err[512];
    cr_assert_eq(sweep_parse("scaler.init_scale=2^0..2^24", &ax[0], err, sizeof err), 0, "%s", err);
    cr_expect_eq(ax[0].n, 25);
    cr_expect_str_eq(ax[0].key, "scaler.init_scale");
    cr_expect_str_eq(ax[0].values[0], "1");
    cr_expect_str_eq(ax[0].values[24], "16777216");
    cr_assert_eq(sweep_parse("train.seed=1,2^3,7", &ax[1], err, sizeof err), 0, "%s", err);
    cr_expect_eq(ax[1].n, 3);
    cr_expect_str_eq(ax[1].values[1], "8");
    cr_expect_eq(sweep_count(ax, 2), 75);
    char sets[2][192];
    sweep_variant(ax, 2, 4, sets); /* the last axis fastest: (1, 1) */
    cr_expect_str_eq(sets[0], "scaler.init_scale=2");
    cr_expect_str_eq(sets[1], "train.seed=8");
    cr_expect_neq(sweep_parse("init_scale=1", &ax[0], err, sizeof err), 0);
    cr_expect_neq(sweep_parse("scaler.init_scale=2^5..2^3", &ax[0], err, sizeof err), 0);
    cr_expect_neq(sweep_parse("scaler.init_scale=1,,2", &ax[0], err, sizeof err), 0);
}

static const char *field(const csv *c, char **row, const char *col)
{
    return row[csv_col(c, col)];
}

Test(sweep, table_equals_the_variants_results, .timeout = 120)
{
    char dir[256], cmd[2048], path[1024];
    make_temp_dir(dir, sizeof dir);
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(cmd, sizeof cmd,
             "%s run tests/cases/small-autocast-fp16-scaler.case --device cpu --quiet --out %s "
             "--sweep 'scaler.init_scale=2^0,2^14..2^20' > /dev/null 2>&1",
             bin, dir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", cmd, st);
    csv sw, summary;
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler.sweep/sweep.csv", dir);
    cr_assert(csv_read(path, &sw), "no %s", path);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    cr_assert(csv_read(path, &summary));
    cr_assert_eq(sw.n_rows, 8);
    int overflowing = 0;
    for (int r = 0; r < sw.n_rows; r++) {
        char **row = sw.rows[r];
        const char *variant = field(&sw, row, "variant");
        char **s = csv_find(&summary, "case", variant, NULL, NULL, NULL, NULL);
        cr_assert_not_null(s, "%s has no summary row", variant);
        cr_expect_str_eq(field(&sw, row, "grad_underflow"), field(&summary, s, "grad_underflow"),
                         "%s", variant);
        cr_expect_str_eq(field(&sw, row, "grad_numel"), field(&summary, s, "grad_numel"), "%s",
                         variant);
        cr_expect_eq(strtod(field(&sw, row, "final_loss"), NULL),
                     strtod(field(&summary, s, "final_loss"), NULL), "%s", variant);
        csv steps;
        snprintf(path, sizeof path, "%s/%s/steps.csv", dir, variant);
        cr_assert(csv_read(path, &steps), "no %s", path);
        int skipped = 0, found = 0;
        for (int k = 0; k < steps.n_rows; k++) {
            skipped += atoi(field(&steps, steps.rows[k], "skipped"));
            found += atoi(field(&steps, steps.rows[k], "found_inf"));
        }
        csv_free(&steps);
        cr_expect_eq(atoi(field(&sw, row, "steps_skipped")), skipped, "%s", variant);
        /* one step: a gradient that overflowed is an inf the GradScaler finds */
        cr_expect_eq(atoll(field(&sw, row, "grad_overflow")) > 0, found > 0, "%s", variant);
        overflowing += found > 0;
    }
    cr_expect(overflowing > 0 && overflowing < sw.n_rows,
              "2^20 overflows this case's float16 gradients, 2^0 does not (%d of %d)", overflowing,
              sw.n_rows);
    csv_free(&sw);
    csv_free(&summary);
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler.sweep/report.md", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[8192];
    bool window = false, finer = false;
    while (fgets(line, sizeof line, f)) {
        window |= strstr(line, "**Safe window:** 2^0 to 2^17") != NULL;
        /* 2^0 leaves a few gradient values subnormal in float16 (sweep.csv), 2^14 none */
        finer |= strstr(line, "the fewest subnormal values (0) at: 2^14, 2^15, 2^16, 2^17.") !=
                 NULL;
    }
    fclose(f);
    cr_expect(window, "report.md names 2^0 to 2^17 as the safe window");
    cr_expect(finer, "report.md names the scales without subnormal gradient values");
    rm_rf(dir);
}
