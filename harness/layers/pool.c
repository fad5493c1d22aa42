/*
 * pool.c: the shape rule and geometry the window pooling kinds share (pool.h), as
 * PyTorch's pool2d_shape_check and pooling_output_shape compute them (ceil_mode=False,
 * dilation 1; aten/src/ATen/native/Pool.h).
 */
#include "pool.h"

int64_t pool_stride(const layer_spec *l) { return l->stride ? l->stride : l->kernel; }

bool pool_shape(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    char s[128];
    shape_text(&in[0], s, sizeof s);
    if (in[0].ndim != 3) {
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; pooling needs a 3-d CxHxW input", s);
        return false;
    }
    if (l->padding > l->kernel / 2) {
        /* pooling_output_shape_pad_lr's check, before either kind's own */
        shape_fail(sc, SHAPE_LAYER,
                   "pad should be at most half of effective kernel size, but got pad=%lld, "
                   "kernel_size=%lld and dilation=1",
                   (long long)l->padding, (long long)l->kernel);
        return false;
    }
    int64_t st = pool_stride(l), h = (in[0].dim[1] + 2 * l->padding - l->kernel) / st + 1,
            w = (in[0].dim[2] + 2 * l->padding - l->kernel) / st + 1;
    if (in[0].dim[1] + 2 * l->padding < l->kernel || in[0].dim[2] + 2 * l->padding < l->kernel ||
        h < 1 || w < 1) {
        shape_fail(sc, SHAPE_LAYER,
                   "Given input size: (%s). Calculated output size: (%lldx%lldx%lld). Output "
                   "size is too small",
                   s, (long long)in[0].dim[0],
                   (long long)(in[0].dim[1] + 2 * l->padding < l->kernel ? 0 : h),
                   (long long)(in[0].dim[2] + 2 * l->padding < l->kernel ? 0 : w));
        return false;
    }
    *out = (layer_shape){3, {in[0].dim[0], h, w}};
    return true;
}

conv2d_geom pool_geom(const layer_spec *l, const tensor *x)
{
    return (conv2d_geom){.n = x->shape[0],
                         .c_in = x->shape[1],
                         .h_in = x->shape[2],
                         .w_in = x->shape[3],
                         .c_out = x->shape[1],
                         .h_out = l->out_shape[1],
                         .w_out = l->out_shape[2],
                         .kh = l->kernel,
                         .kw = l->kernel,
                         .stride = pool_stride(l),
                         .padding = l->padding,
                         .dilation = 1};
}

int pool_describe_window(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "kernel %lld, stride %lld, padding %lld", (long long)l->kernel,
                    (long long)pool_stride(l), (long long)l->padding);
}
