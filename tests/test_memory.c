/*
 * test_memory.c: the memory account against independent counts.
 *  - Activations kept for backward against PyTorch: tests/references/saved_tensors.csv holds
 *    what torch.autograd.graph.saved_tensors_hooks counted (tools/saved_tensors.py, CPU
 *    autocast in bfloat16; parameters and autocast's copies left out) for each case there;
 *    the harness, run on the same case with autocast = bfloat16, must agree within 1%.
 *  - The categories of question 000's MLP worked out by hand from its shapes.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static long long memory_row(const char *out, const char *name, const char *category, int col)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/memory.csv", out, name);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    char **row = csv_find(&c, "category", category, NULL, NULL, NULL, NULL);
    cr_assert_not_null(row, "no %s row in %s", category, path);
    long long v = atoll(row[col]);
    csv_free(&c);
    return v;
}

static void check_reference(const char *case_file, const char *ref_name)
{
    csv ref;
    cr_assert(csv_read("tests/references/saved_tensors.csv", &ref));
    char **row = csv_find(&ref, "case", ref_name, NULL, NULL, NULL, NULL);
    cr_assert_not_null(row, "no reference for %s", ref_name);
    double want = atof(row[csv_col(&ref, "saved_bytes")]);
    csv_free(&ref);
    char out[256];
    make_temp_dir(out, sizeof out);
    const char *sets[1] = {"precision.autocast=bfloat16"};
    train_options opt = {.quiet = true, .observe_off = true};
    case_result res;
    run_case_file_set(case_file, sets, 1, out, &res, &opt);
    cr_assert(res.ok, "%s", res.error);
    double got = (double)memory_row(out, res.name, "saved_for_backward", 2);
    cr_expect(got >= 0.99 * want && got <= 1.01 * want,
              "%s: harness keeps %.0f bytes for backward, PyTorch %.0f", ref_name, got, want);
    rm_rf(out);
}

Test(memory, saved_for_backward_matches_pytorch_small_mlp)
{
    check_reference("tests/cases/small-autocast-fp16-scaler.case",
                    "small-autocast-fp16-scaler+precision.autocast=bfloat16");
}

Test(memory, saved_for_backward_matches_pytorch_small_conv)
{
    check_reference("tests/cases/small-conv.case", "small-conv+precision.autocast=bfloat16");
}

/* graph models: the residual stream's casts for q, k, v, and attention's products, whose
 * operands PyTorch's matmul copies (reshape of a transposed view) where the harness's
 * split_heads and transpose made the copies */
Test(memory, saved_for_backward_matches_pytorch_graph_attention)
{
    check_reference("tests/cases/small-graph-attention-autocast.case",
                    "small-graph-attention-autocast+precision.autocast=bfloat16");
}

Test(memory, saved_for_backward_matches_pytorch_graph_tokens)
{
    check_reference("tests/cases/small-graph-tokens-autocast.case",
                    "small-graph-tokens-autocast+precision.autocast=bfloat16");
}

/* the GPT block (tests/cases/small-gpt-block.case, small-gpt-block-sdpa.case): layer_norm
 * in float32 (the references cast as CUDA's policy does: CPU autocast keeps its input's
 * dtype), its float32 input, mean and rstd saved; softmax's float32 output; gelu's float16
 * input; PyTorch also saves masked_fill's bool mask (16 bytes here) and nll_loss's
 * total_weight (4), which the harness does not keep */
Test(memory, saved_for_backward_matches_pytorch_gpt_block)
{
    check_reference("tests/cases/small-gpt-block.case",
                    "small-gpt-block+precision.autocast=bfloat16");
}

/* with scaled_dot_product_attention's math path: its float32 copies of q, k, v and its
 * float32 probabilities, against what SafeSoftmaxBackward0 and the bmms save */
Test(memory, saved_for_backward_matches_pytorch_gpt_block_sdpa)
{
    check_reference("tests/cases/small-gpt-block-sdpa.case",
                    "small-gpt-block-sdpa+precision.autocast=bfloat16");
}

/* ... and by dtype: saved_tensors_hooks (tools/saved_tensors.py's stderr lists each storage)
 * counts float32 1732 bytes (layer_norm's float32 inputs, means and rstds, softmax's float32
 * output, cross_entropy's float32 log_softmax output, nll_loss's 4-byte total_weight),
 * bfloat16 2304, int64 128 (token ids, labels) and bool 16 (masked_fill's mask); the harness
 * keeps neither the total_weight nor the mask */
Test(memory, saved_for_backward_by_dtype_matches_pytorch_gpt_block)
{
    char out[256];
    make_temp_dir(out, sizeof out);
    const char *sets[1] = {"precision.autocast=bfloat16"};
    train_options opt = {.quiet = true, .observe_off = true};
    case_result res;
    run_case_file_set("tests/cases/small-gpt-block.case", sets, 1, out, &res, &opt);
    cr_assert(res.ok, "%s", res.error);
    /* memory.csv's by_dtype of the row: float32, bfloat16 and int64 (no float16) */
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/memory.csv", out, res.name);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    char **row = csv_find(&c, "category", "saved_for_backward", NULL, NULL, NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&c, "by_dtype")], "float32:1728|bfloat16:2304|int64:128");
    csv_free(&c);
    cr_expect_eq(memory_row(out, res.name, "saved_for_backward", 2), 1728 + 2304 + 128);
    rm_rf(out);
}

Test(memory, saved_for_backward_matches_pytorch_question_000_mlp, .timeout = 600)
{
    check_reference("cases/seed000-autocast-fp16-scaler.case",
                    "seed000-autocast-fp16-scaler+precision.autocast=bfloat16");
}

Test(memory, categories_of_the_small_mlp_by_hand)
{
    /* 16-32-32-8 with biases: 16*32+32 + 32*32+32 + 32*8+8 = 1864 parameters.
     * fp32 params: 7456 bytes; Adam state: 2 x 7456; autocast's float16 copies: 3728;
     * inputs: 4 x 16 float32 = 256 bytes plus 4 int64 labels = 32. */
    char out[256];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-autocast-fp16-scaler.case", out, &res, NULL);
    cr_expect_eq(memory_row(out, res.name, "params", 2), 7456);
    cr_expect_eq(memory_row(out, res.name, "optimizer_state", 2), 14912);
    cr_expect_eq(memory_row(out, res.name, "autocast_cache", 2), 3728);
    cr_expect_eq(memory_row(out, res.name, "inputs", 2), 288);
    cr_expect_eq(memory_row(out, res.name, "master_params", 2), 0);
    /* at the end the step's transient buffers are gone: params, state and data remain */
    cr_expect_eq(memory_row(out, res.name, "total", 3), 7456 + 14912 + 288);
    rm_rf(out);
}

Test(memory, master_weights_hold_a_float32_copy)
{
    /* the same model as float16 with fp32 masters: params 3728, masters 7456, Adam state
     * in float32 on the masters 14912 */
    char out[256];
    make_temp_dir(out, sizeof out);
    const char *sets[2] = {"precision.params=float16", "precision.master_weights=yes"};
    case_result res;
    run_case_file_set("tests/cases/small-autocast-fp16-scaler.case", sets, 2, out, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    cr_expect_eq(memory_row(out, res.name, "params", 2), 3728);
    cr_expect_eq(memory_row(out, res.name, "master_params", 2), 7456);
    cr_expect_eq(memory_row(out, res.name, "optimizer_state", 2), 14912);
    cr_expect_eq(memory_row(out, res.name, "autocast_cache", 2), 0);
    rm_rf(out);
}
