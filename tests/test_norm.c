/*
 * test_norm.c: the normalization kinds (layer_norm, rms_norm, group_norm, batch_norm2d) on the CPU
 * backend:
 *  - their backward ops against central finite differences of an independent float64
 *    forward written here, at several layouts (L = sum(R * y), so dL/dy = R);
 *  - their forward and backward against PyTorch's values (tests/references/norm/, written
 *    by make_norm.py there), in float32 and in the half dtypes;
 *  - layer_norm's real option eps (the first KIND_OPT_REAL): its default, a value, values
 *    out of range with their messages, and the JSON `check --json` prints;
 *  - their cases in tests/cases/, whose [expect] dtypes must hold.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "core/rng.h"
#include "helpers.h"
#include "case/load.h"

#define FD_H 1e-4
#define MAXN 1024

/* ---- finite differences ---- */

typedef struct fd_layout {
    norm_geom g;
    bool affine, bias;
} fd_layout;

static int64_t numel_of(const norm_geom *g) { return g->n * g->groups * g->cpg * g->inner; }

/* L = sum(R * y) of y = (x - mean) / sqrt(var + eps) * w[c] + b[c], in float64; rms_norm's
 * y = x / sqrt(mean(x^2) + eps) * w[c] is the same with mean 0 */
static double norm_loss(const fd_layout *f, const double *x, const double *w, const double *b,
                        const float *r, double *y_out)
{
    const norm_geom *g = &f->g;
    int64_t rows = g->n * g->groups, cols = g->cpg * g->inner;
    double L = 0;
    for (int64_t row = 0; row < rows; row++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < cols; j++)
            m += x[row * cols + j];
        m = g->form == NORM_RMS ? 0.0 : m / (double)cols;
        for (int64_t j = 0; j < cols; j++)
            v += (x[row * cols + j] - m) * (x[row * cols + j] - m);
        v /= (double)cols;
        for (int64_t j = 0; j < cols; j++) {
            int64_t c = row % g->groups * g->cpg + j / g->inner;
            double y = (x[row * cols + j] - m) / sqrt(v + g->eps);
            y = y * (f->affine ? w[c] : 1.0) + (f->bias ? b[c] : 0.0);
            if (y_out)
                y_out[row * cols + j] = y;
            L += r[row * cols + j] * y;
        }
    }
    return L;
}

static void fd(const fd_layout *f, double *v, int64_t n, double *x, double *w, double *b,
               const float *r, double *out)
{
    for (int64_t j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + FD_H;
        double up = norm_loss(f, x, w, b, r, NULL);
        v[j] = keep - FD_H;
        double down = norm_loss(f, x, w, b, r, NULL);
        v[j] = keep;
        out[j] = (up - down) / (2 * FD_H);
    }
}

static void expect_near(const char *what, const tensor *got, const double *want, double rel,
                        double abs)
{
    for (int64_t i = 0; i < got->numel; i++) {
        double a = tensor_at(got, i), b = want[i];
        cr_expect(fabs(a - b) <= rel * fabs(b) + abs, "%s[%lld]: %.8g, expected %.8g", what,
                  (long long)i, a, b);
    }
}

static void check_fd(const fd_layout *f, uint64_t seed)
{
    const norm_geom *g = &f->g;
    int64_t n = numel_of(g), channels = g->groups * g->cpg, rows = g->n * g->groups;
    cr_assert_leq(n, MAXN);
    rng gen;
    rng_seed(&gen, seed);
    static float xf[MAXN], wf[MAXN], bf[MAXN], rf[MAXN];
    static double x[MAXN], w[MAXN], b[MAXN], want[MAXN];
    for (int64_t i = 0; i < n; i++) {
        xf[i] = (float)(2 * rng_normal(&gen) + 0.3), rf[i] = (float)rng_normal(&gen);
        x[i] = xf[i];
    }
    for (int64_t c = 0; c < channels; c++) {
        wf[c] = (float)(1 + 0.5 * rng_normal(&gen)), bf[c] = (float)(0.5 * rng_normal(&gen));
        w[c] = wf[c], b[c] = bf[c];
    }
    test_env e;
    env_open(&e);
    int64_t xs[1] = {n}, cs[1] = {channels}, rs[1] = {rows};
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, 1, xs, xf);
    tensor *tw = f->affine ? env_tensor(&e, "w", DTYPE_FLOAT32, 1, cs, wf) : NULL;
    tensor *tb = f->bias ? env_tensor(&e, "b", DTYPE_FLOAT32, 1, cs, bf) : NULL;
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 1, xs, rf);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 1, xs);
    tensor *mean = g->form == NORM_RMS ? NULL : env_zeros(&e, "mean", DTYPE_FLOAT32, 1, rs);
    tensor *rstd = env_zeros(&e, "rstd", DTYPE_FLOAT32, 1, rs);
    cr_assert_eq(e.be->norm_forward(e.be, g, tx, tw, tb, y, mean, rstd, NULL), 0);
    norm_loss(f, x, w, b, rf, want);
    expect_near("y", y, want, 1e-5, 1e-5);

    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 1, xs);
    cr_assert_eq(e.be->norm_backward_input(e.be, g, dy, tx, mean, rstd, tw, dx, NULL), 0);
    fd(f, x, n, x, w, b, rf, want);
    expect_near("dx", dx, want, 2e-4, 2e-5);
    if (f->affine) {
        tensor *dw = env_zeros(&e, "dw", DTYPE_FLOAT32, 1, cs);
        cr_assert_eq(e.be->norm_backward_weight(e.be, g, dy, tx, mean, rstd, dw, NULL), 0);
        fd(f, w, channels, x, w, b, rf, want);
        expect_near("dw", dw, want, 1e-4, 1e-5);
    }
    if (f->bias) {
        tensor *db = env_zeros(&e, "db", DTYPE_FLOAT32, 1, cs);
        cr_assert_eq(reduce_channel_sum(e.be, dy, g->n, g->inner, db, NULL), 0);
        fd(f, b, channels, x, w, b, rf, want);
        expect_near("db", db, want, 1e-4, 1e-5);
    }
    env_close(&e);
}

