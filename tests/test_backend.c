/*
 * test_backend.c: the backend contract (harness/ops/backend.h): every open path checks that
 * its table is filled and names what is missing; the CUDA loader refuses a library built
 * from other sources, with both builds' ABI numbers, before anything in it runs, and
 * accepts the one make built here (with no GPU it then stops at the device); the counting
 * backend never makes a tensor's values; supports() answers from the table, and a case the
 * backend refuses an op of ends before it starts, naming the op and the dtype; a slot may be
 * empty only for an op supports() refuses in every dtype, and a backend without MXFP8's ops
 * runs other cases and refuses MXFP8 ones with the reason.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/backend.h"
#include "train/train.h"
#include "case/load.h"
#include "layers/fp8_linear.h"

/* a filled table to take functions out of: the CPU backend's, copied */
static backend cpu_table(void)
{
    backend *cpu = backend_cpu_open(NULL);
    cr_assert_not_null(cpu);
    backend copy = *cpu;
    cpu->close(cpu);
    return copy;
}

Test(backend, every_open_path_fills_its_table)
{
    char err[512] = "";
    backend *cpu = backend_cpu_open(NULL), *dry = backend_dry_open(NULL);
    cr_assert(cpu && dry);
    cr_expect_eq(backend_check(cpu, err, sizeof err), 0, "%s", err);
    cr_expect_eq(backend_check(dry, err, sizeof err), 0, "%s", err);
    cpu->close(cpu);
    dry->close(dry);
}

Test(backend, an_op_left_empty_is_named)
{
    backend t = cpu_table();
    t.pointwise_backward = NULL;
    char err[512] = "";
    cr_assert_neq(backend_check(&t, err, sizeof err), 0);
    cr_expect(strstr(err, "cpu backend") != NULL, "got: %s", err);
    cr_expect(strstr(err, ": pointwise_backward") != NULL, "got: %s", err);
    /* pointwise_forward, filled, is not named */
    cr_expect(strstr(err, "pointwise_forward") == NULL, "got: %s", err);
}

Test(backend, every_function_left_empty_is_named)
{
    backend t = cpu_table();
    t.upload_values = NULL;
    t.cast = NULL;
    t.optimizer_step = NULL;
    char err[512] = "";
    cr_assert_neq(backend_check(&t, err, sizeof err), 0);
    cr_expect(strstr(err, "3 functions") != NULL, "got: %s", err);
    cr_expect(strstr(err, "upload_values, cast, optimizer_step") != NULL, "got: %s", err);
}

Test(backend, op_names_are_the_list)
{
    cr_expect_str_eq(backend_op_name(BACKEND_OP_cast), "cast");
    cr_expect_str_eq(backend_op_name(BACKEND_OP_linear_backward_weight), "linear_backward_weight");
    cr_expect_str_eq(backend_op_name(BACKEND_OP_optimizer_step), "optimizer_step");
    cr_expect_str_eq(backend_op_name(BACKEND_OP_COUNT), "(no such op)");
}

/* a backend without MXFP8's block-scaled ops, as the CUDA backend is (kernels/cuda.cuh) */
static bool no_block_ops(const backend *be, backend_op op, dtype dt)
{
    (void)be, (void)dt;
    return op != BACKEND_OP_fp8_block_quantize && op != BACKEND_OP_fp8_block_gemm;
}

/* the same ops said to run in one dtype */
static bool block_ops_in_float32(const backend *be, backend_op op, dtype dt)
{
    return no_block_ops(be, op, dt) || dt == DTYPE_FLOAT32;
}

/* An empty slot passes the check only for an op whose supports() says no in every dtype */
Test(backend, an_op_the_backend_leaves_out_may_be_empty)
{
    backend t = cpu_table();
    t.fp8_block_quantize = NULL;
    t.fp8_block_gemm = NULL;
    char err[512] = "";
    cr_expect_neq(backend_check(&t, err, sizeof err), 0, "no supports(): every op is run");
    cr_expect(strstr(err, "fp8_block_quantize, fp8_block_gemm") != NULL, "got: %s", err);
    t.supports = block_ops_in_float32;
    err[0] = '\0';
    cr_expect_neq(backend_check(&t, err, sizeof err), 0, "run in float32, so not left out");
    cr_expect(strstr(err, "2 functions") != NULL, "got: %s", err);
    t.supports = no_block_ops;
    cr_expect(backend_leaves_out(&t, BACKEND_OP_fp8_block_gemm));
    cr_expect_not(backend_leaves_out(&t, BACKEND_OP_fp8_gemm));
    cr_expect_eq(backend_check(&t, err, sizeof err), 0, "%s", err);
    t.pointwise_backward = NULL; /* an op it has, left empty: still named */
    err[0] = '\0';
    cr_expect_neq(backend_check(&t, err, sizeof err), 0);
    cr_expect(strstr(err, "1 function") && strstr(err, ": pointwise_backward"), "got: %s", err);
}

