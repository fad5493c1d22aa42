/*
 * conv2d.c: nn.Conv2d, x [N, C_in, H, W] -> y [N, C_out, H_out, W_out]. Case files:
 * `conv2d IN -> OUT kernel=K [stride=1] [padding=0] [dilation=1] [groups=1] [bias=yes]`;
 * groups splits the channels (weight [C_out, C_in / groups, K, K], fan_in C_in / groups *
 * K * K as nn.Conv2d's reset_parameters takes it; groups = C_in = C_out is depthwise), both
 * channel counts divisible by it, else nn.Conv2d's messages. For a depthwise convolution
 * PyTorch on CUDA may run its own kernel (aten/src/ATen/native/cuda/DepthwiseConv2d.cu,
 * when use_cudnn_depthwise says no) rather than cuDNN: float32 sums too, in its own order.
 * Under autocast x, w and b are cast to the autocast dtype. Saves the input and the weight.
 * Outside autocast, mismatched dtypes fail with PyTorch's texts (ConvUtils.h,
 * check_input_same_type_as_parameters; with a bias the text names the bias, as checked on
 * PyTorch 1.13's CPU path; the no-bias text is the CUDA one and was not checked on a GPU).
 */
#include "layer.h"

#define CONV_GROUPS opt_int[0]

static void conv2d_backward(run *r, node *n)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *w = n->saved[1];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->conv2d_backward_input(be, &n->geom, dy, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->conv2d_backward_weight(be, &n->geom, dy, x, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, reduce_channel_sum(be, dy, n->geom.n, n->geom.h_out * n->geom.w_out, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

static tensor *conv2d_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0], *w = params[0], *b = l->bias ? params[1] : NULL;
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *xa = autocast_arg(r, ac, x);
    tensor *wa = autocast_arg(r, ac, w);
    tensor *ba = b ? autocast_arg(r, ac, b) : NULL;
    if (ba && ba->dtype != xa->dtype)
        run_fail(r, "Input type (%s) and bias type (%s) should be the same",
                 type_meta_name(xa->dtype), type_meta_name(ba->dtype));
    if (wa->dtype != xa->dtype)
        run_fail(r, "Input type (%s) and weight type (%s) should be the same",
                 cuda_tensor_type_name(xa->dtype), cuda_tensor_type_name(wa->dtype));
    conv2d_geom g = {
        .n = xa->shape[0],
        .c_in = xa->shape[1],
        .h_in = xa->shape[2],
        .w_in = xa->shape[3],
        .c_out = l->out,
        .h_out = l->out_shape[1],
        .w_out = l->out_shape[2],
        .kh = l->kernel,
        .kw = l->kernel,
        .stride = l->stride,
        .padding = l->padding,
        .dilation = l->dilation,
        .groups = l->CONV_GROUPS,
    };
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {g.n, g.c_out, g.h_out, g.w_out};
    tensor *y = run_tensor(r, name, xa->dtype, 4, shape, MEM_ACTIVATIONS);
    tensor *args[3] = {xa, wa, ba};
    autocast_why(r, y, ac, args, 3);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->conv2d_forward(r->be, &g, xa, wa, ba, y, stp));
    node *n = tape_record(r, "conv2d", conv2d_backward, y, args, 3);
    if (n) {
        n->geom = g;
        tape_save(n, 0, xa);
        tape_save(n, 1, wa);
    }
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, wa);
    tensor_release(&r->pool, ba);
    return y;
}

/* The output height or width over n: floor((n + 2p - d(k-1) - 1) / s) + 1, as PyTorch
 * computes it; false when a term overflows int64. */
static bool conv_out(int64_t n, const layer_spec *l, int64_t *out)
{
    int64_t span = size_add(size_mul(l->dilation, l->kernel - 1), 1);
    int64_t padded = size_add(n, size_mul(2, l->padding));
    if (span == INT64_MAX || padded == INT64_MAX)
        return false;
    int64_t num = padded - span;
    *out = (num >= 0 ? num / l->stride : -1 - (-num - 1) / l->stride) + 1;
    return true;
}

