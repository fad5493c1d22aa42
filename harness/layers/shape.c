/*
 * shape.c: shape ops of graph models, with dims of the whole tensor (0 is the batch dim,
 * which none of them moves; negative dims count from the end, as PyTorch's wrap_dim does):
 *  - `NAME = slice dim=D [start=A] [end=B] [step=S]`: x[..., A:B:S] along D
 *    (aten::slice.Tensor; A and B clamped into the dim as TensorShape.cpp's slice clamps
 *    them, negative ones counted from the end; S > 0). A view in PyTorch; a copy here
 *    (narrow_copy). Its backward is slice_backward (derivatives.yaml): zeros of the input's
 *    shape with the gradient placed at A, A+S, ... (narrow_place).
 *  - `NAME = cat A B [C ...] dim=D`: torch.cat((a, b, ...), D), 2 to LAYER_MAX_INPUTS
 *    inputs. On no autocast list (checked with the dispatcher: its output dtype is the type
 *    promotion of its inputs also under autocast, float16 with float32 or with bfloat16 is
 *    float32); every dim but D must agree. A copy in PyTorch and here. Its backward,
 *    cat_tensors_backward (FunctionsManual.cpp), narrows the gradient for each input, a view
 *    that the engine then casts into the input's dtype (validate_outputs in engine.cpp);
 *    here one narrow_copy into the input's dtype, which rounds the same way and costs a copy
 *    where PyTorch's same-dtype narrow is a view.
 *  - `NAME = unsqueeze dim=D`, `NAME = squeeze dim=D`: x.unsqueeze(D), x.squeeze(D) (a dim
 *    of size other than 1 is kept, as PyTorch keeps it). Views in PyTorch and here (no
 *    memory, no rounding); the backward views the gradient back.
 *  - `NAME = pad L R [value=V]`: F.pad(x, (L, R), value=V), constant mode, on the last dim
 *    (aten::constant_pad_nd; negative pads, which crop in PyTorch, are refused). A copy in
 *    PyTorch and here (narrow_place with the fill V); its backward, constant_pad_nd_backward
 *    (derivatives.yaml), pads the gradient by (-L, -R): the middle part, a copy
 *    (narrow_copy).
 *  - `NAME = select dim=D index=I`: x.select(D, I) (x[:, I] for D = 1; I < 0 from the end),
 *    the dim removed. A view in PyTorch; a copy here (narrow_copy). Its backward,
 *    select_backward (derivatives.yaml), places the gradient among zeros (narrow_place).
 *  - `NAME = stack A B [C ...] dim=D`: torch.stack((a, b, ...), D), inputs of one shape, a
 *    new dim D of their count (D in [-rank-1, rank] of the inputs' rank). Its dtypes are
 *    cat's (the dispatcher answers alike), and so is its copy: cat of the inputs each seen
 *    with a dim of 1 at D; input i's gradient is position i of the output's along D.
 * None saves anything for backward; none is on an autocast list (each keeps its input's
 * dtype, cat its inputs' promotion).
 */
#include "layer.h"

/* ---- dims ---- */

bool shape_dim(shape_check *sc, int64_t d, int rank, const char *op, int *out)
{
    *out = dim_index(d, rank);
    if (*out < 0) {
        shape_fail(sc, SHAPE_INPUT,
                   "Dimension out of range (expected to be in range of [%d, %d], but got %lld)",
                   -rank, rank - 1, (long long)d);
        return false;
    }
    if (*out == 0) {
        shape_fail(sc, SHAPE_LAYER, "%s of the batch dim (0) is not supported", op);
        return false;
    }
    return true;
}

/* A view layer: y = x with another shape, the same storage (no memory, no rounding);
 * backward views the gradient back into x's shape. */
