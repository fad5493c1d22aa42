/*
 * test_nonfinite.c: in a skipped step, steps.csv and report.md name the first tensor that
 * held an inf or NaN, the op whose pass made it and that op's forward input.
 * tests/cases/small-scaler-backoff.case starts its GradScaler at 2^24: in steps 0 and 1 the
 * float32 gradient of cross_entropy's upcast `fc3.out@float32`, cast back to float16 by the
 * upcast's backward, exceeds 65504 (fc3.out.grad: `cast` backward, forward input fc3.out);
 * at 2^18 in step 2 fc3.out.grad fits, and the first to overflow is the bias gradient,
 * summed over the batch in the linear's backward (forward input fc3.bias@float16).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "helpers.h"
#include "case/load.h"

Test(nonfinite, skipped_steps_name_the_op_and_its_input, .timeout = 60)
{
    char dir[256], path[1024];
    make_temp_dir(dir, sizeof dir);
    case_result res;
    const char *file = "tests/cases/small-scaler-backoff.case";
    run_case_file(file, dir, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    snprintf(path, sizeof path, "%s/small-scaler-backoff/steps.csv", dir);
    csv c;
    cr_assert(csv_read(path, &c));
    static const char *const want[][4] = {
        {"0", "fc3.out.grad", "cast backward", "fc3.out"},
        {"1", "fc3.out.grad", "cast backward", "fc3.out"},
        {"2", "fc3.bias@float16.grad", "linear backward", "fc3.bias@float16"},
        {"3", "", "", ""},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char **row = csv_find(&c, "step", want[i][0], NULL, NULL, NULL, NULL);
        cr_assert_not_null(row, "step %s", want[i][0]);
        cr_expect_str_eq(row[csv_col(&c, "first_nonfinite")], want[i][1], "step %s", want[i][0]);
        cr_expect_str_eq(row[csv_col(&c, "first_nonfinite_op")], want[i][2], "step %s",
                         want[i][0]);
        cr_expect_str_eq(row[csv_col(&c, "first_nonfinite_input")], want[i][3], "step %s",
                         want[i][0]);
    }
    csv_free(&c);
    snprintf(path, sizeof path, "%s/small-scaler-backoff/report.md", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "**First non-finite value** (step 0, the first skipped): "
                              "`fc3.out.grad`, made by the `cast backward`; its forward input "
                              "`fc3.out` (backward pass: 32 of 32 overflowed to inf, 0 NaN).") !=
                 NULL;
    fclose(f);
    cr_expect(found, "report.md names the first non-finite value");
    rm_rf(dir);
}
