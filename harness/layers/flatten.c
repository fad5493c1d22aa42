/* flatten.c: nn.Flatten(start_dim=1, end_dim=-1) (case files: `flatten [start_dim=S]
 * [end_dim=E]`, dims of the whole tensor as torch.flatten takes them, 0 the batch dim, which
 * stays): the dims S..E merged into one, [B, C, H, W] -> [B, C*H*W] by default. A view of the
 * same storage in PyTorch and here (no memory, no rounding); its backward views the
 * gradient back. */
#include "layer.h"

static tensor *flatten_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    int s = dim_index(l->opt_int[0], x->ndim), e = dim_index(l->opt_int[1], x->ndim);
    int64_t shape[TENSOR_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k <= s || k > e)
            shape[n++] = x->shape[k];
        else
            shape[n - 1] *= x->shape[k];
    }
    return view_layer(r, l, x, n, shape, "flatten");
}

static bool flatten_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                          shape_check *sc)
{
    int rank = in[0].ndim + 1, s, e;
    if (!shape_dim(sc, l->opt_int[0], rank, "flatten", &s) ||
        !shape_dim(sc, l->opt_int[1], rank, "flatten", &e))
        return false;
    if (e < s) {
        shape_fail(sc, SHAPE_LAYER,
                   "flatten() has invalid args: start_dim cannot come after end_dim");
        return false;
    }
    out->ndim = 0;
    for (int k = 1; k < rank; k++) {
        if (k <= s || k > e)
            out->dim[out->ndim++] = in[0].dim[k - 1];
        else
            out->dim[out->ndim - 1] = size_mul(out->dim[out->ndim - 1], in[0].dim[k - 1]);
    }
    return true;
}

static int flatten_describe(const layer_spec *l, char *buf, size_t len)
{
    if (l->opt_int[0] == 1 && l->opt_int[1] == -1)
        return snprintf(buf, len, "flatten");
    return snprintf(buf, len, "flatten dims %lld to %lld", (long long)l->opt_int[0],
                    (long long)l->opt_int[1]);
}

static const kind_opt flatten_opts[] = {
    {"start_dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1, .def = 1},
    {"end_dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[1]), .min = INT64_MIN + 1, .def = -1},
};
static const autocast_op flatten_autocast[] = {
    {"flatten",
     AUTOCAST_NONE,
     "not listed: a view, keeps its input's dtype",
     {"flatten.using_ints", "view"}},
};

const layer_def flatten_def = {
    .name = "flatten",
    .signature = "",
    .opts = flatten_opts,
    .n_opts = COUNT_OF(flatten_opts),
    .input_shape = no_input_shape,
    .shape = flatten_shape,
    .params = no_params,
    .autocast = flatten_autocast,
    .n_autocast = COUNT_OF(flatten_autocast),
    .forward = flatten_forward,
    .describe = flatten_describe,
};
