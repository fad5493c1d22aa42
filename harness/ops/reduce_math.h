/*
 * reduce_math.h: the formulas of the reduction rows (reduce.h), written once in RD_REAL:
 * ops/reduce.h includes this file for float32, which both backends build (AMP_HD); a test
 * includes it again with RD_REAL double, RD_FN(name) naming the double copies and RD_EXACT
 * defined (no rounding points) for finite differences in float64.
 *
 * A row `op` defines its accumulator type RD_FN(rd_op_acc) and
 *   RD_IDENT(op)     the identity an accumulator starts from
 *   RD_REDUCE(op)    a, x: the accumulator after taking value x
 *   RD_COMBINE(op)   a, b: two accumulators as one (a holds the earlier values)
 *   RD_PROJECT(op)   a, R, n_out: the output's value before its one rounding (R values per
 *                    output, n_out outputs)
 *   RD_BACKWARD(op)  g, x, y, count, m, R: the gradient of value x of an output whose result
 *                    is y and whose gradient is g (count: how many of its values RD_COUNTS
 *                    holds for, where the row asks for it; m: the output's mean, RD_MEAN), in
 *                    dt's arithmetic as PyTorch's
 *                    kernels round, before the last rounding into dt
 *   RD_COUNTS(op)    x, y: the predicate RD_COUNT counts (false for a row without RD_COUNT)
 * p is the call's parameters (op_params).
 *
 * Sources (aten/src/ATen/native/):
 *   sum   cuda/ReduceSumProdKernel.cu: a + b from 0, float32 accumulators for half inputs;
 *         its backward expands grad (FunctionsManual.cpp, sum_backward)
 *   mean  cuda/ReduceMomentKernel.cu (mean_kernel_impl): the sum times factor =
 *         float(num_output_elements) / numel, SharedReduceOps.h's MeanOps; its backward
 *         (FunctionsManual.cpp, mean_backward) divides the expanded grad by the count, a CPU
 *         scalar: cuda/BinaryDivTrueKernel.cu multiplies by its float32 reciprocal,
 *         grad * (1.0f / float(R)), rounded once
 *   amax  cuda/ReduceMaxValuesKernel.cu (MaxNanFunctor): (isnan(a) || a > b) ? a : b from
 *         -inf, in the input's dtype (exact in float32); its backward
 *         (derivatives.yaml, scale_grad_by_count): (grad / count) * (x == result), the count
 *         an int64 tensor promoted to grad's dtype, the division a tensor's (opmath, one
 *         rounding), the product by the mask exact (inf * 0 is NaN, as on CUDA)
 *   var   cuda/ReduceMomentKernel.cu (std_var_kernel_impl) with SharedReduceOps.h's WelfordOps,
 *         float32 accumulators {mean, m2, n, nf}: reduce takes a value (delta = x - mean,
 *         mean += delta / nf, m2 += delta * (x - mean)), combine merges two (delta = b.mean -
 *         a.mean, nb_over_n = b.nf / (a.nf + b.nf), mean += delta * nb_over_n, m2 = a.m2 +
 *         b.m2 + delta * delta * a.nf * nb_over_n; an empty one gives the other), project
 *         divides m2 by max(nf - correction, 0) (correction as float32); its backward
 *         (FunctionsManual.cpp, var_backward) is three kernels after the mean's:
 *         ((2 / (R - correction)) * grad) * (self - mean), the scalar a CPU scalar (float32
 *         opmath), each product and the difference rounded into dt
 */
#ifndef RD_REAL
#error "reduce_math.h: include ops/reduce.h, or define RD_REAL and RD_FN first"
#endif

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/half.h"
#include "op_params.h"

#ifndef AMPSCOPE_REDUCE_MATH_ONCE
#define AMPSCOPE_REDUCE_MATH_ONCE
#define RD_UNUSED __attribute__((unused))
#endif

#ifdef RD_EXACT
#define RD_ROUND(v, dt) (v)
#define RD_C(v) v
#else
#define RD_ROUND(v, dt) round_to((v), (dt))
#define RD_C(v) v##f
#endif

