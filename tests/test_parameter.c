/*
 * test_parameter.c: a `parameter` layer's initial values, as torch.nn.init draws them, from
 * the values `ampscope run --dump` writes: ones_ and zeros_ exactly; normal_(mean, std) and
 * trunc_normal_(mean 0, std, a=-2, b=2) by their moments over 16384 draws against the
 * distributions' own (the truncated normal's variance by its closed form,
 * std^2 (1 - 2 beta phi(beta) / (2 Phi(beta) - 1)) with beta = 2 / std), and every
 * truncated value in [-2, 2].
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "core/npy.h"
#include "helpers.h"

#define N 16384

/* the dumped initial values of DIR's parameter NAME.weight: mean and variance, min, max */
static void moments(const char *dir, const char *name, double *mean, double *var, double *lo,
                    double *hi)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/dump/init/%s.weight.npy", dir, name);
    npy_array a;
    cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.numel, N, "%s: %lld values", path, (long long)a.numel);
    double s = 0, s2 = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int64_t i = 0; i < a.numel; i++) {
        double v = load_as_float(a.data, a.dt, i);
        s += v;
        s2 += v * v;
        *lo = fmin(*lo, v);
        *hi = fmax(*hi, v);
    }
    *mean = s / N;
    *var = s2 / N - *mean * *mean;
    npy_free(&a);
}

Test(parameter, initial_values_follow_torch_nn_init_s_distributions, .timeout = 120)
{
    char dir[256], path[512], out[4096], cmd[2048];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "p.case",
               "[model]\n"
               "x  = linear 4 -> 4\n"
               "po = parameter 128 128 init=ones\n"
               "pz = parameter 128 128 init=zeros\n"
               "pn = parameter 128 128 init=normal mean=3 std=0.5\n"
               "pt = parameter 128 128 init=trunc_normal std=1.5\n"
               "y  = mul x 1.0\n"
               "[data]\nbatch = 2\nshape = 4\ntarget = randn\n"
               "[train]\nloss = mse\nsteps = 1\n",
               path, sizeof path);
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(cmd, sizeof cmd, "%s run %s --device cpu --quiet --out %s/out --dump %s/dump 2>&1",
             bin, path, dir, dir);
    cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s", out);
    double mean, var, lo, hi;
    moments(dir, "po", &mean, &var, &lo, &hi);
    cr_expect(lo == 1.0 && hi == 1.0, "ones_: values in [%g, %g]", lo, hi);
    moments(dir, "pz", &mean, &var, &lo, &hi);
    cr_expect(lo == 0.0 && hi == 0.0, "zeros_: values in [%g, %g]", lo, hi);
    /* normal_(3, 0.5): the sample mean within 5 standard errors, the variance within 5% */
    moments(dir, "pn", &mean, &var, &lo, &hi);
    cr_expect(fabs(mean - 3.0) < 5 * 0.5 / sqrt(N), "normal_: mean %g", mean);
    cr_expect(fabs(var / 0.25 - 1) < 0.05, "normal_: variance %g, not 0.25", var);
    /* trunc_normal_(0, 1.5, -2, 2) */
    moments(dir, "pt", &mean, &var, &lo, &hi);
    double beta = 2.0 / 1.5, phi = exp(-beta * beta / 2) / sqrt(2 * M_PI);
    double want = 1.5 * 1.5 * (1 - 2 * beta * phi / erf(beta / sqrt(2.0)));
    cr_expect(lo >= -2.0 && hi <= 2.0, "trunc_normal_: values in [%g, %g]", lo, hi);
    cr_expect(fabs(mean) < 5 * sqrt(want / N), "trunc_normal_: mean %g", mean);
    cr_expect(fabs(var / want - 1) < 0.05, "trunc_normal_: variance %g, not %g", var, want);
    rm_rf(dir);
}
