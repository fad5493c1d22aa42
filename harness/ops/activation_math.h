/*
 * activation_math.h: the elementwise arithmetic of gelu, silu, sigmoid, tanh and dropout,
 * shared by the CPU backend (harness/ops/cpu/activation.c, dropout.c) and the CUDA kernels
 * (kernels/activation.cu, dropout.cu), so both round at the same points.
 *
 * Each function is PyTorch's CUDA formula in its opmath type (float32 for float, half and
 * bfloat16 tensors), before the one rounding into the output dtype, which the caller
 * stores and counts:
 *   gelu      aten/src/ATen/native/cuda/ActivationGeluKernel.cu (GeluCUDAKernelImpl,
 *             GeluBackwardCUDAKernelImpl), approximate='none' (erf) and 'tanh';
 *   silu      ActivationSiluKernel.cu: x / (1 + exp(-x)); dy * s * (1 + x * (1 - s));
 *   sigmoid   UnarySpecialOpsKernel.cu: 1 / (1 + exp(-x)); its backward
 *             BinaryMiscBackwardOpsKernels.cu (sigmoid_backward_kernel_cuda):
 *             a * (scalar_t(1.) - b) * b;
 *   tanh      UnaryGeometricTanhKernel.cu; BinaryMiscBackwardOpsKernels.cu
 *             (tanh_backward_kernel_cuda): a * (scalar_t{1.} - b * b).
 *   The two backwards compute in scalar_t, not in opmath: in c10::Half and c10::BFloat16
 *   every operation rounds to the tensor's dtype (as mse's kernels, loss_math.h), so these
 *   functions round their intermediate results into dt and leave the last rounding to the
 *   caller;
 *   dropout   Dropout.cu (fused_dropout): x * mask * scale with scale = 1 / (1 - p) in
 *             float32; its backward (masked_scale) dy * mask * scale.
 * erf, tanh and exp are evaluated in double and rounded to float32, the correctly rounded
 * float result on both sides (CUDA's erff/tanhf/expf, which PyTorch calls, may be 1-2 ulp
 * away from it: float32 noise, not a difference a half output can show).
 *
 * The dropout mask is not PyTorch's (Philox through curand_uniform4): element i of a mask
 * is kept when the top 24 bits of splitmix64(seed + i * golden) fall below
 * (1 - p) * 2^24, a pure function of (seed, i), so the backward recomputes it and the CPU
 * and the GPU draw the same mask.
 */
#ifndef AMPSCOPE_ACTIVATION_MATH_H
#define AMPSCOPE_ACTIVATION_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/half.h"

/* gelu's approximate= (the order of the layer's choices) */
typedef enum gelu_approximate { GELU_NONE = 0, GELU_TANH } gelu_approximate;

#define ACT_SQRT1_2 0.70710678118654752440f        /* M_SQRT1_2 */
#define ACT_GELU_TANH_BETA 0.79788456080286535588f /* M_SQRT2 * M_2_SQRTPI * 0.5 */
#define ACT_GELU_ERF_BETA 0.39894228040143267794f  /* M_2_SQRTPI * M_SQRT1_2 * 0.5 */
#define ACT_GELU_KAPPA 0.044715f

static inline AMP_HD float act_erf(float v) { return (float)erf((double)v); }
static inline AMP_HD float act_tanh(float v) { return (float)tanh((double)v); }
static inline AMP_HD float act_exp(float v) { return (float)exp((double)v); }

static inline AMP_HD float gelu_elem(float x, gelu_approximate a)
{
    if (a == GELU_TANH) {
        float x_cube = x * x * x;
        float inner = ACT_GELU_TANH_BETA * (x + ACT_GELU_KAPPA * x_cube);
        return 0.5f * x * (1.0f + act_tanh(inner));
    }
    return x * 0.5f * (1.0f + act_erf(x * ACT_SQRT1_2));
}

static inline AMP_HD float gelu_grad_elem(float dy, float x, gelu_approximate a)
{
    if (a == GELU_TANH) {
        float x_sq = x * x;
        float x_cube = x_sq * x;
        float inner = ACT_GELU_TANH_BETA * (x + ACT_GELU_KAPPA * x_cube);
        float tanh_inner = act_tanh(inner);
        float left = 0.5f * x;
        float right = 1.0f + tanh_inner;
        float left_derivative = 0.5f * right;
        float tanh_derivative = 1.0f - tanh_inner * tanh_inner;
        float inner_derivative = ACT_GELU_TANH_BETA * (1.0f + 3.0f * ACT_GELU_KAPPA * x_sq);
        float right_derivative = left * tanh_derivative * inner_derivative;
        return dy * (left_derivative + right_derivative);
    }
    float cdf = 0.5f * (1.0f + act_erf(x * ACT_SQRT1_2));
    float pdf = act_exp(-0.5f * x * x) * ACT_GELU_ERF_BETA;
    return dy * (cdf + x * pdf);
}

static inline AMP_HD float silu_elem(float x) { return x / (1.0f + act_exp(-x)); }

static inline AMP_HD float silu_grad_elem(float dy, float x)
{
    float s = 1.0f / (1.0f + act_exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
}

static inline AMP_HD float sigmoid_elem(float x) { return 1.0f / (1.0f + act_exp(-x)); }

/* dy * (1 - y) * y in dt's arithmetic, before its last rounding */
static inline AMP_HD float sigmoid_grad_elem(float dy, float y, dtype dt)
{
    float one_minus = round_to(1.0f - y, dt);
    return round_to(dy * one_minus, dt) * y;
}

/* dy * (1 - y * y) in dt's arithmetic, before its last rounding */
static inline AMP_HD float tanh_grad_elem(float dy, float y, dtype dt)
{
    float sq = round_to(y * y, dt);
    return dy * round_to(1.0f - sq, dt);
}

/* ---- dropout ---- */

/* the keep threshold of p on the 24-bit scale */
static inline AMP_HD uint32_t dropout_threshold(double p)
{
    return (uint32_t)((1.0 - p) * 16777216.0);
}

/* Dropout.cu's scale: the keep probability 1 - p as accscalar_t (float32), then
 * 1.0 / it in double, stored as float32 */
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

#endif
