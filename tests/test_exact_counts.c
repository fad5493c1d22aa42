/*
 * test_exact_counts.c: an end-to-end run whose underflow, subnormal and overflow counts are
 * known by construction. The model is one linear layer 1 -> 64 without bias, weights 0,
 * input 1, under autocast float16 with a GradScaler of scale S = 16, and loss = mse (mean)
 * against a float32 target t read from a file. Every value on the way is exact:
 * fc.out = 0, and mse's backward in float32 gives fc.out@float32.grad = 2/64 * (0 - t) * S,
 * a product of powers of two. Choosing t_i = -v_i * 64 / (2 * S) puts the gradient at v_i,
 * and the cast down to float16 (fc.out.grad) is the one rounding that can lose values.
 * The expected counts are classified here by hand from IEEE binary16's limits.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/npy.h"
#include "helpers.h"

#define N 64
#define SCALE 16.0

/* the gradient values fc.out@float32.grad will hold, and why */
static void planned_values(double *v)
{
    int k = 0;
    for (int i = 0; i < 8; i++)
        v[k++] = ldexp(1, -10); /* normal */
    for (int i = 0; i < 8; i++)
        v[k++] = ldexp(1, -20); /* subnormal, exact */
    for (int i = 0; i < 8; i++)
        v[k++] = ldexp(1, -26); /* below half of 2^-24: 0 */
    for (int i = 0; i < 4; i++)
        v[k++] = ldexp(1, -25); /* tie with 0, to even: 0 */
    for (int i = 0; i < 4; i++)
        v[k++] = 3 * ldexp(1, -26); /* rounds up to 2^-24 */
    for (int i = 0; i < 4; i++)
        v[k++] = 1.5 * ldexp(1, -24); /* tie, to even: 2^-23 */
    for (int i = 0; i < 4; i++)
        v[k++] = 70000; /* above 65520: inf */
    for (int i = 0; i < 4; i++)
        v[k++] = 65519; /* below 65520: 65504 */
    for (int i = 0; i < 4; i++)
        v[k++] = 0; /* exact zero, no underflow */
    for (int i = 0; i < 4; i++)
        v[k++] = -ldexp(1, -30); /* -0: underflow */
    for (int i = 0; i < 12; i++)
        v[k++] = 1.0; /* normal */
    cr_assert_eq(k, N);
}

typedef struct counts {
    long zeros, underflow, subnormal, overflow;
} counts;

/* IEEE binary16: |v| <= 2^-25 rounds to 0 (2^-25 itself is a tie to even 0); below the
 * smallest normal 2^-14 a non-zero result is subnormal (none of our values rounds up to
 * 2^-14); from 65520 on the result is inf. */
static counts classify(const double *v)
{
    counts c = {0};
    for (int i = 0; i < N; i++) {
        double a = fabs(v[i]);
        if (a == 0) {
            c.zeros++;
        } else if (a <= ldexp(1, -25)) {
            c.zeros++, c.underflow++;
        } else if (a < ldexp(1, -14)) {
            c.subnormal++;
        } else if (a >= 65520) {
            c.overflow++;
        }
    }
    return c;
}

static void write_npy(const char *dir, const char *name, int ndim, const int64_t *shape,
                      const float *v)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, ndim, shape, v, err, sizeof err), 0, "%s", err);
}

static long field(char **row, const csv *c, const char *col) { return atol(row[csv_col(c, col)]); }