Test(norm, layer_norm_backward_matches_finite_differences)
{
    /* rows x C: 3 x 5, 4 x 17, 1 x 64 (one row), and no affine */
    check_fd(&(fd_layout){{3, 1, 5, 1, 1e-5f, NORM_CENTERED}, true, true}, 1);
    check_fd(&(fd_layout){{4, 1, 17, 1, 1e-5f, NORM_CENTERED}, true, true}, 2);
    check_fd(&(fd_layout){{1, 1, 64, 1, 1e-3f, NORM_CENTERED}, true, false}, 3);
    check_fd(&(fd_layout){{5, 1, 8, 1, 1e-5f, NORM_CENTERED}, false, false}, 4);
}

Test(norm, rms_norm_backward_matches_finite_differences)
{
    /* rows x C: 3 x 8, 4 x 17, 1 x 64 with a large eps, and no affine */
    check_fd(&(fd_layout){{3, 1, 8, 1, 0x1p-23f, NORM_RMS}, true, false}, 11);
    check_fd(&(fd_layout){{4, 1, 17, 1, 1e-6f, NORM_RMS}, true, false}, 12);
    check_fd(&(fd_layout){{1, 1, 64, 1, 0.5f, NORM_RMS}, true, false}, 13);
    check_fd(&(fd_layout){{5, 1, 8, 1, 1e-5f, NORM_RMS}, false, false}, 14);
}

Test(norm, group_norm_backward_matches_finite_differences)
{
    /* [N, G, C/G, HW]: 2 x 3 x 2 x 4, 1 x 2 x 3 x 1, 3 x 1 x 4 x 5 (one group), 2 x 4 x 1 x 9 */
    check_fd(&(fd_layout){{2, 3, 2, 4, 1e-5f, NORM_FUSED}, true, true}, 5);
    check_fd(&(fd_layout){{1, 2, 3, 1, 1e-5f, NORM_FUSED}, true, true}, 6);
    check_fd(&(fd_layout){{3, 1, 4, 5, 1e-5f, NORM_FUSED}, true, true}, 7);
    check_fd(&(fd_layout){{2, 4, 1, 9, 1e-5f, NORM_FUSED}, false, false}, 8);
}

/* ---- batch_norm: statistics per channel over N and HW ---- */

typedef struct bn_layout {
    int64_t n, c, hw;
} bn_layout;

/* L = sum(R * y) of y = (x - mean_c) / sqrt(var_c + eps) * w[c] + b[c], in float64 */
static double bn_loss(const bn_layout *f, const double *x, const double *w, const double *b,
                      const float *r, double *y_out)
{
    double L = 0, count = (double)(f->n * f->hw);
    for (int64_t c = 0; c < f->c; c++) {
        double m = 0, v = 0;
        for (int64_t n = 0; n < f->n; n++)
            for (int64_t i = 0; i < f->hw; i++)
                m += x[(n * f->c + c) * f->hw + i];
        m /= count;
        for (int64_t n = 0; n < f->n; n++)
            for (int64_t i = 0; i < f->hw; i++) {
                double d = x[(n * f->c + c) * f->hw + i] - m;
                v += d * d;
            }
        v /= count;
        for (int64_t n = 0; n < f->n; n++)
            for (int64_t i = 0; i < f->hw; i++) {
                int64_t at = (n * f->c + c) * f->hw + i;
                double y = (x[at] - m) / sqrt(v + 1e-5) * w[c] + b[c];
                if (y_out)
                    y_out[at] = y;
                L += r[at] * y;
            }
    }
    return L;
}

static void bn_fd(const bn_layout *f, double *v, int64_t n, double *x, double *w, double *b,
                  const float *r, double *out)
{
    for (int64_t j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + FD_H;
        double up = bn_loss(f, x, w, b, r, NULL);
        v[j] = keep - FD_H;
        double down = bn_loss(f, x, w, b, r, NULL);
        v[j] = keep;
        out[j] = (up - down) / (2 * FD_H);
    }
}

