/*
 * test_long_run.c: a few hundred steps with a GradScaler whose growth_interval is short, so
 * that it both grows and backs off; the scale sequence in steps.csv is replayed here with
 * GradScaler.update()'s rule (torch/amp/grad_scaler.py) and must match it step by step.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "helpers.h"

Test(long_run, loss_scale_follows_the_grad_scaler_rule, .timeout = 300)
{
    char out[256], path[1024];
    make_temp_dir(out, sizeof out);
    const char *sets[3] = {"train.steps=400", "scaler.growth_interval=20", "case.observe=0,399"};
    case_result res;
    run_case_file_set("cases/long-scaler-sawtooth.case", sets, 3, out, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, res.name);
    csv c;
    cr_assert(csv_read(path, &c));
    cr_assert_eq(c.n_rows, 400);
    int k_scale = csv_col(&c, "loss_scale"), k_inf = csv_col(&c, "found_inf");
    int k_skip = csv_col(&c, "skipped");
    double scale = 1024;
    int tracker = 0, growths = 0, backoffs = 0;
    for (int s = 0; s < c.n_rows; s++) {
        cr_assert_eq(atof(c.rows[s][k_scale]), scale, "step %d: scale %s, rule %g", s,
                     c.rows[s][k_scale], scale);
        int inf = atoi(c.rows[s][k_inf]);
        /* skipped is whether optimizer.step() ran (train.c asks the optimizer), found_inf
         * what the scaler found: with a GradScaler the two agree */
        cr_expect_eq(atoi(c.rows[s][k_skip]), inf, "step %d: skipped %s, found_inf %d", s,
                     c.rows[s][k_skip], inf);
        if (inf) {
            scale *= 0.5, tracker = 0, backoffs++;
        } else if (++tracker == 20) {
            scale *= 2.0, tracker = 0, growths++;
        }
    }
    cr_expect_gt(growths, 3, "the scale grew %d times", growths);
    cr_expect_gt(backoffs, 0, "the scale never backed off");
    csv_free(&c);
    rm_rf(out);
}
