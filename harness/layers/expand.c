/*
 * expand.c: the kinds that repeat values, both an expand in PyTorch.
 *  - `NAME = expand [X] sizes=S0,S1,...`: x.expand(S0, S1, ...), sizes of the whole tensor
 *    (aten/src/ATen/ExpandUtils.cpp, inferExpandGeometry): -1 keeps a dim, a dim of size 1
 *    may take any size, new leading dims may be added (not -1) in front of an input without
 *    a batch dim (a constant's, a parameter's); the batch dim's size is -1 (it keeps its
 *    size). In PyTorch a view (stride 0 along the expanded dims, no memory); here the copy a
 *    following reshape or `.contiguous()` makes of it (HF's repeat_kv: expand, then
 *    reshape). Its backward, derivatives.yaml's expand, is at::sum_to(grad, self.sizes())
 *    (ExpandUtils.h's _sum_to: one grad.sum(dims, keepdim=True) over the new leading dims
 *    and the dims that grew from 1): the sum row of ops/reduce.h, a float32 accumulator
 *    and one rounding into the gradient's dtype, as ReduceSumProdKernel.cu's sum_functor.
 *  - `NAME = repeat_interleave [X] repeats=R dim=D`: torch.repeat_interleave(x, R, dim=D)
 *    with an int R >= 1 (0 would leave no element). No kernel of its own in PyTorch: its
 *    int overload is CompositeImplicitAutograd (aten/src/ATen/native/Repeat.cpp:
 *    x.unsqueeze(D + 1).expand(..., R, ...).clone().flatten(D, D + 1)), so it has no entry
 *    of its own in derivatives.yaml and autograd records ViewBackward0, CloneBackward0,
 *    ExpandBackward0 (checked with PyTorch 2.15): its gradient is expand's, the sum of each
 *    group of R consecutive values along D, the sum row over the inserted dim D + 1.
 * Neither is on an autocast list (each keeps its input's dtype). Dims are the whole
 * tensor's (0 is the batch dim, which repeat_interleave does not take).
 */
#include "layer.h"

#include "ops/shape.h"

/* ---- expand ---- */

/* y's shape and the geometry reading x (contiguous) into it; the mask of y's dims that the
 * backward sums (new leading ones and those grown from 1) */
static strided_geom expanded(const tensor *x, const int_list *sizes, unsigned *sum_dims)
{
    int lead = sizes->n - x->ndim;
    int64_t stride[TENSOR_MAX_DIMS];
    contiguous_strides(x->ndim, x->shape, stride);
    strided_geom g = {sizes->n, {0}, {0}};
    *sum_dims = 0;
    for (int k = 0; k < sizes->n; k++) {
        if (k < lead) {
            g.size[k] = sizes->v[k], g.stride[k] = 0;
            *sum_dims |= 1u << k;
            continue;
        }
        int64_t have = x->shape[k - lead];
        g.size[k] = sizes->v[k] == -1 ? have : sizes->v[k];
        g.stride[k] = have == 1 && g.size[k] != 1 ? 0 : stride[k - lead];
        if (have == 1 && g.size[k] != 1)
            *sum_dims |= 1u << k;
    }
    return g;
}

