/* dtype.c: names, sizes and parsing of element types (see dtype.h); the number formats'
 * come from their rows in format.c, int64's (class labels, not a number format) are here. */
#include "dtype.h"

#include <string.h>

#include "format.h"

const char *dtype_name(dtype dt)
{
    const format_info *f = format_of(dt);
    if (f)
        return f->name;
    return dt == DTYPE_INT64 ? "int64" : "?";
}

size_t dtype_size(dtype dt)
{
    const format_info *f = format_of(dt);
    if (f)
        return ((size_t)f->bits + 7) / 8; /* float4_e2m1fn: a byte per value */
    return dt == DTYPE_INT64 ? sizeof(int64_t) : 0;
}

dtype promote_types(dtype a, dtype b) { return a == b ? a : DTYPE_FLOAT32; }

bool dtype_is_half(dtype dt)
{
    const format_info *f = format_of(dt);
    return f && f->bits == 16;
}

bool dtype_is_float8(dtype dt)
{
    const format_info *f = format_of(dt);
    return f && f->bits <= 8;
}

bool dtype_parse(const char *s, dtype *out)
{
    for (int d = 0; d < DTYPE_COUNT; d++) {
        const format_info *f = format_of((dtype)d);
        if (f && strcmp(s, f->name) == 0) {
            *out = (dtype)d;
            return true;
        }
    }
    static const struct {
        const char *alias;
        dtype dt;
    } aliases[] = {
        {"fp32", DTYPE_FLOAT32}, {"float", DTYPE_FLOAT32}, {"fp16", DTYPE_FLOAT16},
        {"half", DTYPE_FLOAT16}, {"bf16", DTYPE_BFLOAT16}, {"e4m3", DTYPE_FLOAT8_E4M3FN},
        {"e5m2", DTYPE_FLOAT8_E5M2},     {"e2m1", DTYPE_FLOAT4_E2M1FN},
        {"e8m0", DTYPE_FLOAT8_E8M0FNU},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(s, aliases[i].alias) == 0) {
            *out = aliases[i].dt;
            return true;
        }
    }
    return false;
}
