/*
 * pointwise_math.h: the formulas of the pointwise rows (pointwise.h), each PyTorch's CUDA
 * kernel in its opmath type before the kernel's one rounding into the output's dtype, which
 * the caller stores and counts. Written once in PW_REAL: ops/pointwise.h includes this file
 * for float32, which both backends build (AMP_HD: __host__ __device__ under nvcc); a test
 * includes it again with PW_REAL double, PW_FN(name) naming the double copies and PW_EXACT
 * defined, where the rounding points are the identity and erf, tanh and exp are double's,
 * for finite differences in float64.
 *
 * A row `op` of arity n defines PW_FORWARD(op) and PW_BACKWARD(op, k) for k < n. Their
 * arguments: a, b, c the operands' values at the element (0 past the arity; in a backward,
 * 0 where the row does not save them), g the output's gradient, y the saved result (0 when
 * not saved), p the call's parameters, i the element's index in the output, dt the dtype the
 * kernel stores (where PyTorch's kernel rounds an intermediate in scalar_t: PW_ROUND).
 *
 * Sources (aten/src/ATen/native/cuda/):
 *   relu      threshold_backward: x <= 0 ? 0 : grad (NaN propagates forward, as torch.relu)
 *   gelu      ActivationGeluKernel.cu (GeluCUDAKernelImpl, GeluBackwardCUDAKernelImpl),
 *             approximate='none' (erf) and 'tanh'
 *   silu      ActivationSiluKernel.cu: x / (1 + exp(-x)); dy * s * (1 + x * (1 - s))
 *   sigmoid   UnarySpecialOpsKernel.cu: 1 / (1 + exp(-x)); BinaryMiscBackwardOpsKernels.cu
 *             (sigmoid_backward_kernel_cuda): a * (scalar_t(1.) - b) * b
 *   tanh      UnaryGeometricTanhKernel.cu; BinaryMiscBackwardOpsKernels.cu
 *             (tanh_backward_kernel_cuda): a * (scalar_t{1.} - b * b)
 *             Both backwards compute in scalar_t, not opmath: in c10::Half and c10::BFloat16
 *             every operation rounds to the tensor's dtype (as mse's kernels, loss_math.h),
 *             so they round their intermediates into dt and leave the last rounding to the
 *             caller.
 *   add, mul  BinaryAddSubKernel.cu, BinaryMulKernel.cu: opmath, one rounding
 *   scale     mul with a CPU scalar (opmath_gpu_kernel_with_scalars: the float32 scalar)
 *   dropout   Dropout.cu (fused_dropout): x * mask * scale with scale = 1 / (1 - p) in
 *             float32; its backward (masked_scale) dy * mask * scale
 *   neg       UnarySignKernels.cu (neg_kernel_cuda): -a, exact in every dtype; its backward
 *             the same kernel on the gradient
 *   sub       BinaryAddSubKernel.cu (add_kernel with alpha -1): a + (-1) * b in opmath, one
 *             rounding; other's gradient -grad (neg's kernel, exact)
 *   div       BinaryDivTrueKernel.cu: a / b in opmath; a CPU scalar divisor multiplies by
 *             its float32 reciprocal (the layer runs mul's row then)
 *   maximum, minimum  MaxMinElementwiseKernel.cu: NaN propagating max/min in opmath
 *   pow       PowKernel.cu (pow_tensor_scalar_kernel), Pow.cpp: see pw_pow_value
 *   rsqrt, sqrt, exp, log, reciprocal, abs, sin, cos, erf  UnaryOpsKernel.cu,
 *             UnaryFractionKernels.cu, UnarySignKernels.cu, UnaryGeometric*Kernel.cu,
 *             UnarySpecialOpsKernel.cu: the function of the opmath value, one rounding
 *   softplus  ActivationSoftplusKernel.cu: (x * beta) > threshold ? x :
 *             log1p(exp(x * beta)) / beta; its backward z = exp(x * beta),
 *             (x * beta) > threshold ? grad : grad * z / (z + 1)
 *   hardswish, hardsigmoid  ActivationHardswishKernel.cu, ActivationHardsigmoidKernel.cu:
 *             x * min(max(x + 3, 0), 6) * one_sixth, min(max(x + 3, 0), 6) * one_sixth
 *   relu6     hardtanh(x, 0, 6) = clamp (UnaryOpsKernel / TensorCompare.cu); its backward
 *             hardtanh_backward (ActivationHardtanhKernel.cu): grad where 0 < x < 6
 *  The backward formulas of derivatives.yaml that are composites of several kernels (rsqrt,
 *  sqrt, reciprocal, pow, sin, cos, erf, div's other) round between those kernels
 *  (PW_ROUND into dt): outside autocast on half tensors every intermediate is a half tensor.
 * erf, tanh and exp are evaluated in double and rounded to float32, the correctly rounded
 * float result on both backends (CUDA's erff/tanhf/expf, which PyTorch calls, may be 1-2 ulp
 * away from it: float32 noise, not a difference a half output can show).
 *
 * The dropout mask is not PyTorch's (Philox through curand_uniform4): element i is kept when
 * the top 24 bits of splitmix64(seed + i * golden) fall below (1 - p) * 2^24, a pure
 * function of (seed, i), so the backward recomputes it and the CPU and the GPU draw the same
 * mask.
 */