/* A case that needs no left-out op runs on such a backend; an MXFP8 case is refused before
 * it runs, with the reason the CLI gives at its [fp8] line (the CPU backend runs it). */
Test(backend, a_backend_without_mxfp8_runs_other_cases_and_refuses_mxfp8, .timeout = 60)
{
    static case_config cfg, mx;
    err_list errs = {0};
    cr_assert_eq(case_load("tests/cases/small-fp32.case", NULL, 0, &cfg, &errs), 0);
    cr_assert_eq(case_load("tests/cases/small-fp8-mxfp8.case", NULL, 0, &mx, &errs), 0);
    err_list_free(&errs);
    backend *be = backend_cpu_open(NULL);
    cr_assert_not_null(be);
    char why[512];
    cr_expect_null(fp8_refusal(&mx, be, why, sizeof why), "the CPU backend runs MXFP8");
    cr_expect_null(fp8_refusal(&cfg, be, why, sizeof why), "no [fp8]");
    be->fp8_block_quantize = NULL;
    be->fp8_block_gemm = NULL;
    be->supports = no_block_ops;
    cr_assert_not_null(fp8_refusal(&mx, be, why, sizeof why));
    cr_expect(strstr(why, "recipe = mxfp8 on the cpu backend") &&
                  strstr(why, "MXFP8 runs on the CPU only") && strstr(why, "HINT"),
              "got: %s", why);
    cr_expect_null(fp8_refusal(&cfg, be, why, sizeof why));
    FILE *f = fopen("tests/cases/small-fp8-mxfp8.case", "r"); /* [fp8]'s recipe line */
    cr_assert_not_null(f);
    char line[512];
    int n = 0, recipe = 0;
    while (fgets(line, sizeof line, f) && !recipe)
        n++, recipe = strncmp(line, "recipe", 6) == 0 ? n : 0;
    fclose(f);
    cr_expect_eq(mx.fp8_line, recipe);
    train_options opt = {.quiet = true};
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    cr_expect_eq(train_case(&cfg, be, &opt, rec), 0);
    cr_expect(rec->result.ok, "%s", rec->result.error);
    record_clear(rec);
    cr_expect_eq(train_case(&mx, be, &opt, rec), 0);
    cr_expect_not(rec->result.ok);
    cr_expect(strstr(rec->result.error, "MXFP8 runs on the CPU only"), "%s", rec->result.error);
    record_free(rec);
    be->close(be);
}

static bool no_bfloat16_pointwise(const backend *be, backend_op op, dtype dt)
{
    (void)be;
    return !(dt == DTYPE_BFLOAT16 &&
             (op == BACKEND_OP_pointwise_forward || op == BACKEND_OP_pointwise_backward));
}

Test(backend, supports_asks_the_table)
{
    backend t = cpu_table();
    cr_expect(backend_supports(&t, BACKEND_OP_pointwise_forward, DTYPE_BFLOAT16)); /* none */
    t.supports = no_bfloat16_pointwise;
    cr_expect_not(backend_supports(&t, BACKEND_OP_pointwise_forward, DTYPE_BFLOAT16));
    cr_expect(backend_supports(&t, BACKEND_OP_pointwise_forward, DTYPE_FLOAT16));
    cr_expect(backend_supports(&t, BACKEND_OP_cast, DTYPE_BFLOAT16));
}

Test(backend, only_the_gpu_offers_native_math)
{
    backend *cpu = backend_cpu_open(NULL), *dry = backend_dry_open(NULL);
    cr_assert(cpu && dry);
    cr_expect_not(cpu->has_native_math);
    cr_expect_not(dry->has_native_math);
    cpu->close(cpu);
    dry->close(dry);
}

typedef struct maker {
    int calls;
    unsigned char values[4];
} maker;

static void *make_four(void *ctx)
{
    maker *m = ctx;
    m->calls++;
    unsigned char *p = malloc(4);
    cr_assert_not_null(p);
    memcpy(p, m->values, 4);
    return p;
}

Test(backend, only_a_backend_holding_values_makes_them)
{
    backend *cpu = backend_cpu_open(NULL), *dry = backend_dry_open(NULL);
    cr_assert(cpu && dry);
    maker m = {0, {1, 2, 3, 250}};
    unsigned char dst[4] = {0};
    dry->upload_values(dry, dst, 4, make_four, &m);
    cr_expect_eq(m.calls, 0);
    cpu->upload_values(cpu, dst, 4, make_four, &m);
    cr_expect_eq(m.calls, 1);
    cr_expect(dst[0] == 1 && dst[1] == 2 && dst[2] == 3 && dst[3] == 250);
    /* the preflight's pass observes every step; a real run only the case's steps */
    cr_expect(dry->observe_every_step);
    cr_expect_not(cpu->observe_every_step);
    cpu->close(cpu);
    dry->close(dry);
}