/* float32 tensors of a batch_norm check: x, w, b, dy, the running stats, and zeroed mean,
 * invstd, y, dx, dw [C] */
typedef struct bn_tensors {
    tensor *x, *w, *b, *dy, *rm, *rv, *mean, *invstd, *y, *dx, *dw;
} bn_tensors;

static bn_tensors bn_tensors_make(test_env *e, const bn_layout *f, float *xf, float *wf,
                                  float *bf, float *rf, float *rmf, float *rvf)
{
    int64_t xs[1] = {f->n * f->c * f->hw}, cs[1] = {f->c};
    return (bn_tensors){env_tensor(e, "x", DTYPE_FLOAT32, 1, xs, xf),
                        env_tensor(e, "w", DTYPE_FLOAT32, 1, cs, wf),
                        env_tensor(e, "b", DTYPE_FLOAT32, 1, cs, bf),
                        env_tensor(e, "dy", DTYPE_FLOAT32, 1, xs, rf),
                        env_tensor(e, "rm", DTYPE_FLOAT32, 1, cs, rmf),
                        env_tensor(e, "rv", DTYPE_FLOAT32, 1, cs, rvf),
                        env_zeros(e, "mean", DTYPE_FLOAT32, 1, cs),
                        env_zeros(e, "invstd", DTYPE_FLOAT32, 1, cs),
                        env_zeros(e, "y", DTYPE_FLOAT32, 1, xs),
                        env_zeros(e, "dx", DTYPE_FLOAT32, 1, xs),
                        env_zeros(e, "dw", DTYPE_FLOAT32, 1, cs)};
}

static void check_bn_fd(const bn_layout *f, uint64_t seed)
{
    int64_t n = f->n * f->c * f->hw;
    cr_assert_leq(n, MAXN);
    rng gen;
    rng_seed(&gen, seed);
    static float xf[MAXN], wf[MAXN], bf[MAXN], rf[MAXN], rmf[MAXN], rvf[MAXN];
    static double x[MAXN], w[MAXN], b[MAXN], want[MAXN];
    for (int64_t i = 0; i < n; i++) {
        xf[i] = (float)(2 * rng_normal(&gen) - 0.4), rf[i] = (float)rng_normal(&gen);
        x[i] = xf[i];
    }
    for (int64_t c = 0; c < f->c; c++) {
        wf[c] = (float)(1 + 0.5 * rng_normal(&gen)), bf[c] = (float)(0.5 * rng_normal(&gen));
        w[c] = wf[c], b[c] = bf[c];
        rmf[c] = (float)(0.1 * c), rvf[c] = (float)(1 + 0.25 * c);
    }
    norm_geom g = {f->n, f->c, 1, f->hw, 1e-5f, NORM_CENTERED};
    test_env e;
    env_open(&e);
    int64_t cs[1] = {f->c};
    bn_tensors t = bn_tensors_make(&e, f, xf, wf, bf, rf, rmf, rvf);
    tensor *tx = t.x, *tw = t.w, *tb = t.b, *dy = t.dy, *rm = t.rm, *rv = t.rv;
    tensor *mean = t.mean, *invstd = t.invstd, *y = t.y;
    cr_assert_eq(e.be->batch_norm_stats(e.be, &g, tx, 0.1f, mean, invstd, rm, rv, NULL, NULL), 0);
    cr_assert_eq(e.be->batch_norm_forward(e.be, &g, tx, mean, invstd, tw, tb, y, NULL), 0);
    bn_loss(f, x, w, b, rf, want);
    expect_near("y", y, want, 1e-5, 1e-5);
    /* running stats: 0.9 r + 0.1 s, with the unbiased variance */
    double count = (double)(f->n * f->hw);
    for (int64_t c = 0; c < f->c; c++) {
        double m = 0, v = 0;
        for (int64_t s = 0; s < f->n; s++)
            for (int64_t i = 0; i < f->hw; i++)
                m += x[(s * f->c + c) * f->hw + i];
        m /= count;
        for (int64_t s = 0; s < f->n; s++)
            for (int64_t i = 0; i < f->hw; i++)
                v += pow(x[(s * f->c + c) * f->hw + i] - m, 2);
        double want_m = 0.9 * rmf[c] + 0.1 * m, want_v = 0.9 * rvf[c] + 0.1 * v / (count - 1);
        cr_expect(fabs(tensor_at(rm, c) - want_m) <= 1e-5 * (1 + fabs(want_m)),
                  "running_mean[%lld]", (long long)c);
        cr_expect(fabs(tensor_at(rv, c) - want_v) <= 1e-5 * (1 + fabs(want_v)), "running_var[%lld]",
                  (long long)c);
    }
    tensor *dx = t.dx, *dw = t.dw, *db = env_zeros(&e, "db", DTYPE_FLOAT32, 1, cs);
    cr_assert_eq(e.be->batch_norm_backward_input(e.be, &g, dy, tx, mean, invstd, tw, dx, NULL), 0);
    cr_assert_eq(e.be->batch_norm_backward_weight(e.be, &g, dy, tx, mean, invstd, dw, NULL), 0);
    cr_assert_eq(reduce_channel_sum(e.be, dy, f->n, f->hw, db, NULL), 0);
    bn_fd(f, x, n, x, w, b, rf, want);
    expect_near("dx", dx, want, 2e-4, 2e-5);
    bn_fd(f, w, f->c, x, w, b, rf, want);
    expect_near("dw", dw, want, 1e-4, 1e-5);
    bn_fd(f, b, f->c, x, w, b, rf, want);
    expect_near("db", db, want, 1e-4, 1e-5);
    env_close(&e);
}

