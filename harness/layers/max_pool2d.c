/*
 * max_pool2d.c: nn.MaxPool2d over x [N, C, H, W] (per sample CxHxW). Case files:
 * `max_pool2d kernel=K [stride=K] [padding=0]` (stride defaults to the kernel, as
 * stride=None). Autocast: on no list (autocast_mode.cpp's fallthrough): it runs in its
 * input's dtype. F.max_pool2d on CUDA is max_pool2d_with_indices (Pooling.cpp); saved for
 * backward (derivatives.yaml): the input and the int64 indices of each window's max, to
 * which max_pool2d_with_indices_backward sends the gradient.
 */
#include "pool.h"

static void max_pool2d_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->max_pool2d_backward(r->be, &n->geom, n->grad, n->saved[1], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *max_pool2d_forward(run *r, const layer_spec *l, tensor *const *in,
                                  tensor *const *params)
{
    tensor *x = in[0];
    conv2d_geom g = pool_geom(l, x);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {g.n, g.c_out, g.h_out, g.w_out};
    tensor *y = run_tensor(r, name, x->dtype, 4, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    snprintf(name, sizeof name, "%s.indices", l->name);
    tensor *idx = run_tensor(r, name, DTYPE_INT64, 4, shape, MEM_ACTIVATIONS);
    tensor_why(idx, DTYPE_REASON_INDEX, "max_pool2d", NULL, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->max_pool2d_forward(r->be, &g, x, y, idx, stp));
    node *n = tape_record(r, "max_pool2d_with_indices", max_pool2d_backward, y, &x, 1);
    if (n)
        n->geom = g;
    tape_save(n, 0, x);
    tape_save(n, 1, idx);
    tensor_release(&r->pool, idx);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool max_pool2d_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                             shape_check *sc)
{
    return pool_shape(l, in, out, sc);
}

static int max_pool2d_describe(const layer_spec *l, char *buf, size_t len)
{
    int n = snprintf(buf, len, "max_pool2d ");
    size_t off = n > 0 && (size_t)n < len ? (size_t)n : len;
    int m = pool_describe_window(l, buf + off, len - off);
    return n < 0 || m < 0 ? -1 : n + m;
}

static const kind_opt max_pool2d_opts[] = {
    {"kernel", KIND_OPT_INT, offsetof(layer_spec, kernel), .min = 1, .required = "kernel=K"},
    {"stride", KIND_OPT_INT, offsetof(layer_spec, stride), .min = 1, .def = 0},
    {"padding", KIND_OPT_INT, offsetof(layer_spec, padding), .min = 0, .def = 0},
    {"dilation", KIND_OPT_REFUSED,
     .refusal = "dilation is not supported (max_pool2d layers have dilation=1)"},
    {"ceil_mode", KIND_OPT_REFUSED,
     .refusal = "ceil_mode is not supported (max_pool2d layers floor)"},
};
static const autocast_op max_pool2d_autocast[] = {
    {"max_pool2d",
     AUTOCAST_NONE,
     "not listed: runs in its input's dtype",
     {"max_pool2d", "max_pool2d_with_indices", "max_pool2d_with_indices_backward"}},
};

const layer_def max_pool2d_def = {
    .name = "max_pool2d",
    .signature = "",
    .opts = max_pool2d_opts,
    .n_opts = COUNT_OF(max_pool2d_opts),
    .input_shape = no_input_shape,
    .shape = max_pool2d_shape,
    .params = no_params,
    .autocast = max_pool2d_autocast,
    .n_autocast = COUNT_OF(max_pool2d_autocast),
    .forward = max_pool2d_forward,
    .describe = max_pool2d_describe,
};
