/*
 * loss_math.h: elementwise loss arithmetic shared by the CPU backend and the CUDA kernels.
 *
 * PyTorch's CUDA mse kernels compute in the tensor's own scalar type (c10::Half or
 * c10::BFloat16), whose operators round after every operation (aten/src/ATen/native/cuda/
 * PointwiseOpsKernel.cu: mse_kernel_cuda `diff = a - b; diff * diff`; mse_backward_cuda_kernel
 * `alpha * (a - b) * c` with alpha = Scalar(norm).to<scalar_t>()). The last operation's
 * rounding is left to the caller, which stores and counts it.
 */
#ifndef AMPSCOPE_LOSS_MATH_H
#define AMPSCOPE_LOSS_MATH_H

#include <math.h>

#include "core/half.h"

/* (a - b)^2 before its final rounding to dt */
static inline AMP_HD float mse_elem(float a, float b, dtype dt)
{
    float d = round_to(a - b, dt);
    return d * d;
}

/* alpha * (a - b) * dy before its final rounding; alpha already rounded to dt */
static inline AMP_HD float mse_grad_elem(float a, float b, float dy, float alpha, dtype dt)
{
    float d = round_to(a - b, dt);
    float t = round_to(alpha * d, dt);
    return t * dy;
}

/* ---- binary_cross_entropy_with_logits (bce_with_logits.c) ----
 * aten/src/ATen/native/Loss.cpp: loss = (1 - target).mul_(input).sub_(log_sigmoid(input)),
 * each op a kernel that computes in float32 and rounds into its output: log_sigmoid into the
 * input's dtype, the others into the target's (the in-place ops keep (1 - target)'s dtype).
 * Backward (torch/csrc/autograd/FunctionsManual.cpp binary_cross_entropy_with_logits_backward,
 * grad mode off): input.sigmoid().sub_(target).mul_(grad).div_(numel), each rounded into the
 * input's dtype; dividing by the number multiplies by its float32 reciprocal on CUDA
 * (BinaryDivTrueKernel.cu). exp and log1p are the double functions rounded to float on both
 * sides (PyTorch's CUDA kernels call the float ones, which may differ by an ulp). */

static inline AMP_HD float loss_exp(float v) { return (float)exp((double)v); }

/* log_sigmoid(x) before its rounding: min(0, x) - log1p(exp(-|x|))
 * (ActivationLogSigmoidKernel.cu) */
static inline AMP_HD float log_sigmoid_elem(float x)
{
    float z = loss_exp(-fabsf(x));
    float m = x < 0.0f ? x : 0.0f;
    return m - (float)log1p((double)z);
}

/* the elementwise loss before its final rounding into dt, the target's dtype; ls is
 * log_sigmoid(x) already rounded into x's dtype */
static inline AMP_HD float bce_logits_elem(float x, float t, float ls, dtype dt)
{
    float a = round_to(1.0f - t, dt);
    float b = round_to(a * x, dt);
    return b - ls;
}

/* d loss / d x before its final rounding into dt, the input's dtype: dy is the loss's
 * gradient, inv_n = 1.0f / numel */
static inline AMP_HD float bce_logits_grad_elem(float x, float t, float dy, float inv_n, dtype dt)
{
    float s = round_to(1.0f / (1.0f + loss_exp(-x)), dt); /* UnarySigmoidKernels.cu */
    float d = round_to(s - t, dt);
    d = round_to(d * dy, dt);
    return d * inv_n;
}

/* ---- l1_loss (l1.c): (input - target).abs().mean(), three autograd nodes ----
 * abs's backward is grad * self.sgn() (derivatives.yaml); sgn of a real number is
 * (0 < x) - (x < 0): 0 at 0 and at NaN, as PyTorch's sign. Both products are exact. */
static inline AMP_HD float sgn_elem(float x) { return (float)((0.0f < x) - (x < 0.0f)); }

#endif
