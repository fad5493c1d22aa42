/*
 * batch_norm2d.c: nn.BatchNorm2d(C) over x [N, C, H, W] (per sample CxHxW), in training mode
 * or, with training=no, in eval mode (module.eval()). Case files: `batch_norm2d C [eps=1e-5]
 * [momentum=0.1] [affine=yes] [training=yes]`; weight ones and bias zeros [C]
 * (reset_parameters), and the buffers running_mean (zeros) and running_var (ones) [C] in the
 * parameters' dtype (memory category `buffers`). In training mode the forward updates them in
 * place with each batch's mean and unbiased variance and observes there (role `buffer`). In
 * eval mode F.batch_norm(training=False) normalizes with them and leaves them as they are
 * (Normalization.cu's batch_norm_cuda_out: save_mean is a float32 copy of running_mean,
 * save_invstd = batch_norm_calc_invstd's 1 / sqrt(running_var + eps) in float32), and no
 * batch size is verified; its backward (derivatives.yaml: cudnn_batch_norm's backward is
 * native_batch_norm_backward when not training) is batch_norm_backward_kernel's eval
 * branch, dx = dy * (invstd * w), dw = sum(dy (x - running_mean)) * invstd, db = sum(dy).
 * num_batches_tracked (an int64 buffer only momentum=None reads) is not modelled.
 *
 * Autocast: on no list (batch_norm falls through autocast_mode.cpp's
 * TORCH_LIBRARY_IMPL(_, Autocast, m) m.fallback(fallthrough)): it runs on what it is given.
 * Which kernel PyTorch runs is _select_batch_norm_backend's choice
 * (aten/src/ATen/native/Normalization.cpp): cuDNN for a 4-d CUDA input that is not
 * bfloat16, a weight that is not bfloat16, an input that is not float16 unless the weight is
 * float32, weight, bias and running stats given, N <= 880801 in training, eps >= cuDNN's
 * minimum; otherwise the native kernel (batch_norm_cuda, Normalization.cuh). So:
 *  - float32 model: cuDNN, all float32;
 *  - autocast float16 (float16 input from a conv, float32 weight and stats): cuDNN, as it
 *    accepts half data with float parameters: float32 statistics, saved mean and invstd
 *    float32 [C] (allocated like the weight), running stats float32, output float16;
 *  - autocast bfloat16 (bfloat16 input, float32 weight): native, mixed type: the same
 *    dtypes (float32 saved and running stats, output bfloat16);
 *  - `.half()` model (weight and stats float16 or bfloat16): native, not cuDNN: float32
 *    opmath, saved mean and invstd in acc_type (float32), running stats updated in float32
 *    and rounded into their half dtype, output in the input's dtype.
 * The harness computes every path as the native kernels do (float32 Welford statistics,
 * y = w * (x - mean) * invstd + b rounded once); cuDNN's internal order differs in the last
 * bits and its reserve space, saved for cudnn_batch_norm_backward, is not counted. The node
 * is named after the path (cudnn_batch_norm or native_batch_norm). Saved for backward: the
 * input, the saved mean and invstd, and the weight (the running stats too in PyTorch: they
 * are buffers, not activations). A weight of another dtype than the input, other than
 * float32 with a half input, fails with the scalar-type check's text (not checked on a GPU).
 */
#include "layer.h"

#define BN_EPS opt_real[0]
#define BN_MOMENTUM opt_real[1]
#define BN_AFFINE opt_bool[0]
#define BN_TRAINING opt_bool[1]

static norm_geom bn_geom(const tensor *x)
{
    return (norm_geom){
        .n = x->shape[0], .groups = x->shape[1], .cpg = 1, .inner = x->shape[2] * x->shape[3]};
}

/* native_batch_norm_backward: the input's gradient as training says, then the weight's and
 * the bias's, the same in both modes (batch_norm_backward_reduce_cuda) */
