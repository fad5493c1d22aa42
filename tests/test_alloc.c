/*
 * test_alloc.c: the CPU backend's memory after the first steps. Its freed blocks serve the
 * next requests of their sizes, so that a step whose requests are the step before's calls
 * neither malloc nor free (cpu_heap_calls), and the tensor pool's released structs serve the
 * next tensors, so that such a step makes no heap calls for them either (tensor_heap_calls);
 * a half weight's widened copy held from the
 * forward GEMM serves the input gradient's GEMM, gives the same bits as one made again, is
 * given up when the weight is written, and leaves the memory account as it was.
 *
 * Step 2 makes a few backend calls too: step 1 made the optimizer's states out of blocks its
 * backward had freed.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu.h"
#include "helpers.h"
#include "case/load.h"

/* the heap calls over a whole run of the case with `steps` steps: the backend's, and the
 * tensor structs' into *structs */
static int64_t heap_calls_of_run(const char *path, int steps, int64_t *structs)
{
    static case_config cfg;
    err_list errs = {0};
    char set[64];
    snprintf(set, sizeof set, "train.steps=%d", steps);
    const char *sets[] = {set};
    cr_assert_eq(case_load(path, sets, 1, &cfg, &errs), 0, "%s: %s", path,
                 errs.n ? errs.msgs[0] : "");
    err_list_free(&errs);
    mem_account account = {0};
    backend *be = backend_cpu_open(&account);
    cr_assert_not_null(be);
    train_options opt = {.quiet = true};
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    int64_t structs_before = tensor_heap_calls();
    cr_assert_eq(train_case(&cfg, be, &opt, rec), 0, "%s", rec->result.error);
    cr_assert(rec->result.ok, "%s", rec->result.error);
    *structs = tensor_heap_calls() - structs_before;
    int64_t calls = cpu_heap_calls(be);
    record_free(rec);
    be->close(be);
    return calls;
}

/* a path held in the parameter itself: Criterion's workers do not share the parent's
 * addresses of string literals */
typedef struct alloc_case {
    char path[96];
} alloc_case;

ParameterizedTestParameters(alloc, steps_after_the_second_call_no_malloc)
{
    static alloc_case cases[] = {
        {"tests/cases/small-autocast-fp16-scaler.case"}, /* autocast's half weight copies */
        {"tests/cases/small-half.case"},                 /* half parameters */
        {"tests/cases/small-conv.case"},
        {"tests/cases/small-gpt-block.case"}, /* matmul, layer norm, softmax */
    };
    return cr_make_param_array(alloc_case, cases, sizeof cases / sizeof *cases);
}

ParameterizedTest(alloc_case *c, alloc, steps_after_the_second_call_no_malloc)
{
    int64_t structs3, structs6;
    int64_t three = heap_calls_of_run(c->path, 3, &structs3),
            six = heap_calls_of_run(c->path, 6, &structs6);
    cr_expect_gt(three, 0);
    cr_expect_eq(six, three, "%s: steps 4 to 6 called malloc, realloc or free %lld times", c->path,
                 (long long)(six - three));
    /* every struct made is freed when the run's pool is cleared: an even count */
    cr_expect_gt(structs3, 0);
    cr_expect_eq(structs3 % 2, 0, "%s: %lld calls, not a calloc and a free for each struct",
                 c->path, (long long)structs3);
    cr_expect_eq(structs6, structs3, "%s: steps 4 to 6 made %lld heap calls for tensor structs",
                 c->path, (long long)(structs6 - structs3));
}

Test(alloc, a_freed_block_serves_the_next_request_of_its_size_and_no_other)
{
    backend *be = backend_cpu_open(NULL);
    cr_assert_not_null(be);
    void *live = be->alloc(be, 16), *a = be->alloc(be, 40000);
    be->free(be, a);
    int64_t calls = cpu_heap_calls(be);
    void *small = be->alloc(be, 1000), *near = be->alloc(be, 40000 - 8); /* other sizes */
    cr_expect(small != a && near != a);
    cr_expect_eq(cpu_heap_calls(be), calls + 2);
    void *b = be->alloc(be, 40000);
    cr_expect_eq(b, a);
    cr_expect_eq(cpu_heap_calls(be), calls + 2);
    be->free(be, b);
    be->free(be, near);
    be->free(be, small);
    calls = cpu_heap_calls(be);
    be->free(be, live); /* none out: the kept blocks go back to the heap */
    cr_expect_eq(cpu_heap_calls(be), calls + 4);
    void *again = be->alloc(be, 40000);
    cr_expect_not_null(again);
    cr_expect_eq(cpu_heap_calls(be), calls + 5);
    be->free(be, again);
    be->close(be);
}

