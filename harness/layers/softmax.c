/*
 * softmax.c: F.softmax(x, dim=-1, dtype=None) (`softmax`) and F.log_softmax(x, dim=-1,
 * dtype=None) (`log_softmax`), with PyTorch's options `dim=D` (a dim of the whole tensor, 0
 * the batch dim, negative from the end; default -1) and `dtype=float32|float16|bfloat16`
 * (the input is cast to dtype before the op; `none`, the default, is PyTorch's None).
 *
 * Both are on autocast's fp32_set_opt_dtype list (aten/src/ATen/autocast_mode.h
 * AT_FORALL_FP32_SET_OPT_DTYPE: KERNEL_CUDA(softmax, fp32_set_opt_dtype),
 * KERNEL_CUDA(log_softmax, fp32_set_opt_dtype)): under autocast, a call on a floating input
 * runs with `set_opt_dtype(at::kFloat, dtype)`, which is the dtype given when one is
 * (`dtype.has_value() ? dtype : to_type`), else float32. So under autocast the output is
 * float32 unless dtype= says otherwise; outside autocast it is dtype, else the input's.
 * How that runs is aten/src/ATen/native/SoftMax.cpp's softmax(input, dim, dtype)
 * (log_softmax alike): a float16 CUDA input with dtype float32 goes to _softmax(input, dim,
 * half_to_float=true), which reads the half values and writes float32 (no cast node; the
 * backward, _softmax_backward_data with input_dtype=Half, rounds the gradient to float16
 * once); any other dtype is `input_.toType(dtype)` first (a cast node, `x@float32`; none
 * when it is already the input's), then _softmax(converted, dim, false). The op computes
 * in float32 (opmath) and rounds once. Each keeps its output for backward
 * (derivatives.yaml: _softmax_backward_data(grad, result, dim, self.scalar_type()),
 * _log_softmax_backward_data likewise).
 * The output's dtype_reason: "cast" when dtype= gave its dtype, else the list's or the
 * input's (autocast_why).
 * The ops: softmax_forward/backward (cpu/softmax.c), log_softmax_forward/backward
 * (cpu/loss.c: the cross entropy's own).
 */
#include "layer.h"

#include <stddef.h>

/* The backend's softmax runs over the last dim. For another dim d, the op runs on copies
 * with d swapped to the end, in the workspace (scratch of the op, as a kernel's, not
 * activations): x^T, y^T = softmax(x^T), y = (y^T)^T, and y^T is freed; the node saves y,
 * as PyTorch's does, and its backward swaps y and dy the same way. The swaps copy values
 * exactly; the rounding counts are the op's, of y^T's stores. n->geom.kh holds d (-1:
 * the last dim). */
static tensor *last_dim(run *r, tensor *t, int d, const char *name)
{
    if (d < 0) {
        tensor_retain(t);
        return t;
    }
    return swap_copy(r, t, d, t->ndim - 1, name, MEM_WORKSPACE, NULL);
}

static void row_backward(run *r, node *n, bool log)
{
    int d = (int)n->geom.kh;
    char name[TENSOR_NAME_MAX + 8];
    node_grad_name(r, n, 0, name, sizeof name);
    tensor *dy = last_dim(r, n->grad, d, "softmax.grad_output^T");
    tensor *y = last_dim(r, n->saved[0], d, "softmax.result^T");
    tensor *dx = d < 0 ? node_grad_tensor(r, n, 0)
                       : run_tensor_like(r, dy, "softmax.grad_input^T", n->in[0].dtype,
                                         MEM_WORKSPACE);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, log ? r->be->log_softmax_backward(r->be, dy, y, dx, stp)
                     : r->be->softmax_backward(r->be, dy, y, dx, stp));
    tensor_release(&r->pool, dy);
    tensor_release(&r->pool, y);
    if (d >= 0) {
        tensor *t = dx;
        dx = swap_copy(r, t, d, t->ndim - 1, name, MEM_GRADS, NULL);
        tensor_release(&r->pool, t);
    }
    node_give_grad(r, n, 0, dx, stp);
}

static void softmax_backward(run *r, node *n) { row_backward(r, n, false); }

static void log_softmax_backward(run *r, node *n) { row_backward(r, n, true); }

/* dtype=: PyTorch's None, then the dtypes it may name */
static const char *const dtype_choices[] = {"none", "float32", "float16", "bfloat16"};
static const dtype dtype_of_choice[] = {DTYPE_FLOAT32, DTYPE_FLOAT32, DTYPE_FLOAT16,
                                        DTYPE_BFLOAT16};

