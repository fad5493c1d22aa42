/*
 * backend.h: the backend table. Layers, losses, the GradScaler and the optimizers never
 * ask which device they run on: they call through this table, filled by the CPU backend
 * (harness/ops/cpu/, always built) or the CUDA backend (kernels/, a shared library loaded with
 * dlopen only when a GPU is asked for or found).
 *
 * Contract of every op:
 *  - tensors' data live in the backend's memory; shapes have been checked by the caller.
 *  - an op computes in float32 ("opmath") from its inputs' exact float32 values and rounds
 *    once, into the output tensor's dtype, when it stores; ops whose PyTorch CUDA kernel
 *    rounds after every operation say so and do the same (see loss_math.h, optim_math.h).
 *  - `st`, when not NULL, receives the counts and histogram of that final rounding
 *    (stats.h); when NULL, no bookkeeping is done (observation off).
 *  - GEMMs take operands of any float dtype, multiply exactly in float32 (half products
 *    are exact there), accumulate in float32 and round the output once.
 *  - every op returns 0, or non-zero with a message in be->err for failures that the user
 *    can cause (out of memory); library failures are reported where they happen (the
 *    CHECK macros print the statement, file, line and library error) and abort.
 *
 * The ops are listed once, in BACKEND_OPS below. The list makes the table's fields, the
 * backend_op enum, the names backend_check() reports, the counting backend's stubs, and the
 * CPU and CUDA backends' declarations and tables (cpu_<op> in harness/ops/cpu/, cuda_<op> in
 * kernels/): adding an op is one line there plus its cpu_<op> and cuda_<op>. Every open
 * path (CPU, counting, CUDA) runs backend_check(), which names each op or memory function
 * a table leaves NULL, but for an op the backend leaves out: its supports() says no in
 * every dtype, and its slot may stay empty (the CUDA backend's MXFP8 ops); the callers of
 * such an op ask backend_supports() before they call it (layers/fp8_linear.c).
 *
 * ABI: the CUDA backend is a shared library built from these sources; backend_cuda_load()
 * refuses one whose BACKEND_ABI_VERSION or sizeof(struct backend) differs from the
 * binary's, before anything in it runs. Bump BACKEND_ABI_VERSION with every change to
 * struct backend or to a type its functions take (tensor, round_stats, conv2d_geom,
 * sdpa_geom, norm_geom, strided_geom, pw_op, rd_op, op_params, optim_*, mem_account,
 * backend_values_fn): a field or op added, removed, reordered, retyped or given another meaning. The size catches
 * only some of these; the version all. The rows a library was built with (pw_op's and rd_op's
 * values) are checked by their names (BACKEND_ROWS_SYMBOL), so that adding a row needs no
 * bump.
 */
#ifndef AMPSCOPE_BACKEND_H
#define AMPSCOPE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "core/memory.h"
#include "core/stats.h"
#include "tensor.h"
#include "fp4_recipe.h"
#include "optim_math.h"
#include "pointwise.h"
#include "reduce.h"

typedef struct conv2d_geom {
    int64_t n, c_in, h_in, w_in; /* input  [N, C_in, H_in, W_in] */
    int64_t c_out, h_out, w_out; /* output [N, C_out, H_out, W_out] */
    int64_t kh, kw, stride, padding, dilation;
    /* convolutions: C_in and C_out split into groups (weight [C_out, C_in / groups, KH, KW]),
     * group i's outputs from its inputs only; 1 for a plain convolution (pools ignore it) */
    int64_t groups;
} conv2d_geom;

/* scaled_dot_product_attention's math path (sdpa_math.h): n independent attentions (batch
 * x heads), q [n, l, e], k [n, s, e], v [n, s, ev], probabilities [n, l, s], out [n, l, ev],
 * all contiguous. causal: key j > query i is masked (tril of ones(l, s), as PyTorch's). An
 * additive attn_mask, when the op is given one, is read at element (b, h, i, j) of the
 * scores [n / heads, heads, l, s] as mask[b * mask_stride[0] + h * mask_stride[1] +
 * i * mask_stride[2] + j * mask_stride[3]] (stride 0 along a broadcast dim). */
typedef struct sdpa_geom {
    int64_t n, l, s, e, ev;
    bool causal;
    int64_t heads;          /* the head dim's size: attention n is head n % heads */
    int64_t mask_stride[4]; /* the mask's strides over the scores' [b, h, i, j] */
} sdpa_geom;
/* A normalization's layout: x viewed as [n, groups, cpg, inner], statistics over each
 * (n, group)'s cpg * inner values, the affine weight and bias indexed by the channel
 * group * cpg + k. layer_norm is groups = 1, cpg = C, inner = 1 (n: every leading index);
 * group_norm is [N, G, C/G, H*W]. */
