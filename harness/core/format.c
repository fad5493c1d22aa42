/*
 * format.c: the table of number formats (see format.h), built from format.h's macros, and
 * the two ways `ampscope formats` prints it. The printers walk one list of fields, so the
 * plain table and the JSON objects always hold the same fields.
 */
#include "format.h"

#include <stddef.h>
#include <string.h>

#define FORMAT_STR_(x) #x
#define FORMAT_STR(x) FORMAT_STR_(x)

/* the row of DTYPE_<N>, named name_ (dtype_name(), and torch.<name_> in PyTorch), whose
 * scalar type PyTorch calls scalar_ (c10::ScalarType) and whose C++ type is cpp_ */
/* log2 of the smallest normal: exponent field 1, or 0 where field 0 is a number */
#define FORMAT_MIN_NORMAL_EXP(N) (1 - FORMAT_##N##_BIAS - (FORMAT_##N##_MIN_NORMAL_PATTERN == 0))
#define FORMAT_ROW(N, name_, scalar_, cpp_)                                                        \
    [DTYPE_##N] = {                                                                                \
        .dt = DTYPE_##N,                                                                           \
        .name = name_,                                                                             \
        .bits = FORMAT_##N##_BITS,                                                                 \
        .is_signed = FORMAT_##N##_SIGNED,                                                          \
        .exponent_bits = FORMAT_##N##_EXP_BITS,                                                    \
        .mantissa_bits = FORMAT_##N##_MAN_BITS,                                                    \
        .bias = FORMAT_##N##_BIAS,                                                                 \
        .has_inf = FORMAT_##N##_HAS_INF,                                                           \
        .nan = FORMAT_##N##_NAN,                                                                   \
        .nan_pattern = FORMAT_##N##_NAN_PATTERN,                                                   \
        .inf_pattern = FORMAT_##N##_INF_PATTERN,                                                   \
        .max_pattern = FORMAT_##N##_MAX_PATTERN,                                                   \
        .min_normal_pattern = FORMAT_##N##_MIN_NORMAL_PATTERN,                                     \
        .magnitude_mask = FORMAT_##N##_MAG_MASK,                                                   \
        .largest = FORMAT_##N##_LARGEST,                                                           \
        .smallest_normal = FORMAT_##N##_SMALLEST_NORMAL,                                           \
        .smallest_subnormal = FORMAT_##N##_SMALLEST_SUBNORMAL,                                     \
        .epsilon = FORMAT_##N##_EPSILON,                                                           \
        .min_normal_exp = FORMAT_MIN_NORMAL_EXP(N),                                                \
        .min_subnormal_exp = FORMAT_MIN_NORMAL_EXP(N) - FORMAT_##N##_MAN_BITS,                     \
        .zero_exp = FORMAT_MIN_NORMAL_EXP(N) - FORMAT_##N##_MAN_BITS - 1,                          \
        .zero_bin_max = FORMAT_MIN_NORMAL_EXP(N) - FORMAT_##N##_MAN_BITS - 2,                      \
        .cublas = FORMAT_STR(FORMAT_##N##_CUBLAS),                                                 \
        .cudnn = FORMAT_STR(FORMAT_##N##_CUDNN),                                                   \
        .torch = "torch." name_,                                                                   \
        .torch_scalar = scalar_,                                                                   \
        .torch_cpp = cpp_,                                                                         \
        .torch_cuda_tensor = "torch.cuda." scalar_ "Tensor",                                       \
    }

/* indexed by dtype; int64's slot stays empty (bits 0) */
static const format_info formats[DTYPE_COUNT] = {
    FORMAT_ROW(FLOAT32, "float32", "Float", "float"),
    FORMAT_ROW(FLOAT16, "float16", "Half", "c10::Half"),
    FORMAT_ROW(BFLOAT16, "bfloat16", "BFloat16", "c10::BFloat16"),
    FORMAT_ROW(FLOAT8_E4M3FN, "float8_e4m3fn", "Float8_e4m3fn", "c10::Float8_e4m3fn"),
    FORMAT_ROW(FLOAT8_E5M2, "float8_e5m2", "Float8_e5m2", "c10::Float8_e5m2"),
    /* PyTorch has no unpacked float4 scalar type: its names are the packed pair's */
    FORMAT_ROW(FLOAT4_E2M1FN, "float4_e2m1fn", "Float4_e2m1fn_x2", "c10::Float4_e2m1fn_x2"),
    FORMAT_ROW(FLOAT8_E8M0FNU, "float8_e8m0fnu", "Float8_e8m0fnu", "c10::Float8_e8m0fnu"),
};

const format_info *format_of(dtype dt)
{
    if ((unsigned)dt >= DTYPE_COUNT || formats[dt].bits == 0)
        return NULL;
    return &formats[dt];
}

/* ---- printing ---- */

typedef enum field_kind {
    FIELD_TEXT,
    FIELD_INT,
    FIELD_BOOL,
    FIELD_NAN,
    FIELD_PATTERN,
    FIELD_LIMIT
} field_kind;

static const struct field {
    const char *name;
    field_kind kind;
    size_t off;
} fields[] = {
    {"name", FIELD_TEXT, offsetof(format_info, name)},
    {"bits", FIELD_INT, offsetof(format_info, bits)},
    {"is_signed", FIELD_BOOL, offsetof(format_info, is_signed)},
    {"exponent_bits", FIELD_INT, offsetof(format_info, exponent_bits)},
    {"mantissa_bits", FIELD_INT, offsetof(format_info, mantissa_bits)},
    {"bias", FIELD_INT, offsetof(format_info, bias)},
    {"has_inf", FIELD_BOOL, offsetof(format_info, has_inf)},
    {"nan", FIELD_NAN, offsetof(format_info, nan)},
    {"nan_pattern", FIELD_PATTERN, offsetof(format_info, nan_pattern)},
    {"inf_pattern", FIELD_PATTERN, offsetof(format_info, inf_pattern)},
    {"max_pattern", FIELD_PATTERN, offsetof(format_info, max_pattern)},
    {"min_normal_pattern", FIELD_PATTERN, offsetof(format_info, min_normal_pattern)},
    {"magnitude_mask", FIELD_PATTERN, offsetof(format_info, magnitude_mask)},
    {"largest", FIELD_LIMIT, offsetof(format_info, largest)},
    {"smallest_normal", FIELD_LIMIT, offsetof(format_info, smallest_normal)},
    {"smallest_subnormal", FIELD_LIMIT, offsetof(format_info, smallest_subnormal)},
    {"epsilon", FIELD_LIMIT, offsetof(format_info, epsilon)},
    {"min_normal_exp", FIELD_INT, offsetof(format_info, min_normal_exp)},
    {"min_subnormal_exp", FIELD_INT, offsetof(format_info, min_subnormal_exp)},
    {"zero_exp", FIELD_INT, offsetof(format_info, zero_exp)},
    {"zero_bin_max", FIELD_INT, offsetof(format_info, zero_bin_max)},
    {"cublas", FIELD_TEXT, offsetof(format_info, cublas)},
    {"cudnn", FIELD_TEXT, offsetof(format_info, cudnn)},
    {"torch", FIELD_TEXT, offsetof(format_info, torch)},
    {"torch_scalar", FIELD_TEXT, offsetof(format_info, torch_scalar)},
    {"torch_cpp", FIELD_TEXT, offsetof(format_info, torch_cpp)},
    {"torch_cuda_tensor", FIELD_TEXT, offsetof(format_info, torch_cuda_tensor)},
};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))

