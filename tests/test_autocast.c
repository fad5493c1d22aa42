/*
 * test_autocast.c: the dtype of every tensor that matters, for question 000's six
 * configurations (small variants in tests/cases/), against what PyTorch does. The expected
 * dtypes below are PyTorch's (AMP_FACTS: autocast casts fp32 weights, biases and inputs to
 * float16 for linear, runs cross_entropy in float32, and a parameter's .grad has the
 * parameter's dtype; checked on a CPU build of PyTorch with ToCopyBackward0 in the graph),
 * and the errors are PyTorch's texts; they are written here, not read from the case files.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"

typedef struct dtype_flow {
    const char *case_file;
    const char *error; /* NULL: the run must end without an error */
    const char *tensors[16][2];
} dtype_flow;

static const dtype_flow flows[] = {
    {"tests/cases/small-fp32.case",
     NULL,
     {{"fc3.out", "float32"},
      {"loss", "float32"},
      {"fc1.out.grad", "float32"},
      {"fc1.weight.grad", "float32"},
      {"fc1.bias.grad", "float32"}}},
    {"tests/cases/small-autocast-fp16-scaler.case",
     NULL,
     {{"input@float16", "float16"},
      {"fc1.weight@float16", "float16"},
      {"fc1.bias@float16", "float16"},
      {"fc1.out", "float16"},
      {"fc3.out", "float16"},
      {"fc3.out@float32", "float32"},
      {"loss", "float32"},
      {"loss.scaled", "float32"},
      {"fc3.out.grad", "float16"},
      {"fc1.out.grad", "float16"},
      {"fc1.weight@float16.grad", "float16"},
      {"fc1.bias@float16.grad", "float16"},
      {"fc1.weight.grad", "float32"},
      {"fc1.bias.grad", "float32"},
      {"fc1.weight.exp_avg", "float32"}}},
    {"tests/cases/small-autocast-fp16.case",
     NULL,
     {{"fc3.out", "float16"},
      {"loss", "float32"},
      {"fc2.out.grad", "float16"},
      {"fc2.weight@float16.grad", "float16"},
      {"fc2.weight.grad", "float32"}}},
    {"tests/cases/small-half-autocast-scaler.case",
     "Attempting to unscale FP16 gradients.",
     {{"fc1.weight", "float16"},
      {"fc3.out", "float16"},
      {"loss", "float32"},
      {"loss.scaled", "float32"},
      {"fc1.out.grad", "float16"},
      {"fc1.weight.grad", "float16"},
      {"fc1.bias.grad", "float16"}}},
    {"tests/cases/small-half.case",
     NULL,
     {{"fc1.weight", "float16"},
      {"input@float16", "float16"},
      {"fc3.out", "float16"},
      {"loss", "float32"},
      {"fc1.weight.grad", "float16"},
      {"fc1.weight.exp_avg", "float16"},
      {"fc1.weight.exp_avg_sq", "float16"}}},
    {"tests/cases/small-fp16-input.case",
     "mat1 and mat2 must have the same dtype, but got Half and Float",
     {{"input", "float16"}, {"fc1.weight", "float32"}}},
};

static void check_flow(const dtype_flow *f)
{
    char out[256], path[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file(f->case_file, out, &res, NULL);
    if (f->error) {
        cr_expect(!res.ok, "%s: expected an error", f->case_file);
        cr_expect(strstr(res.error, f->error) != NULL, "%s: error '%s'", f->case_file, res.error);
    } else {
        cr_expect(res.ok, "%s: %s", f->case_file, res.error);
    }
    snprintf(path, sizeof path, "%s/%s/tensors.csv", out, res.name);
    csv c;
    cr_assert(csv_read(path, &c));
    int dt = csv_col(&c, "dtype");
    for (int i = 0; i < 16 && f->tensors[i][0]; i++) {
        char **row = csv_find(&c, "tensor", f->tensors[i][0], NULL, NULL, NULL, NULL);
        cr_expect_not_null(row, "%s: no row for %s", f->case_file, f->tensors[i][0]);
        if (row)
            cr_expect_str_eq(row[dt], f->tensors[i][1], "%s: %s", f->case_file, f->tensors[i][0]);
    }
    /* a tensor that only exists under autocast must not appear without it */
    if (strstr(f->case_file, "fp32.case"))
        cr_expect_null(csv_find(&c, "tensor", "fc1.weight@float16", NULL, NULL, NULL, NULL));
    csv_free(&c);
    rm_rf(out);
}

Test(autocast, fp32_baseline) { check_flow(&flows[0]); }
Test(autocast, fp32_weights_autocast_fp16_scaler) { check_flow(&flows[1]); }
Test(autocast, fp32_weights_autocast_fp16) { check_flow(&flows[2]); }
Test(autocast, half_model_autocast_scaler_fails_in_unscale) { check_flow(&flows[3]); }
Test(autocast, half_model_autocast) { check_flow(&flows[4]); }
Test(autocast, fp16_input_into_fp32_model_fails_in_linear) { check_flow(&flows[5]); }