Test(norm, batch_norm_backward_matches_finite_differences)
{
    /* [N, C, HW]: 4 x 3 x 6, 2 x 5 x 1 (HW 1: N values per channel), 1 x 2 x 30, 3 x 4 x 9 */
    check_bn_fd(&(bn_layout){4, 3, 6}, 9);
    check_bn_fd(&(bn_layout){2, 5, 1}, 10);
    check_bn_fd(&(bn_layout){1, 2, 30}, 11);
    check_bn_fd(&(bn_layout){3, 4, 9}, 12);
}

/* eval mode: y = (x - rm[c]) / sqrt(rv[c] + eps) * w[c] + b[c], linear in x, w and b; the
 * gradients of L = sum(R * y) by float64 finite differences of that formula */
static double bn_eval_loss(const bn_layout *f, const double *x, const double *w, const double *b,
                           const float *rm, const float *rv, const float *r)
{
    double L = 0;
    for (int64_t n = 0; n < f->n; n++)
        for (int64_t c = 0; c < f->c; c++)
            for (int64_t i = 0; i < f->hw; i++) {
                int64_t at = (n * f->c + c) * f->hw + i;
                L += r[at] * ((x[at] - rm[c]) / sqrt((double)rv[c] + 1e-5) * w[c] + b[c]);
            }
    return L;
}

static void expect_bn_eval_fd(const char *what, const tensor *got, double *v, int64_t n,
                              const bn_layout *f, const double *x, const double *w,
                              const double *b, const float *rm, const float *rv, const float *r)
{
    for (int64_t j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + FD_H;
        double up = bn_eval_loss(f, x, w, b, rm, rv, r);
        v[j] = keep - FD_H;
        double down = bn_eval_loss(f, x, w, b, rm, rv, r);
        v[j] = keep;
        double want = (up - down) / (2 * FD_H), g = tensor_at(got, j);
        cr_expect(fabs(g - want) <= 1e-4 * (1 + fabs(want)), "%s[%lld]: %g, differences %g", what,
                  (long long)j, g, want);
    }
}

Test(norm, batch_norm_eval_backward_matches_finite_differences)
{
    bn_layout f = {3, 4, 5};
    int64_t n = f.n * f.c * f.hw;
    rng gen;
    rng_seed(&gen, 31);
    static float xf[MAXN], rf[MAXN], wf[8], bf[8], rmf[8], rvf[8];
    static double x[MAXN], w[8], b[8];
    for (int64_t i = 0; i < n; i++) {
        xf[i] = (float)(2 * rng_normal(&gen) + 0.3), rf[i] = (float)rng_normal(&gen);
        x[i] = xf[i];
    }
    for (int64_t c = 0; c < f.c; c++) {
        wf[c] = (float)(1 + 0.5 * rng_normal(&gen)), bf[c] = (float)(0.5 * rng_normal(&gen));
        w[c] = wf[c], b[c] = bf[c];
        rmf[c] = (float)(0.3 * rng_normal(&gen)), rvf[c] = (float)(0.5 + 0.4 * c);
    }
    norm_geom g = {f.n, f.c, 1, f.hw, 1e-5f, NORM_CENTERED};
    test_env e;
    env_open(&e);
    bn_tensors t = bn_tensors_make(&e, &f, xf, wf, bf, rf, rmf, rvf);
    tensor *tx = t.x, *tw = t.w, *tb = t.b, *dy = t.dy, *rm = t.rm, *rv = t.rv;
    tensor *mean = t.mean, *invstd = t.invstd, *y = t.y, *dx = t.dx, *dw = t.dw;
    cr_assert_eq(e.be->batch_norm_eval_stats(e.be, &g, rm, rv, mean, invstd), 0);
    cr_assert_eq(e.be->batch_norm_forward(e.be, &g, tx, mean, invstd, tw, tb, y, NULL), 0);
    cr_assert_eq(e.be->batch_norm_backward_eval_input(e.be, &g, dy, invstd, tw, dx, NULL), 0);
    cr_assert_eq(e.be->batch_norm_backward_weight(e.be, &g, dy, tx, mean, invstd, dw, NULL), 0);
    for (int64_t c = 0; c < f.c; c++) /* the running stats are read, not updated */
        cr_expect(tensor_at(rm, c) == rmf[c] && tensor_at(rv, c) == rvf[c], "running stats %lld",
                  (long long)c);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = i / f.hw % f.c;
        double want = (x[i] - rmf[c]) / sqrt((double)rvf[c] + 1e-5) * w[c] + b[c];
        cr_expect(fabs(tensor_at(y, i) - want) <= 1e-5 * (1 + fabs(want)), "y[%lld]",
                  (long long)i);
    }
    expect_bn_eval_fd("dx", dx, x, n, &f, x, w, b, rmf, rvf, rf);
    expect_bn_eval_fd("dw", dw, w, f.c, &f, x, w, b, rmf, rvf, rf);
    env_close(&e);
}