#ifndef PW_REAL
#error "pointwise_math.h: include ops/pointwise.h, or define PW_REAL and PW_FN first"
#endif

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/half.h"
#include "op_params.h"

#ifndef AMPSCOPE_POINTWISE_MATH_ONCE /* what does not depend on PW_REAL */
#define AMPSCOPE_POINTWISE_MATH_ONCE

/* the keep threshold of p on the 24-bit scale */
static inline AMP_HD uint32_t dropout_threshold(double p)
{
    return (uint32_t)((1.0 - p) * 16777216.0);
}

/* Dropout.cu's scale: the keep probability 1 - p as accscalar_t (float32), then 1.0 / it in
 * double, stored as float32 */
static inline AMP_HD float dropout_scale(double p)
{
    return (float)(1.0 / (double)(float)(1.0 - p));
}

static inline AMP_HD bool dropout_keeps(uint64_t seed, int64_t i, uint32_t threshold)
{
    uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 40) < threshold;
}

/* exp as float32 formulas evaluate it: the double function rounded to float32 (softmax's
 * too) */
static inline AMP_HD float exp_f32(float v) { return (float)exp((double)v); }

#define PW_UNUSED __attribute__((unused))
#endif

#ifdef PW_EXACT /* float64: no rounding points, libm in double */
#define PW_ROUND(v, dt) (v)
#define PW_C(v) v
#define PW_LIBM(f, v) f(v)
#else /* float32 opmath: libm's double result rounded to float32 */
#define PW_ROUND(v, dt) round_to((v), (dt))
#define PW_C(v) v##f
#define PW_LIBM(f, v) ((float)f((double)(v)))
#endif

#define PW_FORWARD(op)                                                                             \
    static inline AMP_HD PW_REAL PW_FN(pw_##op##_forward)(                                         \
        PW_REAL a PW_UNUSED, PW_REAL b PW_UNUSED, PW_REAL c PW_UNUSED,                             \
        const op_params *p PW_UNUSED, int64_t i PW_UNUSED, dtype dt PW_UNUSED)
#define PW_BACKWARD(op, k)                                                                         \
    static inline AMP_HD PW_REAL PW_FN(pw_##op##_backward_##k)(                                    \
        PW_REAL g PW_UNUSED, PW_REAL a PW_UNUSED, PW_REAL b PW_UNUSED, PW_REAL c PW_UNUSED,        \
        PW_REAL y PW_UNUSED, const op_params *p PW_UNUSED, int64_t i PW_UNUSED,                    \
        dtype dt PW_UNUSED)

/* ---- relu ---- */
PW_FORWARD(relu) { return a > 0 ? a : (a != a ? a : 0); }
PW_BACKWARD(relu, 0) { return y <= 0 ? 0 : g; }

/* ---- gelu: p->choice[0] is approximate= ---- */
#define PW_GELU_TANH_BETA PW_C(0.79788456080286535588) /* M_SQRT2 * M_2_SQRTPI * 0.5 */
#define PW_GELU_ERF_BETA PW_C(0.39894228040143267794)  /* M_2_SQRTPI * M_SQRT1_2 * 0.5 */
#define PW_GELU_KAPPA PW_C(0.044715)
#define PW_SQRT1_2 PW_C(0.70710678118654752440) /* M_SQRT1_2 */