static void view_backward(run *r, node *n)
{
    char name[TENSOR_NAME_MAX + 8];
    node_grad_name(r, n, 0, name, sizeof name);
    tensor *dx = view_or_fail(r, n->grad, name, n->in[0].ndim, n->in[0].shape);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

tensor *strided_copy_layer(run *r, const layer_spec *l, tensor *x, const strided_geom *g, int ndim,
                           const int64_t *shape, const char *op, backward_fn backward, node **n)
{
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, x->dtype, ndim, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->strided_copy(r->be, x, g, y, stp));
    *n = tape_record(r, op, backward, y, &x, 1);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

tensor *view_layer(run *r, const layer_spec *l, tensor *x, int ndim, const int64_t *shape,
                   const char *op)
{
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = view_or_fail(r, x, name, ndim, shape);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    tape_record(r, op, view_backward, y, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (stp)
        run_check(r, r->be->observe(r->be, y, stp));
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

/* ---- slice ---- */

/* The length of x[A:B:S] along a dim of `size`, A and B clamped as aten's slice clamps them
 * (aten/src/ATen/native/TensorShape.cpp): negative ones counted from the end, then into
 * [0, size], B no less than A. */
static int64_t slice_len(int64_t size, int64_t *start, int64_t *end, int64_t step)
{
    int64_t a = *start, b = *end;
    if (a < 0)
        a = a < -size ? 0 : a + size;
    if (b < 0)
        b = b < -size ? 0 : b + size;
    a = a > size ? size : a;
    b = b < a ? a : b > size ? size : b;
    *start = a, *end = b;
    return (b - a + step - 1) / step;
}

/* the node's fields (geom's, unused by a slice otherwise): the dim, A and S */
static void slice_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_place(r->be, n->grad, (int)n->dims, n->geom.padding, n->geom.stride,
                                     0.0f, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *slice_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    int d = dim_index(l->opt_int[0], x->ndim);
    int64_t start = l->opt_int[1], end = l->opt_int[2], step = l->opt_int[3];
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++)
        shape[k] = x->shape[k];
    shape[d] = slice_len(x->shape[d], &start, &end, step);
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, x->dtype, x->ndim, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_copy(r->be, x, d, start, step, y, stp));
    node *n = tape_record(r, "slice", slice_backward, y, &x, 1);
    if (n)
        n->dims = (unsigned)d, n->geom.padding = start, n->geom.stride = step;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool slice_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                        shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 1, "slice", &d))
        return false;
    int64_t start = l->opt_int[1], end = l->opt_int[2];
    int64_t n = slice_len(in[0].dim[d - 1], &start, &end, l->opt_int[3]);
    if (n == 0) {
        shape_fail(sc, SHAPE_LAYER,
                   "slice %lld:%lld of dim %lld (of size %lld) is empty; the harness needs "
                   "at least one element",
                   (long long)l->opt_int[1], (long long)l->opt_int[2], (long long)l->opt_int[0],
                   (long long)in[0].dim[d - 1]);
        return false;
    }
    *out = in[0];
    out->dim[d - 1] = n;
    return true;
}

static int slice_describe(const layer_spec *l, char *buf, size_t len)
{
    char end[24] = "";
    if (l->opt_int[2] != INT64_MAX)
        snprintf(end, sizeof end, "%lld", (long long)l->opt_int[2]);
    return snprintf(buf, len, "slice dim %lld [%lld:%s:%lld]", (long long)l->opt_int[0],
                    (long long)l->opt_int[1], end, (long long)l->opt_int[3]);
}

static const kind_opt slice_opts[] = {
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1,
     .required = "dim=D"},
    {"start", KIND_OPT_INT, offsetof(layer_spec, opt_int[1]), .min = INT64_MIN + 1, .def = 0},
    {"end", KIND_OPT_INT, offsetof(layer_spec, opt_int[2]), .min = INT64_MIN + 1, .def = INT64_MAX},
    {"step", KIND_OPT_INT, offsetof(layer_spec, opt_int[3]), .min = 1, .def = 1},
};
static const autocast_op slice_autocast[] = {
    {"slice",
     AUTOCAST_NONE,
     "not listed (a view): keeps its input's dtype",
     {"slice.Tensor", "clone"}},
};

