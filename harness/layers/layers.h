/*
 * layers.h: the forward functions of layers and losses. Each takes its inputs as borrowed
 * references, applies autocast's policy (autocast.h), checks dtypes as PyTorch does outside
 * autocast, runs the op through the backend table, records a tape node whose backward runs
 * in the dtype the forward ran in, observes its output, and returns a new reference.
 * Output names: "<layer>.out"; losses: "log_softmax.out", "mse.out", "loss".
 */
#ifndef AMPSCOPE_LAYERS_H
#define AMPSCOPE_LAYERS_H

#include "../run.h"

tensor *linear_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b);
tensor *conv2d_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b);
tensor *relu_forward(run *r, const layer_spec *l, tensor *x);
tensor *flatten_forward(run *r, const layer_spec *l, tensor *x);
/* log_softmax + nll_loss (mean reduction), as F.cross_entropy; target: int64 labels */
tensor *cross_entropy_forward(run *r, tensor *logits, tensor *target);
/* F.mse_loss; reduction_none returns the elementwise loss "mse.out" */
tensor *mse_loss_forward(run *r, tensor *pred, tensor *target, bool reduction_none);
/* x.mean(), named `name` */
tensor *mean_forward(run *r, tensor *x, const char *name);

/* PyTorch's names for dtypes in error messages: ScalarType ("Half"), TypeMeta ("c10::Half"),
 * and CUDA tensor types ("torch.cuda.HalfTensor"). */
const char *scalar_type_name(dtype dt);
const char *type_meta_name(dtype dt);
const char *cuda_tensor_type_name(dtype dt);

#endif
