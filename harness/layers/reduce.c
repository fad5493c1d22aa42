/*
 * reduce.c: the layer kind of every reduction row (ops/reduce.h), made from the row as
 * layers/pointwise.c makes the pointwise rows' kinds: `NAME = sum dim=1,2`,
 * `NAME = mean dim=-1 keepdim=yes`, `NAME = amax dim=-1`, PyTorch's x.sum(dim, keepdim),
 * x.mean(dim, keepdim), x.amax(dim, keepdim); reduce_defs[op] is the kind LAYER_REDUCE + op
 * (config/kinds.h).
 *  dim=      dims of the whole tensor (0 the batch dim, negative dims count from the end),
 *            one or a list; PyTorch's default (every dim) and a list with the batch dim are
 *            refused: a layer's output keeps the batch dim (a case's shapes are per sample)
 *  keepdim=  yes: the reduced dims stay, of size 1; no (PyTorch's default): they go, and a
 *            sample must keep a dim
 * then the row's own options (`var dim=-1 correction=0`: correction= into op_params.real[0],
 * PyTorch's default 1).
 * Dtypes: the row's autocast policy (autocast_mode.h). sum is on fp32_set_opt_dtype: under
 * autocast a float16 or bfloat16 input runs as sum(x, dim, keepdim, dtype=torch.float32),
 * which on CUDA reads the half values and writes float32 (ReduceOps.cpp,
 * make_reduction_from_out_ty: gpu_lowp_to_f32; no cast node); its backward expands the
 * float32 gradient and the engine casts it into the input's dtype, one rounding. mean and
 * amax are on no list: the input's dtype.
 * Forward and backward: the backend's reduce_forward and reduce_backward over the dims'
 * mask, in the row's order and formulas (registry.c's reduce_record_as).
 */
#include "layer.h"

#define RD_DIM opt_int[0]      /* KIND_OPT_DIMS's mask */
#define RD_KEEPDIM opt_bool[0] /* keepdim= */

/* every kind's dim= and keepdim=, then its row's options (var's correction=) */
#define RD_DIMS_OPTS                                                                               \
    {"dim", KIND_OPT_DIMS, offsetof(layer_spec, RD_DIM), .required = "dim=D or dim=D1,D2"},        \
        {"keepdim", KIND_OPT_BOOL, offsetof(layer_spec, RD_KEEPDIM), .def = 0},
#define RD_TABLES(name, backward, policy, opts, aten)                                              \
    static const kind_opt rd_##name##_opts[] = {RD_DIMS_OPTS PW_EXPAND opts{NULL}};                \
    static const autocast_op rd_##name##_autocast[] = {                                            \
        {#name, policy, AUTOCAST_LIST(policy), {PW_EXPAND aten}}};
REDUCE_OPS(RD_TABLES)

static rd_op row_of(const layer_spec *l) { return (rd_op)(l->kind - LAYER_REDUCE); }

/* The mask of dim=, resolved against a tensor of ndim dims (the batch dim included); 0 after
 * a message (PyTorch's "Dimension out of range", a dim named twice, the batch dim) into
 * err */
static unsigned dims_mask(const layer_spec *l, int ndim, char *err, size_t len)
{
    unsigned mask = 0;
    for (int b = 0; b < 2 * KIND_DIMS_NEG; b++) {
        if (!(l->RD_DIM & ((int64_t)1 << b)))
            continue;
        int given = b < KIND_DIMS_NEG ? b : KIND_DIMS_NEG - 1 - b;
        int d = given < 0 ? ndim + given : given;
        if (d < 0 || d >= ndim) {
            snprintf(err, len,
                     "Dimension out of range (expected to be in range of [%d, %d], but got %d)",
                     -ndim, ndim - 1, given);
            return 0;
        }
        if (d == 0) {
            snprintf(err, len,
                     "dim %d is the batch dim, which a layer's output keeps: reduce dims of a "
                     "sample (1 to %d, or negative ones)",
                     given, ndim - 1);
            return 0;
        }
        if (mask & (1u << d)) {
            snprintf(err, len, "dim %d appears multiple times in the list of dims", d);
            return 0;
        }
        mask |= 1u << d;
    }
    return mask;
}

/* the per-sample shape of the output: the input's less (keepdim=no) or with 1 at
 * (keepdim=yes) the reduced dims */
static bool reduce_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    char err[256];
    unsigned mask = dims_mask(l, in[0].ndim + 1, err, sizeof err);
    if (!mask) {
        shape_fail(sc, SHAPE_LAYER, "%s", err);
        return false;
    }
    out->ndim = 0;
    for (int j = 0; j < in[0].ndim; j++)
        if (!(mask & (2u << j)))
            out->dim[out->ndim++] = in[0].dim[j];
        else if (l->RD_KEEPDIM)
            out->dim[out->ndim++] = 1;
    if (out->ndim == 0) {
        shape_fail(sc, SHAPE_LAYER,
                   "keepdim=no over every dim of a sample would leave the batch dim alone; "
                   "give keepdim=yes");
        return false;
    }
    return true;
}

