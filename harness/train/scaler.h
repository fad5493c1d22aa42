/*
 * scaler.h: torch.amp.GradScaler, as torch/amp/grad_scaler.py and the AmpGradScaler
 * kernels implement it:
 *   scale(loss)  loss * scale, scale a 0-dim float32: the product promotes to float32, and
 *                its backward casts the gradient into the loss's dtype (65536 is inf in
 *                float16).
 *   unscale_     inv_scale = float32(1 / float64(scale)); every grad: found_inf |= any
 *                inf/NaN, grad *= inv_scale in float32. A float16 grad raises ValueError
 *                "Attempting to unscale FP16 gradients."; a bfloat16 grad has no CUDA kernel
 *                (NotImplementedError).
 *   step         optimizer.step() only when no inf/NaN was found.
 *   update       found: scale *= backoff_factor, tracker = 0; else tracker += 1 and at
 *                growth_interval scale *= growth_factor if finite, tracker = 0
 *                (_amp_update_scale_cuda_kernel: float scale times double factors).
 */
#ifndef AMPSCOPE_SCALER_H
#define AMPSCOPE_SCALER_H

#include "autograd/run.h"

typedef struct grad_scaler {
    bool enabled;
    float scale;
    int64_t growth_tracker;
    double growth_factor, backoff_factor;
    int64_t growth_interval;
} grad_scaler;

void scaler_init(grad_scaler *s, const case_config *cfg);
/* "loss.scaled" = loss * scale, with its tape node */
tensor *scaler_scale(run *r, const grad_scaler *s, tensor *loss);
/* Unscales grads[0..n) in place (observed in the optimizer pass); returns found_inf.
 * master: the grads are the float32 master gradients; else they are the parameters' .grad
 * and float16/bfloat16 ones are refused as PyTorch refuses them. */
int scaler_unscale(run *r, const grad_scaler *s, tensor *const *grads, int n, bool master);
void scaler_update(grad_scaler *s, int found_inf);

#endif
