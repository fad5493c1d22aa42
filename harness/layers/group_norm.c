/*
 * group_norm.c: nn.GroupNorm(G, C) over x [N, C, *] (per sample [C] or [C, *]), as
 * F.group_norm runs it (native_group_norm). Case files: `group_norm G C [eps=1e-5]
 * [affine=yes]`; weight ones and bias zeros [C] (PyTorch's reset_parameters).
 *
 * Autocast: on CUDA's float32 list (aten/src/ATen/autocast_mode.cpp, AT_FORALL_FP32 of
 * autocast_mode.h: KERNEL_CUDA(group_norm, fp32)), so a half input (and half weight and
 * bias) is cast up and the output is float32. Outside autocast it runs in its input's dtype,
 * and so do mean and rstd [N, G]: native_group_norm (aten/src/ATen/native/group_norm.cpp)
 * allocates them in param_scalar_type(X, mixed_type), the input's dtype unless a half input
 * meets float32 parameters, which the harness refuses. The CUDA kernel
 * (group_norm_kernel.cu) reads the stored mean and rstd back to form a = rstd * w and
 * c = b - a * mean per (n, channel), then y = x * a + c (NORM_FUSED). Saved for backward
 * (derivatives.yaml's native_group_norm): the input, mean, rstd and the weight. Its backward
 * forms dx from per-channel sums of dy and dy * x (GroupNormBackwardKernelImpl); the
 * harness's norm_backward_input is the same value from the per-group sums of w dy and
 * w dy xhat, up to the order of float32 operations.
 */
#include "norm.h"

/* [N, G, C/G, inner] from the saved input [N, C, *] and its mean [N * G] */
static void group_norm_backward(run *r, node *n)
{
    const tensor *x = n->saved[0];
    int64_t batch = x->shape[0], c = x->shape[1], groups = n->saved[1]->numel / batch;
    norm_geom g = {
        .n = batch, .groups = groups, .cpg = c / groups, .inner = x->numel / (batch * c)};
    norm_backward(r, n, &g);
}

#define GN_GROUPS opt_int[0]
#define GN_EPS opt_real[0]
#define GN_AFFINE opt_bool[0]

static tensor *group_norm_forward(run *r, const layer_spec *l, tensor *const *in,
                                  tensor *const *params)
{
    tensor *x = in[0];
    tensor *w = l->GN_AFFINE ? params[0] : NULL, *b = l->GN_AFFINE ? params[1] : NULL;
    norm_geom g = {.n = x->shape[0],
                   .groups = l->GN_GROUPS,
                   .cpg = l->in / l->GN_GROUPS,
                   .inner = x->numel / (x->shape[0] * l->in),
                   .eps = (float)l->GN_EPS,
                   .form = NORM_FUSED};
    return norm_run(r, l, group_norm_backward, &g, x, w, b, NORM_STATS_INPUT);
}

static bool group_norm_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                             shape_check *sc)
{
    if (l->in % l->GN_GROUPS != 0) { /* nn.GroupNorm's ValueError */
        shape_fail(sc, SHAPE_LAYER, "num_channels must be divisible by num_groups");
        return false;
    }
    if (in[0].dim[0] != l->in) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; group_norm needs %lld channels first", s,
                   (long long)l->in);
        return false;
    }
    *out = in[0];
    return true;
}

static int group_norm_params(const layer_spec *l, layer_param *out)
{
    if (!l->GN_AFFINE)
        return 0;
    out[0] = (layer_param){"weight", 1, {l->in}, PARAM_INIT_ONES, 0};
    out[1] = (layer_param){"bias", 1, {l->in}, PARAM_INIT_ZEROS, 0};
    return 2;
}

static int group_norm_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "group_norm %lld groups of %lld channels, eps %g%s",
                    (long long)l->GN_GROUPS, (long long)l->in, l->GN_EPS,
                    l->GN_AFFINE ? "" : " (no affine)");
}

static const kind_arg group_norm_args[] = {
    {"num_groups", "num_groups", offsetof(layer_spec, GN_GROUPS), 1},
    {"num_channels", "num_channels", offsetof(layer_spec, in), 1},
};
static const kind_opt group_norm_opts[] = {
    {"eps", KIND_OPT_REAL, offsetof(layer_spec, GN_EPS), .range = POSITIVE, .real_def = 1e-5},
    {"affine", KIND_OPT_BOOL, offsetof(layer_spec, GN_AFFINE), .def = 1},
};
static const autocast_op group_norm_autocast[] = {
    {"group_norm",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(group_norm, fp32)",
     {"group_norm", "native_group_norm", "native_group_norm_backward"}},
};

const layer_def group_norm_def = {
    .name = "group_norm",
    .signature = "G C",
    .args = group_norm_args,
    .n_args = COUNT_OF(group_norm_args),
    .opts = group_norm_opts,
    .n_opts = COUNT_OF(group_norm_opts),
    .input_shape = no_input_shape,
    .shape = group_norm_shape,
    .params = group_norm_params,
    .autocast = group_norm_autocast,
    .n_autocast = COUNT_OF(group_norm_autocast),
    .forward = group_norm_forward,
    .describe = group_norm_describe,
};
