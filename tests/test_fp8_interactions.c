/*
 * test_fp8_interactions.c: [fp8] (harness/layers/fp8_linear.h) together with the rest of a case,
 * each against what Transformer Engine's te.Linear under fp8_autocast does there:
 *  - a GradScaler: the output gradient is quantized with the loss scale in it (TE quantizes
 *    whatever gradient autograd hands its backward), so its amax is init_scale times the
 *    unscaled run's, and the forward's rows do not change;
 *  - gradient accumulation: delayed scaling updates after every micro-batch's forward and
 *    backward (TE's fp8_autocast region is one micro-batch), and the weight is quantized again
 *    in each micro-batch (TE without is_first_microbatch caching);
 *  - --observe off: fp8.csv is the same file, its counts computed anyway;
 *  - float32 params without autocast: te.Linear's output is float32;
 *  - [B, T, C] inputs, from=, bias=no and a weight tied to an embedding
 *    (tests/cases/small-fp8-tied.case): the tied head is chosen and quantizes the shared
 *    parameter.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* runs tests/cases/<name>.case with sets into a new folder out; reads its fp8.csv into c */
static void run_and_read(const char *name, const char *const *sets, int n_sets, bool observe_off,
                         char *out, int len, csv *c)
{
    make_temp_dir(out, len);
    char path[1024];
    snprintf(path, sizeof path, "tests/cases/%s.case", name);
    train_options opt = {.quiet = true, .observe_off = observe_off};
    case_result res;
    run_case_file_set(path, sets, n_sets, out, &res, &opt);
    cr_assert(res.ok, "%s: %s", name, res.error);
    snprintf(path, sizeof path, "%s/%s/fp8.csv", out, name);
    cr_assert(csv_read(path, c), "%s", path);
}

static float cell(const csv *c, int row, const char *col)
{
    return strtof(c->rows[row][csv_col(c, col)], NULL);
}

static const char *text(const csv *c, int row, const char *col)
{
    return c->rows[row][csv_col(c, col)];
}

Test(fp8_interactions, grad_scaler_scale_is_in_the_quantized_gradient)
{
    const char *plain[] = {"precision.autocast=float16"};
    const char *scaled[] = {"precision.autocast=float16", "scaler.enabled=yes",
                            "scaler.init_scale=1024"};
    char o1[512], o2[512];
    csv a, b;
    run_and_read("small-fp8-current", plain, 1, false, o1, sizeof o1, &a);
    run_and_read("small-fp8-current", scaled, 3, false, o2, sizeof o2, &b);
    cr_assert_eq(a.n_rows, b.n_rows);
    int grads = 0;
    for (int i = 0; i < a.n_rows && strcmp(text(&a, i, "step"), "0") == 0; i++) {
        cr_assert_str_eq(text(&a, i, "tensor"), text(&b, i, "tensor"));
        if (!strstr(text(&a, i, "tensor"), ".out.grad")) { /* the forward: no scaler there */
            cr_expect_eq(cell(&a, i, "amax"), cell(&b, i, "amax"), "%s", text(&a, i, "tensor"));
            continue;
        }
        /* a power of two: exact in float16 for these normal amaxes; current scaling then
         * divides E5M2's largest by it */
        cr_expect_eq(cell(&b, i, "amax"), 1024.0f * cell(&a, i, "amax"), "%s",
                     text(&a, i, "tensor"));
        cr_expect_eq(cell(&b, i, "scale"), 57344.0f / cell(&b, i, "amax"));
        cr_expect_eq(cell(&b, i, "scale"), cell(&a, i, "scale") / 1024.0f);
        grads++;
    }
    cr_expect_eq(grads, 2, "fc2's and fc1's output gradients in step 0");
    csv_free(&a);
    csv_free(&b);
    rm_rf(o1);
    rm_rf(o2);
}

/* accumulate = 2 (batch 8 of the case's 16 samples): fp8.csv has a row per micro-batch; the
 * delayed scale of each row follows from the amaxes of the rows before it (history 4, max) */
Test(fp8_interactions, accumulation_updates_delayed_scales_per_micro_batch)
{
    const char *sets[] = {"data.batch=8", "train.accumulate=2"};
    char out[512];
    csv c;
    run_and_read("small-fp8-delayed", sets, 2, false, out, sizeof out, &c);
    const char *tensors[] = {"fc1.input", "fc1.weight", "fc2.input",
                             "fc2.weight", "fc2.out.grad", "fc1.out.grad"};
    for (int t = 0; t < 6; t++) {
        float amax[16];
        int n = 0;
        for (int i = 0; i < c.n_rows; i++) {
            if (strcmp(text(&c, i, "tensor"), tensors[t]) != 0)
                continue;
            cr_assert_lt(n, 16);
            float want = 1.0f, m = 0.0f;
            for (int j = n - 4 < 0 ? 0 : n - 4; j < n; j++)
                m = fmaxf(m, amax[j]);
            if (n > 0)
                want = 448.0f / m;
            if (strstr(tensors[t], ".out.grad"))
                want = n > 0 ? 57344.0f / m : 1.0f;
            cr_expect_eq(cell(&c, i, "scale"), want, "%s, micro-batch %d of the run", tensors[t],
                         n);
            char step[8];
            snprintf(step, sizeof step, "%d", n / 2);
            cr_expect_str_eq(text(&c, i, "step"), step, "%s", tensors[t]);
            amax[n++] = cell(&c, i, "amax");
        }
        /* the weights too: quantized again in every micro-batch */
        cr_expect_eq(n, 6, "%s: 3 steps of 2 micro-batches", tensors[t]);
    }
    csv_free(&c);
    rm_rf(out);
}

