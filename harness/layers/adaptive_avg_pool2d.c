/*
 * adaptive_avg_pool2d.c: nn.AdaptiveAvgPool2d(1), a ResNet's head: x [N, C, H, W] ->
 * [N, C, 1, 1]. Case files: `adaptive_avg_pool2d 1` (the only output size supported).
 * For a 1x1 output PyTorch computes input.mean({-1, -2}, keepdim=True)
 * (adaptive_avg_pool2d_symint in aten/src/ATen/native/AdaptiveAveragePooling.cpp), so the
 * op is mean's: a float32 sum times 1 / (H W), rounded once into the input's dtype, and its
 * backward MeanBackward's dy / (H W), which saves no tensor (only the input's sizes).
 * Autocast: neither op is on a list (mean falls through autocast_mode.cpp): the input's
 * dtype.
 */
#include "layer.h"

static void adaptive_avg_pool2d_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->global_avg_pool_backward(r->be, n->grad, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *adaptive_avg_pool2d_forward(run *r, const layer_spec *l, tensor *const *in,
                                           tensor *const *params)
{
    tensor *x = in[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    tensor *y = run_tensor(r, name, x->dtype, 4, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, "adaptive_avg_pool2d", &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->global_avg_pool_forward(r->be, x, y, stp));
    tape_record(r, "mean", adaptive_avg_pool2d_backward, y, &x, 1);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
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
    {"adaptive_avg_pool2d", AUTOCAST_NONE, "not listed: mean over H, W in its input's dtype"},
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