PW_FORWARD(gelu)
{
    if (p->choice[0] == GELU_TANH) {
        PW_REAL a_cube = a * a * a;
        PW_REAL inner = PW_GELU_TANH_BETA * (a + PW_GELU_KAPPA * a_cube);
        return PW_C(0.5) * a * (PW_C(1.0) + PW_LIBM(tanh, inner));
    }
    return a * PW_C(0.5) * (PW_C(1.0) + PW_LIBM(erf, a * PW_SQRT1_2));
}

PW_BACKWARD(gelu, 0)
{
    if (p->choice[0] == GELU_TANH) {
        PW_REAL a_sq = a * a;
        PW_REAL a_cube = a_sq * a;
        PW_REAL inner = PW_GELU_TANH_BETA * (a + PW_GELU_KAPPA * a_cube);
        PW_REAL tanh_inner = PW_LIBM(tanh, inner);
        PW_REAL left = PW_C(0.5) * a;
        PW_REAL right = PW_C(1.0) + tanh_inner;
        PW_REAL left_derivative = PW_C(0.5) * right;
        PW_REAL tanh_derivative = PW_C(1.0) - tanh_inner * tanh_inner;
        PW_REAL inner_derivative =
            PW_GELU_TANH_BETA * (PW_C(1.0) + PW_C(3.0) * PW_GELU_KAPPA * a_sq);
        PW_REAL right_derivative = left * tanh_derivative * inner_derivative;
        return g * (left_derivative + right_derivative);
    }
    PW_REAL cdf = PW_C(0.5) * (PW_C(1.0) + PW_LIBM(erf, a * PW_SQRT1_2));
    PW_REAL pdf = PW_LIBM(exp, PW_C(-0.5) * a * a) * PW_GELU_ERF_BETA;
    return g * (cdf + a * pdf);
}

/* ---- silu, sigmoid, tanh ---- */
PW_FORWARD(silu) { return a / (PW_C(1.0) + PW_LIBM(exp, -a)); }
PW_BACKWARD(silu, 0)
{
    PW_REAL s = PW_C(1.0) / (PW_C(1.0) + PW_LIBM(exp, -a));
    return g * s * (PW_C(1.0) + a * (PW_C(1.0) - s));
}

PW_FORWARD(sigmoid) { return PW_C(1.0) / (PW_C(1.0) + PW_LIBM(exp, -a)); }
/* g * (1 - y) * y in dt's arithmetic, before its last rounding */
PW_BACKWARD(sigmoid, 0)
{
    PW_REAL one_minus = PW_ROUND(PW_C(1.0) - y, dt);
    return PW_ROUND(g * one_minus, dt) * y;
}

PW_FORWARD(tanh) { return PW_LIBM(tanh, a); }
/* g * (1 - y * y) in dt's arithmetic, before its last rounding */
PW_BACKWARD(tanh, 0)
{
    PW_REAL sq = PW_ROUND(y * y, dt);
    return g * PW_ROUND(PW_C(1.0) - sq, dt);
}

/* ---- add, mul, scale ---- */
PW_FORWARD(add) { return a + b; }
PW_BACKWARD(add, 0) { return g; }
PW_BACKWARD(add, 1) { return g; }

PW_FORWARD(mul) { return a * b; }
PW_BACKWARD(mul, 0) { return g * b; }
PW_BACKWARD(mul, 1) { return g * a; }

/* p->real[0] is S, as float32: the CPU scalar's opmath value */
PW_FORWARD(scale) { return a * (PW_REAL)(float)p->real[0]; }
PW_BACKWARD(scale, 0) { return g * (PW_REAL)(float)p->real[0]; }

/* ---- dropout: p->real[0] is p; the mask of element i from p->seed ---- */
/* x * mask * scale, as PyTorch's kernel: a dropped inf is NaN there too */
PW_FORWARD(dropout)
{
    PW_REAL mask = dropout_keeps(p->seed, i, dropout_threshold(p->real[0])) ? 1 : 0;
    return a * mask * dropout_scale(p->real[0]);
}
PW_BACKWARD(dropout, 0)
{
    PW_REAL mask = dropout_keeps(p->seed, i, dropout_threshold(p->real[0])) ? 1 : 0;
    return g * mask * dropout_scale(p->real[0]);
}

