/*
 * test_clip.c: clip_grad_norm_ and clip_grad_value_ (harness/train/clip.c) against PyTorch's on
 * the same gradients: tests/references/clip_grad.txt, written by tools/clip_reference.py
 * (its header gives the command and the format). The total norm and every clipped value
 * must equal PyTorch's: exactly where they are float16 or bfloat16, and within 8 units of
 * float32's last place (relative 2^-20) where float32, as PyTorch sums (and, for a p-norm
 * other than 1, 2 and inf, raises to the power p) in float32 in its own order and clip.c
 * in double: the 3-norm's total, and so its coefficient, differ by a few units there. Also error_if_nonfinite's RuntimeError, and clipping before unscale_ in a run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/clip.h"
#include "helpers.h"

#define REF "tests/references/clip_grad.txt"
#define MAX_GRADS 4

static void run_open(test_env *e, run *r, observer *obs, case_config *cfg)
{
    env_open(e);
    memset(r, 0, sizeof *r);
    memset(obs, 0, sizeof *obs);
    obs->be = e->be;
    r->cfg = cfg;
    r->be = e->be;
    r->obs = obs;
    r->counting = true;
    r->pool = e->pool;
}

static dtype dtype_of(const char *s)
{
    dtype dt;
    cr_assert(dtype_parse(s, &dt), "dtype %s", s);
    return dt;
}

/* "DTYPE N v..." after the line's first word: the values into v (malloc'd) */
static float *read_values(char *rest, dtype *dt, int64_t *n)
{
    char *save;
    *dt = dtype_of(strtok_r(rest, " \n", &save));
    *n = atoll(strtok_r(NULL, " \n", &save));
    float *v = malloc(sizeof(float) * (size_t)*n);
    for (int64_t i = 0; i < *n; i++)
        v[i] = (float)strtod(strtok_r(NULL, " \n", &save), NULL);
    return v;
}

static bool close_enough(float got, float want, dtype dt)
{
    if (isnan(want))
        return isnan(got);
    if (dt != DTYPE_FLOAT32 || isinf(want))
        return got == want;
    return fabsf(got - want) <= ldexpf(1, -20) * fabsf(want);
}

Test(clip, clip_grad_matches_pytorch)
{
    FILE *f = fopen(REF, "r");
    cr_assert_not_null(f, "cannot read %s", REF);
    char line[1 << 16], name[128] = "", func[16] = "";
    tensor *g[MAX_GRADS];
    int n_grads = 0, n_clipped = 0, sets = 0;
    float total_want = NAN;
    clip_result got = {0};
    test_env e;
    run r;
    observer obs;
    case_config cfg;
    memset(&cfg, 0, sizeof cfg);
    while (fgets(line, sizeof line, f)) {
        char word[16];
        if (line[0] == '#' || sscanf(line, "%15s", word) != 1)
            continue;
        char *rest = line + strlen(word) + 1;
        if (strcmp(word, "set") == 0) {
            char arg[64], norm[16];
            cr_assert_eq(sscanf(rest, "%127s %15s %63s %15s", name, func, arg, norm), 4);
            memset(&cfg, 0, sizeof cfg);
            double a = strtod(arg, NULL);
            if (strcmp(func, "norm") == 0)
                cfg.clip_grad_norm = a;
            else
                cfg.clip_grad_value = a;
            cfg.norm_type = strcmp(norm, "inf") == 0 ? INFINITY : strtod(norm, NULL);
            run_open(&e, &r, &obs, &cfg);
            n_grads = n_clipped = 0;
        } else if (strcmp(word, "grad") == 0) {
            dtype dt;
            int64_t n;
            float *v = read_values(rest, &dt, &n);
            g[n_grads] = env_tensor(&e, "w.grad", dt, 1, &n, v);
            n_grads++;
            free(v);
        } else if (strcmp(word, "total") == 0) {
            char dt[16], v[64];
            cr_assert_eq(sscanf(rest, "%15s %63s", dt, v), 2);
            total_want = (float)strtod(v, NULL);
            if (setjmp(r.fail))
                cr_assert_fail("%s: %s", name, r.error);
            got = clip_grad_norm(&r, g, n_grads, ROLE_GRAD_PARAM);
            cr_expect(close_enough((float)got.total_norm, total_want, dtype_of(dt)),
                      "%s: total norm %a, PyTorch %a", name, got.total_norm, (double)total_want);
        } else if (strcmp(word, "clipped") == 0) {
            if (strcmp(func, "value") == 0 && n_clipped == 0) {
                if (setjmp(r.fail))
                    cr_assert_fail("%s: %s", name, r.error);
                clip_grad_value(&r, g, n_grads, ROLE_GRAD_PARAM);
            }
            dtype dt;
            int64_t n;
            float *v = read_values(rest, &dt, &n);
            tensor *t = g[n_clipped++];
            cr_assert_eq(t->numel, n);
            int bad = 0;
            for (int64_t i = 0; i < n; i++)
                if (!close_enough(tensor_at(t, i), v[i], dt) && bad++ < 3)
                    cr_expect_fail("%s: gradient %d [%lld] = %a, PyTorch %a", name, n_clipped - 1,
                                   (long long)i, (double)tensor_at(t, i), (double)v[i]);
            free(v);
        } else if (strcmp(word, "end") == 0) {
            cr_expect_eq(n_clipped, n_grads, "%s: every gradient compared", name);
            env_close(&e);
            sets++;
        }
    }
    fclose(f);
    cr_expect_eq(sets, 12, "the reference's 12 sets, got %d", sets);
}

