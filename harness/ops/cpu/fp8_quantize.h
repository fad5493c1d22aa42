/*
 * fp8_quantize.h: a float32 tensor's quantized float8 copy, as fp8 training makes it: each
 * value multiplied by the tensor's scale, then cast to float8_e4m3fn or float8_e5m2 in one of
 * the two overflow behaviours:
 *  - FP8_SATURATE: |x * scale| above the format's largest finite (and +-inf) is clamped to
 *    +-largest before the cast, as Transformer Engine's casts (cuda_fp8.h's __NV_SATFINITE)
 *    and torchao's clamp then .to() do; NaN stays NaN. The clamped values are counted as
 *    `saturated` (fp8.csv), and the rounding then sees the clamped value, so overflow is 0.
 *  - FP8_PLAIN: the cast alone, as c10::Float8_e4m3fn(float) and c10::Float8_e5m2(float)
 *    convert (harness/core/half.h): e4m3fn gives NaN above 464, e5m2 inf from 61440 up, counted
 *    as overflow (and, for e4m3fn's NaN, nan) in tensors.csv's meanings. (PyTorch 2.15's CPU
 *    tensor cast .to(torch.float8_e4m3fn) was measured to saturate instead, inf to 448: the
 *    scalar conversion of c10's header is the one implemented here.)
 * The counts are the CPU's counting store's (harness/ops/cpu/round.c), so the quantized copy is
 * an observed tensor like any other.
 */
#ifndef AMPSCOPE_FP8_QUANTIZE_H
#define AMPSCOPE_FP8_QUANTIZE_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/stats.h"

typedef enum fp8_overflow {
    FP8_SATURATE, /* clamp to the largest finite first (Transformer Engine, torchao) */
    FP8_PLAIN,    /* PyTorch's plain cast: NaN (e4m3fn) or inf (e5m2) */
} fp8_overflow;

/* dst[i] = float8 of x[i] * scale (dt float8_e4m3fn or float8_e5m2, one byte a value), with
 * st's counts of the rounding (NULL: none); returns how many values were clamped (always 0
 * under FP8_PLAIN). */
int64_t fp8_quantize(const float *x, int64_t n, float scale, dtype dt, fp8_overflow ov,
                     uint8_t *dst, round_stats *st);

#endif