/* ---- neg ---- */
PW_FORWARD(neg) { return -a; }
PW_BACKWARD(neg, 0) { return -g; }

/* ---- sub ---- */
PW_FORWARD(sub) { return a - b; }
PW_BACKWARD(sub, 0) { return g; }
PW_BACKWARD(sub, 1) { return -g; }

/* ---- div: a / b in opmath (a CPU scalar divisor is mul's row with 1.0f / b: the layer) ---- */
PW_FORWARD(div) { return a / b; }
PW_BACKWARD(div, 0) { return g / b; }
/* -grad * ((self / other) / other): neg exact, each division a kernel of its own */
PW_BACKWARD(div, 1) { return -g * PW_ROUND(PW_ROUND(a / b, dt) / b, dt); }

/* ---- maximum, minimum: NaN propagates; the gradient halved on ties (grad / 2: a CPU
 * scalar divisor, grad * 0.5f) ---- */
PW_FORWARD(maximum) { return a != a ? a : b != b ? b : a > b ? a : b; }
PW_BACKWARD(maximum, 0) { return a == b ? g * PW_C(0.5) : a < b ? 0 : g; }
PW_BACKWARD(maximum, 1) { return a == b ? g * PW_C(0.5) : a > b ? 0 : g; }
PW_FORWARD(minimum) { return a != a ? a : b != b ? b : a < b ? a : b; }
PW_BACKWARD(minimum, 0) { return a == b ? g * PW_C(0.5) : a > b ? 0 : g; }
PW_BACKWARD(minimum, 1) { return a == b ? g * PW_C(0.5) : a < b ? 0 : g; }

/* ---- pow: p->real[0] is the exponent e ---- */
/* x ** e as pow's kernels compute it for the exponent's special values (Pow.cpp,
 * pow_Tensor_Scalar_out: e == 0 fills 1, e == 1 copies; PowKernel.cu,
 * pow_tensor_scalar_kernel: 0.5 sqrt, -0.5 rsqrt, -1 reciprocal; and
 * pow_tensor_scalar_kernel_impl in scalar_t: base * base, base * base * base (a half
 * product rounds before the next), 1.0 / (base * base)); else pow(x, e) with e converted
 * to scalar_t (exp_scalar.to<scalar_t>()) */
static inline AMP_HD PW_REAL PW_FN(pw_pow_value)(PW_REAL a, double e, dtype dt PW_UNUSED)
{
    if (e == 0)
        return 1;
    if (e == 1)
        return a;
    if (e == 0.5)
        return PW_LIBM(sqrt, a);
    if (e == -0.5)
        return (PW_REAL)(1.0 / sqrt((double)a));
    if (e == -1)
        return PW_C(1.0) / a;
    if (e == 2)
        return a * a;
    if (e == 3)
        return PW_ROUND(a * a, dt) * a;
    if (e == -2)
        return PW_C(1.0) / PW_ROUND(a * a, dt);
    return (PW_REAL)pow((double)a, (double)PW_ROUND((PW_REAL)e, dt));
}
PW_FORWARD(pow) { return PW_FN(pw_pow_value)(a, p->real[0], dt); }
/* grad * (e * self.pow(e - 1)): three kernels (e * t a CPU scalar's mul, float32 e); 0 for
 * e == 0 (zeros_like) */
PW_BACKWARD(pow, 0)
{
    if (p->real[0] == 0)
        return 0;
    PW_REAL t = PW_ROUND(PW_FN(pw_pow_value)(a, p->real[0] - 1, dt), dt);
    return g * PW_ROUND((PW_REAL)(float)p->real[0] * t, dt);
}

/* ---- rsqrt, sqrt, exp, log, reciprocal ---- */
PW_FORWARD(rsqrt) { return (PW_REAL)(1.0 / sqrt((double)a)); }
/* (-0.5 * grad) * result.pow(3): each a kernel */
PW_BACKWARD(rsqrt, 0)
{
    return PW_ROUND(PW_C(-0.5) * g, dt) * PW_ROUND(PW_FN(pw_pow_value)(y, 3, dt), dt);
}
PW_FORWARD(sqrt) { return PW_LIBM(sqrt, a); }
PW_BACKWARD(sqrt, 0) { return g / PW_ROUND(PW_C(2.0) * y, dt); }
PW_FORWARD(exp) { return PW_LIBM(exp, a); }
PW_BACKWARD(exp, 0) { return g * y; }
PW_FORWARD(log) { return PW_LIBM(log, a); }
PW_BACKWARD(log, 0) { return g / a; }
PW_FORWARD(reciprocal) { return PW_C(1.0) / a; }
PW_BACKWARD(reciprocal, 0) { return -g * PW_ROUND(y * y, dt); }