typedef enum norm_form {
    NORM_CENTERED, /* y = (x - mean) * rstd * w + b (layer_norm_kernel.cu) */
    NORM_FUSED,    /* y = x * a + c, a = rstd * w, c = b - a * mean per (n, channel)
                    * (group_norm_kernel.cu's ComputeFusedParamsCUDAKernel) */
    NORM_RMS       /* rms_norm: rstd = 1 / sqrt(sum(x^2) / cols + eps), y = w * (rstd * x),
                    * no mean (the ops take mean NULL) and no bias; the backward as
                    * layer_norm_kernel.cu's rms_norm branches write it */
} norm_form;

typedef struct norm_geom {
    int64_t n, groups, cpg, inner;
    float eps;
    norm_form form;
} norm_geom;

/* One parameter's optimizer step: param (and master when master weights are on), grad,
 * state tensors as optim_math.h lists them for the optimizer kind. */
typedef struct optim_tensors {
    tensor *param; /* the tensor the step writes: the master when there is one */
    tensor *grad;  /* same dtype as param */
    tensor *state[OPTIM_MAX_STATE];
    dtype visible; /* dtype of the parameter the model sees (for lost updates) */
} optim_tensors;

typedef struct optim_result {
    bool counting; /* false (observation off): param and state are left alone */
    round_stats param;
    round_stats state[OPTIM_MAX_STATE];
    int64_t lost_updates;
} optim_result;

typedef struct backend backend;

/* Host values for upload_values: a malloc'd buffer of the requested bytes, in the tensor's
 * dtype, that the backend copies and frees. It may end the run instead of returning (it is
 * called before the backend holds anything); it never returns NULL. */
typedef void *(*backend_values_fn)(void *ctx);

/* X(return type, name, parameters): the backend's memory and lifetime. */
#define BACKEND_MEMORY_FNS(X)                                                                    \
    /* NULL (and be->err) when out of memory */                                                  \
    X(void *, alloc, (backend *be, int64_t bytes))                                               \
    X(void, free, (backend *be, void *p))                                                        \
    X(void, upload, (backend *be, void *dst, const void *src, int64_t bytes))                    \
    /* dst (bytes) = what make(ctx) returns; a backend whose tensors hold no values (the         \
     * counting backend) never calls make */                                                     \
    X(void, upload_values, (backend *be, void *dst, int64_t bytes, backend_values_fn make,       \
                            void *ctx))                                                          \
    X(void, download, (backend *be, void *dst, const void *src, int64_t bytes))                  \
    X(int64_t, mem_available, (backend *be))                                                     \
    /* waits for queued work (timing) */                                                         \
    X(void, synchronize, (backend *be))                                                          \
    X(void, close, (backend *be))

#define BACKEND_CAT_MAX 4 /* the inputs of one cat */

/* A strided view of a tensor x read out in row-major order: y's element at multi-index
 * (i_0, ..., i_{ndim-1}) of `size` is x's element sum_k i_k * stride[k] (a stride of 0
 * repeats a value: expand; permuted strides: permute). The copy `.contiguous()` makes of
 * such a view in PyTorch. Up to TENSOR_MAX_DIMS + 1 dims: repeat_interleave's view of
 * x.unsqueeze(d + 1).expand(...) has one more than x. */
#define STRIDED_MAX_DIMS (TENSOR_MAX_DIMS + 1)
typedef struct strided_geom {
    int ndim;
    int64_t size[STRIDED_MAX_DIMS], stride[STRIDED_MAX_DIMS];
} strided_geom;

