/*
 * avg_pool2d.c: nn.AvgPool2d over x [N, C, H, W] (per sample CxHxW). Case files:
 * `avg_pool2d kernel=K [stride=K] [padding=0] [count_include_pad=yes]` (stride defaults to
 * the kernel, as stride=None). Autocast: on no list (autocast_mode.cpp's fallthrough): it
 * runs in its input's dtype. Saved for backward (derivatives.yaml's avg_pool2d): the
 * input, which avg_pool2d_backward reads for its shape.
 */
#include "pool.h"

#define AVG_COUNT_PAD opt_bool[0]

static void avg_pool2d_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->avg_pool2d_backward(r->be, &n->geom, n->scalar != 0.0, n->grad, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *avg_pool2d_forward(run *r, const layer_spec *l, tensor *const *in,
                                  tensor *const *params)
{
    tensor *x = in[0];
    conv2d_geom g = pool_geom(l, x);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {g.n, g.c_out, g.h_out, g.w_out};
    tensor *y = run_tensor(r, name, x->dtype, 4, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->avg_pool2d_forward(r->be, &g, l->AVG_COUNT_PAD, x, y, stp));
    node *n = tape_record(r, "avg_pool2d", avg_pool2d_backward, y, &x, 1);
    if (n) {
        n->geom = g;
        n->scalar = l->AVG_COUNT_PAD;
    }
    tape_save(n, 0, x);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool avg_pool2d_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                             shape_check *sc)
{
    return pool_shape(l, in, out, sc);
}

static int avg_pool2d_describe(const layer_spec *l, char *buf, size_t len)
{
    int n = snprintf(buf, len, "avg_pool2d ");
    size_t off = n > 0 && (size_t)n < len ? (size_t)n : len;
    int m = pool_describe_window(l, buf + off, len - off);
    if (n < 0 || m < 0)
        return -1;
    off = (size_t)(n + m) < len ? (size_t)(n + m) : len;
    int k = snprintf(buf + off, len - off, "%s", l->AVG_COUNT_PAD ? "" : " (padding not counted)");
    return k < 0 ? -1 : n + m + k;
}

static const kind_opt avg_pool2d_opts[] = {
    {"kernel", KIND_OPT_INT, offsetof(layer_spec, kernel), .min = 1, .required = "kernel=K"},
    {"stride", KIND_OPT_INT, offsetof(layer_spec, stride), .min = 1, .def = 0},
    {"padding", KIND_OPT_INT, offsetof(layer_spec, padding), .min = 0, .def = 0},
    {"count_include_pad", KIND_OPT_BOOL, offsetof(layer_spec, AVG_COUNT_PAD), .def = 1},
    {"ceil_mode", KIND_OPT_REFUSED,
     .refusal = "ceil_mode is not supported (avg_pool2d layers floor)"},
    {"divisor_override", KIND_OPT_REFUSED, .refusal = "divisor_override is not supported"},
};
static const autocast_op avg_pool2d_autocast[] = {
    {"avg_pool2d",
     AUTOCAST_NONE,
     "not listed: runs in its input's dtype",
     {"avg_pool2d", "avg_pool2d_backward"}},
};

const layer_def avg_pool2d_def = {
    .name = "avg_pool2d",
    .signature = "",
    .opts = avg_pool2d_opts,
    .n_opts = COUNT_OF(avg_pool2d_opts),
    .input_shape = no_input_shape,
    .shape = avg_pool2d_shape,
    .params = no_params,
    .autocast = avg_pool2d_autocast,
    .n_autocast = COUNT_OF(avg_pool2d_autocast),
    .forward = avg_pool2d_forward,
    .describe = avg_pool2d_describe,
};