/* ---- abs, sin, cos, erf ---- */
PW_FORWARD(abs) { return a < 0 ? -a : a; }
PW_BACKWARD(abs, 0) { return g * (a > 0 ? PW_C(1.0) : a < 0 ? PW_C(-1.0) : a); }
PW_FORWARD(sin) { return PW_LIBM(sin, a); }
PW_BACKWARD(sin, 0) { return g * PW_ROUND(PW_LIBM(cos, a), dt); }
PW_FORWARD(cos) { return PW_LIBM(cos, a); }
PW_BACKWARD(cos, 0) { return g * -PW_ROUND(PW_LIBM(sin, a), dt); }
PW_FORWARD(erf) { return PW_LIBM(erf, a); }
/* ((2 / sqrt(pi)) * exp(-(self.pow(2)))) * grad: pow, exp, the CPU scalar's mul, each a
 * kernel (the neg exact) */
PW_BACKWARD(erf, 0)
{
    PW_REAL e = PW_ROUND(PW_LIBM(exp, -PW_ROUND(a * a, dt)), dt);
    return PW_ROUND((PW_REAL)(float)1.12837916709551257390 * e, dt) * g;
}

/* ---- softplus: p->real[0] is beta, p->real[1] threshold, as opmath (float32) ---- */
PW_FORWARD(softplus)
{
    PW_REAL beta = (PW_REAL)(float)p->real[0], threshold = (PW_REAL)(float)p->real[1];
    return a * beta > threshold ? a : PW_LIBM(log1p, PW_LIBM(exp, a * beta)) / beta;
}
PW_BACKWARD(softplus, 0)
{
    PW_REAL beta = (PW_REAL)(float)p->real[0], threshold = (PW_REAL)(float)p->real[1];
    PW_REAL z = PW_LIBM(exp, a * beta);
    return a * beta > threshold ? g : g * z / (z + PW_C(1.0));
}

/* ---- hardswish, hardsigmoid, relu6 ---- */
#define PW_ONE_SIXTH ((PW_REAL)(1.0f / 6.0f)) /* the kernels' opmath_t one_sixth(1.0f / 6.0f) */
PW_FORWARD(hardswish)
{
    PW_REAL r = a + PW_C(3.0) > 0 ? a + PW_C(3.0) : 0;
    return a * (r < PW_C(6.0) ? r : PW_C(6.0)) * PW_ONE_SIXTH;
}
PW_BACKWARD(hardswish, 0)
{
    return a < PW_C(-3.0) ? 0 : a <= PW_C(3.0) ? g * ((a / PW_C(3.0)) + PW_C(0.5)) : g;
}
PW_FORWARD(hardsigmoid)
{
    PW_REAL r = a + PW_C(3.0) > 0 ? a + PW_C(3.0) : 0;
    return (r < PW_C(6.0) ? r : PW_C(6.0)) * PW_ONE_SIXTH;
}
PW_BACKWARD(hardsigmoid, 0) { return a > PW_C(-3.0) && a < PW_C(3.0) ? g * PW_ONE_SIXTH : 0; }
/* clamp(x, 0, 6): NaN propagates */
PW_FORWARD(relu6) { return a != a ? a : a < 0 ? 0 : a > PW_C(6.0) ? PW_C(6.0) : a; }
PW_BACKWARD(relu6, 0) { return a <= 0 || a >= PW_C(6.0) ? 0 : g; }
#undef PW_ONE_SIXTH

#undef PW_FORWARD
#undef PW_BACKWARD
#undef PW_GELU_TANH_BETA
#undef PW_GELU_ERF_BETA
#undef PW_GELU_KAPPA
#undef PW_SQRT1_2
#undef PW_ROUND
#undef PW_C
#undef PW_LIBM
#undef PW_REAL
#undef PW_FN
#undef PW_EXACT