static int reduce_describe(const layer_spec *l, char *buf, size_t len)
{
    int at = snprintf(buf, len, "%s dim=", layer_def_of(l->kind)->name);
    const char *sep = "";
    for (int b = 0; b < 2 * KIND_DIMS_NEG; b++)
        if (l->RD_DIM & ((int64_t)1 << b)) {
            size_t off = (size_t)at < len ? (size_t)at : len;
            at += snprintf(buf + off, len - off, "%s%d", sep,
                           b < KIND_DIMS_NEG ? b : KIND_DIMS_NEG - 1 - b);
            sep = ",";
        }
    size_t off = (size_t)at < len ? (size_t)at : len;
    at += snprintf(buf + off, len - off, " keepdim=%s", l->RD_KEEPDIM ? "yes" : "no");
    const layer_def *d = layer_def_of(l->kind);
    for (int o = 2; o < d->n_opts; o++) /* the row's own, past dim= and keepdim= */
        if (d->opts[o].type == KIND_OPT_REAL) {
            off = (size_t)at < len ? (size_t)at : len;
            at += snprintf(buf + off, len - off, " %s=%g", d->opts[o].name,
                           *(const double *)((const char *)l + d->opts[o].offset));
        }
    return at;
}

static tensor *reduce_layer_forward(run *r, const layer_spec *l, tensor *const *in,
                                    tensor *const *params)
{
    rd_op op = row_of(l);
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *x = in[0];
    char err[256];
    unsigned mask = dims_mask(l, x->ndim, err, sizeof err); /* the case's check passed it */
    int nd = 0;
    int64_t shape[TENSOR_MAX_DIMS];
    for (int j = 0; j < x->ndim; j++)
        if (!(mask & (1u << j)))
            shape[nd++] = x->shape[j];
        else if (l->RD_KEEPDIM)
            shape[nd++] = 1;
    dtype dt = x->dtype;
    if (r->autocast && ac->policy == AUTOCAST_FP32_SET_OPT_DTYPE &&
        (dt == DTYPE_FLOAT16 || dt == DTYPE_BFLOAT16))
        dt = DTYPE_FLOAT32;
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    op_params p = {.seed = 0}; /* the row's options' slots */
    for (int s = 0; s < OP_MAX_PARAMS; s++) {
        p.real[s] = l->opt_real[s];
        p.choice[s] = l->opt_choice[s];
    }
    return reduce_record_as(r, op, &p, ac, x, mask, name, nd, shape, dt, ROLE_ACTIVATION);
}

#define RD_DEF(op, backward_, policy_, opts_, aten_)                                               \
    [RD_OP_##op] = {.name = #op,                                                                   \
                    .signature = "",                                                               \
                    .opts = rd_##op##_opts,                                                        \
                    .n_opts = COUNT_OF(rd_##op##_opts) - 1,                                        \
                    .shape = reduce_shape,                                                         \
                    .input_shape = no_input_shape,                                                 \
                    .params = no_params,                                                           \
                    .autocast = rd_##op##_autocast,                                                \
                    .n_autocast = 1,                                                               \
                    .forward = reduce_layer_forward,                                               \
                    .describe = reduce_describe},
const layer_def reduce_defs[RD_OP_COUNT] = {REDUCE_OPS(RD_DEF)};