const layer_def slice_def = {
    .name = "slice",
    .signature = "",
    .opts = slice_opts,
    .n_opts = COUNT_OF(slice_opts),
    .input_shape = no_input_shape,
    .shape = slice_shape,
    .params = no_params,
    .autocast = slice_autocast,
    .n_autocast = COUNT_OF(slice_autocast),
    .forward = slice_forward,
    .describe = slice_describe,
};

/* ---- cat ---- */

_Static_assert(LAYER_MAX_INPUTS <= BACKEND_CAT_MAX, "a cat of every input a layer may have");

/* the node's dim (geom's field, unused by a cat otherwise); each input's gradient is its
 * part of the output's, in the input's dtype */
static void cat_backward(run *r, node *n)
{
    int d = (int)n->dims;
    int64_t start = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (node_needs_grad(n, i)) {
            tensor *dx = node_grad_tensor(r, n, i);
            round_stats st;
            round_stats *stp = run_stats(r, &st);
            run_check(r, r->be->narrow_copy(r->be, n->grad, d, start, 1, dx, stp));
            node_give_grad(r, n, i, dx, stp);
        }
        start += n->in[i].shape[d];
    }
}

static tensor *cat_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    int d = dim_index(l->opt_int[0], in[0]->ndim);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < in[0]->ndim; k++)
        shape[k] = in[0]->shape[k];
    for (int i = 1; i < l->n_inputs; i++)
        shape[d] += in[i]->shape[d];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, autocast_output_dtype(in, l->n_inputs), in[0]->ndim, shape,
                           MEM_ACTIVATIONS);
    autocast_why(r, y, ac, in, l->n_inputs);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cat(r->be, (const tensor *const *)in, l->n_inputs, d, y, stp));
    node *n = tape_record(r, "cat", cat_backward, y, in, l->n_inputs);
    if (n)
        n->dims = (unsigned)d;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool cat_shape(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 1, "cat", &d))
        return false;
    *out = in[0];
    for (int i = 1; i < l->n_inputs; i++) {
        if (in[i].ndim != in[0].ndim) {
            shape_fail(sc, SHAPE_LAYER,
                       "Tensors must have same number of dimensions: got %d and %d", in[0].ndim + 1,
                       in[i].ndim + 1);
            return false;
        }
        for (int k = 0; k < in[0].ndim; k++)
            if (k != d - 1 && in[i].dim[k] != in[0].dim[k]) {
                shape_fail(sc, SHAPE_LAYER,
                           "Sizes of tensors must match except in dimension %d. Expected size "
                           "%lld but got size %lld for tensor number %d in the list",
                           d, (long long)in[0].dim[k], (long long)in[i].dim[k], i);
                return false;
            }
        out->dim[d - 1] = size_add(out->dim[d - 1], in[i].dim[d - 1]);
    }
    return true;
}

static int cat_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "cat dim %lld", (long long)l->opt_int[0]);
}

static const kind_opt cat_opts[] = {
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1,
     .required = "dim=D"},
};
static const autocast_op cat_autocast[] = {
    {"cat",
     AUTOCAST_NONE,
     "not listed: its inputs' type promotion (float16 with float32 is float32)",
     {"cat"}},
};

const layer_def cat_def = {
    .name = "cat",
    .signature = "",
    .opts = cat_opts,
    .n_opts = COUNT_OF(cat_opts),
    .input_shape = no_input_shape,
    .shape = cat_shape,
    .params = no_params,
    .autocast = cat_autocast,
    .n_autocast = COUNT_OF(cat_autocast),
    .forward = cat_forward,
    .describe = cat_describe,
    .n_inputs = LAYER_MAX_INPUTS,
    .min_inputs = 2,
};

/* ---- unsqueeze and squeeze ---- */

