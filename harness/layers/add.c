/*
 * add.c: `NAME = add A B`, torch.add(a, b) (a + b) of two layers' outputs (or the input) of
 * one shape: the residual stream's `x = x + f(x)`. Not on any autocast list (type
 * promotion applies, also under autocast: float32 + float16 is float32, half + half stays
 * half). Saves nothing; its backward hands the output's gradient to both inputs as it is
 * (AddBackward0 in tools/autograd/derivatives.yaml: `self: grad`, `other: grad` with
 * alpha 1), cast into an input's dtype where it differs (the engine's cast).
 */
#include "layer.h"

static void add_backward(run *r, node *n)
{
    for (int i = 0; i < 2; i++)
        if (node_needs_grad(n, i))
            give_grad_as_is(r, n, i, n->grad);
}

static tensor *add_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *a = in[0], *b = in[1];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor_like(r, a, name, promote_types(a->dtype, b->dtype), MEM_ACTIVATIONS);
    tensor *args[2] = {a, b};
    autocast_why(r, y, "add", args, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->add(r->be, a, b, y, stp));
    tape_record(r, "add", add_backward, y, args, 2);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

/* both inputs of one shape (PyTorch broadcasts; the harness asks for equal shapes) */
bool shape_same_two(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    bool same = in[0].ndim == in[1].ndim;
    for (int d = 0; same && d < in[0].ndim; d++)
        same = in[0].dim[d] == in[1].dim[d];
    if (!same) {
        char a[128], b[128];
        shape_text(&in[0], a, sizeof a);
        shape_text(&in[1], b, sizeof b);
        shape_fail(sc, SHAPE_LAYER, "its inputs have shapes %s and %s; %s needs one shape", a, b,
                   layer_def_of(l->kind)->name);
        return false;
    }
    *out = in[0];
    return true;
}

static int add_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "add");
}

static const autocast_op add_autocast[] = {
    {"add", AUTOCAST_NONE,
     "not listed (autocast_mode.cpp's fallthrough): type promotion, float32 + float16 is "
     "float32"},
};

const layer_def add_def = {
    .name = "add",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = shape_same_two,
    .params = no_params,
    .autocast = add_autocast,
    .n_autocast = COUNT_OF(add_autocast),
    .forward = add_forward,
    .describe = add_describe,
    .n_inputs = 2,
};