#define RD_ACC(op) RD_FN(rd_##op##_acc)
#define RD_IDENT(op)                                                                               \
    static inline AMP_HD RD_ACC(op) RD_FN(rd_##op##_ident)(const op_params *p RD_UNUSED)
#define RD_REDUCE(op)                                                                              \
    static inline AMP_HD RD_ACC(op)                                                                \
        RD_FN(rd_##op##_reduce)(RD_ACC(op) a, RD_REAL x, const op_params *p RD_UNUSED)
#define RD_COMBINE(op)                                                                             \
    static inline AMP_HD RD_ACC(op)                                                                \
        RD_FN(rd_##op##_combine)(RD_ACC(op) a, RD_ACC(op) b, const op_params *p RD_UNUSED)
#define RD_PROJECT(op)                                                                             \
    static inline AMP_HD RD_REAL RD_FN(rd_##op##_project)(                                         \
        RD_ACC(op) a, int64_t R RD_UNUSED, int64_t n_out RD_UNUSED, const op_params *p RD_UNUSED)
#define RD_BACKWARD(op)                                                                            \
    static inline AMP_HD RD_REAL RD_FN(rd_##op##_backward)(                                        \
        RD_REAL g RD_UNUSED, RD_REAL x RD_UNUSED, RD_REAL y RD_UNUSED, int64_t count RD_UNUSED,    \
        RD_REAL m RD_UNUSED, int64_t R RD_UNUSED, const op_params *p RD_UNUSED,                    \
        dtype dt RD_UNUSED)
#define RD_COUNTS(op)                                                                              \
    static inline AMP_HD bool RD_FN(rd_##op##_counts)(RD_REAL x RD_UNUSED, RD_REAL y RD_UNUSED)

/* ---- sum ---- */
typedef RD_REAL RD_ACC(sum);
RD_IDENT(sum) { return 0; }
RD_REDUCE(sum) { return a + x; }
RD_COMBINE(sum) { return a + b; }
RD_PROJECT(sum) { return a; }
RD_BACKWARD(sum) { return g; }
RD_COUNTS(sum) { return false; }

/* ---- mean ---- */
typedef RD_REAL RD_ACC(mean);
RD_IDENT(mean) { return 0; }
RD_REDUCE(mean) { return a + x; }
RD_COMBINE(mean) { return a + b; }
RD_PROJECT(mean) { return a * ((RD_REAL)n_out / (RD_REAL)(n_out * R)); }
RD_BACKWARD(mean) { return g * (RD_C(1.0) / (RD_REAL)R); }
RD_COUNTS(mean) { return false; }

/* ---- amax ---- */
typedef RD_REAL RD_ACC(amax);
RD_IDENT(amax) { return -(RD_REAL)INFINITY; }
RD_COMBINE(amax) { return (a != a || a > b) ? a : b; }
RD_REDUCE(amax) { return RD_FN(rd_amax_combine)(a, x, p); }
RD_PROJECT(amax) { return a; }
RD_BACKWARD(amax)
{
    RD_REAL share = RD_ROUND(g / RD_ROUND((RD_REAL)count, dt), dt);
    return share * (RD_REAL)(x == y ? 1 : 0);
}
RD_COUNTS(amax) { return x == y; }

/* ---- var: p->real[0] is the correction ---- */
typedef struct RD_ACC(var) {
    RD_REAL mean, m2, nf;
    int32_t n; /* WelfordData's index_t count (-1 after a combine, as there) */
} RD_ACC(var);
static inline AMP_HD RD_ACC(var) RD_FN(rd_var_make)(RD_REAL mean, RD_REAL m2, RD_REAL nf, int32_t n)
{
    RD_ACC(var) a;
    a.mean = mean, a.m2 = m2, a.nf = nf, a.n = n;
    return a;
}
RD_IDENT(var) { return RD_FN(rd_var_make)(0, 0, 0, 0); }
RD_REDUCE(var)
{
    int32_t n = a.n + 1;
    RD_REAL nf = (RD_REAL)n;
    RD_REAL delta = x - a.mean;
    RD_REAL mean = a.mean + delta / nf;
    return RD_FN(rd_var_make)(mean, a.m2 + delta * (x - mean), nf, n);
}
RD_COMBINE(var)
{
    if (a.nf == 0)
        return b;
    if (b.nf == 0)
        return a;
    RD_REAL delta = b.mean - a.mean, count = a.nf + b.nf, nb_over_n = b.nf / count;
    return RD_FN(rd_var_make)(a.mean + delta * nb_over_n,
                              a.m2 + b.m2 + delta * delta * a.nf * nb_over_n, count, -1);
}
RD_PROJECT(var)
{
    RD_REAL correction = (RD_REAL)(float)p->real[0];
    RD_REAL divisor = a.nf > correction ? a.nf - correction : 0;
    return a.m2 / divisor;
}
RD_BACKWARD(var)
{
    RD_REAL scale = (RD_REAL)(float)(2.0 / ((double)R - p->real[0]));
    return RD_ROUND(scale * g, dt) * RD_ROUND(x - m, dt);
}
RD_COUNTS(var) { return false; }

#undef RD_ACC
#undef RD_IDENT
#undef RD_REDUCE
#undef RD_COMBINE
#undef RD_PROJECT
#undef RD_BACKWARD
#undef RD_COUNTS
#undef RD_ROUND
#undef RD_C
#undef RD_REAL
#undef RD_FN
#undef RD_EXACT