static tensor *unsqueeze_forward(run *r, const layer_spec *l, tensor *const *in,
                                 tensor *const *params)
{
    tensor *x = in[0];
    int d = dim_index(l->opt_int[0], x->ndim + 1);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0, j = 0; k <= x->ndim; k++)
        shape[k] = k == d ? 1 : x->shape[j++];
    return view_layer(r, l, x, x->ndim + 1, shape, "unsqueeze");
}

static bool unsqueeze_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                            shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 2, "unsqueeze", &d))
        return false;
    if (in[0].ndim == LAYER_MAX_RANK) {
        shape_fail(sc, SHAPE_LAYER, "unsqueeze of a %d-d tensor: at most %d dims with the batch",
                   in[0].ndim + 1, LAYER_MAX_RANK + 1);
        return false;
    }
    out->ndim = in[0].ndim + 1;
    for (int k = 0, j = 0; k < out->ndim; k++)
        out->dim[k] = k == d - 1 ? 1 : in[0].dim[j++];
    return true;
}

/* in without its whole-tensor dim d (per-sample d - 1) into out; a sample keeps one dim */
static bool drop_dim(shape_check *sc, const layer_shape *in, int d, const char *op,
                     layer_shape *out)
{
    if (in->ndim == 1) {
        shape_fail(sc, SHAPE_LAYER, "%s of the only per-sample dim is not supported", op);
        return false;
    }
    out->ndim = in->ndim - 1;
    for (int k = 0, j = 0; k < in->ndim; k++)
        if (k != d - 1)
            out->dim[j++] = in->dim[k];
    return true;
}

static tensor *squeeze_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    int d = dim_index(l->opt_int[0], x->ndim);
    if (x->shape[d] != 1) /* PyTorch keeps a dim of another size */
        return view_layer(r, l, x, x->ndim, x->shape, "squeeze");
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0, j = 0; k < x->ndim; k++)
        if (k != d)
            shape[j++] = x->shape[k];
    return view_layer(r, l, x, x->ndim - 1, shape, "squeeze");
}

static bool squeeze_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                          shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 1, "squeeze", &d))
        return false;
    *out = in[0];
    return in[0].dim[d - 1] != 1 || drop_dim(sc, &in[0], d, "squeeze", out);
}

static int dim_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "%s %lld", layer_def_of(l->kind)->name, (long long)l->opt_int[0]);
}

static const kind_opt dim_opts[] = {
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1,
     .required = "dim=D"},
};
static const autocast_op unsqueeze_autocast[] = {
    {"unsqueeze", AUTOCAST_NONE, "not listed (a view): keeps its input's dtype", {"unsqueeze"}},
};
static const autocast_op squeeze_autocast[] = {
    {"squeeze", AUTOCAST_NONE, "not listed (a view): keeps its input's dtype", {"squeeze.dim"}},
};

const layer_def unsqueeze_def = {
    .name = "unsqueeze",
    .signature = "",
    .opts = dim_opts,
    .n_opts = COUNT_OF(dim_opts),
    .input_shape = no_input_shape,
    .shape = unsqueeze_shape,
    .params = no_params,
    .autocast = unsqueeze_autocast,
    .n_autocast = COUNT_OF(unsqueeze_autocast),
    .forward = unsqueeze_forward,
    .describe = dim_describe,
};

const layer_def squeeze_def = {
    .name = "squeeze",
    .signature = "",
    .opts = dim_opts,
    .n_opts = COUNT_OF(dim_opts),
    .input_shape = no_input_shape,
    .shape = squeeze_shape,
    .params = no_params,
    .autocast = squeeze_autocast,
    .n_autocast = COUNT_OF(squeeze_autocast),
    .forward = squeeze_forward,
    .describe = dim_describe,
};

/* ---- pad ---- */

