/*
 * linear.c: nn.Linear, y[*,O] = x[*,I] w[O,I]^T + b[O] over the last dim, as F.linear runs
 * it (the leading dims flattened into the GEMM's rows: addmm with a bias, mm without).
 * Case files: `linear IN -> OUT [bias=yes|no] [from=NAME] [weight=LAYER.weight]` (a tied
 * weight: another layer's [O, I] parameter, one tensor). Under autocast x, w and b are cast
 * to the autocast dtype. Saved for backward: the input and the weight (as AddmmBackward0
 * keeps mat1 and mat2). A layer [fp8] chooses runs as te.Linear instead (fp8_linear.h).
 * Also PyTorch's dtype names in error texts.
 */
#include <string.h>

#include "core/format.h"
#include "fp8_linear.h"
#include "layer.h"

/* PyTorch's names of a dtype in its error messages: the number formats' from format.h's
 * table, int64's (class labels) here */
const char *scalar_type_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_scalar : dt == DTYPE_INT64 ? "Long" : "?";
}

const char *type_meta_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_cpp : dt == DTYPE_INT64 ? "long int" : "?";
}

const char *cuda_tensor_type_name(dtype dt)
{
    const format_info *f = format_of(dt);
    return f ? f->torch_cuda_tensor : dt == DTYPE_INT64 ? "torch.cuda.LongTensor" : "?";
}

static void linear_backward(run *r, node *n)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *w = n->saved[1];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->linear_backward_input(be, dy, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->linear_backward_weight(be, dy, x, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, reduce_channel_sum(be, dy, dy->numel / db->numel, 1, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

static tensor *linear_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0], *w = params[0], *b = l->bias ? params[1] : NULL;
    if (fp8_linear_chosen(r, l))
        return fp8_linear_forward(r, l, x, w, b);
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *xa = autocast_arg(r, ac, x);
    tensor *wa = autocast_arg(r, ac, w);
    tensor *ba = b ? autocast_arg(r, ac, b) : NULL;
    /* ADDMM_META and mm's meta function in aten/src/ATen/native/LinearAlgebra.cpp */
    if (ba && ba->dtype != wa->dtype)
        run_fail(r, "self and mat2 must have the same dtype, but got %s and %s",
                 scalar_type_name(ba->dtype), scalar_type_name(wa->dtype));
    if (xa->dtype != wa->dtype) {
        if (ba)
            run_fail(r, "mat1 and mat2 must have the same dtype, but got %s and %s",
                     scalar_type_name(xa->dtype), scalar_type_name(wa->dtype));
        run_fail(r, "expected mat1 and mat2 to have the same dtype, but got: %s != %s",
                 type_meta_name(xa->dtype), type_meta_name(wa->dtype));
    }
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, xa->shape, sizeof shape);
    shape[xa->ndim - 1] = wa->shape[0];
    tensor *y = run_tensor(r, name, xa->dtype, xa->ndim, shape, MEM_ACTIVATIONS);
    tensor *args[3] = {xa, wa, ba};
    autocast_why(r, y, ac, args, 3);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->linear_forward(r->be, xa, wa, ba, y, stp));
    node *n = tape_record(r, "linear", linear_backward, y, args, 3);
    tape_save(n, 0, xa);
    tape_save(n, 1, wa);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, wa);
    tensor_release(&r->pool, ba);
    return y;
}

static bool linear_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    int last = in[0].ndim - 1;
    if (in[0].ndim > 1 && in[0].dim[last] != l->in) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT,
                   "input has shape %s; linear acts on the last dim, of %lld features (add a "
                   "flatten layer to join the dims)",
                   s, (long long)in[0].dim[last]);
    } else if (in[0].dim[last] != l->in) {
        shape_fail(sc, SHAPE_INPUT, "input has %lld features", (long long)in[0].dim[last]);
    }
    *out = in[0];
    out->dim[last] = l->out;
    return true;
}

static bool linear_input_shape(const layer_spec *l, layer_shape *in)
{
    *in = (layer_shape){1, {l->in}};
    return true;
}

static int linear_params(const layer_spec *l, layer_param *out)
{
    out[0] = (layer_param){"weight", 2, {l->out, l->in}, PARAM_INIT_UNIFORM_FAN_IN, l->in};
    if (!l->bias)
        return 1;
    out[1] = (layer_param){"bias", 1, {l->out}, PARAM_INIT_UNIFORM_FAN_IN, l->in};
    return 2;
}

static int linear_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "linear %lld → %lld%s", (long long)l->in, (long long)l->out,
                    l->bias ? "" : " (no bias)");
}

static const kind_arg linear_args[] = {
    {"in_features", "in", offsetof(layer_spec, in), 1},
    {"out_features", "out", offsetof(layer_spec, out), 1},
};
static const kind_opt linear_opts[] = {
    {"bias", KIND_OPT_BOOL, offsetof(layer_spec, bias), .def = 1},
};
static const autocast_op linear_autocast[] = {
    {"linear",
     AUTOCAST_LOWER_PRECISION_FP,
     "lower_precision_fp: KERNEL_CUDA(linear, lower_precision_fp)",
     {"linear"}},
};

const layer_def linear_def = {
    .name = "linear",
    .signature = "IN -> OUT",
    .args = linear_args,
    .n_args = COUNT_OF(linear_args),
    .opts = linear_opts,
    .n_opts = COUNT_OF(linear_opts),
    .input_shape = linear_input_shape,
    .shape = linear_shape,
    .params = linear_params,
    .autocast = linear_autocast,
    .n_autocast = COUNT_OF(linear_autocast),
    .forward = linear_forward,
    .describe = linear_describe,
    .te_linear = true,
};