static void batch_norm2d_grads(run *r, node *n, bool training)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *mean = n->saved[1], *invstd = n->saved[2],
           *w = n->saved[3];
    norm_geom g = bn_geom(x);
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        if (training)
            run_check(r, be->batch_norm_backward_input(be, &g, dy, x, mean, invstd, w, dx, stp));
        else
            run_check(r, be->batch_norm_backward_eval_input(be, &g, dy, invstd, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->batch_norm_backward_weight(be, &g, dy, x, mean, invstd, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, reduce_channel_sum(be, dy, g.n, g.inner, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

static void batch_norm2d_backward(run *r, node *n) { batch_norm2d_grads(r, n, true); }
static void batch_norm2d_backward_eval(run *r, node *n) { batch_norm2d_grads(r, n, false); }

static bool is_half(dtype dt) { return dt == DTYPE_FLOAT16 || dt == DTYPE_BFLOAT16; }

/* _select_batch_norm_backend's test, for what the harness can vary (its batch limits:
 * 880801 in training, 65535 in eval) */
static bool selects_cudnn(const layer_spec *l, const tensor *x, const tensor *w)
{
    int64_t batch_max = l->BN_TRAINING ? 880801 : 65535;
    return w && x->dtype != DTYPE_BFLOAT16 && w->dtype != DTYPE_BFLOAT16 &&
           (x->dtype != DTYPE_FLOAT16 || w->dtype == DTYPE_FLOAT32) &&
           x->shape[0] <= batch_max && l->BN_EPS >= 1e-5; /* CUDNN_BN_MIN_EPSILON */
}

static tensor *batch_norm2d_forward(run *r, const layer_spec *l, tensor *const *in,
                                    tensor *const *params)
{
    tensor *x = in[0];
    int k = l->BN_AFFINE ? 2 : 0;
    tensor *w = l->BN_AFFINE ? params[0] : NULL, *b = l->BN_AFFINE ? params[1] : NULL;
    tensor *running_mean = params[k], *running_var = params[k + 1];
    const tensor *p = running_mean;
    bool ok = p->dtype == x->dtype || (is_half(x->dtype) && p->dtype == DTYPE_FLOAT32);
    if (!ok)
        run_fail(r, "expected scalar type %s but found %s", scalar_type_name(x->dtype),
                 scalar_type_name(p->dtype));
    norm_geom g = bn_geom(x);
    g.eps = (float)l->BN_EPS;
    if (l->BN_TRAINING && g.n * g.inner == 1) /* _verify_batch_size in torch/nn/functional.py */
        run_fail(r,
                 "Expected more than 1 value per channel when training, got input size "
                 "torch.Size([%lld, %lld, %lld, %lld])",
                 (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[2],
                 (long long)x->shape[3]);
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &x, 1); /* x's dtype, whatever w's */
    snprintf(name, sizeof name, "%s.save_mean", l->name);
    tensor *mean = run_tensor(r, name, DTYPE_FLOAT32, 1, &g.groups, MEM_ACTIVATIONS);
    tensor_why(mean, DTYPE_REASON_OPMATH, "batch_norm", NULL, 0);
    snprintf(name, sizeof name, "%s.save_invstd", l->name);
    tensor *invstd = run_tensor(r, name, DTYPE_FLOAT32, 1, &g.groups, MEM_ACTIVATIONS);
    tensor_why(invstd, DTYPE_REASON_OPMATH, "batch_norm", NULL, 0);
    round_stats st_mean, st_var, st;
    if (l->BN_TRAINING) {
        round_stats *stm = run_stats(r, &st_mean), *stv = run_stats(r, &st_var);
        run_check(r, r->be->batch_norm_stats(r->be, &g, x, (float)l->BN_MOMENTUM, mean, invstd,
                                             running_mean, running_var, stm, stv));
        observe_tensor(r->obs, running_mean, ROLE_BUFFER, stm);
        observe_tensor(r->obs, running_var, ROLE_BUFFER, stv);
    } else {
        run_check(r, r->be->batch_norm_eval_stats(r->be, &g, running_mean, running_var, mean,
                                                  invstd));
    }
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->batch_norm_forward(r->be, &g, x, mean, invstd, w, b, y, stp));
    tensor *args[3] = {x, w, b};
    node *n = tape_record(r, selects_cudnn(l, x, w) ? "cudnn_batch_norm" : "native_batch_norm",
                          l->BN_TRAINING ? batch_norm2d_backward : batch_norm2d_backward_eval,
                          y, args, 3);
    tape_save(n, 0, x);
    tape_save(n, 1, mean);
    tape_save(n, 2, invstd);
    if (w)
        tape_save(n, 3, w);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, mean);
    tensor_release(&r->pool, invstd);
    return y;
}

static bool batch_norm2d_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                               shape_check *sc)
{
    char s[128];
    if (in[0].ndim != 3) {
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; batch_norm2d needs a 3-d CxHxW input", s);
        return false;
    }
    if (in[0].dim[0] != l->in) {
        shape_fail(sc, SHAPE_INPUT, "input has %lld channels", (long long)in[0].dim[0]);
        return false;
    }
    *out = in[0];
    return true;
}

static int batch_norm2d_params(const layer_spec *l, layer_param *out)
{
    int n = 0;
    if (l->BN_AFFINE) {
        out[n++] = (layer_param){"weight", 1, {l->in}, PARAM_INIT_ONES, 0};
        out[n++] = (layer_param){"bias", 1, {l->in}, PARAM_INIT_ZEROS, 0};
    }
    out[n++] = (layer_param){"running_mean", 1, {l->in}, PARAM_BUFFER_ZEROS, 0};
    out[n++] = (layer_param){"running_var", 1, {l->in}, PARAM_BUFFER_ONES, 0};
    return n;
}

static int batch_norm2d_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "batch_norm2d %lld, eps %g, momentum %g, %s%s", (long long)l->in,
                    l->BN_EPS, l->BN_MOMENTUM, l->BN_TRAINING ? "training" : "eval",
                    l->BN_AFFINE ? "" : " (no affine)");
}

