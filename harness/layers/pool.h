/*
 * pool.h: what the window pooling kinds' files (max_pool2d.c, avg_pool2d.c) share: their
 * options' fields (kernel, stride, padding of layer_spec; stride 0 means the kernel, as
 * PyTorch's stride=None, and `check --json` shows it so), their shape rule and their
 * geometry (pool.c).
 */
#ifndef AMPSCOPE_LAYERS_POOL_H
#define AMPSCOPE_LAYERS_POOL_H

#include "layer.h"

/* the stride a layer uses: its own, or its kernel's when none was given */
int64_t pool_stride(const layer_spec *l);
/* The output CxHoxWo of a CxHxW input, floor((H + 2p - k) / s) + 1, with PyTorch's texts
 * for a padding above half the kernel and an output too small. */
bool pool_shape(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc);
/* the geometry of x [N, C, H, W] pooled as l says (c_out = c_in, dilation 1) */
conv2d_geom pool_geom(const layer_spec *l, const tensor *x);
/* "kernel 2, stride 2, padding 0" */
int pool_describe_window(const layer_spec *l, char *buf, size_t len);

#endif
