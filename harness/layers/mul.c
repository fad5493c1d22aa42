/*
 * mul.c: `NAME = mul A B`, torch.mul(a, b) (a * b) of two tensors of one shape (a gate).
 * Not on any autocast list: type promotion, as add. Saves both inputs; its backward is
 * MulBackward0's (tools/autograd/derivatives.yaml, mul_tensor_backward): da = dy * b and
 * db = dy * a, each computed in the promoted dtype of its operands and then cast into its
 * input's dtype where that differs (the engine's cast).
 */
#include "layer.h"

/* the gradient of input i: dy * other, in promote(dy, other), then in i's dtype */
static void mul_grad(run *r, node *n, int i)
{
    tensor *dy = n->grad, *other = n->saved[1 - i];
    dtype prod = promote_types(dy->dtype, other->dtype);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *dx = node_grad_tensor(r, n, i);
    if (prod == dx->dtype) {
        run_check(r, r->be->mul(r->be, dy, other, dx, stp));
    } else {
        tensor *p = run_tensor_like(r, dy, dx->name, prod, MEM_GRADS);
        run_check(r, r->be->mul(r->be, dy, other, p, NULL));
        run_check(r, r->be->cast(r->be, p, dx, stp));
        tensor_release(&r->pool, p);
    }
    node_give_grad(r, n, i, dx, stp);
}

static void mul_backward(run *r, node *n)
{
    for (int i = 0; i < 2; i++)
        if (node_needs_grad(n, i))
            mul_grad(r, n, i);
}

static tensor *mul_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *a = in[0], *b = in[1];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor_like(r, a, name, promote_types(a->dtype, b->dtype), MEM_ACTIVATIONS);
    tensor *args[2] = {a, b};
    autocast_why(r, y, "mul", args, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul(r->be, a, b, y, stp));
    node *n = tape_record(r, "mul", mul_backward, y, args, 2);
    tape_save(n, 0, a);
    tape_save(n, 1, b);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static int mul_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "mul");
}

static const autocast_op mul_autocast[] = {
    {"mul", AUTOCAST_NONE,
     "not listed (autocast_mode.cpp's fallthrough): type promotion, float32 * float16 is "
     "float32"},
};

const layer_def mul_def = {
    .name = "mul",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = shape_same_two,
    .params = no_params,
    .autocast = mul_autocast,
    .n_autocast = COUNT_OF(mul_autocast),
    .forward = mul_forward,
    .describe = mul_describe,
    .n_inputs = 2,
};
