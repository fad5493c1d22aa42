/*
 * softmax.c: nn.Softmax(dim=-1) (`softmax`) and nn.LogSoftmax(dim=-1) (`log_softmax`) over
 * the last dim. Both are on autocast's fp32_set_opt_dtype list (aten/src/ATen/autocast_mode.h
 * AT_FORALL_FP32_SET_OPT_DTYPE: KERNEL_CUDA(softmax, fp32_set_opt_dtype),
 * KERNEL_CUDA(log_softmax, fp32_set_opt_dtype)): under autocast a float16 or bfloat16 input
 * is run as softmax(x, dim, dtype=torch.float32), so the output is float32. How that runs is
 * aten/src/ATen/native/SoftMax.cpp's softmax(input, dim, dtype) (log_softmax alike): a
 * float16 CUDA input goes to _softmax(input, dim, half_to_float=true), which reads the half
 * values and writes float32 (no cast node; the backward, _softmax_backward_data with
 * input_dtype=Half, rounds the gradient to float16 once); a bfloat16 input is first cast
 * with toType(float32) (a cast node, `x@float32`). Outside autocast the output has the
 * input's dtype, computed in float32 (opmath) and rounded once. Each keeps its output for
 * backward (derivatives.yaml: _softmax_backward_data(grad, result, dim, self.scalar_type()),
 * _log_softmax_backward_data likewise).
 * The ops: softmax_forward/backward (cpu/softmax.c), log_softmax_forward/backward
 * (cpu/loss.c: the cross entropy's own).
 */
#include "layer.h"

static void softmax_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->softmax_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static void log_softmax_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->log_softmax_backward(r->be, n->grad, n->saved[0], dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

/* softmax or log_softmax of x under fp32_set_opt_dtype, as SoftMax.cpp runs it */
static tensor *row_forward(run *r, const layer_spec *l, tensor *x, bool log)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *src = x;
    dtype out_dt = x->dtype;
    if (r->autocast && ac->policy == AUTOCAST_FP32_SET_OPT_DTYPE && x->dtype != DTYPE_FLOAT32) {
        out_dt = DTYPE_FLOAT32;
        if (x->dtype != DTYPE_FLOAT16) /* bfloat16: toType(float32), then _softmax */
            src = cast_to(r, x, DTYPE_FLOAT32, MEM_ACTIVATIONS, DTYPE_REASON_FP32_SET_OPT_DTYPE,
                          ac->op);
    }
    if (src == x)
        tensor_retain(x);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, src, name, out_dt, MEM_ACTIVATIONS);
    autocast_why(r, y, ac, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, log ? r->be->log_softmax_forward(r->be, src, y, stp)
                     : r->be->softmax_forward(r->be, src, y, stp));
    node *n = tape_record(r, ac->op, log ? log_softmax_backward : softmax_backward, y, &src, 1);
    tape_save(n, 0, y);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, src);
    return y;
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
    return snprintf(buf, len, "softmax (dim=-1)");
}

static int log_softmax_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "log_softmax (dim=-1)");
}

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
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = softmax_autocast,
    .n_autocast = COUNT_OF(softmax_autocast),
    .forward = softmax_forward,
    .describe = softmax_describe,
};

const layer_def log_softmax_def = {
    .name = "log_softmax",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = log_softmax_autocast,
    .n_autocast = COUNT_OF(log_softmax_autocast),
    .forward = log_softmax_forward,
    .describe = log_softmax_describe,
};