/* softmax or log_softmax of x, as autocast's fp32_set_opt_dtype and SoftMax.cpp run it */
static tensor *row_forward(run *r, const layer_spec *l, tensor *x, bool log)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    bool given = l->opt_choice[0] != 0;
    bool eligible = r->autocast && ac->policy == AUTOCAST_FP32_SET_OPT_DTYPE &&
                    x->dtype != DTYPE_INT64; /* firstarg_is_eligible: a floating tensor */
    dtype out_dt = given ? dtype_of_choice[l->opt_choice[0]] : eligible ? DTYPE_FLOAT32 : x->dtype;
    dtype_reason why = given ? DTYPE_REASON_CAST : DTYPE_REASON_FP32_SET_OPT_DTYPE;
    tensor *src = x;
    /* half_to_float reads float16 itself; any other change is toType first */
    if (out_dt != x->dtype && !(x->dtype == DTYPE_FLOAT16 && out_dt == DTYPE_FLOAT32))
        src = cast_to(r, x, out_dt, MEM_ACTIVATIONS, why, ac->op);
    else
        tensor_retain(x);
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    int rank = x->ndim, d = (int)(l->opt_int[0] < 0 ? l->opt_int[0] + rank : l->opt_int[0]);
    if (d == rank - 1)
        d = -1; /* the last dim: no copies */
    tensor *xt = last_dim(r, src, d, "softmax.input^T");
    tensor *yt = d < 0 ? run_tensor_like(r, xt, name, out_dt, MEM_ACTIVATIONS)
                       : run_tensor_like(r, xt, "softmax.result^T", out_dt, MEM_WORKSPACE);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, log ? r->be->log_softmax_forward(r->be, xt, yt, stp)
                     : r->be->softmax_forward(r->be, xt, yt, stp));
    tensor_release(&r->pool, xt);
    tensor *y = yt;
    if (d >= 0) {
        y = swap_copy(r, yt, d, rank - 1, name, MEM_ACTIVATIONS, NULL);
        tensor_release(&r->pool, yt);
    }
    if (given)
        tensor_why(y, why, ac->op, (const tensor *const *)&x, 1);
    else
        autocast_why(r, y, ac, &x, 1);
    node *n = tape_record(r, ac->op, log ? log_softmax_backward : softmax_backward, y, &src, 1);
    if (n)
        n->geom.kh = d;
    tape_save(n, 0, y);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, src);
    return y;
}

/* dim= of the whole tensor (0 the batch dim, negative from the end), as PyTorch's
 * maybe_wrap_dim checks it */
static bool row_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                      shape_check *sc)
{
    int64_t rank = in[0].ndim + 1, d = l->opt_int[0];
    if (d < -rank || d >= rank) {
        shape_fail(sc, SHAPE_LAYER,
                   "Dimension out of range (expected to be in range of [%lld, %lld], but got "
                   "%lld)",
                   (long long)-rank, (long long)(rank - 1), (long long)d);
        return false;
    }
    *out = in[0];
    return true;
}

static int row_describe(const layer_spec *l, const char *op, char *buf, size_t len)
{
    if (l->opt_choice[0])
        return snprintf(buf, len, "%s (dim=%lld, dtype=%s)", op, (long long)l->opt_int[0],
                        dtype_choices[l->opt_choice[0]]);
    return snprintf(buf, len, "%s (dim=%lld)", op, (long long)l->opt_int[0]);
}

static tensor *softmax_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    return row_forward(r, l, in[0], false);
}

static tensor *log_softmax_forward(run *r, const layer_spec *l, tensor *const *in,
                                   tensor *const *params)
{
    return row_forward(r, l, in[0], true);
}

static int softmax_describe(const layer_spec *l, char *buf, size_t len)
{
    return row_describe(l, "softmax", buf, len);
}

static int log_softmax_describe(const layer_spec *l, char *buf, size_t len)
{
    return row_describe(l, "log_softmax", buf, len);
}

static const kind_opt row_opts[] = {
    {"dim", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = INT64_MIN + 1, .def = -1},
    {"dtype", KIND_OPT_CHOICE, offsetof(layer_spec, opt_choice[0]), .def = 0,
     .choices = dtype_choices, .n_choices = COUNT_OF(dtype_choices)},
};

static const autocast_op softmax_autocast[] = {
    {"softmax",
     AUTOCAST_FP32_SET_OPT_DTYPE,
     "fp32_set_opt_dtype: KERNEL_CUDA(softmax, fp32_set_opt_dtype)",
     {"softmax.int", "_softmax", "_softmax_backward_data"}},
};

static const autocast_op log_softmax_autocast[] = {
    {"log_softmax",
     AUTOCAST_FP32_SET_OPT_DTYPE,
     "fp32_set_opt_dtype: KERNEL_CUDA(log_softmax, fp32_set_opt_dtype) (the log_softmax layer)",
     {"log_softmax.int", "_log_softmax", "_log_softmax_backward_data"}},
};

const layer_def softmax_def = {
    .name = "softmax",
    .signature = "",
    .opts = row_opts,
    .n_opts = COUNT_OF(row_opts),
    .input_shape = no_input_shape,
    .shape = row_shape,
    .params = no_params,
    .autocast = softmax_autocast,
    .n_autocast = COUNT_OF(softmax_autocast),
    .forward = softmax_forward,
    .describe = softmax_describe,
};

const layer_def log_softmax_def = {
    .name = "log_softmax",
    .signature = "",
    .opts = row_opts,
    .n_opts = COUNT_OF(row_opts),
    .input_shape = no_input_shape,
    .shape = row_shape,
    .params = no_params,
    .autocast = log_softmax_autocast,
    .n_autocast = COUNT_OF(log_softmax_autocast),
    .forward = log_softmax_forward,
    .describe = log_softmax_describe,
};
