/*
 * test_selftest.c: the backend selftest (harness/ops/selftest.c) as part of the suite: two CPU
 * backends against each other always, and the CUDA backend against the CPU when a usable
 * GPU is present; without one that test is skipped with the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ops/selftest.h"

/* Two CPU backends, opened apart, run every check on the same inputs. This does not test
 * that the CPU computes the right values (test_layers.c, test_optim.c and the conformance
 * tests do); it tests that the CPU backend is reproducible (the exact ops give the same
 * bits, counts and histograms from a second instance, the summation-order ops agree within
 * the selftest's tolerance), that every op of the table runs and hands back its workspace,
 * and that the selftest's comparisons pass on results that agree (no false FAIL). */
Test(selftest, two_cpu_backends_agree)
{
    backend *a = backend_cpu_open(NULL), *b = backend_cpu_open(NULL);
    cr_assert(a && b);
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    cr_expect_eq(selftest_run(a, b, out), 0);
    /* the checks really ran: the last line counts them */
    char line[256], last[256] = "";
    rewind(out);
    while (fgets(line, sizeof line, out))
        strcpy(last, line);
    int passed = -1, failed = -1;
    cr_expect_eq(sscanf(last, "selftest: %d passed, %d failed", &passed, &failed), 2, "%s", last);
    cr_expect_gt(passed, 100, "%s", last);
    cr_expect_eq(failed, 0, "%s", last);
    fclose(out);
    a->close(a);
    b->close(b);
}

Test(selftest, cuda_against_cpu, .timeout = 600)
{
    char err[512];
    backend *gpu = backend_cuda_load(NULL, NULL, err, sizeof err);
    if (!gpu)
        cr_skip_test("no GPU: %s", err);
    backend *cpu = backend_cpu_open(NULL);
    int failed = selftest_run(cpu, gpu, stdout);
    cr_expect_eq(failed, 0, "%d selftest checks failed on %s", failed, gpu->device);
    gpu->close(gpu);
    cpu->close(cpu);
}

/* ---- every op of the table is reached ---- */

/* ops that only count their calls, for a CPU backend's table (its memory functions stay) */
static int op_calls[BACKEND_OP_COUNT];
#define COUNTING_OP(name, params)                                                                  \
    static int count_##name params                                                                 \
    {                                                                                              \
        op_calls[BACKEND_OP_##name]++;                                                             \
        return 0;                                                                                  \
    }
BACKEND_OPS(COUNTING_OP)
#undef COUNTING_OP

/* The selftest against a backend that counts its op calls and computes nothing (its checks
 * fail; what counts is which ops they call): every op of BACKEND_OPS must be called, so a new
 * op without a selftest check fails here, named. */
Test(selftest, every_op_of_the_backend_table_is_reached)
{
    backend *ref = backend_cpu_open(NULL), *counting = backend_cpu_open(NULL);
    cr_assert(ref && counting);
#define COUNTING_ENTRY(name, params) counting->name = count_##name;
    BACKEND_OPS(COUNTING_ENTRY)
#undef COUNTING_ENTRY
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    selftest_run(ref, counting, out);
    fclose(out);
    for (int op = 0; op < BACKEND_OP_COUNT; op++)
        cr_expect_gt(op_calls[op], 0, "no selftest check calls %s",
                     backend_op_name((backend_op)op));
    counting->close(counting);
    ref->close(ref);
}
