/*
 * dtype.h: the element types ampscope knows, their names and sizes.
 *
 * Names are PyTorch's (`float32`, `float16`, `bfloat16`, `int64`, `float8_e4m3fn`,
 * `float8_e5m2`); the parser also accepts the short forms users type (fp32, fp16, bf16, half,
 * float, e4m3, e5m2, ...). int64 exists only for class labels; the float8 and float4 formats
 * only for the quantized copies of fp8 and fp4 training (fp8_quantize.h, fp8_linear.h) and
 * their block scales, never as a model's compute dtype. The number formats' layouts and limits are in format.h.
 */
#ifndef AMPSCOPE_DTYPE_H
#define AMPSCOPE_DTYPE_H

#include <stddef.h>
#include <stdbool.h>

typedef enum dtype {
    DTYPE_FLOAT32 = 0,
    DTYPE_FLOAT16,
    DTYPE_BFLOAT16,
    DTYPE_INT64,
    DTYPE_FLOAT8_E4M3FN, /* after int64, so the earlier values (and files naming them) stay */
    DTYPE_FLOAT8_E5M2,
    DTYPE_FLOAT4_E2M1FN,  /* NVFP4 and MXFP4's elements, one a byte (ml_dtypes' layout) */
    DTYPE_FLOAT8_E8M0FNU, /* MXFP4's block scales: powers of two */
    DTYPE_COUNT
} dtype;

#ifdef __cplusplus
extern "C" {
#endif

const char *dtype_name(dtype dt);
size_t dtype_size(dtype dt);
/* true when dt is a 16-bit number format (float16, bfloat16) */
bool dtype_is_half(dtype dt);
/* true when dt is a format of 8 bits or fewer (float8_e4m3fn, float8_e5m2, float4_e2m1fn,
 * float8_e8m0fnu): those only quantized copies and their scales are stored in */
bool dtype_is_float8(dtype dt);
/* PyTorch's type promotion of two floating tensors (c10/core/ScalarType.h, promoteTypes):
 * the same dtype stays, float32 with either half is float32, float16 with bfloat16 is
 * float32. */
dtype promote_types(dtype a, dtype b);
/* Parses a number format's name ("float32", "float16", "bfloat16", "float8_e4m3fn",
 * "float8_e5m2", "float4_e2m1fn", "float8_e8m0fnu") or a short form ("fp32", "float", "fp16",
 * "half", "bf16", "e4m3", "e5m2", "e2m1", "e8m0");
 * returns false for anything else (int64 is not a parseable compute dtype). */
bool dtype_parse(const char *s, dtype *out);

#ifdef __cplusplus
}
#endif

#endif