static const kind_arg batch_norm2d_args[] = {
    {"num_features", "num_features", offsetof(layer_spec, in), 1},
};
static const kind_opt batch_norm2d_opts[] = {
    {"eps", KIND_OPT_REAL, offsetof(layer_spec, BN_EPS), .range = POSITIVE, .real_def = 1e-5},
    {"momentum", KIND_OPT_REAL, offsetof(layer_spec, BN_MOMENTUM), .range = UNIT_HALF,
     .real_def = 0.1},
    {"affine", KIND_OPT_BOOL, offsetof(layer_spec, BN_AFFINE), .def = 1},
    {"training", KIND_OPT_BOOL, offsetof(layer_spec, BN_TRAINING), .def = 1},
    {"track_running_stats", KIND_OPT_REFUSED,
     .refusal = "track_running_stats is not supported (batch_norm2d layers keep running stats)"},
};
static const autocast_op batch_norm2d_autocast[] = {
    {"batch_norm",
     AUTOCAST_NONE,
     "not listed: fallthrough; its input's dtype (cuDNN takes half x with float32 w)",
     {"batch_norm", "native_batch_norm", "native_batch_norm_backward"}},
};

const layer_def batch_norm2d_def = {
    .name = "batch_norm2d",
    .signature = "C",
    .args = batch_norm2d_args,
    .n_args = COUNT_OF(batch_norm2d_args),
    .opts = batch_norm2d_opts,
    .n_opts = COUNT_OF(batch_norm2d_opts),
    .input_shape = no_input_shape,
    .shape = batch_norm2d_shape,
    .params = batch_norm2d_params,
    .autocast = batch_norm2d_autocast,
    .n_autocast = COUNT_OF(batch_norm2d_autocast),
    .forward = batch_norm2d_forward,
    .describe = batch_norm2d_describe,
};