/* X(name, parameters): the ops. Each returns 0, or non-zero with a message in be->err. */
#define BACKEND_OPS(X)                                                                           \
    /* ---- elementwise ---- */                                                                  \
    /* dst = round(src) into dst->dtype (same numel) */                                          \
    X(cast, (backend *be, const tensor *src, tensor *dst, round_stats *st))                      \
    /* dst = round(float(src) * s); src and dst may be the same tensor */                        \
    X(mul_scalar, (backend *be, const tensor *src, float s, tensor *dst, round_stats *st))       \
    X(fill, (backend *be, tensor *dst, float value))                                             \
    /* counts of t as it is (a rounding of each value to itself) */                              \
    X(observe, (backend *be, const tensor *t, round_stats *st))                                  \
    /* ---- the pointwise rows (pointwise.h; cpu/pointwise.c, kernels/pointwise.cu) ---- */     \
    /* y = row op's forward of x[0..arity), each operand broadcast to y's shape (broadcast.h),   \
     * computed in float32 opmath and rounded once into y's dtype */                             \
    X(pointwise_forward, (backend *be, pw_op op, const op_params *p, const tensor *const *x,     \
                          tensor *y, round_stats *st))                                           \
    /* dx = row op's backward formula k, the gradient of operand k in dy's (the output's)        \
     * shape: from dy, the saved operands x[0..arity) (NULL where the row saves none; each       \
     * broadcast to dy's shape) and the saved result y (NULL when not saved), rounded once       \
     * into dx's dtype (the formula rounds where the row's kernel does) */                       \
    X(pointwise_backward, (backend *be, pw_op op, const op_params *p, int k, const tensor *dy,   \
                           const tensor *const *x, const tensor *y, tensor *dx,                  \
                           round_stats *st))                                                     \
    /* ---- the reduction rows (reduce.h; cpu/reduce.c, kernels/reduce.cu) ---- */               \
    /* y = row op's reduction of x over the dims whose bits `dims` sets (y: the kept dims'       \
     * values in order, any shape of that numel), in reduce.h's order with the row's float32    \
     * accumulators, projected and rounded once into y's dtype */                                \
    X(reduce_forward, (backend *be, rd_op op, const op_params *p, const tensor *x,               \
                       unsigned dims, tensor *y, round_stats *st))                               \
    /* dx (x's shape) = row op's backward at every element of x, from dy (y's numel), and x     \
     * and y where the row reads them (else NULL), rounded once into dx's dtype */               \
    X(reduce_backward, (backend *be, rd_op op, const op_params *p, const tensor *dy,            \
                        const tensor *x, const tensor *y, unsigned dims, tensor *dx,             \
                        round_stats *st))                                                        \
    /* ---- matrix products ---- */                                                              \
    /* y[B,O] = x[B,I] w[O,I]^T (+ b[O]) */                                                      \
    X(linear_forward, (backend *be, const tensor *x, const tensor *w, const tensor *b,           \
                       tensor *y, round_stats *st))                                              \
    /* dx[B,I] = dy[B,O] w[O,I] */                                                               \
    X(linear_backward_input, (backend *be, const tensor *dy, const tensor *w, tensor *dx,        \
                              round_stats *st))                                                  \
    /* dw[O,I] = dy[B,O]^T x[B,I] */                                                             \
    X(linear_backward_weight, (backend *be, const tensor *dy, const tensor *x, tensor *dw,       \
                               round_stats *st))                                                 \
    X(conv2d_forward, (backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,      \
                       const tensor *b, tensor *y, round_stats *st))                             \
    X(conv2d_backward_input, (backend *be, const conv2d_geom *g, const tensor *dy,               \
                              const tensor *w, tensor *dx, round_stats *st))                     \
    X(conv2d_backward_weight, (backend *be, const conv2d_geom *g, const tensor *dy,              \
                               const tensor *x, tensor *dw, round_stats *st))                    \
    /* ---- losses (rows are over the last dim) ---- */                                          \
    X(log_softmax_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))           \
    /* dx = dy - exp(y) * sum(dy) per row */                                                     \
    X(log_softmax_backward, (backend *be, const tensor *dy, const tensor *y, tensor *dx,         \
                             round_stats *st))                                                   \
    /* loss = -mean_i logp[i, target[i]]; target int64 */                                        \
    X(nll_loss_forward, (backend *be, const tensor *logp, const tensor *target, tensor *loss,    \
                         round_stats *st))                                                       \
    /* dlogp[i, target[i]] = -dloss / B, 0 elsewhere */                                          \
    X(nll_loss_backward, (backend *be, const tensor *dloss, const tensor *target,                \
                          tensor *dlogp, round_stats *st))                                       \
    /* y = (a - b)^2 elementwise, in y's dtype as loss_math.h rounds it */                       \
    X(mse_forward, (backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st))  \
    /* da = alpha * (a - b) * dy; dy has a's numel or is a scalar broadcast */                   \
    X(mse_backward, (backend *be, const tensor *dy, const tensor *a, const tensor *b,            \
                     double alpha, tensor *da, round_stats *st))                                 \
    /* ---- GradScaler and optimizers ---- */                                                    \
    /* *found_inf |= any element of g is inf or NaN; then g = round(float(g) * inv_scale) */     \
    X(unscale, (backend *be, tensor *g, float inv_scale, int *found_inf, round_stats *st))       \
    X(optimizer_step, (backend *be, const optim_config *cfg, const optim_hyper *h,               \
                       optim_tensors *t, optim_result *out))                             \
    /* ---- softmax and the causal mask (rows are over the last dim) ---- */                    \
    /* y = softmax(x) per row, y in x's dtype or float32 (half_to_float) */                      \
    X(softmax_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))               \
    /* t = dy * y rounded to dy's dtype, dx = t - y * sum(t) per row; dx may have another      \
     * dtype than dy and y */                                                                   \
    X(softmax_backward, (backend *be, const tensor *dy, const tensor *y, tensor *dx,             \
                         round_stats *st))                                                       \
    /* dst = src, with value where column > row of the last two dims (masked_fill of the       \
     * strict upper triangle); src and dst of one dtype */                                       \
    X(causal_fill, (backend *be, const tensor *src, float value, tensor *dst, round_stats *st))  \
    /* ---- losses bce_with_logits and l1 (loss_math.h) ---- */                                  \
    /* y = (1 - t) * x - log_sigmoid(x) elementwise: log_sigmoid rounded into x's dtype, the   \
     * rest after each op into y's (t's) dtype */                                                \
    X(bce_logits_forward, (backend *be, const tensor *x, const tensor *t, tensor *y,             \
                           round_stats *st))                                                     \
    /* dx = (sigmoid(x) - t) * dy / numel, rounded into dx's (x's) dtype after each op; dy one  \
     * element */                                                                                \
    X(bce_logits_backward, (backend *be, const tensor *dy, const tensor *x, const tensor *t,     \
                            tensor *dx, round_stats *st))                                        \
    /* y = a - b elementwise (same numel) */                                                     \
    X(sub_forward, (backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st))  \
    X(abs_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))                   \
    /* dx = dy * sgn(x), sgn(0) = sgn(NaN) = 0 */                                                \
    X(abs_backward, (backend *be, const tensor *dy, const tensor *x, tensor *dx,                 \
                     round_stats *st))                                                           \
    /* ---- scaled_dot_product_attention (sdpa_math.h; q and k arrive scaled) ---- */            \
    /* p = _safe_softmax(q k^T + mask + causal mask) over the keys; mask NULL: none */          \
    X(sdpa_probs_forward, (backend *be, const sdpa_geom *g, const tensor *q, const tensor *k,    \
                           const tensor *mask, tensor *p, round_stats *st))                      \
    /* ds = p * (dp - rowsum(dp * p)); dq = ds k, dk = ds^T q, and ds itself into dscores      \
     * [n, l, s] when not NULL (the mask's gradient) (uncounted: callers observe) */             \
    X(sdpa_probs_backward, (backend *be, const sdpa_geom *g, const tensor *dp, const tensor *q,  \
                            const tensor *k, const tensor *p, tensor *dq, tensor *dk,            \
                            tensor *dscores))                                                    \
    /* out = p v */                                                                              \
    X(sdpa_value_forward, (backend *be, const sdpa_geom *g, const tensor *p, const tensor *v,    \
                           tensor *out, round_stats *st))                                        \
    /* dp = dout v^T, dv = p^T dout (uncounted: callers observe) */                              \
    X(sdpa_value_backward, (backend *be, const sdpa_geom *g, const tensor *dout,                 \
                            const tensor *p, const tensor *v, tensor *dp, tensor *dv))        \
    /* ---- normalization (cpu/norm.c, kernels/norm.cu) ---- */                                \
    /* mean and rstd [n * groups] (float32 sums, rstd = 1 / sqrt(biased var + eps), stored    \
     * in their tensors' dtype), then y from the stored mean and rstd as g->form says; w      \
     * and b may be NULL (no affine: 1 and 0), mean NULL with NORM_RMS (here and in the       \
     * backward); st counts y's rounding */                                                   \
    X(norm_forward, (backend *be, const norm_geom *g, const tensor *x, const tensor *w,         \
                     const tensor *b, tensor *y, tensor *mean, tensor *rstd, round_stats *st))  \
    /* dx = rstd * (w dy - mean(w dy) - xhat mean(w dy xhat)) per (n, group), xhat =          \
     * (x - mean) * rstd; w may be NULL */                                                    \
    X(norm_backward_input, (backend *be, const norm_geom *g, const tensor *dy, const tensor *x, \
                            const tensor *mean, const tensor *rstd, const tensor *w,           \
                            tensor *dx, round_stats *st))                                      \
    /* dw[c] = sum of dy * xhat over n and inner (db is reduce_channel_sum) */                \
    X(norm_backward_weight, (backend *be, const norm_geom *g, const tensor *dy,                \
                             const tensor *x, const tensor *mean, const tensor *rstd,          \
                             tensor *dw, round_stats *st))                                     \
    /* batch_norm in training mode, x [N, C, HW] as g = {N, C, 1, HW}: each channel's mean   \
     * and invstd = 1 / sqrt(biased var + eps) over N and HW (float32 Welford sums, stored in  \
     * their tensors' dtype), and the running stats updated in place, r = (1 - momentum) r +  \
     * momentum s with the unbiased variance, rounded into their dtype (counted in st_mean,   \
     * st_var) */                                                                              \
    X(batch_norm_stats, (backend *be, const norm_geom *g, const tensor *x, float momentum,     \
                         tensor *mean, tensor *invstd, tensor *running_mean,                   \
                         tensor *running_var, round_stats *st_mean, round_stats *st_var))      \
    /* y = w * (x - mean) * invstd + b per channel; w and b may be NULL */                    \
    X(batch_norm_forward, (backend *be, const norm_geom *g, const tensor *x, const tensor *mean, \
                           const tensor *invstd, const tensor *w, const tensor *b, tensor *y,  \
                           round_stats *st))                                                   \
    /* dx = (dy - sum(dy) / M - (x - mean) * sum(dy (x - mean)) / M * invstd^2) * invstd * w  \
     * per channel, M = N * HW; w may be NULL */                                               \
    X(batch_norm_backward_input, (backend *be, const norm_geom *g, const tensor *dy,           \
                                  const tensor *x, const tensor *mean, const tensor *invstd,   \
                                  const tensor *w, tensor *dx, round_stats *st))               \
    /* dw[c] = sum(dy (x - mean)) * invstd (db is reduce_channel_sum) */                      \
    X(batch_norm_backward_weight, (backend *be, const norm_geom *g, const tensor *dy,          \
                                   const tensor *x, const tensor *mean, const tensor *invstd,  \
                                   tensor *dw, round_stats *st))                               \
    /* batch_norm in eval mode (Normalization.cu's batch_norm_cuda_out with train false):    \
     * mean = the running mean read as float32 (save_mean.copy_(running_mean)), invstd =      \
     * 1 / sqrt(running_var + eps) in float32 (batch_norm_calc_invstd); nothing updated,      \
     * nothing counted (mean and invstd are float32) */                                        \
    X(batch_norm_eval_stats, (backend *be, const norm_geom *g, const tensor *running_mean,     \
                              const tensor *running_var, tensor *mean, tensor *invstd))        \
    /* eval mode's dx = dy * (invstd * w) per channel (Normalization.cuh's                    \
     * batch_norm_backward_kernel with train false: go * grad_scale); w may be NULL */         \
    X(batch_norm_backward_eval_input, (backend *be, const norm_geom *g, const tensor *dy,      \
                                       const tensor *invstd, const tensor *w, tensor *dx,      \
                                       round_stats *st))                                       \
    /* ---- pooling (cpu/pool.c, kernels/pool.cu): NCHW, g's c_in = c_out, dilation 1 ---- */ \
    /* y = the max of each window (NaN wins; padding never does), indices (int64) its         \
     * position h * W + w in the input plane */                                               \
    X(max_pool2d_forward, (backend *be, const conv2d_geom *g, const tensor *x, tensor *y,      \
                           tensor *indices, round_stats *st))                                  \
    /* dx = the sum of dy over the windows whose max each element was */                     \
    X(max_pool2d_backward, (backend *be, const conv2d_geom *g, const tensor *dy,               \
                            const tensor *indices, tensor *dx, round_stats *st))               \
    /* y = sum of the window's inputs / divisor: the window's size clipped to the padded     \
     * input (count_include_pad) or to the input */                                           \
    X(avg_pool2d_forward, (backend *be, const conv2d_geom *g, bool count_include_pad,          \
                           const tensor *x, tensor *y, round_stats *st))                      \
    /* dx = sum over the windows holding the element of dy / divisor */                      \
    X(avg_pool2d_backward, (backend *be, const conv2d_geom *g, bool count_include_pad,         \
                            const tensor *dy, tensor *dx, round_stats *st))                   \
    /* ---- upsampling (cpu/interpolate.c, kernels/interpolate.cu): NCHW, g's c_in = c_out,   \
     * the integer scale factor in g->stride; index rules in interpolate_math.h ---- */       \
    /* y = F.interpolate(x, scale_factor=stride, mode="nearest") (upsample_nearest2d) */      \
    X(upsample_nearest2d_forward, (backend *be, const conv2d_geom *g, const tensor *x,         \
                                   tensor *y, round_stats *st))                                \
    /* dx = the float32 sum of dy over the outputs that copy each input, rounded once */      \
    X(upsample_nearest2d_backward, (backend *be, const conv2d_geom *g, const tensor *dy,       \
                                    tensor *dx, round_stats *st))                              \
    /* ---- graph models ---- */                                                                 \
    /* y[n, :] = w[idx[n], :]; idx int64 [N], w [V, C], y [N, C] in w's dtype */                 \
    X(embedding_forward, (backend *be, const tensor *idx, const tensor *w, tensor *y,            \
                          round_stats *st))                                                      \
    /* dw[v, :] = sum of dy[n, :] over n with idx[n] == v (none where v == padding_idx, -1:      \
     * no padding), summed in float32 and rounded once into dw's dtype */                        \
    X(embedding_backward, (backend *be, const tensor *dy, const tensor *idx,                     \
                           int64_t padding_idx, tensor *dw, round_stats *st))                    \
    /* y[..., M, N] = op(a)[..., M, K] op(b)[..., K, N] over y's leading dims (a and b have      \
     * them too): op(a) = a^T when ta (a stored [..., K, M]), op(b) = b^T when tb (b stored      \
     * [..., N, K]); float32 products and sums, rounded once into y's dtype */                   \
    X(matmul, (backend *be, const tensor *a, const tensor *b, bool ta, bool tb, tensor *y,       \
               round_stats *st))                                                                 \
    /* y = x with dims d1 and d2 swapped, as a contiguous copy (exact); y's shape is x's with    \
     * those dims swapped */                                                                     \
    X(transpose, (backend *be, const tensor *x, int d1, int d2, tensor *y, round_stats *st))    \
    /* ---- shape ops (cpu/shape.c, kernels/shape.cu): copies along one dim d, each value    \
     * loaded and stored through the counting store (a widening cast when the dtypes differ) */ \
    /* y[.., j, ..] = x[.., start + j * step, ..] for j < y->shape[d], y's other dims x's:      \
     * x[..., a:b:step] (slice), a cat's input gradient, pad's backward */                      \
    X(narrow_copy, (backend *be, const tensor *x, int d, int64_t start, int64_t step, tensor *y, \
                    round_stats *st))                                                            \
    /* y[.., start + j * step, ..] = x[.., j, ..] for j < x->shape[d], every other value of y   \
     * `fill`: slice_backward (fill 0) and F.pad's constant mode */                             \
    X(narrow_place, (backend *be, const tensor *x, int d, int64_t start, int64_t step,          \
                     float fill, tensor *y, round_stats *st))                                   \
    /* y = torch.cat(x[0..n), d): the inputs' values one after another along d (n up to         \
     * BACKEND_CAT_MAX; every dim but d agrees with y's) */                                      \
    X(cat, (backend *be, const tensor *const *x, int n, int d, tensor *y, round_stats *st))     \
    /* y = the strided view g of x, copied: permute, expand and repeat_interleave (g's sizes'   \
     * product is y's numel; y's shape may be any of that numel) */                            \
    X(strided_copy, (backend *be, const tensor *x, const strided_geom *g, tensor *y,            \
                     round_stats *st))                                                          \
    /* ---- float8 (cpu/fp8.c, kernels/fp8.cu): te.Linear under fp8_autocast ---- */             \
    /* *amax = max |x| over x's values, NaNs ignored and 0 for none, as Transformer Engine's     \
     * amax kernels take fmaxf(fabsf(v), amax) from 0 (transformer_engine/common/recipe/        \
     * current_scaling.cu); an inf counts */                                                     \
    X(amax, (backend *be, const tensor *x, float *amax))                                         \
    /* q = float8(x * scale) in q's float8 dtype: saturate clamps |x * scale| above the largest  \
     * finite to it first (*saturated counts them; NaN stays NaN), else the plain cast (NaN or  \
     * inf, fp8_quantize.h); qt, when not NULL, is the transposed copy of the 2-D view [rows,    \
     * cols] (cols x's last dim), [cols, rows], as TE's cast_transpose makes it; st counts q */ \
    X(fp8_quantize, (backend *be, const tensor *x, float scale, bool saturate, tensor *q,        \
                     tensor *qt, int64_t *saturated, round_stats *st))                           \
    /* y[M,N] = round(sum_k a[m,k] b[n,k] * (scale_inv_a * scale_inv_b) (+ bias[n])): a [M,K]   \
     * and b [N,K] float8 (TN, K the last dim of both), float32 products (exact) and sums;      \
     * fast_accum asks cuBLASLt for CUBLASLT_MATMUL_DESC_FAST_ACCUM (the CPU always accumulates  \
     * in float32 and ignores it); E5M2 x E5M2 is refused (non-zero, be->err) */                 \
    X(fp8_gemm, (backend *be, const tensor *a, const tensor *b, float scale_inv_a,              \
                 float scale_inv_b, const tensor *bias, bool fast_accum, tensor *y,              \
                 round_stats *st))                                                               \
    /* ---- MXFP8 (cpu/fp8_block.c; the CPU only: the CUDA backend leaves both out) ---- */      \
    /* x viewed as [rows, cols] (cols its last dim), or its transpose [cols, rows] when         \
     * colwise: q = float8(v * 2^-(e-127)) per block of 32 consecutive values along the last    \
     * dim of that view (a multiple of 32), e = the block's E8M0 exponent (fp8_recipe.h's       \
     * fp8_e8m0_te of its amax), saturating (*saturated counts the clamped); e8m0 (host         \
     * memory) gets one byte per block, row-major; q has the view's shape; st counts q */       \
    X(fp8_block_quantize, (backend *be, const tensor *x, bool colwise, tensor *q, uint8_t *e8m0, \
                           int64_t *saturated, round_stats *st))                                 \
    /* y[M,N] = round(sum_k A[m,k] B[n,k] (+ bias[n])), A = a's float8 values times their       \
     * blocks' 2^(e-127) (a_e8m0: M*K/32 bytes), B likewise (b [N,K], b_e8m0): TN, K a multiple  \
     * of 32, float32 products and sums; non-zero (be->err) when a product could fall below     \
     * float32's normal range (its float32 product would not be exact) or an operand's value     \
     * times its block's scale leaves float32's range */                                        \
    X(fp8_block_gemm, (backend *be, const tensor *a, const uint8_t *a_e8m0, const tensor *b,     \
                       const uint8_t *b_e8m0, const tensor *bias, tensor *y, round_stats *st))   \
    /* ---- NVFP4 and MXFP4 (cpu/fp4_block.c; the CPU only: the CUDA backend leaves it out) ---- */ \
    /* x viewed as [rows, cols] (cols its last dim), or its transpose when opts->colwise: q =    \
     * float4_e2m1fn of each value times its block's multiplier, blocks of 16 (NVFP4; 16x16     \
     * tiles under block_2d, each 16 first times TE's RHT matrix under rht) or 32 (MXFP4) along  \
     * the view's last dim (a multiple of the block), by fp4_recipe.h's rules, rounded to       \
     * nearest or stochastically from opts->seed; scales (host memory) one byte a block (E4M3   \
     * or E8M0), row-major; q has the view's shape; *out what it did; st counts q */            \
    X(fp4_block_quantize, (backend *be, const tensor *x, const fp4_quant_opts *opts, tensor *q,  \
                           uint8_t *scales, fp4_quant_stats *out, round_stats *st))            \
    /* y[M,N] = round(alpha sum_k A[m,k] B[n,k] (+ bias[n])): A = a's E2M1 values times their  \
     * block scales (a_scales laid out as fp4_block_quantize with a_opts wrote them), B        \
     * likewise, TN (K the last dim of both), alpha = (1 / a_s_enc) (1 / b_s_enc) (NVFP4's     \
     * per-tensor decode scales; pass 1 under MXFP4), float32 products and sums */            \
    X(fp4_block_gemm, (backend *be, const tensor *a, const uint8_t *a_scales,                    \
                       const fp4_quant_opts *a_opts, float a_s_enc, const tensor *b,             \
                       const uint8_t *b_scales, const fp4_quant_opts *b_opts, float b_s_enc,     \
                       const tensor *bias, tensor *y, round_stats *st))

