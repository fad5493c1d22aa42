/*
 * activation.c: the elementwise activations nn.GELU (`gelu`, approximate=none|tanh),
 * nn.SiLU (`silu`), nn.Sigmoid (`sigmoid`) and nn.Tanh (`tanh`). None of them is on an
 * autocast list (aten/src/ATen/autocast_mode.h's AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32
 * and AT_FORALL_FP32_SET_OPT_DTYPE name none of them), so autocast_mode.cpp's fallthrough,
 * TORCH_LIBRARY_IMPL(_, Autocast, m) { m.fallback(torch::CppFunction::makeFallthrough()); },
 * runs them in their input's dtype: a float16 linear's output gives a float16 gelu.out.
 * What each keeps for backward is what tools/autograd/derivatives.yaml's formula reads:
 * gelu and silu their input (gelu_backward(grad, self, approximate), silu_backward(grad,
 * self)), sigmoid and tanh their result (sigmoid_backward(grad, result),
 * tanh_backward(grad, result)). The arithmetic is activation_math.h's.
 */
#include "layer.h"

/* the autocast entry of each of them */
#define ACT_FALLTHROUGH "not listed: autocast_mode.cpp's fallthrough runs it in its input's dtype"

/* The layer's output "<layer>.out", in x's dtype (its kind's one autocast entry: on no list). */
static tensor *act_output(run *r, const layer_spec *l, tensor *x)
{
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast[0].op, &x, 1);
    return y;
}

/* Records the op's node (NULL when x needs no gradient), saving x or y, and observes y. */
static node *act_record(run *r, const char *op, backward_fn bw, tensor *x, tensor *y, tensor *saved,
                        round_stats *stp)
{
    node *n = tape_record(r, op, bw, y, &x, 1);
    tape_save(n, 0, saved);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return n;
}

/* ---- gelu ---- */

/* opt_choice[0]: approximate= (gelu_approximate's order) */
static const char *const gelu_approximate_names[] = {[GELU_NONE] = "none", [GELU_TANH] = "tanh"};

static const kind_opt gelu_opts[] = {
    {"approximate", KIND_OPT_CHOICE, offsetof(layer_spec, opt_choice[0]), .def = GELU_NONE,
     .choices = gelu_approximate_names, .n_choices = COUNT_OF(gelu_approximate_names)},
};

static void gelu_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(
        r, r->be->gelu_backward(r->be, n->grad, n->saved[0], (gelu_approximate)n->scalar, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *gelu_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    gelu_approximate a = (gelu_approximate)l->opt_choice[0];
    tensor *y = act_output(r, l, x);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->gelu_forward(r->be, x, a, y, stp));
    node *n = act_record(r, "gelu", gelu_backward, x, y, x, stp);
    if (n)
        n->scalar = a; /* the backward's approximate= */
    return y;
}

static int gelu_describe(const layer_spec *l, char *buf, size_t len)
{
    if (l->opt_choice[0] == GELU_NONE)
        return snprintf(buf, len, "gelu");
    return snprintf(buf, len, "gelu (approximate=%s)", gelu_approximate_names[l->opt_choice[0]]);
}

static const autocast_op gelu_autocast[] = {
    {"gelu", AUTOCAST_NONE, ACT_FALLTHROUGH},
};

const layer_def gelu_def = {
    .name = "gelu",
    .signature = "",
    .opts = gelu_opts,
    .n_opts = COUNT_OF(gelu_opts),
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = gelu_autocast,
    .n_autocast = COUNT_OF(gelu_autocast),
    .forward = gelu_forward,
    .describe = gelu_describe,
};

/* ---- silu, sigmoid, tanh: no options ---- */

static void silu_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->silu_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *silu_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    tensor *y = act_output(r, l, x);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->silu_forward(r->be, x, y, stp));
    act_record(r, "silu", silu_backward, x, y, x, stp);
    return y;
}

static void sigmoid_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->sigmoid_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *sigmoid_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    tensor *y = act_output(r, l, x);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->sigmoid_forward(r->be, x, y, stp));
    act_record(r, "sigmoid", sigmoid_backward, x, y, y, stp);
    return y;
}

static void tanh_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->tanh_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *tanh_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    tensor *y = act_output(r, l, x);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->tanh_forward(r->be, x, y, stp));
    act_record(r, "tanh", tanh_backward, x, y, y, stp);
    return y;
}

static int silu_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "silu");
}
static int sigmoid_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "sigmoid");
}
static int tanh_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "tanh");
}

static const autocast_op silu_autocast[] = {{"silu", AUTOCAST_NONE, ACT_FALLTHROUGH}};
static const autocast_op sigmoid_autocast[] = {{"sigmoid", AUTOCAST_NONE, ACT_FALLTHROUGH}};
static const autocast_op tanh_autocast[] = {{"tanh", AUTOCAST_NONE, ACT_FALLTHROUGH}};

/* the one-input, no-option kinds' definitions */
#define ACT_DEF(kind)                                                                              \
    const layer_def kind##_def = {                                                                 \
        .name = #kind,                                                                             \
        .signature = "",                                                                           \
        .input_shape = no_input_shape,                                                             \
        .shape = shape_same,                                                                       \
        .params = no_params,                                                                       \
        .autocast = kind##_autocast,                                                               \
        .n_autocast = COUNT_OF(kind##_autocast),                                                   \
        .forward = kind##_forward,                                                                 \
        .describe = kind##_describe,                                                               \
    };
ACT_DEF(silu)
ACT_DEF(sigmoid)
ACT_DEF(tanh)
