/*
 * test_autocast_policy.c: every op `ampscope ops --json` lists has the CUDA autocast policy
 * PyTorch's own dispatcher gives its ATen op: tests/references/autocast_policies.csv, which
 * tools/autocast_policies.py wrote by calling each op under CUDA autocast float16 on fake
 * CUDA tensors (float32, float16 and bfloat16 inputs; the policy read from the output
 * dtypes, see the script). An op whose ATen op has no row there fails, named; so does a
 * policy word that is not one of autocast_mode.h's seven. And the casts autocast_arg makes
 * for each policy, on a bare run.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast.h"
#include "cli/ops.h"
#include "helpers.h"

#define REFERENCE "tests/references/autocast_policies.csv"

/* the text of JSON string field `key` of one object line into buf; false when absent */
static bool field(const char *line, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    if (!p)
        return false;
    p += strlen(pat);
    if (*p == '[')
        p++;
    if (*p != '"')
        return false;
    p++;
    size_t n = strcspn(p, "\"");
    snprintf(buf, len, "%.*s", (int)n, p);
    return true;
}

/* the reference's policy of ATen op aten, or NULL */
static const char *reference_policy(const csv *ref, const char *aten)
{
    char **row = csv_find(ref, "aten", aten, NULL, NULL, NULL, NULL);
    return row ? row[csv_col(ref, "policy")] : NULL;
}

Test(autocast_policy, every_op_has_the_policy_pytorch_s_cuda_dispatcher_gives_its_aten_op)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    ops_print_json(f);
    fclose(f);
    static const char *const words[] = {"lower_precision_fp",
                                        "fp32",
                                        "fp32_set_opt_dtype",
                                        "fp32_append_dtype",
                                        "promote",
                                        "banned",
                                        "none"};
    int ops = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], aten[128], policy[64];
        if (!field(line, "name", name, sizeof name))
            continue;
        ops++;
        cr_assert(field(line, "aten", aten, sizeof aten), "%s: no aten list: %s", name, line);
        cr_assert(field(line, "policy", policy, sizeof policy), "%s: no policy", name);
        bool known = false;
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
            known |= strcmp(policy, words[w]) == 0;
        cr_expect(known, "%s: policy \"%s\" is not one of autocast_mode.h's lists", name, policy);
        const char *want = reference_policy(&ref, aten);
        cr_expect_not_null(want,
                           "%s: its ATen op %s has no row in " REFERENCE
                           " (bin/ampscope ops --json | tools/autocast_policies.py)",
                           name, aten);
        /* fp32_append_dtype calls look like fp32 ones from their output dtypes */
        if (want && strcmp(policy, "fp32_append_dtype") == 0)
            policy[4] = '\0';
        if (want)
            cr_expect_str_eq(policy, want, "%s (%s): the harness says %s, PyTorch's dispatcher %s",
                             name, aten, policy, want);
    }
    cr_expect_gt(ops, 30, "only %d ops listed", ops);
    free(text);
    csv_free(&ref);
}

/* The dtype autocast_arg gives a tensor of dtype dt for an op of policy p, under float16
 * autocast (autocast_mode.cpp: cached_cast to the lower precision dtype or float32; no cast
 * for promote's single argument and none) */
static dtype cast_under(run *r, autocast_policy p, dtype dt)
{
    const autocast_op op = {"op", p, "test", {"op"}};
    const int64_t shape[1] = {4};
    tensor *t = run_tensor(r, "t", dt, 1, shape, MEM_ACTIVATIONS);
    tensor *a = autocast_arg(r, &op, t);
    dtype got = a->dtype;
    tensor_release(&r->pool, a);
    tensor_release(&r->pool, t);
    return got;
}

Test(autocast_policy, autocast_arg_casts_as_autocast_mode_cpp_s_lists_do)
{
    run *r = test_run_open();
    r->autocast = true;
    r->autocast_dtype = DTYPE_FLOAT16;
    static const struct {
        autocast_policy p;
        dtype in, out;
    } want[] = {
        {AUTOCAST_LOWER_PRECISION_FP, DTYPE_FLOAT32, DTYPE_FLOAT16},
        {AUTOCAST_LOWER_PRECISION_FP, DTYPE_BFLOAT16, DTYPE_FLOAT16},
        {AUTOCAST_FP32, DTYPE_FLOAT16, DTYPE_FLOAT32},
        {AUTOCAST_FP32_SET_OPT_DTYPE, DTYPE_BFLOAT16, DTYPE_FLOAT32},
        {AUTOCAST_FP32_APPEND_DTYPE, DTYPE_FLOAT16, DTYPE_FLOAT32},
        {AUTOCAST_PROMOTE, DTYPE_FLOAT16, DTYPE_FLOAT16},
        {AUTOCAST_NONE, DTYPE_FLOAT16, DTYPE_FLOAT16},
        {AUTOCAST_NONE, DTYPE_FLOAT32, DTYPE_FLOAT32},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(cast_under(r, want[i].p, want[i].in), want[i].out, "%s of %s",
                     autocast_policy_name(want[i].p), dtype_name(want[i].in));
    r->autocast = false; /* outside autocast nothing is cast */
    cr_expect_eq(cast_under(r, AUTOCAST_FP32, DTYPE_FLOAT16), DTYPE_FLOAT16);
    cr_expect_eq(cast_under(r, AUTOCAST_BANNED, DTYPE_FLOAT16), DTYPE_FLOAT16);
    r->autocast = true; /* a banned op fails the run under autocast */
    if (setjmp(r->fail) == 0) {
        cast_under(r, AUTOCAST_BANNED, DTYPE_FLOAT32);
        cr_expect_fail("a banned op ran under autocast");
    } else {
        cr_expect(strstr(r->error, "unsafe to autocast"), "%s", r->error);
    }
    test_run_close(r);
}