Test(exact_counts, underflow_subnormal_overflow_at_the_cast_down)
{
    double v[N];
    planned_values(v);
    counts want = classify(v);
    cr_assert_eq(want.underflow, 16);
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    float ones[1] = {1}, zeros[N] = {0}, target[N];
    for (int i = 0; i < N; i++)
        target[i] = (float)(-v[i] * N / (2 * SCALE));
    int64_t in_shape[2] = {1, 1}, w_shape[2] = {N, 1}, t_shape[2] = {1, N};
    write_npy(dir, "x.npy", 2, in_shape, ones);
    write_npy(dir, "w.npy", 2, w_shape, zeros);
    write_npy(dir, "t.npy", 2, t_shape, target);
    write_file(dir, "exact.case",
               "[case]\nname = exact\n[model]\nfc = linear 1 -> 64 bias=no\n"
               "[data]\nbatch = 1\ninput = file x.npy\ntarget = file t.npy\n"
               "[precision]\nautocast = float16\n[scaler]\ninit_scale = 16\n"
               "[train]\nloss = mse\noptimizer = sgd lr=0.1\n[init]\nfc.weight = file w.npy\n",
               path, sizeof path);
    case_result res;
    run_case_file(path, dir, &res, NULL);
    cr_assert(res.ok, "%s", res.error);

    snprintf(path, sizeof path, "%s/exact/tensors.csv", dir);
    csv c;
    cr_assert(csv_read(path, &c));
    char **g32 = csv_find(&c, "tensor", "fc.out@float32.grad", NULL, NULL, NULL, NULL);
    char **g16 = csv_find(&c, "tensor", "fc.out.grad", NULL, NULL, NULL, NULL);
    char **wg16 = csv_find(&c, "tensor", "fc.weight@float16.grad", NULL, NULL, NULL, NULL);
    cr_assert(g32 && g16 && wg16);
    /* float32 holds every planned value: nothing is lost before the cast */
    cr_expect_eq(field(g32, &c, "underflow"), 0);
    cr_expect_eq(field(g32, &c, "zeros"), 4);
    cr_expect_eq(field(g32, &c, "overflow"), 0);
    /* the cast down to float16 */
    cr_expect_str_eq(g16[csv_col(&c, "dtype")], "float16");
    cr_expect_eq(field(g16, &c, "zeros"), want.zeros);
    cr_expect_eq(field(g16, &c, "underflow"), want.underflow);
    cr_expect_eq(field(g16, &c, "subnormal"), want.subnormal);
    cr_expect_eq(field(g16, &c, "overflow"), want.overflow);
    cr_expect_eq(field(g16, &c, "nan"), 0);
    cr_expect_str_eq(g16[csv_col(&c, "amin_nonzero")], "5.96046448e-08"); /* 2^-24 */
    /* dW = dy^T x with x = 1 copies the rounded values: no second loss */
    cr_expect_eq(field(wg16, &c, "underflow"), 0);
    cr_expect_eq(field(wg16, &c, "zeros"), want.zeros);
    csv_free(&c);

    /* the inf makes the GradScaler skip the step and back off */
    snprintf(path, sizeof path, "%s/exact/steps.csv", dir);
    cr_assert(csv_read(path, &c));
    cr_assert_eq(c.n_rows, 1);
    cr_expect_str_eq(c.rows[0][csv_col(&c, "found_inf")], "1");
    cr_expect_str_eq(c.rows[0][csv_col(&c, "skipped")], "1");
    cr_expect_str_eq(c.rows[0][csv_col(&c, "loss_scale")], "16");
    cr_expect_str_eq(c.rows[0][csv_col(&c, "first_nonfinite")], "fc.out.grad");
    csv_free(&c);

    /* hist.csv bins log2|x| before the rounding: 2^-26 lands in bin -26, 8 times */
    snprintf(path, sizeof path, "%s/exact/hist.csv", dir);
    cr_assert(csv_read(path, &c));
    char **bin = csv_find(&c, "tensor", "fc.out.grad", "bin", "-26", NULL, NULL);
    cr_assert_not_null(bin);
    cr_expect_str_eq(bin[csv_col(&c, "count")], "8"); /* 8 x 2^-26 */
    bin = csv_find(&c, "tensor", "fc.out.grad", "bin", "-25", NULL, NULL);
    cr_assert_not_null(bin);
    cr_expect_str_eq(bin[csv_col(&c, "count")], "8"); /* 4 x 2^-25 and 4 x 1.5 * 2^-25 */
    csv_free(&c);
    rm_rf(dir);
}