static const char *nan_name(format_nan n)
{
    switch (n) {
    case FORMAT_NAN_IEEE:
        return "ieee";
    case FORMAT_NAN_ALL_ONES:
        return "all_ones";
    case FORMAT_NAN_NONE:
        return "none";
    }
    return "?";
}

/* field k of f as text: JSON when json (strings quoted), else for the plain table */
static void field_text(const format_info *f, int k, bool json, char *buf, size_t len)
{
    const char *p = (const char *)f + fields[k].off;
    const char *q = json ? "\"" : "";
    switch (fields[k].kind) {
    case FIELD_TEXT:
        snprintf(buf, len, "%s%s%s", q, *(const char *const *)p, q);
        return;
    case FIELD_INT:
        snprintf(buf, len, "%d", *(const int *)p);
        return;
    case FIELD_BOOL:
        snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
        return;
    case FIELD_NAN:
        snprintf(buf, len, "%s%s%s", q, nan_name(*(const format_nan *)p), q);
        return;
    case FIELD_PATTERN:
        snprintf(buf, len, "%s0x%0*x%s", q, (f->bits + 3) / 4, *(const uint32_t *)p, q);
        return;
    case FIELD_LIMIT:
        if (json)
            snprintf(buf, len, "%.17g, \"%s_hex\": \"%a\"", *(const float *)p, fields[k].name,
                     *(const float *)p);
        else
            snprintf(buf, len, "%.9g (%a)", *(const float *)p, *(const float *)p);
        return;
    }
    snprintf(buf, len, "?");
}

void format_print_table(FILE *out)
{
    const format_info *row[DTYPE_COUNT];
    int n = 0;
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (format_of((dtype)d))
            row[n++] = format_of((dtype)d);
    int width[DTYPE_COUNT] = {0};
    char buf[128];
    for (int i = 0; i < n; i++)
        for (int k = 0; k < N_FIELDS; k++) {
            field_text(row[i], k, false, buf, sizeof buf);
            int w = (int)strlen(buf);
            width[i] = w > width[i] ? w : width[i];
        }
    for (int k = 0; k < N_FIELDS; k++) {
        fprintf(out, "%-20s", fields[k].name);
        for (int i = 0; i < n; i++) {
            field_text(row[i], k, false, buf, sizeof buf);
            fprintf(out, "  %-*s", i + 1 < n ? width[i] : 0, buf);
        }
        fputc('\n', out);
    }
}

void format_print_json(FILE *out)
{
    char buf[128];
    fputc('[', out);
    const char *sep = "";
    for (int d = 0; d < DTYPE_COUNT; d++) {
        const format_info *f = format_of((dtype)d);
        if (!f)
            continue;
        fprintf(out, "%s\n  {", sep);
        for (int k = 0; k < N_FIELDS; k++) {
            field_text(f, k, true, buf, sizeof buf);
            fprintf(out, "%s\"%s\": %s", k ? ", " : "", fields[k].name, buf);
        }
        fputc('}', out);
        sep = ",";
    }
    fputs("\n]\n", out);
}
