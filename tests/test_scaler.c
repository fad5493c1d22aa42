/*
 * test_scaler.c: the GradScaler's update rule over a scripted sequence of inf and finite
 * steps (the expected scales worked out by hand from torch/amp/grad_scaler.py's rule), and
 * unscale_'s inf/NaN check and multiply on the CPU backend.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "train/scaler.h"
#include "helpers.h"

Test(scaler, update_grows_after_interval_and_backs_off_on_inf)
{
    grad_scaler s = {.enabled = true,
                     .scale = 8.0f,
                     .growth_factor = 2.0,
                     .backoff_factor = 0.5,
                     .growth_interval = 3};
    /* step: found_inf, then the scale and tracker after update() */
    static const struct {
        int inf;
        float scale;
        int tracker;
    } script[] = {
        {0, 8, 1}, {0, 8, 2}, {0, 16, 0}, /* third success in a row: 8 * 2 */
        {1, 8, 0},                        /* inf: 16 * 0.5, tracker reset */
        {0, 8, 1}, {1, 4, 0},             /* an inf breaks the run of successes */
        {0, 4, 1}, {0, 4, 2}, {0, 8, 0},  {1, 4, 0}, {1, 2, 0}, {1, 1, 0}, /* repeated backoff */
    };
    for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
        scaler_update(&s, script[i].inf);
        cr_expect_eq(s.scale, script[i].scale, "step %zu: scale %g, expected %g", i,
                     (double)s.scale, (double)script[i].scale);
        cr_expect_eq(s.growth_tracker, script[i].tracker, "step %zu: tracker", i);
    }
}

Test(scaler, growth_to_inf_is_not_applied)
{
    /* 2^127 * 4 = 2^129 is not a finite float32: the scale stays, the tracker resets */
    grad_scaler s = {.enabled = true,
                     .scale = ldexpf(1, 127),
                     .growth_factor = 4.0,
                     .backoff_factor = 0.5,
                     .growth_interval = 1};
    scaler_update(&s, 0);
    cr_expect_eq(s.scale, ldexpf(1, 127));
    cr_expect_eq(s.growth_tracker, 0);
}

Test(scaler, unscale_multiplies_by_the_float32_reciprocal_and_finds_inf)
{
    test_env e;
    env_open(&e);
    int64_t n = 4;
    float v[4] = {65536.0f, 3.0f, -1024.0f, 0.0f};
    tensor *g = env_tensor(&e, "g", DTYPE_FLOAT32, 1, &n, v);
    int found = 0;
    /* inv_scale = float32(1 / float64(65536)) = 2^-16 */
    cr_assert_eq(e.be->unscale(e.be, g, (float)(1.0 / 65536.0), &found, NULL), 0);
    cr_expect_eq(found, 0);
    cr_expect_eq(tensor_at(g, 0), 1.0f);
    cr_expect_eq(tensor_at(g, 1), 3.0f / 65536.0f);
    cr_expect_eq(tensor_at(g, 2), -1.0f / 64.0f);
    float w[4] = {1.0f, INFINITY, 2.0f, NAN};
    tensor *h = env_tensor(&e, "h", DTYPE_FLOAT16, 1, &n, w);
    cr_assert_eq(e.be->unscale(e.be, h, 0.5f, &found, NULL), 0);
    cr_expect_eq(found, 1);
    cr_expect_eq(tensor_at(h, 0), 0.5f);
    cr_expect(isinf(tensor_at(h, 1)));
    env_close(&e);
}

Test(scaler, half_gradients_are_refused_as_pytorch_refuses_them)
{
    char out[256];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-half-autocast-scaler.case", out, &res, NULL);
    cr_expect(!res.ok);
    cr_expect_str_eq(res.error, "ValueError: Attempting to unscale FP16 gradients.");
    rm_rf(out);
}
