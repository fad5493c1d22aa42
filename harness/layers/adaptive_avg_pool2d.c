/*
 * adaptive_avg_pool2d.c: nn.AdaptiveAvgPool2d(1), a ResNet's head: x [N, C, H, W] ->
 * [N, C, 1, 1]. Case files: `adaptive_avg_pool2d 1` (the only output size supported).
 * For a 1x1 output PyTorch computes input.mean({-1, -2}, keepdim=True)
 * (adaptive_avg_pool2d_symint in aten/src/ATen/native/AdaptiveAveragePooling.cpp), so the
 * op is the mean row over dims 2 and 3 (ops/reduce.h): a float32 sum in the row's order
 * times mean_kernel_impl's factor, rounded once into the input's dtype, and its backward
 * MeanBackward's grad / (H W), which divides by a CPU scalar: BinaryDivTrueKernel.cu
 * multiplies by its float32 reciprocal, grad * (1.0f / (H W)), rounded once (not a division
 * by H W, which differs from it in the last bit of some values: tests/test_pool.c). It
 * saves no tensor (only the input's sizes).
 * Autocast: neither op is on a list (mean falls through autocast_mode.cpp): the input's
 * dtype.
 */
#include "layer.h"

static tensor *adaptive_avg_pool2d_forward(run *r, const layer_spec *l, tensor *const *in,
                                           tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    return reduce_record(r, RD_OP_mean, x, 1u << 2 | 1u << 3, name, 4, shape, ROLE_ACTIVATION);
}

static bool adaptive_avg_pool2d_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                                      shape_check *sc)
{
    if (in[0].ndim != 3) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT,
                   "input has shape %s; adaptive_avg_pool2d needs a 3-d CxHxW input", s);
        return false;
    }
    *out = (layer_shape){3, {in[0].dim[0], 1, 1}};
    return true;
}

static int adaptive_avg_pool2d_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "adaptive_avg_pool2d 1 (the mean over H and W)");
}

static const autocast_op adaptive_avg_pool2d_autocast[] = {
    {"adaptive_avg_pool2d",
     AUTOCAST_NONE,
     "not listed: mean over H, W in its input's dtype",
     {"adaptive_avg_pool2d", "mean.dim"}},
};

const layer_def adaptive_avg_pool2d_def = {
    .name = "adaptive_avg_pool2d",
    .signature = "1",
    .input_shape = no_input_shape,
    .shape = adaptive_avg_pool2d_shape,
    .params = no_params,
    .autocast = adaptive_avg_pool2d_autocast,
    .n_autocast = COUNT_OF(adaptive_avg_pool2d_autocast),
    .forward = adaptive_avg_pool2d_forward,
    .describe = adaptive_avg_pool2d_describe,
};