Test(clip, error_if_nonfinite_raises_pytorchs_error)
{
    test_env e;
    run r;
    observer obs;
    case_config cfg = {.clip_grad_norm = 1.0, .norm_type = 2.0, .error_if_nonfinite = true};
    run_open(&e, &r, &obs, &cfg);
    int64_t n = 2;
    float v[2] = {1.0f, INFINITY};
    tensor *g[1] = {env_tensor(&e, "w.grad", DTYPE_FLOAT32, 1, &n, v)};
    if (setjmp(r.fail) == 0) {
        clip_grad_norm(&r, g, 1, ROLE_GRAD_PARAM);
        cr_expect_fail("a non-finite total norm did not raise");
    } else { /* torch/nn/utils/clip_grad.py's text */
        cr_expect(strstr(r.error, "RuntimeError: The total norm of order 2.0 for gradients from "
                                  "`parameters` is non-finite, so it cannot be clipped.") == r.error,
                  "%s", r.error);
    }
    env_close(&e);
}

static double steps_value(const char *out, const char *name, const char *col)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    double v = strtod(c.rows[0][csv_col(&c, col)], NULL);
    csv_free(&c);
    return v;
}

/* step 0 of the two clipping cases has the same gradients: clipped before unscale_ their
 * norm is the loss scale (65536) times the true one, and so is the coefficient smaller */
Test(clip, before_unscale_sees_the_scaled_norm, .timeout = 120)
{
    char dir[256];
    make_temp_dir(dir, sizeof dir);
    const char *sets[] = {"train.steps=1"};
    case_result res;
    run_case_file_set("cases/clip-after-unscale.case", sets, 1, dir, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    run_case_file_set("cases/clip-before-unscale.case", sets, 1, dir, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    double after = steps_value(dir, "clip-after-unscale", "total_norm");
    double before = steps_value(dir, "clip-before-unscale", "total_norm");
    double coef_after = steps_value(dir, "clip-after-unscale", "clip_coef");
    double coef_before = steps_value(dir, "clip-before-unscale", "clip_coef");
    cr_expect(after > 1.0, "the case's true norm is above max_norm = 1: %g", after);
    cr_expect(fabs(before / after / 65536.0 - 1.0) < 1e-4, "norms %g before, %g after unscale_",
              before, after);
    cr_expect(fabs(coef_after / (1.0 / (after + 1e-6)) - 1.0) < 1e-6, "coef %g", coef_after);
    cr_expect(fabs(coef_before * 65536.0 / coef_after - 1.0) < 1e-4, "coefs %g, %g", coef_before,
              coef_after);
    rm_rf(dir);
}
