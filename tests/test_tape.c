/*
 * test_tape.c: the autograd tape's failures. A failure raised inside a node's backward
 * (run_fail, or a backend op's error through run_check) reads "<op> backward: <message>",
 * naming the node that failed and not another; a failure outside backward has no prefix.
 * The nodes here are made for the test on a small run over the CPU backend: x (a leaf)
 * -> "relu" -> h -> "mul" -> y, whose backward functions pass the gradient on or fail.
 */
#include <criterion/criterion.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/run.h"
#include "helpers.h"

static run *r;

static void run_open(void) { r = test_run_open(); }
static void run_close(void) { test_run_close(r); }

/* a backward that hands a gradient of ones to its input */
static void pass_on(run *rr, node *n)
{
    tensor *g = node_grad_tensor(rr, n, 0);
    rr->be->fill(rr->be, g, 1.0f);
    node_give_grad(rr, n, 0, g, NULL);
}

static void fail_in_backend(run *rr, node *n)
{
    (void)n;
    snprintf(rr->be->err, sizeof rr->be->err, "the backend refused the op");
    run_check(rr, -1);
}

static void fail_in_harness(run *rr, node *n)
{
    (void)n;
    run_fail(rr, "a check failed (%d)", 7);
}

/* records x -> relu -> h -> mul -> y with the given backward functions and runs backward
 * from y; returns the run's error, "" when backward finished */
static const char *backward_with(backward_fn relu_bw, backward_fn mul_bw)
{
    int64_t one = 1;
    tensor *x = run_tensor(r, "x", DTYPE_FLOAT32, 1, &one, MEM_PARAMS);
    x->requires_grad = x->is_leaf = true;
    tensor *h = run_tensor(r, "h", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "relu", relu_bw, h, &x, 1));
    tensor *y = run_tensor(r, "y", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "mul", mul_bw, y, &h, 1));
    r->error[0] = '\0';
    if (setjmp(r->fail) == 0)
        tape_backward(r, y, 1.0f);
    return r->error;
}

Test(tape, a_failure_in_backward_names_the_op, .init = run_open, .fini = run_close)
{
    cr_expect_str_eq(backward_with(pass_on, fail_in_backend),
                     "mul backward: the backend refused the op");
    tape_clear(r);
    /* the failing node is the second one run: its name, not the first's */
    cr_expect_str_eq(backward_with(fail_in_harness, pass_on), "relu backward: a check failed (7)");
}

Test(tape, a_failure_outside_backward_has_no_op_name, .init = run_open, .fini = run_close)
{
    cr_expect_str_eq(backward_with(pass_on, pass_on), "");
    /* after a backward that finished, and after one that failed */
    if (setjmp(r->fail) == 0)
        run_fail(r, "after backward");
    cr_expect_str_eq(r->error, "after backward");
    backward_with(pass_on, fail_in_backend);
    tape_clear(r);
    if (setjmp(r->fail) == 0)
        run_fail(r, "after a failed backward");
    cr_expect_str_eq(r->error, "after a failed backward");
}
