/*
 * test_fp8_recipe.c: the scaling recipes (harness/ops/fp8_recipe.h) against Transformer Engine's
 * rules worked out here step by step: a scripted amax sequence through delayed scaling
 * (history rolled, row 0 zeroed, max and most_recent, margin, a zero, an inf and a NaN amax
 * keeping the previous scale); current scaling's edge values; E8M0 block scales, TE's
 * rounding up against the OCP rule.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>

#include "ops/fp8_recipe.h"

/*
 * History of 3 rows, max, margin 1, E4M3 (448). Each step records its amax into row 0, then
 * updates: amax = max of the rows, scale = 448 / amax / 2, then roll(-1) and row 0 = 0.
 *   step 0: record 2   rows [2,0,0]  amax 2   scale 112    rows after [0,0,2]
 *   step 1: record 4   rows [4,0,2]  amax 4   scale 56     rows after [0,2,4]
 *   step 2: record 1   rows [1,2,4]  amax 4   scale 56     rows after [0,4,1]
 *   (TE's roll then zero drops the value rolled into row 0: 2 is gone)
 *   step 3: record 0.5 rows [.5,4,1] amax 4   scale 56     rows after [0,1,.5]
 *   step 4: record 0   rows [0,1,.5] amax 1   scale 224    rows after [0,.5,0]
 *   step 5: record 0   rows [0,.5,0] amax .5  scale 448    rows after [0,0,0]
 *   step 6: record 0   rows [0,0,0]  amax 0   scale kept 448
 *   step 7: record inf rows [inf,0,0] amax inf scale kept 448
 *   step 8: record 8   rows [8,0,inf] amax inf scale kept 448 (the inf is still in the rows)
 */
Test(fp8_recipe, delayed_scaling_follows_te_step_by_step)
{
    fp8_delayed d;
    cr_assert(fp8_delayed_init(&d, 3, FP8_AMAX_MAX, 1, 448.0f));
    cr_expect_eq(d.scale, 1.0f, "TE's initial scale");
    const float rec[] = {2, 4, 1, 0.5f, 0, 0, 0, INFINITY, 8};
    const float amax[] = {2, 4, 4, 4, 1, 0.5f, 0, INFINITY, INFINITY};
    const float scale[] = {112, 56, 56, 56, 224, 448, 448, 448, 448};
    const float after[][3] = {{0, 0, 2},  {0, 2, 4},    {0, 4, 1}, {0, 1, 0.5f}, {0, 0.5f, 0},
                              {0, 0, 0},  {0, 0, 0},    {0, 0, INFINITY}, {0, INFINITY, 8}};
    for (int s = 0; s < 9; s++) {
        fp8_delayed_record(&d, rec[s]);
        float a = fp8_delayed_update(&d);
        cr_expect_eq(a, amax[s], "step %d amax %g", s, a);
        cr_expect_eq(d.scale, scale[s], "step %d scale %g", s, d.scale);
        cr_expect_eq(d.scale_inv, 1.0f / scale[s], "step %d scale_inv", s);
        for (int r = 0; r < 3; r++)
            cr_expect_eq(d.history[r], after[s][r], "step %d row %d: %g", s, r, d.history[r]);
    }
    fp8_delayed_free(&d);
}

/* most_recent uses row 0 only; a NaN keeps the scale; a record keeps the step's largest */
Test(fp8_recipe, delayed_most_recent_and_nan)
{
    fp8_delayed d;
    cr_assert(fp8_delayed_init(&d, 4, FP8_AMAX_MOST_RECENT, 0, 57344.0f));
    fp8_delayed_record(&d, 1024);
    fp8_delayed_record(&d, 512); /* the step's second quantization: smaller, not kept */
    cr_expect_eq(fp8_delayed_update(&d), 1024);
    cr_expect_eq(d.scale, 56.0f);
    fp8_delayed_record(&d, 2);
    cr_expect_eq(fp8_delayed_update(&d), 2, "not the 1024 still in the rows");
    cr_expect_eq(d.scale, 28672.0f);
    fp8_delayed_record(&d, NAN);
    cr_expect(isnan(fp8_delayed_update(&d)));
    cr_expect_eq(d.scale, 28672.0f, "a NaN amax keeps the scale");
    fp8_delayed_record(&d, 1e-42f); /* a subnormal amax: 57344 / 1e-42 is inf in float32 */
    fp8_delayed_update(&d);
    cr_expect_eq(d.scale, FLT_MAX);
    fp8_delayed_free(&d);
}