/* the node's fields (geom's, unused by a pad otherwise): the last dim and L */
static void pad_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_copy(r->be, n->grad, (int)n->dims, n->geom.padding, 1, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *pad_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    int d = x->ndim - 1;
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++)
        shape[k] = x->shape[k];
    shape[d] += l->opt_int[0] + l->opt_int[1];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, x->dtype, x->ndim, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_place(r->be, x, d, l->opt_int[0], 1, (float)l->opt_real[0], y, stp));
    node *n = tape_record(r, "pad", pad_backward, y, &x, 1);
    if (n)
        n->dims = (unsigned)d, n->geom.padding = l->opt_int[0];
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool pad_shape(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    *out = in[0];
    int d = in[0].ndim - 1;
    out->dim[d] = size_add(in[0].dim[d], size_add(l->opt_int[0], l->opt_int[1]));
    return true;
}

static int pad_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "pad (%lld, %lld), value %g", (long long)l->opt_int[0],
                    (long long)l->opt_int[1], l->opt_real[0]);
}

static const kind_arg pad_args[] = {
    {"left", "left", offsetof(layer_spec, opt_int[0]), 0},
    {"right", "right", offsetof(layer_spec, opt_int[1]), 0},
};
static const kind_opt pad_opts[] = {
    {"value", KIND_OPT_REAL, offsetof(layer_spec, opt_real[0]), .range = ANY, .real_def = 0.0},
};
static const autocast_op pad_autocast[] = {
    {"pad", AUTOCAST_NONE, "not listed: keeps its input's dtype", {"constant_pad_nd"}},
};

const layer_def pad_def = {
    .name = "pad",
    .signature = "L R",
    .args = pad_args,
    .n_args = COUNT_OF(pad_args),
    .opts = pad_opts,
    .n_opts = COUNT_OF(pad_opts),
    .input_shape = no_input_shape,
    .shape = pad_shape,
    .params = no_params,
    .autocast = pad_autocast,
    .n_autocast = COUNT_OF(pad_autocast),
    .forward = pad_forward,
    .describe = pad_describe,
};

/* ---- select and stack ---- */

/* t's metadata with a dim of size 1 inserted at d (no memory: a stack copy) */
static tensor with_unit_dim(const tensor *t, int d)
{
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0, j = 0; k <= t->ndim; k++)
        shape[k] = k == d ? 1 : t->shape[j++];
    return reshaped(t, t->ndim + 1, shape);
}

/* the node's fields (geom's, unused by a select otherwise): the dim and the index */
static void select_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    tensor g = with_unit_dim(n->grad, (int)n->dims);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_place(r->be, &g, (int)n->dims, n->geom.padding, 1, 0.0f, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

/* index I of a dim of `size` into [0, size), or -1 */
static int64_t select_index(int64_t i, int64_t size)
{
    if (i < -size || i >= size)
        return -1;
    return i < 0 ? i + size : i;
}

static tensor *select_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    int d = dim_index(l->opt_int[0], x->ndim);
    int64_t i = select_index(l->opt_int[1], x->shape[d]);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0, j = 0; k < x->ndim; k++)
        if (k != d)
            shape[j++] = x->shape[k];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, x->dtype, x->ndim - 1, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    tensor y1 = with_unit_dim(y, d);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->narrow_copy(r->be, x, d, i, 1, &y1, stp));
    node *n = tape_record(r, "select", select_backward, y, &x, 1);
    if (n)
        n->dims = (unsigned)d, n->geom.padding = i;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool select_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 1, "select", &d))
        return false;
    int64_t size = in[0].dim[d - 1];
    if (select_index(l->opt_int[1], size) < 0) {
        shape_fail(sc, SHAPE_LAYER,
                   "select(): index %lld out of range for tensor of per-sample size %lld at "
                   "dimension %d",
                   (long long)l->opt_int[1], (long long)size, d);
        return false;
    }
    return drop_dim(sc, &in[0], d, "select", out);
}

static int select_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "select dim %lld index %lld", (long long)l->opt_int[0],
                    (long long)l->opt_int[1]);
}

static const kind_opt select_opts[] = {
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1,
     .required = "dim=D"},
    {"index", KIND_OPT_INT, offsetof(layer_spec, opt_int[1]), .min = INT64_MIN + 1,
     .required = "index=I"},
};
static const autocast_op select_autocast[] = {
    {"select",
     AUTOCAST_NONE,
     "not listed (a view): keeps its input's dtype",
     {"select.int", "clone"}},
};

