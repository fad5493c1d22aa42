/*
 * layer_norm.c: nn.LayerNorm(C) over the last dim, as F.layer_norm runs it (native_layer_norm).
 * Case files: `layer_norm C [eps=1e-5] [elementwise_affine=yes] [bias=yes]`; weight ones and
 * bias zeros [C] (PyTorch's reset_parameters), no parameters with elementwise_affine=no.
 *
 * Autocast: on CUDA's float32 list (aten/src/ATen/autocast_mode.cpp, AT_FORALL_FP32 of
 * autocast_mode.h: KERNEL_CUDA(layer_norm, fp32)), so a half input (and half weight and
 * bias) is cast up and the output is float32. Outside autocast it runs in its input's dtype;
 * mean and rstd are float32 whatever the input (layer_norm_cuda in
 * aten/src/ATen/native/cuda/layer_norm_kernel.cu allocates them in acc_type). Saved for
 * backward, as native_layer_norm's derivative (tools/autograd/derivatives.yaml) keeps them:
 * the input, mean, rstd and the weight; the backward is layer_norm_backward_cuda's (dx from
 * the row sums of w dy and w dy xhat, dw = sum dy xhat, db = sum dy).
 * A weight whose dtype is not the input's (outside autocast) fails with the text of the
 * scalar-type check of the CUDA kernel's data_ptr (not checked on a GPU).
 */
#include "norm.h"

/* the rows of the saved input: as many as its mean has */
static void layer_norm_backward(run *r, node *n)
{
    int64_t rows = n->saved[1]->numel;
    norm_geom g = {.n = rows, .groups = 1, .cpg = n->saved[0]->numel / rows, .inner = 1};
    norm_backward(r, n, &g);
}

#define LN_EPS opt_real[0]
#define LN_AFFINE opt_bool[0]

static tensor *layer_norm_forward(run *r, const layer_spec *l, tensor *const *in,
                                  tensor *const *params)
{
    tensor *x = in[0];
    tensor *w = l->LN_AFFINE ? params[0] : NULL, *b = l->LN_AFFINE && l->bias ? params[1] : NULL;
    int64_t c = x->shape[x->ndim - 1];
    norm_geom g = {.n = x->numel / c,
                   .groups = 1,
                   .cpg = c,
                   .inner = 1,
                   .eps = (float)l->LN_EPS,
                   .form = NORM_CENTERED};
    return norm_run(r, l, layer_norm_backward, &g, x, w, b, NORM_STATS_FLOAT32);
}

static int layer_norm_params(const layer_spec *l, layer_param *out)
{
    if (!l->LN_AFFINE)
        return 0;
    out[0] = (layer_param){"weight", 1, {l->in}, PARAM_INIT_ONES, 0};
    if (!l->bias)
        return 1;
    out[1] = (layer_param){"bias", 1, {l->in}, PARAM_INIT_ZEROS, 0};
    return 2;
}

static int layer_norm_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "layer_norm %lld, eps %g%s", (long long)l->in, l->LN_EPS,
                    !l->LN_AFFINE ? " (no affine)"
                    : l->bias     ? ""
                                  : " (no bias)");
}

static const kind_arg layer_norm_args[] = {
    {"normalized_shape", "normalized_shape", offsetof(layer_spec, in), 1},
};
static const kind_opt layer_norm_opts[] = {
    {"eps", KIND_OPT_REAL, offsetof(layer_spec, LN_EPS), .range = POSITIVE, .real_def = 1e-5},
    {"elementwise_affine", KIND_OPT_BOOL, offsetof(layer_spec, LN_AFFINE), .def = 1},
    {"bias", KIND_OPT_BOOL, offsetof(layer_spec, bias), .def = 1},
};
static const autocast_op layer_norm_autocast[] = {
    {"layer_norm",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(layer_norm, fp32)",
     {"layer_norm", "native_layer_norm", "native_layer_norm_backward"}},
};

const layer_def layer_norm_def = {
    .name = "layer_norm",
    .signature = "C",
    .args = layer_norm_args,
    .n_args = COUNT_OF(layer_norm_args),
    .opts = layer_norm_opts,
    .n_opts = COUNT_OF(layer_norm_opts),
    .input_shape = norm_last_dim_input_shape,
    .shape = norm_last_dim_shape,
    .params = layer_norm_params,
    .autocast = layer_norm_autocast,
    .n_autocast = COUNT_OF(layer_norm_autocast),
    .forward = layer_norm_forward,
    .describe = layer_norm_describe,
};
