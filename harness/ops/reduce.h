/*
 * reduce.h: the reductions, one row each, as the pointwise ops are (pointwise.h): a row is
 * one line of REDUCE_OPS below and its formulas in reduce_math.h; the backend's two entries
 * reduce_forward and reduce_backward run any row (cpu/reduce.c, kernels/reduce.cu), over
 * the dims of x a mask names (at most TENSOR_MAX_DIMS: a linear bias's gradient reduces
 * dim 0 of [B, O], a convolution's dims 0, 2 and 3 of [N, C, H, W], a loss's mean all).
 *
 * A row's columns, X(name, backward, policy, opts, aten):
 *  name      the op, and its formulas' names
 *  backward  what its backward reads, as PyTorch's autograd node saves it
 *            (tools/autograd/derivatives.yaml): RD_SAVE_X (the input), RD_SAVE_OUT (the
 *            result), RD_COUNT (per output, how many of its values the row's predicate
 *            RD_COUNTS holds for: amax's ties), RD_MEAN (per output, the mean row's result
 *            rounded into x's dtype: var's self.mean(dim, keepdim=True), a tensor of its own)
 *  policy    its CUDA autocast policy (autocast_policy.h)
 *  opts      (), or its name=value options, as pointwise.h's (op_params' slots: var's
 *            correction is real[0])
 *  aten      the ATen ops it stands for, the one autocast dispatches first
 *
 * Accumulation, from PyTorch's CUDA reduction kernels (aten/src/ATen/native/cuda/):
 * Reduce.cuh's gpu_reduce_kernel with a float32 accumulator for float32, float16 and
 * bfloat16 inputs (ReduceSumProdKernel.cu's sum_functor<Half, float>, ReduceMomentKernel.cu's
 * mean_kernel_impl<Half, float> and MeanOps, ReduceMaxValuesKernel.cu's MaxNanFunctor for
 * amax), and the shape of Reduce.cuh's order, fixed here so that both backends add in the
 * same order and agree bit for bit:
 *  - an output's R values, in the row-major order of its reduced dims (j = 0 .. R - 1), are
 *    cut into G spans of L values: G = min(RD_MAX_SPANS, ceil(R / RD_SPAN_MIN)), L =
 *    ceil(R / G) rounded up to a multiple of RD_SWEEP (the last spans may be shorter, or
 *    empty);
 *  - within a span, value j (counted from the span's start) goes to lane j % RD_LANES and to
 *    accumulator (j / RD_LANES) % RD_ACCS of that lane, each accumulator taking its values in
 *    order from the row's identity (Reduce.cuh's thread_reduce: vt0 = 4 accumulators per
 *    thread, its input strided by the threads);
 *  - a lane's accumulators combine in order, ((a0 + a1) + a2) + a3 (thread_reduce's end);
 *  - the lanes combine pairwise, lane l taking lane l + o for o = 1, 2, 4, 8, 16
 *    (block_x_reduce's warp shuffles), lane 0 holding the span's value;
 *  - the spans combine the same way, pairwise by offsets 1, 2, 4, ... (a span past the
 *    last takes no part), then the row projects the result (mean: times its factor) and
 *    the kernel rounds it once into the output's dtype.
 * The lanes and spans are the harness's choice of Reduce.cuh's block and grid shapes, which
 * PyTorch picks from the tensor's geometry and the GPU: its last bits may differ from this
 * order's; the class of order (several accumulators, pairwise trees) is its.
 */
#ifndef AMPSCOPE_REDUCE_H
#define AMPSCOPE_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "autocast_policy.h"
#include "core/half.h"
#include "op_params.h"
#include "tensor.h"

#define RD_LANES 32
#define RD_ACCS 4
#define RD_SWEEP (RD_LANES * RD_ACCS) /* 128 values: each accumulator of each lane once */
/* A span is one warp's share: 32 lanes of at most 256 values each, Reduce.cuh's
 * setReduceConfig splitting the input over more blocks (ctas_per_output) until no thread
 * sums more than max_values_per_thread = 256 values; at most 65535 blocks of 16 warps (its
 * cap on ctas_per_output, 512-thread blocks), so that a float32 mean of 10^9 values sums
 * chains as short as a GPU's (64 values an accumulator), not chains 16 times longer. */
#define RD_SPAN_MIN (RD_LANES * 256)
#define RD_MAX_SPANS (65535 * 16)
#define RD_MAX_ATEN 4

/* the backward column's flags */
enum { RD_SAVE_X = 1 << 0, RD_SAVE_OUT = 1 << 1, RD_COUNT = 1 << 2, RD_MEAN = 1 << 3 };

/* X(name, backward, policy, opts, aten): see above */
#define REDUCE_OPS(X)                                                                              \
    /* x.sum(dims); SumBackward1: grad expanded to self's sizes (nothing saved) */                 \
    X(sum, 0, AUTOCAST_FP32_SET_OPT_DTYPE, (), ("sum.dim_IntList", "sum"))                         \
    /* x.mean(dims); MeanBackward1: grad expanded, divided by the count (a CPU scalar:             \
     * BinaryDivTrueKernel.cu multiplies by its float32 reciprocal) */                             \
    X(mean, 0, AUTOCAST_NONE, (), ("mean.dim", "mean"))                                            \
    /* x.amax(dims); its backward shares grad evenly among the ties: (grad / count) * mask,        \
     * mask = (result == self) (derivatives.yaml's amax, scale_grad_by_count) */                   \
    X(amax, RD_SAVE_X | RD_SAVE_OUT | RD_COUNT, AUTOCAST_NONE, (), ("amax"))                       \
    /* x.var(dims, correction=C), C in real[0] (PyTorch's default 1); VarBackward0:                \
     * var_backward (FunctionsManual.cpp): (2 / (R - C)) * grad * (self - self.mean(dim, True)) */ \
    X(var, RD_SAVE_X | RD_MEAN, AUTOCAST_NONE, (PW_OPT_REAL(correction, 0, NONNEG, 1.0)),          \
      ("var.correction"))

