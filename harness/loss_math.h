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

#include "half.h"

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

#endif