/* BACKEND_OP_cast, ...: an op, as backend_supports() is asked about it */
typedef enum backend_op {
#define BACKEND_OP_ENUM(name, params) BACKEND_OP_##name,
    BACKEND_OPS(BACKEND_OP_ENUM)
#undef BACKEND_OP_ENUM
        BACKEND_OP_COUNT
} backend_op;

struct backend {
    const char *name;        /* "cpu" | "cuda" | "dry" */
    bool native_math;        /* --gpu-math native: library GEMMs write half outputs directly */
    bool has_native_math;    /* the backend can run with native_math on */
    bool observe_every_step; /* runs through it observe every step (the counting backend:
                              * the preflight's peak is that of an observed step) */
    char device[128];        /* summary.csv's device: "cpu", "cuda:NVIDIA H200" */
    char err[512];           /* message of the last failure an op returned */
    mem_account *account;    /* where scratch allocations are counted (as MEM_WORKSPACE) */
    void *ctx;               /* the backend's own state */

    /* Optional: whether op runs with operands of dtype dt; NULL runs every op in every
     * dtype. Ask through backend_supports(). */
    bool (*supports)(const backend *be, backend_op op, dtype dt);

#define BACKEND_MEMORY_FIELD(ret, name, params) ret(*name) params;
    BACKEND_MEMORY_FNS(BACKEND_MEMORY_FIELD)
#undef BACKEND_MEMORY_FIELD
#define BACKEND_OP_FIELD(name, params) int(*name) params;
    BACKEND_OPS(BACKEND_OP_FIELD)
#undef BACKEND_OP_FIELD
};