/* ---- PyTorch's values ---- */

typedef struct ref_config {
    const char *name;
    norm_form form;
    int64_t groups; /* group_norm; 0: layer_norm over the last dim */
    dtype in, run;  /* the stored input's dtype, the op's dtype (after autocast's cast) */
} ref_config;

static const ref_config ref_configs[] = {
    {"layer_norm-f32-6x10", NORM_CENTERED, 0, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"layer_norm-f32-2x3x33", NORM_CENTERED, 0, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"layer_norm-f16-autocast", NORM_CENTERED, 0, DTYPE_FLOAT16, DTYPE_FLOAT32},
    {"layer_norm-f16-half", NORM_CENTERED, 0, DTYPE_FLOAT16, DTYPE_FLOAT16},
    {"layer_norm-bf16-half", NORM_CENTERED, 0, DTYPE_BFLOAT16, DTYPE_BFLOAT16},
    {"group_norm-f32-2x6x4x5", NORM_FUSED, 3, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"group_norm-f32-3x4x7", NORM_FUSED, 2, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"group_norm-f32-4x6", NORM_FUSED, 2, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"group_norm-f16-autocast", NORM_FUSED, 4, DTYPE_FLOAT16, DTYPE_FLOAT32},
    {"rms_norm-f32-6x16", NORM_RMS, 0, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"rms_norm-f32-2x3x36", NORM_RMS, 0, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {"rms_norm-f16-autocast", NORM_RMS, 0, DTYPE_FLOAT16, DTYPE_FLOAT32},
    {"rms_norm-f16-half", NORM_RMS, 0, DTYPE_FLOAT16, DTYPE_FLOAT16},
    {"rms_norm-bf16-half", NORM_RMS, 0, DTYPE_BFLOAT16, DTYPE_BFLOAT16},
};

/* batch_norm's: the input's dtype, the parameters' and running stats', the mode */
typedef struct bn_ref_config {
    const char *name;
    dtype x, par;
    bool training;
} bn_ref_config;

static const bn_ref_config bn_ref_configs[] = {
    {"batch_norm-f32-4x3x5x5", DTYPE_FLOAT32, DTYPE_FLOAT32, true},
    {"batch_norm-f32-2x6x3x7", DTYPE_FLOAT32, DTYPE_FLOAT32, true},
    {"batch_norm-f16-mixed", DTYPE_FLOAT16, DTYPE_FLOAT32, true},
    {"batch_norm-f16-half", DTYPE_FLOAT16, DTYPE_FLOAT16, true},
    {"batch_norm-bf16-half", DTYPE_BFLOAT16, DTYPE_BFLOAT16, true},
    {"batch_norm_eval-f32-4x3x5x5", DTYPE_FLOAT32, DTYPE_FLOAT32, false},
    {"batch_norm_eval-f32-1x6x1x1", DTYPE_FLOAT32, DTYPE_FLOAT32, false},
    {"batch_norm_eval-f16-mixed", DTYPE_FLOAT16, DTYPE_FLOAT32, false},
    {"batch_norm_eval-bf16-half", DTYPE_BFLOAT16, DTYPE_BFLOAT16, false},
};

static npy_array ref_read(const char *cfg, const char *t)
{
    char path[PATH_MAX], err[512];
    snprintf(path, sizeof path, "tests/references/norm/%s.%s.npy", cfg, t);
    npy_array a;
    cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32, "%s", path);
    return a;
}

static tensor *ref_tensor(test_env *e, const char *cfg, const char *t, dtype dt)
{
    npy_array a = ref_read(cfg, t);
    tensor *r = env_tensor(e, t, dt, a.ndim, a.shape, a.data);
    for (int64_t i = 0; i < a.numel; i++) /* the file's values are already in dt */
        cr_assert_eq(tensor_at(r, i), ((float *)a.data)[i], "%s.%s[%lld]", cfg, t, (long long)i);
    npy_free(&a);
    return r;
}

/* got within a few float32 ulps of PyTorch's value, or one ulp of a half dtype (PyTorch's
 * CPU kernels sum in another order, so a half result may round the other way) */
