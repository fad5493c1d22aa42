/*
 * dtype.h: the element types ampscope knows, their names and sizes.
 *
 * Names are PyTorch's (`float32`, `float16`, `bfloat16`, `int64`); the parser also accepts
 * the short forms users type (fp32, fp16, bf16, half, float, ...). int64 exists only for
 * class labels.
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
    DTYPE_COUNT
} dtype;

#ifdef __cplusplus
extern "C" {
#endif

const char *dtype_name(dtype dt);
size_t dtype_size(dtype dt);
/* true when dt is one of the two 16-bit float formats */
bool dtype_is_half(dtype dt);
/* Parses "float32", "fp32", "float", "float16", "fp16", "half", "bfloat16", "bf16";
 * returns false for anything else (int64 is not a parseable compute dtype). */
bool dtype_parse(const char *s, dtype *out);

#ifdef __cplusplus
}
#endif

#endif
