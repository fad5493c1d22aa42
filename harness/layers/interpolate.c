/*
 * interpolate.c: F.interpolate(x, scale_factor=S, mode="nearest") over x [N, C, H, W] (per
 * sample CxHxW) -> [N, C, H*S, W*S], diffusers' Upsample2D. Case files:
 * `interpolate scale_factor=S [mode=nearest]`, S a whole number >= 1 (F.interpolate passes
 * it to upsample_nearest2d.vec as scale_factors, so the kernels' scale is 1/S: the index
 * rules of ops/interpolate_math.h). mode=bilinear (upsample_bilinear2d) is not supported.
 *
 * Autocast: on CUDA's float32 list (autocast_mode.h's AT_FORALL_FP32:
 * KERNEL_CUDA(upsample_nearest2d, fp32), checked on fake CUDA tensors:
 * tests/references/autocast_policies.csv), so a half input is cast up and the output is
 * float32; outside autocast it runs in its input's dtype. Its backward
 * (derivatives.yaml: upsample_nearest2d_backward with the input's sizes) saves no tensor and
 * sums each input's S*S gradients in float32 (accscalar_t), rounded once.
 */
#include "layer.h"

#define UP_SCALE opt_int[0]
#define UP_MODE opt_choice[0]

static void interpolate_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->upsample_nearest2d_backward(r->be, &n->geom, n->grad, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *interpolate_forward(run *r, const layer_spec *l, tensor *const *in,
                                   tensor *const *params)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *x = autocast_arg(r, ac, in[0]);
    conv2d_geom g = {.n = x->shape[0],
                     .c_in = x->shape[1],
                     .c_out = x->shape[1],
                     .h_in = x->shape[2],
                     .w_in = x->shape[3],
                     .h_out = x->shape[2] * l->UP_SCALE,
                     .w_out = x->shape[3] * l->UP_SCALE,
                     .stride = l->UP_SCALE};
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[4] = {g.n, g.c_out, g.h_out, g.w_out};
    tensor *y = run_tensor(r, name, x->dtype, 4, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, ac, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->upsample_nearest2d_forward(r->be, &g, x, y, stp));
    node *n = tape_record(r, "upsample_nearest2d", interpolate_backward, y, &x, 1);
    if (n)
        n->geom = g;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, x);
    return y;
}

static bool interpolate_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                              shape_check *sc)
{
    if (in[0].ndim != 3) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; interpolate needs a 3-d CxHxW input", s);
        return false;
    }
    int64_t h = size_mul(in[0].dim[1], l->UP_SCALE), w = size_mul(in[0].dim[2], l->UP_SCALE);
    if (h == INT64_MAX || w == INT64_MAX) {
        shape_fail(sc, SHAPE_LAYER, "scale_factor %lld makes the output too large",
                   (long long)l->UP_SCALE);
        return false;
    }
    *out = (layer_shape){3, {in[0].dim[0], h, w}};
    return true;
}

static int interpolate_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "interpolate scale_factor %lld, nearest", (long long)l->UP_SCALE);
}

static const kind_opt interpolate_opts[] = {
    {"scale_factor", KIND_OPT_INT, offsetof(layer_spec, UP_SCALE), .min = 1,
     .required = "scale_factor=S"},
    {"mode", KIND_OPT_CHOICE, offsetof(layer_spec, UP_MODE), .def = 0,
     .choices = (const char *const[]){"nearest"}, .n_choices = 1},
    {"size", KIND_OPT_REFUSED, .refusal = "size= is not supported (give scale_factor=S)"},
    {"align_corners", KIND_OPT_REFUSED,
     .refusal = "align_corners is not supported (mode=nearest takes none)"},
};
static const autocast_op interpolate_autocast[] = {
    {"upsample_nearest2d",
     AUTOCAST_FP32,
     "fp32: KERNEL_CUDA(upsample_nearest2d, fp32)",
     {"upsample_nearest2d.vec", "upsample_nearest2d", "upsample_nearest2d_backward"}},
};

const layer_def interpolate_def = {
    .name = "interpolate",
    .signature = "",
    .opts = interpolate_opts,
    .n_opts = COUNT_OF(interpolate_opts),
    .input_shape = no_input_shape,
    .shape = interpolate_shape,
    .params = no_params,
    .autocast = interpolate_autocast,
    .n_autocast = COUNT_OF(interpolate_autocast),
    .forward = interpolate_forward,
    .describe = interpolate_describe,
};