static void expect_ref(const char *cfg, const char *t, const tensor *got)
{
    npy_array a = ref_read(cfg, t);
    cr_assert_eq(a.numel, got->numel, "%s.%s", cfg, t);
    const float *want = a.data;
    double amax = 0;
    for (int64_t i = 0; i < a.numel; i++)
        amax = fmax(amax, fabs(want[i]));
    double rel = got->dtype == DTYPE_FLOAT16    ? 0x1p-10
                 : got->dtype == DTYPE_BFLOAT16 ? 0x1p-7
                                                : 1e-5;
    for (int64_t i = 0; i < a.numel; i++) {
        double g = tensor_at(got, i), w = want[i];
        cr_expect(fabs(g - w) <= rel * fabs(w) + 1e-6 * amax, "%s.%s[%lld]: %.8g, PyTorch %.8g",
                  cfg, t, (long long)i, g, w);
    }
    npy_free(&a);
}

Test(norm, values_match_pytorch)
{
    for (size_t k = 0; k < sizeof ref_configs / sizeof ref_configs[0]; k++) {
        const ref_config *rc = &ref_configs[k];
        test_env e;
        env_open(&e);
        dtype par = rc->in == rc->run ? rc->run : DTYPE_FLOAT32;
        tensor *x = ref_tensor(&e, rc->name, "x", rc->in);
        bool rms = rc->form == NORM_RMS; /* no bias, no mean, eps None: float32's */
        tensor *w = ref_tensor(&e, rc->name, "w", par);
        tensor *b = rms ? NULL : ref_tensor(&e, rc->name, "b", par);
        tensor *dy = ref_tensor(&e, rc->name, "dy", rc->run);
        tensor *xr = env_zeros(&e, "xr", rc->run, x->ndim, x->shape); /* autocast's cast */
        cr_assert_eq(e.be->cast(e.be, x, xr, NULL), 0);
        norm_geom g = {.eps = rms ? 0x1p-23f : 1e-5f, .form = rc->form};
        if (rc->groups == 0) {
            g.cpg = x->shape[x->ndim - 1];
            g.n = x->numel / g.cpg, g.groups = 1, g.inner = 1;
        } else {
            g.n = x->shape[0], g.groups = rc->groups, g.cpg = x->shape[1] / rc->groups;
            g.inner = x->numel / (x->shape[0] * x->shape[1]);
        }
        int64_t rows = g.n * g.groups;
        dtype sdt = rc->groups == 0 ? DTYPE_FLOAT32 : rc->run;
        tensor *y = env_zeros(&e, "y", rc->run, x->ndim, x->shape);
        tensor *dx = env_zeros(&e, "dx", rc->run, x->ndim, x->shape);
        tensor *dw = env_zeros(&e, "dw", par, 1, w->shape);
        tensor *db = env_zeros(&e, "db", par, 1, w->shape);
        tensor *mean = rms ? NULL : env_zeros(&e, "mean", sdt, 1, &rows);
        tensor *rstd = env_zeros(&e, "rstd", sdt, 1, &rows);
        cr_assert_eq(e.be->norm_forward(e.be, &g, xr, w, b, y, mean, rstd, NULL), 0);
        cr_assert_eq(e.be->norm_backward_input(e.be, &g, dy, xr, mean, rstd, w, dx, NULL), 0);
        cr_assert_eq(e.be->norm_backward_weight(e.be, &g, dy, xr, mean, rstd, dw, NULL), 0);
        cr_assert_eq(reduce_channel_sum(e.be, dy, g.n, g.inner, db, NULL), 0);
        expect_ref(rc->name, "y", y);
        expect_ref(rc->name, "dx", dx);
        expect_ref(rc->name, "dw", dw);
        if (!rms)
            expect_ref(rc->name, "db", db);
        env_close(&e);
    }
}

Test(norm, batch_norm_values_match_pytorch)
{
    for (size_t k = 0; k < sizeof bn_ref_configs / sizeof bn_ref_configs[0]; k++) {
        const bn_ref_config *rc = &bn_ref_configs[k];
        test_env e;
        env_open(&e);
        tensor *x = ref_tensor(&e, rc->name, "x", rc->x);
        tensor *w = ref_tensor(&e, rc->name, "w", rc->par);
        tensor *b = ref_tensor(&e, rc->name, "b", rc->par);
        tensor *dy = ref_tensor(&e, rc->name, "dy", rc->x);
        tensor *rm = ref_tensor(&e, rc->name, "rm0", rc->par);
        tensor *rv = ref_tensor(&e, rc->name, "rv0", rc->par);
        norm_geom g = {x->shape[0], x->shape[1],  1, x->shape[2] * x->shape[3],
                       1e-5f,       NORM_CENTERED};
        tensor *mean = env_zeros(&e, "mean", DTYPE_FLOAT32, 1, &g.groups);
        tensor *invstd = env_zeros(&e, "invstd", DTYPE_FLOAT32, 1, &g.groups);
        tensor *y = env_zeros(&e, "y", rc->x, x->ndim, x->shape);
        tensor *dx = env_zeros(&e, "dx", rc->x, x->ndim, x->shape);
        tensor *dw = env_zeros(&e, "dw", rc->par, 1, &g.groups);
        tensor *db = env_zeros(&e, "db", rc->par, 1, &g.groups);
        if (rc->training)
            cr_assert_eq(
                e.be->batch_norm_stats(e.be, &g, x, 0.1f, mean, invstd, rm, rv, NULL, NULL), 0);
        else
            cr_assert_eq(e.be->batch_norm_eval_stats(e.be, &g, rm, rv, mean, invstd), 0);
        cr_assert_eq(e.be->batch_norm_forward(e.be, &g, x, mean, invstd, w, b, y, NULL), 0);
        if (rc->training)
            cr_assert_eq(
                e.be->batch_norm_backward_input(e.be, &g, dy, x, mean, invstd, w, dx, NULL), 0);
        else
            cr_assert_eq(e.be->batch_norm_backward_eval_input(e.be, &g, dy, invstd, w, dx, NULL),
                         0);
        cr_assert_eq(e.be->batch_norm_backward_weight(e.be, &g, dy, x, mean, invstd, dw, NULL), 0);
        cr_assert_eq(reduce_channel_sum(e.be, dy, g.n, g.inner, db, NULL), 0);
        expect_ref(rc->name, "y", y);
        expect_ref(rc->name, "rm", rm);
        expect_ref(rc->name, "rv", rv);
        expect_ref(rc->name, "dx", dx);
        expect_ref(rc->name, "dw", dw);
        expect_ref(rc->name, "db", db);
        env_close(&e);
    }
}

