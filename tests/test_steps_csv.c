/*
 * test_steps_csv.c: steps.csv's skipped column says whether optimizer.step() ran, found_inf
 * whether the GradScaler found an inf or NaN. With a GradScaler the two agree (it skips the
 * step on an inf); without one nothing is looked for and the step runs whatever the
 * gradients hold, as in PyTorch. Evidence independent of both columns: a step that ran
 * changed the weights, so the next step's loss differs; a skipped one left it as it was.
 * The model is test_exact_counts.c's: one linear 1 -> 64 without bias, weights 0, input 1,
 * autocast float16, mse against a float32 target t, so fc.out@float32.grad = 2/64 * (0 - t)
 * * S exactly (S the loss scale, 1 without a scaler); four targets put it at 70000 * S,
 * which the cast down to float16 (fc.out.grad) turns into inf, and so fc.weight's gradient.
 * A step that ends in an error writes no row at all.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "helpers.h"

#define N 64

static void write_npy(const char *dir, const char *name, int ndim, const int64_t *shape,
                      const float *v)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, ndim, shape, v, err, sizeof err), 0, "%s", err);
}

/* two steps of the model with scaler = yes or no; reads steps.csv into c */
static void run_two_steps(const char *dir, bool scaler, csv *c)
{
    float ones[1] = {1}, zeros[N] = {0}, target[N] = {0};
    for (int i = 0; i < 4; i++)
        target[i] = -70000.0f * N / 2; /* gradient 70000 * S */
    for (int i = 4; i < N; i++)
        target[i] = 0.5f; /* ordinary gradients */
    int64_t in_shape[2] = {1, 1}, w_shape[2] = {N, 1}, t_shape[2] = {1, N};
    write_npy(dir, "x.npy", 2, in_shape, ones);
    write_npy(dir, "w.npy", 2, w_shape, zeros);
    write_npy(dir, "t.npy", 2, t_shape, target);
    char text[1024], path[512];
    snprintf(text, sizeof text,
             "[case]\nname = inf\n[model]\nfc = linear 1 -> 64 bias=no\n"
             "[data]\nbatch = 1\ninput = file x.npy\ntarget = file t.npy\n"
             "[precision]\nautocast = float16\n[scaler]\nenabled = %s\ninit_scale = 16\n"
             "[train]\nloss = mse\noptimizer = sgd lr=0.1\nsteps = 2\n"
             "[init]\nfc.weight = file w.npy\n",
             scaler ? "yes" : "no");
    write_file(dir, "inf.case", text, path, sizeof path);
    case_result res;
    run_case_file(path, dir, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    snprintf(path, sizeof path, "%s/inf/steps.csv", dir);
    cr_assert(csv_read(path, c));
    cr_assert_eq(c->n_rows, 2);
}

static const char *cell(const csv *c, int row, const char *col)
{
    return c->rows[row][csv_col(c, col)];
}

Test(steps_csv, with_a_grad_scaler_an_inf_skips_the_step)
{
    char dir[256];
    make_temp_dir(dir, sizeof dir);
    csv c;
    run_two_steps(dir, true, &c);
    for (int s = 0; s < 2; s++) {
        cr_expect_str_eq(cell(&c, s, "found_inf"), "1", "step %d", s);
        cr_expect_str_eq(cell(&c, s, "skipped"), "1", "step %d", s);
    }
    /* the weights stayed as they were: the same loss again */
    cr_expect_str_eq(cell(&c, 1, "loss"), cell(&c, 0, "loss"));
    csv_free(&c);
    rm_rf(dir);
}

Test(steps_csv, without_a_grad_scaler_the_step_runs_on_an_inf)
{
    char dir[256];
    make_temp_dir(dir, sizeof dir);
    csv c;
    run_two_steps(dir, false, &c);
    for (int s = 0; s < 2; s++) {
        cr_expect_str_eq(cell(&c, s, "found_inf"), "0", "step %d: nothing looks", s);
        cr_expect_str_eq(cell(&c, s, "skipped"), "0", "step %d ran", s);
    }
    /* the inf gradient reached the weights: the next loss is not the first one */
    cr_expect_str_neq(cell(&c, 1, "loss"), cell(&c, 0, "loss"));
    csv_free(&c);
    rm_rf(dir);
}

/* a step that ends in an error (here GradScaler.unscale_ refusing float16 gradients,
 * before optimizer.step()) writes no row: no row says that a step ran which did not */
Test(steps_csv, a_step_that_ends_in_an_error_has_no_row)
{
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "err.case",
               "[case]\nname = err\n[model]\nfc = linear 4 -> 2\n[data]\nbatch = 2\n"
               "[precision]\nparams = float16\nautocast = float16\n[scaler]\nenabled = yes\n"
               "[train]\nsteps = 2\n[expect]\nerror = Attempting to unscale FP16 gradients.\n",
               path, sizeof path);
    case_result res;
    run_case_file(path, dir, &res, NULL);
    cr_assert(!res.ok);
    cr_expect(strstr(res.error, "Attempting to unscale FP16 gradients.") != NULL, "%s", res.error);
    snprintf(path, sizeof path, "%s/err/steps.csv", dir);
    csv c;
    cr_assert(csv_read(path, &c));
    cr_expect_eq(c.n_rows, 0);
    csv_free(&c);
    rm_rf(dir);
}
