/*
 * permute.c: `NAME = permute [X] dims=D0,D1,...`, torch.permute(x, dims): one dim of the
 * whole tensor per dim of x (0 is the batch dim, which stays first; negative dims count
 * from the end), each once (aten/src/ATen/native/TensorShape.cpp's permute: the length
 * check, maybe_wrap_dim on each, "duplicate dims are not allowed"). In PyTorch a view
 * (strides permuted, no memory); the harness's tensors are contiguous, so here it is the
 * copy `.contiguous()` makes of that view, as transpose.c's is. On no autocast list (a view
 * keeps its input's dtype). Its backward, PermuteBackward0 (derivatives.yaml's permute:
 * permute_backwards), permutes the gradient back by the inverse permutation. An input
 * without a batch dim (a constant's, a parameter's) permutes all its dims.
 */
#include "layer.h"

#include "ops/shape.h"

/* the permutation in a node's `dims`, 4 bits a dim */
#define PERM_BITS 4
_Static_assert((LAYER_MAX_RANK + 1) * PERM_BITS <= 32, "a permutation fits a node's dims");

/* the geometry reading x (shape `shape`, contiguous) at dims perm[0..ndim) */
static strided_geom permuted(int ndim, const int64_t *shape, const int *perm)
{
    int64_t stride[TENSOR_MAX_DIMS];
    contiguous_strides(ndim, shape, stride);
    strided_geom g = {ndim, {0}, {0}};
    for (int k = 0; k < ndim; k++)
        g.size[k] = shape[perm[k]], g.stride[k] = stride[perm[k]];
    return g;
}

static void permute_backward(run *r, node *n)
{
    int ndim = n->grad->ndim, inv[TENSOR_MAX_DIMS];
    for (int k = 0; k < ndim; k++)
        inv[(n->dims >> (PERM_BITS * k)) & 0xf] = k;
    strided_geom g = permuted(ndim, n->grad->shape, inv);
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->strided_copy(r->be, n->grad, &g, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *permute_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    int perm[TENSOR_MAX_DIMS];
    unsigned packed = 0;
    for (int k = 0; k < x->ndim; k++) {
        perm[k] = dim_index(l->opt_list.v[k], x->ndim);
        packed |= (unsigned)perm[k] << (PERM_BITS * k);
    }
    strided_geom g = permuted(x->ndim, x->shape, perm);
    node *n;
    tensor *y = strided_copy_layer(r, l, x, &g, x->ndim, g.size, "permute", permute_backward, &n);
    if (n)
        n->dims = packed;
    return y;
}

static bool permute_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                          shape_check *sc)
{
    bool batched = !(l->whole_inputs & 1u);
    int rank = in[0].ndim + (batched ? 1 : 0);
    const int_list *dims = &l->opt_list;
    if (dims->n != rank) {
        shape_fail(sc, SHAPE_INPUT,
                   "permute(sparse_coo): number of dimensions in the tensor input does not "
                   "match the length of the desired ordering of dimensions i.e. input.dim() = "
                   "%d is not equal to len(dims) = %d",
                   rank, dims->n);
        return false;
    }
    bool seen[LAYER_MAX_RANK + 1] = {false};
    int perm[LAYER_MAX_RANK + 1] = {0};
    for (int k = 0; k < rank; k++) {
        perm[k] = dim_index(dims->v[k], rank);
        if (perm[k] < 0) {
            shape_fail(sc, SHAPE_INPUT,
                       "Dimension out of range (expected to be in range of [%d, %d], but got "
                       "%lld)",
                       -rank, rank - 1, (long long)dims->v[k]);
            return false;
        }
        if (seen[perm[k]]) {
            shape_fail(sc, SHAPE_LAYER, "permute(): duplicate dims are not allowed.");
            return false;
        }
        seen[perm[k]] = true;
    }
    if (batched && perm[0] != 0) {
        shape_fail(sc, SHAPE_LAYER,
                   "permute moving the batch dim (0) is not supported: dims must start with 0");
        return false;
    }
    int skip = batched ? 1 : 0; /* the per-sample dims of a batched tensor */
    out->ndim = in[0].ndim;
    for (int k = skip; k < rank; k++)
        out->dim[k - skip] = in[0].dim[perm[k] - skip];
    return true;
}

static int permute_describe(const layer_spec *l, char *buf, size_t len)
{
    char dims[128];
    list_text(l->opt_list.v, l->opt_list.n, dims, sizeof dims);
    return snprintf(buf, len, "permute %s", dims);
}

static const kind_opt permute_opts[] = {
    {"dims", KIND_OPT_INTS, offsetof(layer_spec, opt_list), .min = INT64_MIN + 1,
     .required = "dims=D0,D1,..."},
};
static const autocast_op permute_autocast[] = {
    {"permute", AUTOCAST_NONE, "not listed (a view): keeps its input's dtype", {"permute", "clone"}},
};

const layer_def permute_def = {
    .name = "permute",
    .signature = "",
    .opts = permute_opts,
    .n_opts = COUNT_OF(permute_opts),
    .input_shape = no_input_shape,
    .shape = permute_shape,
    .params = no_params,
    .autocast = permute_autocast,
    .n_autocast = COUNT_OF(permute_autocast),
    .forward = permute_forward,
    .describe = permute_describe,
    .whole_inputs = true,
};
