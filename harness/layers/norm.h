/*
 * norm.h: what the normalization kinds' files (layer_norm.c, group_norm.c) share: their
 * forward, from autocast's policy to the tape (norm.c), and their backward, given the
 * layout each kind derives from the tensors it saved.
 */
#ifndef AMPSCOPE_LAYERS_NORM_H
#define AMPSCOPE_LAYERS_NORM_H

#include "layer.h"

/* Where a normalization's mean and rstd are stored: float32 always (layer_norm's acc_type)
 * or in the input's dtype after autocast (group_norm's param_scalar_type). */
typedef enum norm_stats_dtype { NORM_STATS_FLOAT32, NORM_STATS_INPUT } norm_stats_dtype;

/* Applies autocast's policy of the layer's entry to x, w and b (w and b may be NULL), fails on a
 * weight or bias of another dtype than the input, runs norm_forward into "<layer>.out" (mean and
 * rstd "<layer>.mean", "<layer>.rstd"; no mean for NORM_RMS), records the node with
 * `backward` and saves x, mean (NULL for NORM_RMS), rstd and w in that order. g's n, groups, cpg and inner describe x. */
tensor *norm_run(run *r, const layer_spec *l, backward_fn backward, const norm_geom *g, tensor *x,
                 tensor *w, tensor *b, norm_stats_dtype stats);

/* The shape rules of a kind that normalizes the last dim, of size l->in (layer_norm,
 * rms_norm): the input's shape, or the error naming the kind; as the first layer, [C]. */
bool norm_last_dim_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc);
bool norm_last_dim_input_shape(const layer_spec *l, layer_shape *in);

/* The backward of a node norm_run recorded: dx, dw (norm_backward_weight) and db
 * (reduce_channel_sum over g->n and g->inner), each when needed. */
void norm_backward(run *r, node *n, const norm_geom *g);

#endif