/* a float16 tensor of n pseudo-random values in [-2, 2) */
static tensor *random_half(test_env *e, const char *name, int ndim, const int64_t *shape,
                           unsigned seed)
{
    float v[64 * 64];
    int64_t n = shape_numel(ndim, shape);
    cr_assert_leq(n, 64 * 64);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
    return env_tensor(e, name, DTYPE_FLOAT16, ndim, shape, v);
}

static bool same_bits(const tensor *a, const tensor *b)
{
    return memcmp(a->data, b->data, (size_t)tensor_bytes(a)) == 0;
}

Test(alloc, a_held_weight_copy_gives_the_same_bits_and_goes_when_the_weight_changes)
{
    test_env e;
    env_open(&e);
    backend *be = e.be;
    int64_t xs[] = {37, 61}, ws[] = {45, 61}, ys[] = {37, 45};
    tensor *x = random_half(&e, "x", 2, xs, 1), *w = random_half(&e, "fc.weight", 2, ws, 2);
    tensor *dy = random_half(&e, "dy", 2, ys, 3), *y = env_zeros(&e, "y", DTYPE_FLOAT16, 2, ys);
    tensor *dx[4];
    for (int i = 0; i < 4; i++)
        dx[i] = env_zeros(&e, "dx", DTYPE_FLOAT16, 2, xs);
    x->requires_grad = true;

    /* held by the forward, outside the account; taken by the backward */
    cr_assert_eq(be->linear_forward(be, x, w, NULL, y, NULL), 0);
    cr_expect_eq(e.account.current[MEM_WORKSPACE], 0);
    int64_t peak = e.account.peak[MEM_WORKSPACE];
    float *held = cpu_take(be, w); /* there is one; put back */
    cr_expect_not_null(held);
    cpu_hold(be, w, held);
    cr_assert_eq(be->linear_backward_input(be, dy, w, dx[0], NULL), 0);
    cr_expect_eq(e.account.current[MEM_WORKSPACE], 0);
    cr_expect_eq(e.account.peak[MEM_WORKSPACE], peak);
    cr_assert_eq(be->linear_backward_input(be, dy, w, dx[1], NULL), 0); /* widened again */
    cr_expect(same_bits(dx[0], dx[1]));

    /* written after the forward: the backward reads the new values */
    cr_assert_eq(be->linear_forward(be, x, w, NULL, y, NULL), 0);
    cr_assert_eq(be->fill(be, w, 0.5f), 0);
    cr_expect_null(cpu_take(be, w));
    cr_assert_eq(be->linear_backward_input(be, dy, w, dx[2], NULL), 0);
    cr_assert_eq(be->linear_backward_input(be, dy, w, dx[3], NULL), 0);
    cr_expect(same_bits(dx[2], dx[3]));
    cr_expect_not(same_bits(dx[2], dx[0]));

    /* freed after the forward, and another weight made, likely in the same memory: its own
     * values are read */
    cr_assert_eq(be->linear_forward(be, x, w, NULL, y, NULL), 0);
    tensor_release(&e.pool, w);
    tensor *w2 = random_half(&e, "fc.weight", 2, ws, 4);
    cr_expect_null(cpu_take(be, w2));
    cr_assert_eq(be->linear_backward_input(be, dy, w2, dx[2], NULL), 0);
    cr_assert_eq(be->linear_backward_input(be, dy, w2, dx[3], NULL), 0);
    cr_expect(same_bits(dx[2], dx[3]));
    cr_expect_not(same_bits(dx[2], dx[0]));
    env_close(&e);
}