/* ---- eps, a real option ---- */

static char tmp_dir[64];

static const char *write_case(const char *text)
{
    static char path[PATH_MAX];
    write_file(tmp_dir, "t.case", text, path, sizeof path);
    return path;
}

#define LN_CASE(opts) "[model]\nfc = linear 8 -> 8\nln = layer_norm 8" opts "\n[data]\nbatch = 2\n"

Test(norm, layer_norm_eps_option)
{
    make_temp_dir(tmp_dir, sizeof tmp_dir);
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(write_case(LN_CASE("")), NULL, 0, cfg, &errs), 0);
    cr_expect_eq(cfg->layers[1].opt_real[0], 1e-5, "default eps %g", cfg->layers[1].opt_real[0]);
    cr_expect(cfg->layers[1].opt_bool[0] && cfg->layers[1].bias);

    cr_assert_eq(case_load(write_case(LN_CASE(" eps=0.001 bias=no")), NULL, 0, cfg, &errs), 0);
    cr_expect_eq(cfg->layers[1].opt_real[0], 0.001);
    cr_expect(!cfg->layers[1].bias);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(case_write_json(cfg, f), 0);
    cr_assert_eq(fclose(f), 0);
    const char *want = "{\"name\": \"ln\", \"kind\": \"layer_norm\", \"line\": 3, "
                       "\"normalized_shape\": 8, \"eps\": 0.001, \"elementwise_affine\": true, "
                       "\"bias\": false, \"inputs\": [\"fc\"], \"weight_of\": null, "
                       "\"out_shape\": [8]}";
    cr_expect_not_null(strstr(buf, want), "missing %s in\n%s", want, buf);
    free(buf);

    static const char *const bad[][2] = {
        {" eps=0", "t.case:3: bad number '0' for eps: must be > 0"},
        {" eps=-1e-5", "t.case:3: bad number '-1e-5' for eps: must be > 0"},
        {" eps=tiny", "t.case:3: bad number 'tiny' for eps: expected a number"},
        {" eps=1e999", "t.case:3: bad number '1e999' for eps: must be a finite number"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, LN_CASE("%s"), bad[i][0]);
        err_list_free(&errs);
        cr_assert_gt(case_load(write_case(text), NULL, 0, cfg, &errs), 0, "%s", bad[i][0]);
        cr_expect_not_null(strstr(errs.msgs[0], bad[i][1]), "%s: got %s", bad[i][0], errs.msgs[0]);
    }
    err_list_free(&errs);
    free(cfg);
    rm_rf(tmp_dir);
}

Test(norm, shapes_are_checked)
{
    make_temp_dir(tmp_dir, sizeof tmp_dir);
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    err_list errs = {0};
    cr_assert_gt(case_load(write_case("[model]\nfc = linear 8 -> 6\nln = layer_norm 8\n"
                                      "[data]\nbatch = 2\n"),
                           NULL, 0, cfg, &errs),
                 0);
    cr_expect_not_null(strstr(errs.msgs[0], "t.case:3:"), "%s", errs.msgs[0]);
    cr_expect_not_null(strstr(errs.msgs[0], "layer_norm 8 normalizes a last dim of 8"), "%s",
                       errs.msgs[0]);
    err_list_free(&errs);
    /* group_norm: channels first, divisible into the groups */
    cr_assert_eq(
        case_load(
            write_case("[model]\nc = conv2d 3 -> 8 kernel=3\ngn = group_norm 4 8\n"
                       "[data]\nbatch = 2\nshape = 3x8x8\ntarget = randn\n[train]\nloss = mse\n"),
            NULL, 0, cfg, &errs),
        0);
    cr_expect(cfg->layers[1].opt_int[0] == 4 && cfg->layers[1].in == 8);
    cr_expect_eq(cfg->layers[1].out_ndim, 3);
    static const char *const bad[][2] = {
        {"gn = group_norm 3 8", "t.case:3: gn = group_norm 3 8: num_channels must be divisible "
                                "by num_groups"},
        {"gn = group_norm 2 6", "t.case:3: gn = group_norm 2 6: input has shape 8x6x6; "
                                "group_norm needs 6 channels first"},
        {"gn = group_norm 0 8", "t.case:3: bad number '0' for num_groups"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "[model]\nc = conv2d 3 -> 8 kernel=3\n%s\n"
                 "[data]\nbatch = 2\nshape = 3x8x8\ntarget = randn\n[train]\nloss = mse\n",
                 bad[i][0]);
        err_list_free(&errs);
        cr_assert_gt(case_load(write_case(text), NULL, 0, cfg, &errs), 0, "%s", bad[i][0]);
        cr_expect_not_null(strstr(errs.msgs[0], bad[i][1]), "%s: got %s", bad[i][0], errs.msgs[0]);
    }
    err_list_free(&errs);
    free(cfg);
    rm_rf(tmp_dir);
}