Test(fp8_recipe, current_scaling_compute_scale_from_amax)
{
    cr_expect_eq(fp8_scale_from_amax(2.0f, 448.0f, false), 224.0f);
    cr_expect_eq(fp8_scale_from_amax(3.0f, 448.0f, false), 448.0f / 3.0f);
    cr_expect_eq(fp8_scale_from_amax(3.0f, 448.0f, true), 128.0f, "149.33 down to 128");
    cr_expect_eq(fp8_scale_from_amax(0.0f, 448.0f, false), 1.0f);
    cr_expect_eq(fp8_scale_from_amax(INFINITY, 448.0f, false), 1.0f);
    cr_expect_eq(fp8_scale_from_amax(NAN, 448.0f, false), 1.0f);
    cr_expect_eq(fp8_scale_from_amax(1e-42f, 448.0f, false), FLT_MAX);
    cr_expect_eq(fp8_scale_from_amax(1e-42f, 448.0f, true), 0x1p127f, "FLT_MAX's exponent");
}

/*
 * E8M0: TE takes amax / 448 rounded up to a power of two; OCP floor(log2 amax) - 8.
 * amax 448: 1 exactly, 127 in both. amax 449: TE 2 (128), OCP floor(log2 449) = 8, 127.
 * amax 100: TE 100/448 = 0.223 up to 0.25 (125); OCP floor(log2 100) = 6, 6 - 8 = -2 (125).
 * amax 500: TE 1.116 up to 2 (128); OCP 8 - 8 = 0 (127): the OCP scale lets 500 / 1 reach
 * past 448 (it saturates), TE's never does.
 */
Test(fp8_recipe, e8m0_te_rounds_up_ocp_floors)
{
    cr_expect_eq(fp8_e8m0_te(448.0f, 448.0f), 127);
    cr_expect_eq(fp8_e8m0_ocp(448.0f, 8), 127);
    cr_expect_eq(fp8_e8m0_te(449.0f, 448.0f), 128);
    cr_expect_eq(fp8_e8m0_ocp(449.0f, 8), 127);
    cr_expect_eq(fp8_e8m0_te(100.0f, 448.0f), 125);
    cr_expect_eq(fp8_e8m0_ocp(100.0f, 8), 125);
    cr_expect_eq(fp8_e8m0_te(500.0f, 448.0f), 128);
    cr_expect_eq(fp8_e8m0_ocp(500.0f, 8), 127);
    cr_expect_eq(fp8_e8m0_te(NAN, 448.0f), 0xff);
    cr_expect_eq(fp8_e8m0_te(INFINITY, 448.0f), 0xfe);
    cr_expect_eq(fp8_e8m0_te(0.0f, 448.0f), 0);
    cr_expect_eq(fp8_e8m0_value(128), 2.0f);
    cr_expect(isnan(fp8_e8m0_value(0xff)));
    for (float a = 1e-3f; a < 1e6f; a *= 1.37f) /* TE's scale never lets the block saturate */
        cr_expect_leq(a / fp8_e8m0_value(fp8_e8m0_te(a, 448.0f)), 448.0f, "amax %g", a);
}

/* what TE's cast multiplies a block by (exp2f_rcp): 1 for e = 0, 2^(127 - e), 0 for e = 254 */
Test(fp8_recipe, e8m0_multiplier_as_exp2f_rcp)
{
    cr_expect_eq(fp8_e8m0_multiplier(0), 1.0f);
    cr_expect_eq(fp8_e8m0_multiplier(1), 0x1p126f);
    cr_expect_eq(fp8_e8m0_multiplier(125), 4.0f);
    cr_expect_eq(fp8_e8m0_multiplier(127), 1.0f);
    cr_expect_eq(fp8_e8m0_multiplier(253), 0x1p-126f);
    cr_expect_eq(fp8_e8m0_multiplier(254), 0.0f);
    cr_expect(isnan(fp8_e8m0_multiplier(0xff)));
}