/* RD_OP_sum, ...: a row, in the list's order */
typedef enum rd_op {
#define RD_OP_ENUM(name, ...) RD_OP_##name,
    REDUCE_OPS(RD_OP_ENUM)
#undef RD_OP_ENUM
        RD_OP_COUNT
} rd_op;

/* A row as data (reduce.c), for the layers, the tests and `ampscope ops`. */
typedef struct rd_row {
    const char *name;
    unsigned backward; /* RD_SAVE_*, RD_COUNT */
    autocast_policy policy;
    const char *aten[RD_MAX_ATEN]; /* NULL-terminated */
} rd_row;

#ifdef __cplusplus
extern "C" {
#endif
extern const rd_row rd_rows[RD_OP_COUNT];
#ifdef __cplusplus
}
#endif

/* ---- x viewed for a reduction over the dims of a mask ---- */

/* the groups of one class an rd_view can have: kept and reduced groups alternate, so
 * TENSOR_MAX_DIMS dims make at most half of them, rounded up, of each */
#define RD_MAX_GROUPS ((TENSOR_MAX_DIMS + 1) / 2)

/* x's dims of size > 1, adjacent ones of one class merged: the kept groups give an output's
 * index o (row-major, their outer first), the reduced groups a value's index j; at most
 * RD_MAX_GROUPS of each. Element (o, j) of x is at
 * sum_k digit_k(o) * kstride[k] + sum_k digit_k(j) * rstride[k]. */
typedef struct rd_view {
    int64_t n_out, R;
    int nk, nr;
    int64_t kdim[RD_MAX_GROUPS], kstride[RD_MAX_GROUPS];
    int64_t rdim[RD_MAX_GROUPS], rstride[RD_MAX_GROUPS];
    bool inner_reduced; /* x's innermost dim of size > 1 is reduced (or none is kept) */
    int spans;          /* G */
    int64_t span;       /* L */
} rd_view;

static inline AMP_HD int64_t rd_digits(int n, const int64_t *dim, const int64_t *stride,
                                       int64_t idx)
{
    int64_t at = 0;
    for (int k = n - 1; k >= 0; k--) {
        int64_t q = idx / dim[k];
        at += (idx - q * dim[k]) * stride[k];
        idx = q;
    }
    return at;
}

/* where output o's values start in x, and value j's offset from there */
static inline AMP_HD int64_t rd_base(const rd_view *v, int64_t o)
{
    return rd_digits(v->nk, v->kdim, v->kstride, o);
}
static inline AMP_HD int64_t rd_offset(const rd_view *v, int64_t j)
{
    return rd_digits(v->nr, v->rdim, v->rstride, j);
}

/* the output of x's element i: its kept digits (the reverse of rd_base) */
static inline AMP_HD int64_t rd_output_of(const rd_view *v, int64_t i)
{
    int64_t o = 0, scale = 1;
    for (int k = v->nk - 1; k >= 0; k--) {
        o += (i / v->kstride[k] % v->kdim[k]) * scale;
        scale *= v->kdim[k];
    }
    return o;
}

/* x [ndim, shape] reduced over the dims whose bits `dims` sets */
static inline rd_view rd_view_of(int ndim, const int64_t *shape, unsigned dims)
{
    rd_view v;
    memset(&v, 0, sizeof v);
    v.n_out = v.R = 1;
    int last = -1; /* class of the last group: 0 kept, 1 reduced */
    int64_t stride = 1;
    int64_t dim[2][TENSOR_MAX_DIMS], str[2][TENSOR_MAX_DIMS];
    int n[2] = {0, 0};
    v.inner_reduced = true;
    bool inner_seen = false;
    for (int d = ndim - 1; d >= 0; d--) { /* innermost first */
        if (shape[d] == 1)
            continue;
        int cls = (dims >> d) & 1;
        if (!inner_seen)
            v.inner_reduced = cls == 1;
        inner_seen = true;
        if (cls == last) {
            dim[cls][n[cls] - 1] *= shape[d];
        } else {
            dim[cls][n[cls]] = shape[d];
            str[cls][n[cls]] = stride;
            n[cls]++;
        }
        last = cls;
        stride *= shape[d];
        if (cls)
            v.R *= shape[d];
        else
            v.n_out *= shape[d];
    }
    v.nk = n[0], v.nr = n[1];
    for (int k = 0; k < n[0]; k++) { /* outer first */
        v.kdim[k] = dim[0][n[0] - 1 - k];
        v.kstride[k] = str[0][n[0] - 1 - k];
    }
    for (int k = 0; k < n[1]; k++) {
        v.rdim[k] = dim[1][n[1] - 1 - k];
        v.rstride[k] = str[1][n[1] - 1 - k];
    }
    int64_t g = (v.R + RD_SPAN_MIN - 1) / RD_SPAN_MIN;
    v.spans = (int)(g < 1 ? 1 : g > RD_MAX_SPANS ? RD_MAX_SPANS : g);
    v.span = (v.R + v.spans - 1) / v.spans;
    v.span = (v.span + RD_SWEEP - 1) / RD_SWEEP * RD_SWEEP;
    return v;
}

/* the float32 formulas */
#define RD_REAL float
#define RD_FN(name) name
#include "reduce_math.h"

#endif