/* ---- the cases ---- */

Test(norm, cases_hold_their_expectations)
{
    static const char *const cases[] = {"tests/cases/small-layer-norm.case",
                                        "tests/cases/small-group-norm.case",
                                        "tests/cases/small-batch-norm.case"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        make_temp_dir(out, sizeof out);
        case_result res;
        run_case_file(cases[i], out, &res, NULL);
        cr_expect(res.ok, "%s: %s", cases[i], res.error);
        cr_expect(res.passed && res.expect_total > 0, "%s: %d/%d held\n%s", cases[i],
                  res.expect_passed, res.expect_total, res.failures);
        rm_rf(out);
    }
}

/* batch_norm2d 3 OPTS on one value per channel (batch 1, 3x1x1): the run's result */
static void run_one_value_per_channel(const char *opts, case_result *res)
{
    make_temp_dir(tmp_dir, sizeof tmp_dir);
    char path[PATH_MAX], out[64], text[256];
    snprintf(text, sizeof text,
             "[model]\nbn = batch_norm2d 3%s\nflat = flatten\nfc = linear 3 -> 2\n"
             "[data]\nbatch = 1\nshape = 3x1x1\ntarget = classes\n",
             opts);
    write_file(tmp_dir, "one.case", text, path, sizeof path);
    make_temp_dir(out, sizeof out);
    run_case_file(path, out, res, NULL);
    rm_rf(out);
    rm_rf(tmp_dir);
}

Test(norm, batch_norm_needs_more_than_one_value_per_channel)
{
    case_result res;
    run_one_value_per_channel("", &res);
    cr_expect(!res.ok);
    cr_expect_not_null(strstr(res.error, "Expected more than 1 value per channel when training, "
                                         "got input size torch.Size([1, 3, 1, 1])"),
                       "%s", res.error);
}

/* eval mode verifies no batch size (F.batch_norm calls _verify_batch_size only when
 * training): one value per channel runs */
Test(norm, batch_norm_eval_takes_one_value_per_channel)
{
    case_result res;
    run_one_value_per_channel(" training=no", &res);
    cr_expect(res.ok, "%s", res.error);
}

/* ---- saved for backward, against saved_tensors_hooks ---- */

/* what each case (tests/references/norm/saved_bytes.csv, float32) keeps for backward:
 * PyTorch's count, less the 4 bytes of nll_loss's float32 total_weight, which the harness
 * does not count (the 1% of tests/test_memory.c would hide a norm's mean or rstd) */
Test(norm, saved_for_backward_matches_pytorch)
{
    csv ref;
    cr_assert(csv_read("tests/references/norm/saved_bytes.csv", &ref));
    cr_assert_geq(ref.n_rows, 4);
    for (int i = 0; i < ref.n_rows; i++) {
        const char *case_file = ref.rows[i][csv_col(&ref, "case")];
        const char *sets[1] = {ref.rows[i][csv_col(&ref, "sets")]};
        long long want = atoll(ref.rows[i][csv_col(&ref, "saved_bytes")]);
        char out[64], path[PATH_MAX];
        make_temp_dir(out, sizeof out);
        train_options opt = {.quiet = true, .observe_off = true};
        case_result res;
        run_case_file_set(case_file, sets, 1, out, &res, &opt);
        cr_assert(res.ok, "%s: %s", case_file, res.error);
        snprintf(path, sizeof path, "%s/%s/memory.csv", out, res.name);
        csv mem;
        cr_assert(csv_read(path, &mem));
        char **row = csv_find(&mem, "category", "saved_for_backward", NULL, NULL, NULL, NULL);
        cr_assert_not_null(row);
        long long got = atoll(row[csv_col(&mem, "peak_bytes")]);
        cr_expect_eq(got + 4, want, "%s: harness keeps %lld bytes for backward, PyTorch %lld",
                     case_file, got, want);
        csv_free(&mem);
        rm_rf(out);
    }
    csv_free(&ref);
}