/* What the CUDA library says it was built for (BACKEND_ABI_SYMBOL). This struct never
 * changes: it is how two builds learn that everything else may have. */
typedef struct backend_abi {
    int32_t version;     /* BACKEND_ABI_VERSION of its sources */
    int64_t table_bytes; /* sizeof(struct backend) there */
} backend_abi;
#define BACKEND_ABI_VERSION 17

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU backend; always available. NULL when out of host memory, or (with backend_check's
 * message on stderr) when a build left a function of its table empty. */
backend *backend_cpu_open(mem_account *account);
/* The GEMMs of linear and matmul the CPU backend has run since the process began, by path:
 * operands widened to float32 for OpenBLAS's sgemm, or bfloat16 operands on the processor's
 * bfloat16 instructions where that is exact (ops/cpu/gemm_bf16.c). config.csv and report.md
 * give a run's. */
typedef struct backend_gemm_paths {
    int64_t sgemm, bf16;
} backend_gemm_paths;
backend_gemm_paths backend_cpu_gemm_paths(void);
/* The counting backend of the memory preflight (backend_dry.c); NULL as backend_cpu_open. */
backend *backend_dry_open(mem_account *account);

/* Loads lib/libampscope_cuda.so and opens the first GPU. Returns NULL with a message in
 * err when that is not possible: "no usable CUDA device: ...", a library built for another
 * ABI (both builds' numbers), or a table that fails backend_check(). */