static bool conv2d_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    char s[128];
    if (in[0].ndim != 3) {
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; conv2d needs a 3-d CxHxW input", s);
        return false;
    }
    if (in[0].dim[0] != l->in)
        shape_fail(sc, SHAPE_INPUT, "input has %lld channels", (long long)in[0].dim[0]);
    if (l->in % l->CONV_GROUPS) /* torch/nn/modules/conv.py's _ConvNd */
        shape_fail(sc, SHAPE_LAYER, "in_channels must be divisible by groups");
    else if (l->out % l->CONV_GROUPS)
        shape_fail(sc, SHAPE_LAYER, "out_channels must be divisible by groups");
    int64_t h, w;
    if (!conv_out(in[0].dim[1], l, &h) || !conv_out(in[0].dim[2], l, &w)) {
        shape_fail(sc, SHAPE_LAYER, "sizes overflow int64");
        return false;
    }
    if (h < 1 || w < 1) {
        shape_text(&(layer_shape){3, {l->in, in[0].dim[1], in[0].dim[2]}}, s, sizeof s);
        shape_fail(sc, SHAPE_LAYER, "output size %lldx%lldx%lld is too small (input %s)",
                   (long long)l->out, (long long)h, (long long)w, s);
        return false;
    }
    *out = (layer_shape){3, {l->out, h, w}};
    return true;
}

static int conv2d_params(const layer_spec *l, layer_param *out)
{
    int64_t in_g = l->in / l->CONV_GROUPS, fan_in = size_mul(in_g, size_mul(l->kernel, l->kernel));
    out[0] = (layer_param){
        "weight", 4, {l->out, in_g, l->kernel, l->kernel}, PARAM_INIT_UNIFORM_FAN_IN, fan_in};
    if (!l->bias)
        return 1;
    out[1] = (layer_param){"bias", 1, {l->out}, PARAM_INIT_UNIFORM_FAN_IN, fan_in};
    return 2;
}

static int conv2d_describe(const layer_spec *l, char *buf, size_t len)
{
    char groups[32] = "";
    if (l->CONV_GROUPS > 1)
        snprintf(groups, sizeof groups, ", groups %lld", (long long)l->CONV_GROUPS);
    return snprintf(buf, len, "conv2d %lld → %lld, kernel %lld, stride %lld, padding %lld%s%s",
                    (long long)l->in, (long long)l->out, (long long)l->kernel, (long long)l->stride,
                    (long long)l->padding, groups, l->bias ? "" : " (no bias)");
}

static const kind_arg conv2d_args[] = {
    {"in_channels", "in", offsetof(layer_spec, in), 1},
    {"out_channels", "out", offsetof(layer_spec, out), 1},
};
static const kind_opt conv2d_opts[] = {
    {"bias", KIND_OPT_BOOL, offsetof(layer_spec, bias), .def = 1},
    {"kernel", KIND_OPT_INT, offsetof(layer_spec, kernel), .min = 1, .required = "kernel=K"},
    {"stride", KIND_OPT_INT, offsetof(layer_spec, stride), .min = 1, .def = 1},
    {"padding", KIND_OPT_INT, offsetof(layer_spec, padding), .min = 0, .def = 0},
    {"dilation", KIND_OPT_INT, offsetof(layer_spec, dilation), .min = 1, .def = 1},
    {"groups", KIND_OPT_INT, offsetof(layer_spec, CONV_GROUPS), .min = 1, .def = 1},
};
static const autocast_op conv2d_autocast[] = {
    {"conv2d",
     AUTOCAST_LOWER_PRECISION_FP,
     "lower_precision_fp: KERNEL_CUDA(conv2d, lower_precision_fp)",
     {"conv2d", "convolution_backward"}},
};

const layer_def conv2d_def = {
    .name = "conv2d",
    .signature = "IN -> OUT",
    .args = conv2d_args,
    .n_args = COUNT_OF(conv2d_args),
    .opts = conv2d_opts,
    .n_opts = COUNT_OF(conv2d_opts),
    .input_shape = no_input_shape,
    .shape = conv2d_shape,
    .params = conv2d_params,
    .autocast = conv2d_autocast,
    .n_autocast = COUNT_OF(conv2d_autocast),
    .forward = conv2d_forward,
    .describe = conv2d_describe,
};
