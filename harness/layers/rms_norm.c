/*
 * rms_norm.c: nn.RMSNorm(C) over the last dim, as F.rms_norm runs it on CUDA: rms_norm_symint
 * (aten/src/ATen/native/layer_norm.cpp) calls _fused_rms_norm there, whose kernels are
 * layer_norm_kernel.cu's with rms_norm = true. Case files: `rms_norm C [eps=E]
 * [elementwise_affine=yes]`; weight ones [C] (nn.RMSNorm's reset_parameters), none with
 * elementwise_affine=no. eps not given is PyTorch's None: the epsilon of the kernel's float32
 * accumulate type (std::numeric_limits<opmath_type>::epsilon(), 2^-23), whatever the input's
 * dtype (checked with F.rms_norm on a float16 input).
 *
 * The arithmetic (backend.h's NORM_RMS): rstd = 1 / sqrt(sum(x^2) / C + eps) in float32,
 * stored float32 (acc_type), y = w * (rstd * x) rounded once; dx = (C w dy - x rstd s2) *
 * (rstd / C) with s2 = sum(dy w x rstd) over the row; dw = sum of dy x rstd over the rows.
 * _fused_rms_norm saves the input, rstd and the weight (no mean). Autocast: on CUDA's float32
 * list since PyTorch 2.12 (KERNEL_CUDA(rms_norm, fp32) in autocast_mode.cpp): a float16
 * input and weight are cast up and the output is float32 (checked with the fake-CUDA
 * dispatch, tools/autocast_policies.py). Outside autocast it runs in its input's dtype; a
 * weight of another dtype fails as layer_norm's does.
 */
#include <float.h>

#include "norm.h"

#define RMS_EPS opt_real[0] /* 0: None, the float32 epsilon */
#define RMS_AFFINE opt_bool[0]

static void rms_norm_backward(run *r, node *n)
{
    int64_t rows = n->saved[2]->numel;
    norm_geom g = {
        .n = rows, .groups = 1, .cpg = n->saved[0]->numel / rows, .inner = 1, .form = NORM_RMS};
    norm_backward(r, n, &g);
}

static tensor *rms_norm_forward(run *r, const layer_spec *l, tensor *const *in,
                                tensor *const *params)
{
    tensor *x = in[0];
    int64_t c = x->shape[x->ndim - 1];
    norm_geom g = {.n = x->numel / c,
                   .groups = 1,
                   .cpg = c,
                   .inner = 1,
                   .eps = l->RMS_EPS > 0 ? (float)l->RMS_EPS : FLT_EPSILON,
                   .form = NORM_RMS};
    return norm_run(r, l, rms_norm_backward, &g, x, l->RMS_AFFINE ? params[0] : NULL, NULL,
                    NORM_STATS_FLOAT32);
}

static int rms_norm_params(const layer_spec *l, layer_param *out)
{
    if (!l->RMS_AFFINE)
        return 0;
    out[0] = (layer_param){"weight", 1, {l->in}, PARAM_INIT_ONES, 0};
    return 1;
}

static int rms_norm_describe(const layer_spec *l, char *buf, size_t len)
{
    char eps[32] = "eps None";
    if (l->RMS_EPS > 0)
        snprintf(eps, sizeof eps, "eps %g", l->RMS_EPS);
    return snprintf(buf, len, "rms_norm %lld, %s%s", (long long)l->in, eps,
                    l->RMS_AFFINE ? "" : " (no affine)");
}

static const kind_arg rms_norm_args[] = {
    {"normalized_shape", "normalized_shape", offsetof(layer_spec, in), 1},
};
static const kind_opt rms_norm_opts[] = {
    {"eps", KIND_OPT_REAL, offsetof(layer_spec, RMS_EPS), .range = POSITIVE, .real_def = 0},
    {"elementwise_affine", KIND_OPT_BOOL, offsetof(layer_spec, RMS_AFFINE), .def = 1},
};
static const autocast_op rms_norm_autocast[] = {
    {"rms_norm",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(rms_norm, fp32)",
     {"rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward"}},
};

const layer_def rms_norm_def = {
    .name = "rms_norm",
    .signature = "C",
    .args = rms_norm_args,
    .n_args = COUNT_OF(rms_norm_args),
    .opts = rms_norm_opts,
    .n_opts = COUNT_OF(rms_norm_opts),
    .input_shape = norm_last_dim_input_shape,
    .shape = norm_last_dim_shape,
    .params = rms_norm_params,
    .autocast = rms_norm_autocast,
    .n_autocast = COUNT_OF(rms_norm_autocast),
    .forward = rms_norm_forward,
    .describe = rms_norm_describe,
};
