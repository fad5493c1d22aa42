/*
 * test_matrix.c: `ampscope matrix CASE`. The error measures against values worked out by
 * hand; the table against the configurations' own results (summary.csv, steps.csv,
 * memory.csv of each variant); and the bfloat16 comparison with and without a GradScaler
 * both ways: bit-identical where the exactness condition holds (tests/cases/small-fp32:
 * no gradient value near the subnormal range), not where a case is built to break it (an
 * input of values near 2^-126, bfloat16's smallest normal, so the weight gradients are
 * subnormal unless the loss scale lifts them out).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/matrix.h"
#include "core/npy.h"
#include "helpers.h"

Test(matrix, error_measures)
{
    /* r = (1, 2, 0, -4), x = (1, 2.5, 1, -4): relative errors 0, 0.25, -, 0 -> 0.25;
     * signal 1 + 4 + 0 + 16 = 21, noise 0.25 + 1 = 1.25: 10 log10(16.8) dB */
    float r[4] = {1, 2, 0, -4}, x[4] = {1, 2.5f, 1, -4};
    double rel, sq;
    matrix_error(x, r, 4, &rel, &sq);
    cr_expect_float_eq(rel, 0.25, 1e-15);
    cr_expect_float_eq(sq, 10.0 * log10(21.0 / 1.25), 1e-12);
    matrix_error(r, r, 4, &rel, &sq);
    cr_expect_eq(rel, 0.0);
    cr_expect(isinf(sq) && sq > 0, "equal values: SQNR inf, got %g", sq);
}

static int run_matrix(const char *case_path, const char *out)
{
    char cmd[2048];
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(cmd, sizeof cmd, "%s matrix %s --device cpu --quiet --out %s > /dev/null 2>&1", bin,
             case_path, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool report_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no %s", path);
    char line[16384];
    bool found = false;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static const char *field(const csv *c, char **row, const char *col)
{
    return row[csv_col(c, col)];
}

Test(matrix, table_equals_the_configurations_results, .timeout = 120)
{
    char dir[256], path[1024];
    make_temp_dir(dir, sizeof dir);
    cr_assert_eq(run_matrix("tests/cases/small-fp32.case", dir), 0);
    csv m, summary;
    snprintf(path, sizeof path, "%s/small-fp32.matrix/matrix.csv", dir);
    cr_assert(csv_read(path, &m), "no %s", path);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    cr_assert(csv_read(path, &summary));
    cr_assert_eq(m.n_rows, MATRIX_CONFIGS);
    for (int r = 0; r < m.n_rows; r++) {
        char **row = m.rows[r];
        const char *v = field(&m, row, "variant");
        cr_expect_str_eq(field(&m, row, "config"), matrix_config_names[r]);
        char **s = csv_find(&summary, "case", v, NULL, NULL, NULL, NULL);
        cr_assert_not_null(s, "%s: no summary row", v);
        static const char *const same[] = {"output_dtype", "loss_dtype", "param_grad_dtypes",
                                           "grad_underflow", "grad_numel"};
        for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
            cr_expect_str_eq(field(&m, row, same[k]), field(&summary, s, same[k]), "%s: %s", v,
                             same[k]);
        csv steps, mem;
        snprintf(path, sizeof path, "%s/%s/steps.csv", dir, v);
        cr_assert(csv_read(path, &steps));
        long long lost = 0;
        for (int k = 0; k < steps.n_rows; k++)
            lost += atoll(field(&steps, steps.rows[k], "lost_updates"));
        cr_expect_eq(atoll(field(&m, row, "lost_updates")), lost, "%s", v);
        csv_free(&steps);
        snprintf(path, sizeof path, "%s/%s/memory.csv", dir, v);
        cr_assert(csv_read(path, &mem));
        char **total = csv_find(&mem, "category", "total", NULL, NULL, NULL, NULL);
        cr_assert_not_null(total);
        cr_expect_str_eq(field(&m, row, "peak_total"), field(&mem, total, "peak_bytes"), "%s", v);
        csv_free(&mem);
    }
    csv_free(&m);
    csv_free(&summary);
    /* errors.csv: fp32 against itself is exact, everything else is not */
    csv e;
    snprintf(path, sizeof path, "%s/small-fp32.matrix/errors.csv", dir);
    cr_assert(csv_read(path, &e));
    char **self = csv_find(&e, "config", "fp32", "tensor", "fc1.weight.grad", NULL, NULL);
    cr_assert_not_null(self);
    cr_expect_str_eq(field(&e, self, "sqnr_db"), "inf");
    cr_expect_str_eq(field(&e, self, "identical_to_fp32"), "1");
    char **half = csv_find(&e, "config", "half", "tensor", "fc1.weight.grad", NULL, NULL);
    cr_assert_not_null(half);
    cr_expect_str_eq(field(&e, half, "identical_to_fp32"), "0");
    cr_expect(strtod(field(&e, half, "sqnr_db"), NULL) > 20.0, "float16's 11 bits: SQNR %s",
              field(&e, half, "sqnr_db"));
    csv_free(&e);
    /* the condition holds here, and the two runs' gradients are bit-identical */
    snprintf(path, sizeof path, "%s/small-fp32.matrix/report.md", dir);
    cr_expect(report_has(path, "the condition holds. The gradients the optimizer received are "
                               "bit-identical."));
    rm_rf(dir);
}

/* a case whose input lies near 2^-126: in bfloat16 autocast its weight gradients are
 * subnormal without a scaler and normal (scaled by 65536) with one */
Test(matrix, bf16_scaler_differs_where_values_are_subnormal, .timeout = 120)
{
    char dir[256], path[1024], err[256];
    make_temp_dir(dir, sizeof dir);
    float x[4 * 8];
    for (int i = 0; i < 4 * 8; i++) /* 1.5 * 2^-126 .. times 1 to 2.9, mixed signs */
        x[i] = (i % 3 ? 1.0f : -1.0f) * ldexpf(1.5f + 0.05f * (float)i, -126);
    int64_t shape[2] = {4, 8};
    snprintf(path, sizeof path, "%s/tiny.npy", dir);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, 2, shape, x, err, sizeof err), 0, "%s", err);
    write_file(dir, "tiny.case",
               "[case]\nname = tiny\n[model]\nfc1 = linear 8 -> 4\n[data]\nbatch = 4\n"
               "input = file tiny.npy\ntarget = classes\n[train]\nloss = cross_entropy\n",
               path, sizeof path);
    cr_assert_eq(run_matrix(path, dir), 0);
    snprintf(path, sizeof path, "%s/tiny.matrix/report.md", dir);
    cr_expect(report_has(path, "the condition is broken. The gradients the optimizer received "
                               "are not bit-identical."));
    csv e;
    snprintf(path, sizeof path, "%s/tiny.matrix/errors.csv", dir);
    cr_assert(csv_read(path, &e));
    char **with = csv_find(&e, "config", "autocast-bf16-scaler", "tensor", "fc1.weight.grad", NULL,
                           NULL);
    char **without = csv_find(&e, "config", "autocast-bf16", "tensor", "fc1.weight.grad", NULL,
                              NULL);
    cr_assert(with && without);
    /* the scaler keeps bfloat16's 8 bits where the unscaled run has a subnormal's fewer */
    cr_expect(strtod(field(&e, with, "sqnr_db"), NULL) > strtod(field(&e, without, "sqnr_db"), NULL),
              "SQNR with the scaler %s, without %s", field(&e, with, "sqnr_db"),
              field(&e, without, "sqnr_db"));
    csv_free(&e);
    rm_rf(dir);
}
