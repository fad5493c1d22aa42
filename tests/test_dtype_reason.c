/*
 * test_dtype_reason.c: the reason each tensor of a run has its dtype (tensors.csv's
 * dtype_reason and op, ops/dtype_reason.h) against PyTorch's CUDA autocast lists as its own
 * header declares them (tests/references/autocast_lists.csv, made by
 * tools/autocast_lists.py from ATen/autocast_mode.h): every row of cases that run most layer
 * and loss kinds has a reason; a row whose reason is an autocast list names an op that list
 * holds; a row made outside the autocast region by an op on a list (autocast_off) names an
 * op some list holds; in a case under autocast, a row whose dtype came from its operands
 * (input, promote) names an op on no list (without autocast every op keeps its operands'
 * dtype).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* the list autocast_lists.csv gives op; "" when none */
static const char *list_of(const csv *ref, const char *op)
{
    char **row = csv_find(ref, "op", op, NULL, NULL, NULL, NULL);
    return row ? row[csv_col(ref, "list")] : "";
}

static bool is_list_reason(const char *reason)
{
    return !strcmp(reason, "lower_precision_fp") || !strcmp(reason, "fp32") ||
           !strcmp(reason, "fp32_set_opt_dtype");
}

/* Runs the case and holds its rows against the lists; returns the rows seen with a list
 * reason (lists) and with an operands' reason (operands). */
static void check_case(const char *file, const csv *ref, int *lists, int *operands)
{
    char out[256], path[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file(file, out, &res, NULL);
    csv t, cfg;
    snprintf(path, sizeof path, "%s/%.200s/config.csv", out, res.name);
    cr_assert(csv_read(path, &cfg), "%s", path);
    bool autocast = strcmp(cfg.rows[0][csv_col(&cfg, "autocast")], "off") != 0;
    csv_free(&cfg);
    snprintf(path, sizeof path, "%s/%.200s/tensors.csv", out, res.name);
    cr_assert(csv_read(path, &t), "%s", path);
    int k_reason = csv_col(&t, "dtype_reason"), k_op = csv_col(&t, "op"),
        k_name = csv_col(&t, "tensor");
    for (int r = 0; r < t.n_rows; r++) {
        const char *reason = t.rows[r][k_reason], *op = t.rows[r][k_op];
        const char *name = t.rows[r][k_name], *list = list_of(ref, op);
        cr_expect(reason[0], "%s: %s has no dtype reason", file, name);
        if (is_list_reason(reason)) {
            (*lists)++;
            cr_expect_str_eq(list, reason, "%s: %s: %s is on autocast's %s list, not %s", file,
                             name, op, list[0] ? list : "no", reason);
        } else if (!strcmp(reason, "autocast_off")) {
            cr_expect(list[0], "%s: %s: autocast_off, but %s is on no autocast list", file, name,
                      op);
        } else if (autocast && (!strcmp(reason, "input") || !strcmp(reason, "promote"))) {
            (*operands)++;
            cr_expect(!list[0], "%s: %s: %s, but %s is on autocast's %s list", file, name,
                      reason, op, list);
        }
    }
    csv_free(&t);
    rm_rf(out);
}

Test(dtype_reason, every_row_has_one_and_lists_are_autocast_mode_h_lists, .timeout = 300)
{
    static const char *const cases[] = {
        "tests/cases/small-gpt-block.case",         "tests/cases/small-gpt-block-sdpa.case",
        "tests/cases/small-conv.case",              "tests/cases/small-resnet-block.case",
        "tests/cases/small-batch-norm.case",        "tests/cases/small-group-norm.case",
        "tests/cases/small-mse-autocast.case",      "tests/cases/small-l1-half.case",
        "tests/cases/small-bce-autocast.case",      "tests/cases/small-softmax-autocast.case",
        "tests/cases/small-causal-mask.case",       "tests/cases/small-silu-sigmoid-tanh.case",
        "tests/cases/small-dropout.case",           "tests/cases/small-fp8-delayed.case",
        "tests/cases/small-autocast-fp16-scaler.case", "tests/cases/small-half.case",
        "tests/cases/small-graph-token-file.case",  "tests/cases/small-rmsprop-centered.case",
        "tests/cases/small-graph-casts-autocast.case",
    };
    csv ref;
    cr_assert(csv_read("tests/references/autocast_lists.csv", &ref));
    cr_assert_str_eq(list_of(&ref, "linear"), "lower_precision_fp", "the reference's own rows");
    int lists = 0, operands = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(cases[i], &ref, &lists, &operands);
    cr_expect_gt(lists, 50, "rows with an autocast list's reason");
    cr_expect_gt(operands, 50, "rows whose operands gave their dtype");
    csv_free(&ref);
}
