/*
 * transpose.c: `NAME = transpose D1 D2`, x.transpose(D1, D2) with the dims of the whole
 * tensor (0 is the batch dim, which stays; negative dims count from the end), and the
 * dim-swapping copy split_heads and merge_heads share. In PyTorch a transpose is a view
 * (no memory); the harness's tensors are contiguous, so its transpose is the copy that
 * PyTorch's matmul makes of such a view when it reshapes it for bmm (aten's matmul:
 * `reshape` of a non-contiguous batch): in the attention pattern the copy and what bmm
 * saves for backward are the same bytes PyTorch holds, under the transpose's name. Not on
 * any autocast list (a view keeps its input's dtype). Saves nothing; the gradient is
 * transposed back.
 */
#include "layer.h"

tensor reshaped(const tensor *t, int ndim, const int64_t *shape)
{
    tensor v = *t;
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++)
        v.shape[d] = shape[d];
    return v;
}

tensor *swap_copy(run *r, const tensor *x, int d1, int d2, const char *name, mem_category cat,
                  round_stats *st)
{
    int64_t shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d == d1 ? d2 : d == d2 ? d1 : d];
    tensor *y = run_tensor(r, name, x->dtype, x->ndim, shape, cat);
    run_check(r, r->be->transpose(r->be, x, d1, d2, y, st));
    return y;
}

int dim_index(int64_t d, int rank)
{
    if (d < -rank || d >= rank)
        return -1;
    return (int)(d < 0 ? d + rank : d);
}

static void transpose_backward(run *r, node *n)
{
    char name[TENSOR_NAME_MAX + 8];
    node_grad_name(r, n, 0, name, sizeof name);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *dx = swap_copy(r, n->grad, (int)n->geom.kh, (int)n->geom.kw, name, MEM_GRADS, stp);
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *transpose_forward(run *r, const layer_spec *l, tensor *const *in,
                                 tensor *const *params)
{
    tensor *x = in[0];
    int d1 = dim_index(l->opt_int[0], x->ndim), d2 = dim_index(l->opt_int[1], x->ndim);
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *y = swap_copy(r, x, d1, d2, name, MEM_ACTIVATIONS, stp);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1);
    node *n = tape_record(r, "transpose", transpose_backward, y, &x, 1);
    if (n) /* the dims swapped (geom's fields, unused by a transpose otherwise) */
        n->geom.kh = d1, n->geom.kw = d2;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool transpose_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                            shape_check *sc)
{
    int rank = in[0].ndim + 1; /* with the batch dim */
    int d[2];
    for (int k = 0; k < 2; k++) {
        d[k] = dim_index(l->opt_int[k], rank);
        if (d[k] < 0) {
            shape_fail(sc, SHAPE_INPUT,
                       "Dimension out of range (expected to be in range of [%d, %d], but got "
                       "%lld)",
                       -rank, rank - 1, (long long)l->opt_int[k]);
            return false;
        }
        if (d[k] == 0) {
            shape_fail(sc, SHAPE_LAYER, "transpose of the batch dim (0) is not supported");
            return false;
        }
    }
    *out = in[0];
    out->dim[d[0] - 1] = in[0].dim[d[1] - 1];
    out->dim[d[1] - 1] = in[0].dim[d[0] - 1];
    return true;
}

static int transpose_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "transpose %lld %lld", (long long)l->opt_int[0],
                    (long long)l->opt_int[1]);
}

static const kind_arg transpose_args[] = {
    {"dim0", "dim0", offsetof(layer_spec, opt_int[0]), INT64_MIN + 1},
    {"dim1", "dim1", offsetof(layer_spec, opt_int[1]), INT64_MIN + 1},
};
static const autocast_op transpose_autocast[] = {
    {"transpose",
     AUTOCAST_NONE,
     "not listed (a view): keeps its input's dtype",
     {"transpose.int", "clone"}},
};

const layer_def transpose_def = {
    .name = "transpose",
    .signature = "D1 D2",
    .args = transpose_args,
    .n_args = COUNT_OF(transpose_args),
    .input_shape = no_input_shape,
    .shape = transpose_shape,
    .params = no_params,
    .autocast = transpose_autocast,
    .n_autocast = COUNT_OF(transpose_autocast),
    .forward = transpose_forward,
    .describe = transpose_describe,
};