const layer_def select_def = {
    .name = "select",
    .signature = "",
    .opts = select_opts,
    .n_opts = COUNT_OF(select_opts),
    .input_shape = no_input_shape,
    .shape = select_shape,
    .params = no_params,
    .autocast = select_autocast,
    .n_autocast = COUNT_OF(select_autocast),
    .forward = select_forward,
    .describe = select_describe,
};

/* the node's dim; input i's gradient is the output gradient's position i along it */
static void stack_backward(run *r, node *n)
{
    int d = (int)n->dims;
    for (int i = 0; i < n->n_in; i++) {
        if (!node_needs_grad(n, i))
            continue;
        tensor *dx = node_grad_tensor(r, n, i);
        tensor dx1 = with_unit_dim(dx, d);
        round_stats st;
        round_stats *stp = run_stats(r, &st);
        run_check(r, r->be->narrow_copy(r->be, n->grad, d, i, 1, &dx1, stp));
        node_give_grad(r, n, i, dx, stp);
    }
}

static tensor *stack_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    int d = dim_index(l->opt_int[0], in[0]->ndim + 1);
    tensor units[LAYER_MAX_INPUTS];
    const tensor *parts[LAYER_MAX_INPUTS];
    for (int i = 0; i < l->n_inputs; i++) {
        units[i] = with_unit_dim(in[i], d);
        parts[i] = &units[i];
    }
    int64_t shape[TENSOR_MAX_DIMS];
    for (int k = 0; k <= in[0]->ndim; k++)
        shape[k] = units[0].shape[k];
    shape[d] = l->n_inputs;
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, autocast_output_dtype(in, l->n_inputs), in[0]->ndim + 1, shape,
                           MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, in, l->n_inputs);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cat(r->be, parts, l->n_inputs, d, y, stp));
    node *n = tape_record(r, "stack", stack_backward, y, in, l->n_inputs);
    if (n)
        n->dims = (unsigned)d;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool stack_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                        shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[0], in[0].ndim + 2, "stack", &d))
        return false;
    for (int i = 1; i < l->n_inputs; i++) {
        bool same = in[i].ndim == in[0].ndim;
        for (int k = 0; same && k < in[0].ndim; k++)
            same = in[i].dim[k] == in[0].dim[k];
        if (!same) {
            char s0[128], si[128];
            shape_text(&in[0], s0, sizeof s0);
            shape_text(&in[i], si, sizeof si);
            shape_fail(sc, SHAPE_LAYER,
                       "stack expects each tensor to be equal size, but got per-sample %s at "
                       "entry 0 and %s at entry %d",
                       s0, si, i);
            return false;
        }
    }
    if (in[0].ndim == LAYER_MAX_RANK) {
        shape_fail(sc, SHAPE_LAYER, "stack of %d-d tensors: at most %d dims with the batch",
                   in[0].ndim + 1, LAYER_MAX_RANK + 1);
        return false;
    }
    out->ndim = in[0].ndim + 1;
    for (int k = 0, j = 0; k < out->ndim; k++)
        out->dim[k] = k == d - 1 ? l->n_inputs : in[0].dim[j++];
    return true;
}

static const autocast_op stack_autocast[] = {
    {"stack",
     AUTOCAST_NONE,
     "not listed: its inputs' type promotion (float16 with float32 is float32)",
     {"stack"}},
};

const layer_def stack_def = {
    .name = "stack",
    .signature = "",
    .opts = dim_opts,
    .n_opts = COUNT_OF(dim_opts),
    .input_shape = no_input_shape,
    .shape = stack_shape,
    .params = no_params,
    .autocast = stack_autocast,
    .n_autocast = COUNT_OF(stack_autocast),
    .forward = stack_forward,
    .describe = dim_describe,
    .n_inputs = LAYER_MAX_INPUTS,
    .min_inputs = 2,
};