backend *backend_cuda_load(mem_account *account, const char *lib_dir, char *err, int errlen);

/* What the CUDA library exports (looked up by name with dlsym). */
typedef backend *(*backend_cuda_open_fn)(mem_account *account, char *err, int errlen);
#define BACKEND_CUDA_OPEN_SYMBOL "ampscope_backend_cuda_open"
typedef backend_abi (*backend_abi_fn)(void);
#define BACKEND_ABI_SYMBOL "ampscope_backend_abi"
/* The names of the rows the library was built with, in their order: BACKEND_ROW_NAMES. */
typedef const char *(*backend_rows_fn)(void);
#define BACKEND_ROWS_SYMBOL "ampscope_backend_rows"
#define BACKEND_ROW_NAME(name, ...) #name " "
#define BACKEND_ROW_NAMES POINTWISE_OPS(BACKEND_ROW_NAME) "| " REDUCE_OPS(BACKEND_ROW_NAME)

/* 0 when every memory function and op of be is filled, an op it leaves out excepted; else
 * -1 with a message in err naming the backend and each one left NULL. */
int backend_check(const backend *be, char *err, int errlen);
/* Whether be runs op with operands of dtype dt (be->supports, or every op when it is NULL). */
bool backend_supports(const backend *be, backend_op op, dtype dt);
/* Whether be leaves op out: its supports() says no in every dtype (its slot may be empty). */
bool backend_leaves_out(const backend *be, backend_op op);
/* "cast", "linear_forward", ...: the op's name in the list */
const char *backend_op_name(backend_op op);
/* db[C] = the sum row over dy viewed as [outer, C, inner], over outer and inner (a bias's
 * gradient): be's reduce_forward, counted into st */
int reduce_channel_sum(backend *be, const tensor *dy, int64_t outer, int64_t inner, tensor *db,
                       round_stats *st);
/* y (one value) = row op over every element of x (a loss's mean) */
int reduce_all(backend *be, rd_op op, const tensor *x, tensor *y, round_stats *st);

#ifdef __cplusplus
}
#endif

#endif