Test(fp8_interactions, observe_off_writes_the_same_fp8_csv)
{
    char o1[512], o2[512];
    csv a, b;
    run_and_read("small-fp8-delayed", NULL, 0, false, o1, sizeof o1, &a);
    run_and_read("small-fp8-delayed", NULL, 0, true, o2, sizeof o2, &b);
    cr_assert_eq(a.n_rows, b.n_rows);
    int64_t counted = 0;
    for (int i = 0; i < a.n_rows; i++)
        for (int k = 0; k < a.n_cols; k++)
            cr_expect_str_eq(a.rows[i][k], b.rows[i][k], "row %d, %s", i, a.header[k]);
    for (int i = 0; i < a.n_rows; i++)
        counted += atoll(text(&a, i, "saturated")) + atoll(text(&a, i, "underflow"));
    cr_expect_gt(counted, 0, "the case saturates and underflows: the comparison sees counts");
    csv_free(&a);
    csv_free(&b);
    rm_rf(o1);
    rm_rf(o2);
}

Test(fp8_interactions, float32_without_autocast_outputs_float32)
{
    const char *sets[] = {"precision.autocast=off"};
    char out[512], path[1024];
    csv c;
    run_and_read("small-fp8-current", sets, 1, false, out, sizeof out, &c);
    cr_expect_gt(c.n_rows, 0);
    csv_free(&c);
    snprintf(path, sizeof path, "%s/small-fp8-current/tensors.csv", out);
    cr_assert(csv_read(path, &c));
    const char *want[][2] = {{"fc1.out", "float32"},
                             {"fc2.out", "float32"},
                             {"fc2.input@float8_e4m3fn", "float8_e4m3fn"},
                             {"fc2.out.grad@float8_e5m2", "float8_e5m2"},
                             {"fc1.weight.grad", "float32"}};
    for (int k = 0; k < 5; k++) {
        char **row = csv_find(&c, "tensor", want[k][0], "step", "0", NULL, NULL);
        cr_assert_not_null(row, "%s", want[k][0]);
        cr_expect_str_eq(row[csv_col(&c, "dtype")], want[k][1], "%s", want[k][0]);
    }
    /* the weight gradient is the GEMM's float32 output itself: no cast copy */
    cr_expect_null(csv_find(&c, "tensor", "fc1.weight.grad@float32", "step", "0", NULL, NULL));
    csv_free(&c);
    rm_rf(out);
}

Test(fp8_interactions, tied_head_quantizes_the_shared_parameter)
{
    char out[512], path[1024];
    csv c, t;
    run_and_read("small-fp8-tied", NULL, 0, false, out, sizeof out, &c);
    snprintf(path, sizeof path, "%s/small-fp8-tied/tensors.csv", out);
    cr_assert(csv_read(path, &t));
    /* every linear chosen, the tied head too: 5 layers x 3 operands x 3 steps */
    cr_expect_eq(c.n_rows, 45);
    for (int s = 0; s < 3; s++) {
        char step[4];
        snprintf(step, sizeof step, "%d", s);
        /* the parameter as the step's forward reads it: the initial one, else the previous
         * step's optimizer output */
        char **p = s == 0 ? csv_find(&t, "tensor", "tok.weight", "step", "0", NULL, NULL)
                          : NULL;
        if (s > 0) {
            char prev[4];
            snprintf(prev, sizeof prev, "%d", s - 1);
            p = csv_find(&t, "tensor", "tok.weight", "step", prev, "pass", "optimizer");
        }
        cr_assert_not_null(p, "tok.weight before step %d", s);
        int found = 0;
        for (int i = 0; i < c.n_rows; i++)
            if (strcmp(text(&c, i, "step"), step) == 0 &&
                strcmp(text(&c, i, "tensor"), "head.weight") == 0) {
                cr_expect_eq(cell(&c, i, "amax"), strtof(p[csv_col(&t, "amax")], NULL),
                             "step %d", s);
                found++;
            }
        cr_expect_eq(found, 1, "step %d", s);
    }
    /* the shared parameter's gradient: the embedding's and head's float8 GEMM's, summed */
    cr_expect_not_null(csv_find(&t, "tensor", "tok.weight.grad", "step", "0", NULL, NULL));
    /* k reads ln1.out through from=, [2, 8, 16]: the same values as q's input */
    for (int i = 0; i + 2 < c.n_rows && strcmp(text(&c, i, "step"), "0") == 0; i++)
        if (strcmp(text(&c, i, "tensor"), "q.input") == 0)
            cr_expect_eq(cell(&c, i, "amax"), cell(&c, i + 2, "amax"), "k.input's amax");
    csv_free(&c);
    csv_free(&t);
    rm_rf(out);
}
