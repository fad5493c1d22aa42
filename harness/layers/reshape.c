/*
 * reshape.c: `NAME = reshape D1 [D2 ... D5] [from=X]`: x.reshape(B, D1, D2, ...), the sizes of
 * a sample (the batch dim stays), one of them -1 for the size the others leave
 * (aten/src/ATen/InferSize.h, infer_size_impl: at most one -1, and the product must be the
 * input's numel). The harness's tensors are contiguous, so it is always a view, as
 * reshape is of a contiguous tensor in PyTorch (TensorShape.cpp: reshape returns view when
 * the strides allow): no memory, no rounding, the input's dtype (on no autocast list); its
 * backward views the gradient back (ViewBackward0).
 */
#include "layer.h"

static tensor *reshape_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    int64_t shape[LAYER_MAX_RANK + 1] = {x->shape[0]};
    for (int j = 0; j < l->out_ndim; j++)
        shape[j + 1] = l->out_shape[j];
    return view_layer(r, l, x, l->out_ndim + 1, shape, "view");
}

/* "[-1, 4]": the sizes as written, PyTorch's form in its message */
static void sizes_text(const layer_spec *l, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int j = 0; j < l->n_dims && at < len; j++)
        at += (size_t)snprintf(buf + at, len - at, j ? ", %lld" : "%lld", (long long)l->dims[j]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

static bool reshape_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                          shape_check *sc)
{
    int64_t numel = 1, known = 1;
    int infer = -1;
    for (int j = 0; j < in[0].ndim; j++)
        numel = size_mul(numel, in[0].dim[j]);
    for (int j = 0; j < l->n_dims; j++) {
        if (l->dims[j] != -1) {
            known = size_mul(known, l->dims[j]);
            continue;
        }
        if (infer >= 0) {
            shape_fail(sc, SHAPE_LAYER, "only one dimension can be inferred");
            return false;
        }
        infer = j;
    }
    char sizes[128];
    sizes_text(l, sizes, sizeof sizes);
    if (infer >= 0 ? numel % known != 0 : numel != known) {
        shape_fail(sc, SHAPE_INPUT, "shape '%s' is invalid for input of size %lld per sample",
                   sizes, (long long)numel);
        return false;
    }
    out->ndim = l->n_dims;
    for (int j = 0; j < l->n_dims; j++)
        out->dim[j] = j == infer ? numel / known : l->dims[j];
    return true;
}

static int reshape_describe(const layer_spec *l, char *buf, size_t len)
{
    char sizes[128];
    sizes_text(l, sizes, sizeof sizes);
    return snprintf(buf, len, "reshape (B, %s)", sizes + 1);
}

static const autocast_op reshape_autocast[] = {
    {"reshape", AUTOCAST_NONE, "not listed (a view): keeps its input's dtype", {"view"}},
};

const layer_def reshape_def = {
    .name = "reshape",
    .signature = "D1 [D2 ... D5]",
    .input_shape = no_input_shape,
    .shape = reshape_shape,
    .params = no_params,
    .autocast = reshape_autocast,
    .n_autocast = COUNT_OF(reshape_autocast),
    .forward = reshape_forward,
    .describe = reshape_describe,
    .words = KIND_WORDS_SHAPE,
};
