/*
 * clip.h: gradient clipping as torch/nn/utils/clip_grad.py (PyTorch 2.x) computes it.
 *
 *   clip_grad_norm_(max_norm, norm_type, error_if_nonfinite)
 *     _get_total_norm: one norm per gradient (torch._foreach_norm), in that gradient's
 *     dtype: a float16 gradient's norm is float16 (inf above 65504) however it was summed;
 *     then the norm of those norms (torch.stack promotes them: float16 with float32 is
 *     float32, float16 with bfloat16 is float32) in the promoted dtype. With
 *     error_if_nonfinite a NaN or inf total raises RuntimeError ("The total norm of order
 *     2.0 for gradients from `parameters` is non-finite, so it cannot be clipped. ...").
 *     _clip_grads_with_norm_: clip_coef = max_norm / (total_norm + 1e-6), both ops in the
 *     total's dtype, clamped to at most 1 and multiplied into every gradient
 *     unconditionally (torch._foreach_mul_: float(g) * float(coef), rounded into g's dtype).
 *   clip_grad_value_(clip_value)
 *     torch._foreach_clamp_min_(-v) then _foreach_clamp_max_(v): in float, rounded into
 *     the gradient's dtype; NaN stays NaN.
 * Each sum of a norm runs here in double over the stored values and is rounded once into
 * the norm's dtype (PyTorch sums float32 partial sums in its own order: the two agree to
 * float32's rounding, and exactly wherever the result is float16 or bfloat16 away from a
 * rounding tie).
 */
#ifndef AMPSCOPE_CLIP_H
#define AMPSCOPE_CLIP_H

#include "autograd/run.h"

typedef struct clip_result {
    double total_norm; /* before clipping, in its dtype's value */
    double clip_coef;  /* clamped to 1 */
} clip_result;

/* clip_grad_norm_ over grads[0..n) (NULL entries skipped) with the case's max_norm,
 * norm_type and error_if_nonfinite; role: how the clipped gradients are observed */
clip_result clip_grad_norm(run *r, tensor *const *grads, int n, tensor_role role);
/* clip_grad_value_ over grads[0..n) with the case's clip_grad_value */
void clip_grad_value(run *r, tensor *const *grads, int n, tensor_role role);

/* the norm of v[0..n) of order p (INFINITY: max |v|), in double */
double clip_vector_norm(const float *v, int64_t n, double p);

#endif