Test(backend, a_library_of_another_abi_is_refused)
{
    char err[1024] = "", want[256];
    backend *be = backend_cuda_load(NULL, TEST_LIB_DIR "/other-abi", err, sizeof err);
    cr_assert_null(be);
    cr_expect(strstr(err, "other-abi/libampscope_cuda.so was built for backend ABI 999 (struct "
                          "backend of 4242 bytes)") != NULL,
              "got: %s", err);
    snprintf(want, sizeof want, "this binary expects ABI %d (%zu bytes): rebuild with make",
             BACKEND_ABI_VERSION, sizeof(backend));
    cr_expect(strstr(err, want) != NULL, "got: %s", err);
    cr_expect(strstr(err, "was opened") == NULL, "its open ran: %s", err);
}

Test(backend, a_library_built_with_other_pointwise_rows_is_refused)
{
    char err[1024] = "", want[1024];
    backend *be = backend_cuda_load(NULL, TEST_LIB_DIR "/other-rows", err, sizeof err);
    cr_assert_null(be);
    snprintf(want, sizeof want, "was built with the rows \"relu \"; this binary has \"%s\"",
             BACKEND_ROW_NAMES);
    cr_expect(strstr(err, want) != NULL, "got: %s", err);
    cr_expect(strstr(err, "was opened") == NULL, "its open ran: %s", err);
}

Test(backend, a_library_without_an_abi_is_refused)
{
    char err[1024] = "";
    backend *be = backend_cuda_load(NULL, TEST_LIB_DIR "/no-abi", err, sizeof err);
    cr_assert_null(be);
    cr_expect(strstr(err, "has no ampscope_backend_abi") != NULL, "got: %s", err);
    cr_expect(strstr(err, "was opened") == NULL, "its open ran: %s", err);
}

Test(backend, the_library_make_built_passes_the_abi_check)
{
    if (access("lib/libampscope_cuda.so", F_OK) != 0)
        cr_skip_test("lib/libampscope_cuda.so not built (no CUDA toolkit, or CUDA=0)");
    char err[1024] = "";
    backend *be = backend_cuda_load(NULL, "lib", err, sizeof err);
    if (be) { /* a GPU: the table it filled passed the check too */
        cr_expect_eq(backend_check(be, err, sizeof err), 0, "%s", err);
        cr_expect(be->has_native_math);
        be->close(be);
        return;
    }
    cr_expect(strncmp(err, "no usable CUDA device: ", 23) == 0, "got: %s", err);
    cr_expect(strstr(err, "ABI") == NULL && strstr(err, "has no") == NULL, "got: %s", err);
    /* a machine without the driver's library: said so, not the runtime's "driver version is
     * insufficient", which the runtime also returns when there is no driver at all */
    void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY);
    if (libcuda) {
        dlclose(libcuda);
        return;
    }
    cr_expect(strstr(err, "no usable CUDA device: no NVIDIA driver found (libcuda.so.1") == err,
              "got: %s", err);
    cr_expect(strstr(err, "insufficient") == NULL, "got: %s", err);
}

/* A case whose tensors take a dtype the backend refuses for one of its ops ends before its
 * first tensor, with the op and the dtype named; the same case runs where nothing is
 * refused. */
Test(backend, a_case_the_backend_cannot_run_names_the_op)
{
    static case_config cfg;
    err_list errs = {0};
    const char *sets[] = {"precision.autocast=bfloat16"};
    cr_assert_eq(case_load("tests/cases/small-fp32.case", sets, 1, &cfg, &errs), 0);
    err_list_free(&errs);
    mem_account account = {0};
    backend *be = backend_cpu_open(&account);
    cr_assert_not_null(be);
    train_options opt = {.quiet = true};
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    const case_result *res = &rec->result;
    be->supports = no_bfloat16_pointwise;
    cr_expect_eq(train_case(&cfg, be, &opt, rec), 0);
    cr_expect_not(res->ok);
    cr_expect_str_eq(res->error, "the cpu backend cannot run pointwise_forward on bfloat16 tensors");
    be->supports = NULL;
    record_clear(rec);
    cr_expect_eq(train_case(&cfg, be, &opt, rec), 0);
    cr_expect(res->ok, "%s", res->error);
    record_free(rec);
    be->close(be);
}
