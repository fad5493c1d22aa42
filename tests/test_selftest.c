/*
 * test_selftest.c: the backend selftest (harness/selftest.c) as part of the suite: the CPU
 * against itself always (it exercises every check), and the CUDA backend against the CPU
 * when a usable GPU is present; without one that test is skipped with the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "../harness/selftest.h"

Test(selftest, cpu_against_cpu)
{
    backend *a = backend_cpu_open(NULL), *b = backend_cpu_open(NULL);
    cr_assert(a && b);
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    cr_expect_eq(selftest_run(a, b, out), 0);
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