/* the node's dims: the mask of the gradient's dims to sum */
static void expand_backward(run *r, node *n)
{
    if (!n->dims) { /* nothing grew: the gradient as it is */
        give_grad_as_is(r, n, 0, n->grad);
        return;
    }
    tensor *dx = node_grad_tensor(r, n, 0);
    op_params p = {{0}, {0}, 0};
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->reduce_forward(r->be, RD_OP_sum, &p, n->grad, n->dims, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *expand_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    unsigned sum_dims;
    strided_geom g = expanded(x, &l->opt_list, &sum_dims);
    node *n;
    tensor *y = strided_copy_layer(r, l, x, &g, g.ndim, g.size, "expand", expand_backward, &n);
    if (n)
        n->dims = sum_dims;
    return y;
}

void list_text(const int64_t *v, int n, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < n && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, k ? ", %lld" : "%lld", (long long)v[k]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

static bool expand_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    bool batched = !(l->whole_inputs & 1u);
    int skip = batched ? 1 : 0;
    int rank = in[0].ndim + skip;
    const int_list *sizes = &l->opt_list;
    int64_t have[LAYER_MAX_RANK + 1] = {-1}; /* the batch's size is unknown here */
    for (int k = 0; k < in[0].ndim; k++)
        have[k + skip] = in[0].dim[k];
    char want[128], got[128];
    list_text(sizes->v, sizes->n, want, sizeof want);
    list_text(have, rank, got, sizeof got);
    if (sizes->n < rank) {
        shape_fail(sc, SHAPE_INPUT,
                   "expand(size=%s): the number of sizes provided (%d) must be greater or equal "
                   "to the number of dimensions in the tensor (%d)",
                   want, sizes->n, rank);
        return false;
    }
    int lead = sizes->n - rank;
    if (batched && (lead > 0 || sizes->v[0] != -1)) {
        shape_fail(sc, SHAPE_LAYER,
                   "expand of the batch dim (0) is not supported: its size is -1 (kept), and "
                   "new leading dims are for inputs without a batch dim");
        return false;
    }
    if (!batched && sizes->n > LAYER_MAX_RANK) {
        shape_fail(sc, SHAPE_LAYER, "expand to %d dims: at most %d without a batch dim",
                   sizes->n, LAYER_MAX_RANK);
        return false;
    }
    out->ndim = sizes->n - skip;
    for (int k = skip; k < sizes->n; k++) {
        int64_t s = sizes->v[k], h = k < lead ? 0 : have[k - lead];
        if (k < lead && s == -1) {
            shape_fail(sc, SHAPE_LAYER,
                       "The expanded size of the tensor (-1) isn't allowed in a leading, "
                       "non-existing dimension %d",
                       k);
            return false;
        }
        if (k >= lead && s != -1 && s != h && h != 1) {
            shape_fail(sc, SHAPE_INPUT,
                       "The expanded size of the tensor (%lld) must match the existing size "
                       "(%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                       "sizes: %s",
                       (long long)s, (long long)h, k, want, got);
            return false;
        }
        if (s == 0) {
            shape_fail(sc, SHAPE_LAYER,
                       "expand to a size of 0 (dim %d) is empty; the harness needs at least "
                       "one element",
                       k);
            return false;
        }
        out->dim[k - skip] = s == -1 ? h : s;
    }
    return true;
}

static int expand_describe(const layer_spec *l, char *buf, size_t len)
{
    char sizes[128];
    list_text(l->opt_list.v, l->opt_list.n, sizes, sizeof sizes);
    return snprintf(buf, len, "expand %s", sizes);
}

static const kind_opt expand_opts[] = {
    {"sizes", KIND_OPT_INTS, offsetof(layer_spec, opt_list), .min = -1,
     .required = "sizes=S0,S1,..."},
};
static const autocast_op expand_autocast[] = {
    {"expand", AUTOCAST_NONE, "not listed (a view): keeps its input's dtype", {"expand", "clone"}},
};

const layer_def expand_def = {
    .name = "expand",
    .signature = "",
    .opts = expand_opts,
    .n_opts = COUNT_OF(expand_opts),
    .input_shape = no_input_shape,
    .shape = expand_shape,
    .params = no_params,
    .autocast = expand_autocast,
    .n_autocast = COUNT_OF(expand_autocast),
    .forward = expand_forward,
    .describe = expand_describe,
    .whole_inputs = true,
};

/* ---- repeat_interleave ---- */

/* x seen as [outer, n, inner] along dim d: y is [outer, n, R, inner] read from it */
static strided_geom interleaved(const tensor *x, int d, int64_t repeats)
{
    strided_geom g = {4, {1, x->shape[d], repeats, 1}, {0}};
    for (int k = 0; k < d; k++)
        g.size[0] *= x->shape[k];
    for (int k = d + 1; k < x->ndim; k++)
        g.size[3] *= x->shape[k];
    g.stride[0] = g.size[1] * g.size[3], g.stride[1] = g.size[3], g.stride[2] = 0,
    g.stride[3] = 1;
    return g;
}

/* the node's fields (geom's, unused otherwise): the dim and R; the gradient summed over
 * each group of R (dim 2 of its [outer, n, R, inner] view) */
static void repeat_interleave_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    strided_geom g = interleaved(dx, (int)n->dims, n->geom.stride);
    tensor dy = reshaped(n->grad, 4, g.size);
    op_params p = {{0}, {0}, 0};
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->reduce_forward(r->be, RD_OP_sum, &p, &dy, 1u << 2, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *repeat_interleave_forward(run *r, const layer_spec *l, tensor *const *in,
                                         tensor *const *params)
{
    tensor *x = in[0];
    int d = dim_index(l->opt_int[1], x->ndim);
    int64_t repeats = l->opt_int[0], shape[TENSOR_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++)
        shape[k] = x->shape[k] * (k == d ? repeats : 1);
    strided_geom g = interleaved(x, d, repeats);
    node *n;
    tensor *y = strided_copy_layer(r, l, x, &g, x->ndim, shape, "repeat_interleave",
                                   repeat_interleave_backward, &n);
    if (n)
        n->dims = (unsigned)d, n->geom.stride = repeats;
    return y;
}

static bool repeat_interleave_shape(const layer_spec *l, const layer_shape *in,
                                    layer_shape *out, shape_check *sc)
{
    int d;
    if (!shape_dim(sc, l->opt_int[1], in[0].ndim + 1, "repeat_interleave", &d))
        return false;
    *out = in[0];
    out->dim[d - 1] = size_mul(in[0].dim[d - 1], l->opt_int[0]);
    return true;
}

static int repeat_interleave_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "repeat_interleave %lld dim %lld", (long long)l->opt_int[0],
                    (long long)l->opt_int[1]);
}

static const kind_opt repeat_interleave_opts[] = {
    {"repeats", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = 1,
     .required = "repeats=R"},
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[1]), .min = INT64_MIN + 1,
     .required = "dim=D"},
};
static const autocast_op repeat_interleave_autocast[] = {
    {"repeat_interleave",
     AUTOCAST_NONE,
     "not listed: keeps its input's dtype",
     {"repeat_interleave.self_int", "expand", "clone"}},
};

const layer_def repeat_interleave_def = {
    .name = "repeat_interleave",
    .signature = "",
    .opts = repeat_interleave_opts,
    .n_opts = COUNT_OF(repeat_interleave_opts),
    .input_shape = no_input_shape,
    .shape = repeat_interleave_shape,
    .params = no_params,
    .autocast = repeat_interleave_autocast,
    .n_autocast = COUNT_OF(repeat_interleave_autocast),
    .forward = repeat_interleave_forward,
    .describe = repeat_interleave_describe,
};
