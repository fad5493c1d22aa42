/*
 * test_selftest_exact.c: the selftest's exact-count checks (harness/ops/selftest.c) notice what
 * they are built to notice. A device under test that is the CPU backend with one defect, its
 * linear_forward (or conv2d_forward) flushing float32 subnormal outputs to zero as a
 * flush-to-zero GPU library would, must fail those checks and only those.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/selftest.h"

static int (*cpu_linear_forward)(backend *, const tensor *, const tensor *, const tensor *,
                                 tensor *, round_stats *);
static int (*cpu_conv2d_forward)(backend *, const conv2d_geom *, const tensor *, const tensor *,
                                 const tensor *, tensor *, round_stats *);

/* float32 subnormals of a CPU tensor to zero (the counts stay the CPU's) */
static void flush_subnormals(tensor *t)
{
    if (t->dtype != DTYPE_FLOAT32)
        return;
    float *v = t->data;
    for (int64_t i = 0; i < t->numel; i++)
        if (v[i] != 0.0f && fabsf(v[i]) < 0x1p-126f)
            v[i] = 0.0f;
}

static int ftz_linear_forward(backend *be, const tensor *x, const tensor *w, const tensor *b,
                              tensor *y, round_stats *st)
{
    int rc = cpu_linear_forward(be, x, w, b, y, st);
    flush_subnormals(y);
    return rc;
}

static int ftz_conv2d_forward(backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,
                              const tensor *b, tensor *y, round_stats *st)
{
    int rc = cpu_conv2d_forward(be, g, x, w, b, y, st);
    flush_subnormals(y);
    return rc;
}

/* the number of FAIL lines of the selftest's output, and of those naming `op` ... `exact` */
static void run_against(backend *dut, int *fails, int *exact_fails, const char *op)
{
    backend *ref = backend_cpu_open(NULL);
    cr_assert_not_null(ref);
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    int failed = selftest_run(ref, dut, out);
    rewind(out);
    char line[1024], want[64];
    snprintf(want, sizeof want, "FAIL %s exact ", op);
    *fails = *exact_fails = 0;
    while (fgets(line, sizeof line, out))
        if (strncmp(line, "FAIL ", 5) == 0) {
            ++*fails;
            *exact_fails += strncmp(line, want, strlen(want)) == 0;
        }
    cr_expect_eq(failed, *fails, "selftest_run returned %d, printed %d FAIL lines", failed, *fails);
    fclose(out);
    ref->close(ref);
}

Test(selftest_exact, a_flushing_gemm_fails_the_exact_gemm_checks)
{
    backend *dut = backend_cpu_open(NULL);
    cr_assert_not_null(dut);
    cpu_linear_forward = dut->linear_forward;
    dut->linear_forward = ftz_linear_forward;
    int fails, exact;
    run_against(dut, &fails, &exact, "linear_forward");
    /* float32 and bfloat16 operands into float32, two shapes, exact and native: 8 checks */
    cr_expect_eq(exact, 8, "%d exact linear_forward checks failed", exact);
    cr_expect_eq(fails, exact, "%d other checks failed", fails - exact);
    dut->close(dut);
}

Test(selftest_exact, a_flushing_convolution_fails_the_exact_convolution_checks)
{
    backend *dut = backend_cpu_open(NULL);
    cr_assert_not_null(dut);
    cpu_conv2d_forward = dut->conv2d_forward;
    dut->conv2d_forward = ftz_conv2d_forward;
    int fails, exact;
    run_against(dut, &fails, &exact, "conv2d_forward");
    cr_expect_eq(exact, 4, "%d exact conv2d_forward checks failed", exact);
    cr_expect_eq(fails, exact, "%d other checks failed", fails - exact);
    dut->close(dut);
}
