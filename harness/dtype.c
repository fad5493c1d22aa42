/* dtype.c: names, sizes and parsing of element types (see dtype.h). */
#include "dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtype_info[DTYPE_COUNT] = {
    [DTYPE_FLOAT32] = {"float32", 4},
    [DTYPE_FLOAT16] = {"float16", 2},
    [DTYPE_BFLOAT16] = {"bfloat16", 2},
    [DTYPE_INT64] = {"int64", 8},
};

const char *dtype_name(dtype dt) { return dt < DTYPE_COUNT ? dtype_info[dt].name : "?"; }

size_t dtype_size(dtype dt) { return dt < DTYPE_COUNT ? dtype_info[dt].size : 0; }

bool dtype_is_half(dtype dt) { return dt == DTYPE_FLOAT16 || dt == DTYPE_BFLOAT16; }

bool dtype_parse(const char *s, dtype *out)
{
    static const struct {
        const char *alias;
        dtype dt;
    } aliases[] = {
        {"float32", DTYPE_FLOAT32},   {"fp32", DTYPE_FLOAT32},  {"float", DTYPE_FLOAT32},
        {"float16", DTYPE_FLOAT16},   {"fp16", DTYPE_FLOAT16},  {"half", DTYPE_FLOAT16},
        {"bfloat16", DTYPE_BFLOAT16}, {"bf16", DTYPE_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(s, aliases[i].alias) == 0) {
            *out = aliases[i].dt;
            return true;
        }
    }
    return false;
}
