/*
 * test_format.c: the number formats' table (harness/core/format.h) against what each row's layout
 * implies, derived here from its bits and bias alone (largest finite (2 - 2^-m) 2^emax,
 * smallest normal 2^(1-bias), ...), against C's <float.h> for float32, and against the
 * codecs of half.h (float_from_half, float_from_bf16 decode the row's patterns to its
 * limits; round_to puts the rounds-to-zero band and the overflow where the row says); that
 * the CPU's counting store (harness/ops/cpu/round.c) classes values at the row's patterns; and
 * that `ampscope formats --json` (the binary is $AMPSCOPE, else bin/ampscope) prints the
 * table, every field.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ops/cpu/cpu.h"
#include "core/format.h"

/* every dtype that is a number format, in the enum's order */
static int number_formats(const format_info **out)
{
    int n = 0;
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (format_of((dtype)d))
            out[n++] = format_of((dtype)d);
    return n;
}

/* the value of a stored pattern of f, decoded by half.h */
static double decode(const format_info *f, uint32_t p) { return float_from_pattern(p, f->dt); }

Test(format, every_number_dtype_has_its_row_and_int64_none)
{
    for (int d = 0; d < DTYPE_COUNT; d++) {
        const format_info *f = format_of((dtype)d);
        if (d == DTYPE_INT64) {
            cr_expect_null(f, "int64 is not a number format");
            continue;
        }
        cr_assert_not_null(f, "dtype %d has no row", d);
        cr_expect_eq(f->dt, (dtype)d);
        cr_expect_str_eq(f->name, dtype_name((dtype)d));
        cr_expect_eq(((size_t)f->bits + 7) / 8, dtype_size((dtype)d), "%s", f->name);
        dtype parsed;
        cr_expect(dtype_parse(f->name, &parsed) && parsed == (dtype)d, "%s", f->name);
        char torch[64];
        snprintf(torch, sizeof torch, "torch.%s", dtype_name((dtype)d));
        cr_expect_str_eq(f->torch, torch);
    }
    cr_expect_null(format_of(DTYPE_COUNT));
    cr_expect_null(format_of((dtype)-1));
    cr_expect_str_eq(dtype_name(DTYPE_INT64), "int64");
    cr_expect_eq(dtype_size(DTYPE_INT64), 8);
    cr_expect(!dtype_is_half(DTYPE_INT64) && !dtype_is_half(DTYPE_FLOAT32));
    cr_expect(dtype_is_half(DTYPE_FLOAT16) && dtype_is_half(DTYPE_BFLOAT16));
}

/* the value of pattern p of f from its layout alone: exponent field E, mantissa field M,
 * (1 + M / 2^m) 2^(E - bias), or M 2^(1 - bias - m) for E = 0 in a format with subnormals; a
 * format without mantissa bits has none to hold, and its field 0 is a number (E8M0) */
static double layout_value(const format_info *f, uint32_t p)
{
    int e = f->exponent_bits, m = f->mantissa_bits;
    uint32_t E = (p >> m) & ((1u << e) - 1u), M = p & ((1u << m) - 1u);
    if (E == 0 && m > 0)
        return ldexp((double)M, 1 - f->bias - m);
    return (1.0 + ldexp((double)M, -m)) * ldexp(1.0, (int)E - f->bias);
}

Test(format, limits_and_patterns_follow_from_bits_and_bias)
{
    const format_info *rows[DTYPE_COUNT];
    int n = number_formats(rows);
    cr_assert_geq(n, 3);
    for (int i = 0; i < n; i++) {
        const format_info *f = rows[i];
        int e = f->exponent_bits, m = f->mantissa_bits;
        cr_expect_eq(f->is_signed + e + m, f->bits,
                     "%s: sign, exponent and mantissa fill the encoding", f->name);
        cr_expect_eq(f->bias, (1 << (e - 1)) - 1, "%s bias", f->name);
        uint32_t exp_ones = ((1u << e) - 1u) << m, man_ones = (1u << m) - 1u;
        /* the largest finite value's pattern: the largest exponent field below all ones with
         * a full mantissa when all ones means inf and NaN; all ones but the last bit when only
         * S.1..1 is NaN; all ones in a format without NaN */
        uint32_t max_pattern = 0;
        switch (f->nan) {
        case FORMAT_NAN_IEEE:
            max_pattern = exp_ones - 1u;
            cr_expect(f->has_inf, "%s: IEEE NaNs lie above inf", f->name);
            cr_expect_eq(f->inf_pattern, exp_ones, "%s inf", f->name);
            break;
        case FORMAT_NAN_ALL_ONES:
        case FORMAT_NAN_NONE:
            max_pattern = (exp_ones | man_ones) - (f->nan == FORMAT_NAN_ALL_ONES);
            cr_expect(!f->has_inf, "%s", f->name);
            cr_expect_eq(f->inf_pattern, 0u, "%s has no inf", f->name);
            break;
        }
        cr_expect_eq(f->max_pattern, max_pattern, "%s max pattern", f->name);
        cr_expect_eq((double)f->largest, layout_value(f, max_pattern), "%s largest %a", f->name,
                     (double)f->largest);
        uint32_t min_normal = m > 0 ? 1u << m : 0u;
        cr_expect_eq(f->min_normal_pattern, min_normal, "%s", f->name);
        cr_expect_eq((double)f->smallest_normal, layout_value(f, min_normal), "%s", f->name);
        cr_expect_eq((double)f->smallest_subnormal, layout_value(f, m > 0 ? 1u : 0u), "%s",
                     f->name);
        cr_expect_eq((double)f->epsilon, ldexp(1.0, -m), "%s epsilon", f->name);
        cr_expect_eq(f->magnitude_mask, exp_ones | man_ones, "%s magnitude mask", f->name);
        cr_expect_eq(f->min_normal_exp, ilogb(f->smallest_normal), "%s", f->name);
        cr_expect_eq(f->min_subnormal_exp, ilogb(f->smallest_subnormal), "%s", f->name);
        cr_expect_eq(f->zero_exp, f->min_subnormal_exp - 1, "%s", f->name);
        cr_expect_eq(f->zero_bin_max, f->zero_exp - 1, "%s", f->name);
        switch (f->nan) {
        case FORMAT_NAN_IEEE: /* quiet: all-ones exponent, the mantissa's top bit; c10's
                               * float8_e5m2 sets every mantissa bit (Float8_e5m2.h) */
            cr_expect_eq(f->nan_pattern,
                         exp_ones | (f->dt == DTYPE_FLOAT8_E5M2 ? man_ones : 1u << (m - 1)),
                         "%s NaN", f->name);
            break;
        case FORMAT_NAN_ALL_ONES:
            cr_expect_eq(f->nan_pattern, exp_ones | man_ones, "%s NaN", f->name);
            break;
        case FORMAT_NAN_NONE: /* a NaN converts to the largest (format.h) */
            cr_expect_eq(f->nan_pattern, f->max_pattern, "%s NaN", f->name);
            break;
        }
    }
}

Test(format, float32_is_float_h)
{
    const format_info *f = format_of(DTYPE_FLOAT32);
    cr_assert_not_null(f);
    cr_expect_eq(f->largest, FLT_MAX);
    cr_expect_eq(f->smallest_normal, FLT_MIN);
    cr_expect_eq(f->smallest_subnormal, FLT_TRUE_MIN);
    cr_expect_eq(f->epsilon, FLT_EPSILON);
    cr_expect_eq(f->mantissa_bits, FLT_MANT_DIG - 1);
    cr_expect_eq(f->bias, FLT_MAX_EXP - 1);
    cr_expect_eq(f->bits, (int)(8 * sizeof(float)));
    cr_expect_eq(bits_float(f->max_pattern), FLT_MAX);
    cr_expect_eq(bits_float(f->min_normal_pattern), FLT_MIN);
    cr_expect_eq(bits_float(f->inf_pattern), INFINITY);
    cr_expect_eq(float_bits(NAN) & f->magnitude_mask, f->nan_pattern);
    cr_expect_eq(dtype_min_normal(DTYPE_FLOAT32), FLT_MIN);
}

/* the row's patterns decode to its limits; half.h's conversion rounds where the row says */
static void check_codec(dtype dt)
{
    const format_info *f = format_of(dt);
    cr_assert_not_null(f);
    cr_expect_eq(decode(f, f->max_pattern), (double)f->largest, "%s", f->name);
    cr_expect_eq(decode(f, f->min_normal_pattern), (double)f->smallest_normal, "%s", f->name);
    cr_expect_eq(decode(f, f->min_normal_pattern - 1u),
                 (double)f->smallest_normal - (double)f->smallest_subnormal,
                 "%s: the largest subnormal", f->name);
    cr_expect_eq(decode(f, 1u), (double)f->smallest_subnormal, "%s", f->name);
    cr_expect(isinf(decode(f, f->inf_pattern)) && decode(f, f->inf_pattern) > 0, "%s", f->name);
    cr_expect(isnan(decode(f, f->nan_pattern)), "%s", f->name);
    cr_expect(!isnan(decode(f, f->inf_pattern - 1u)), "%s", f->name);
    cr_expect_eq(decode(f, f->magnitude_mask + 1u), -0.0, "%s: the sign bit", f->name);
    cr_expect(signbit(decode(f, f->magnitude_mask + 1u)), "%s: the sign bit", f->name);
    /* 1 + epsilon is the value after 1: 1's pattern is the bias in the exponent field */
    uint32_t one = (uint32_t)f->bias << f->mantissa_bits;
    cr_expect_eq(decode(f, one), 1.0, "%s", f->name);
    cr_expect_eq(decode(f, one + 1u), 1.0 + (double)f->epsilon, "%s epsilon", f->name);
    cr_expect_eq(dtype_min_normal(dt), f->smallest_normal, "%s", f->name);

    uint16_t stored;
    cr_expect(isnan(store_from_float(&stored, dt, 0, NAN)), "%s", f->name);
    cr_expect_eq(stored, f->nan_pattern, "%s: the NaN a conversion stores", f->name);
    /* the band: 2^zero_exp is a tie to the even zero, just above it the smallest subnormal,
     * the top of bin zero_bin_max rounds to zero */
    float z = ldexpf(1.0f, f->zero_exp);
    cr_expect_eq(round_to(z, dt), 0.0f, "%s", f->name);
    cr_expect_eq(round_to(nextafterf(z, 1.0f), dt), f->smallest_subnormal, "%s", f->name);
    cr_expect_eq(round_to(nextafterf(ldexpf(1.0f, f->zero_bin_max + 1), 0.0f), dt), 0.0f, "%s",
                 f->name);
    cr_expect_eq(round_to(ldexpf(1.0f, f->zero_bin_max + 1), dt), 0.0f, "%s", f->name);
    /* overflow: up to half an ulp above the largest stays, the midpoint goes to inf */
    float ulp = ldexpf(1.0f, f->bias - f->mantissa_bits);
    cr_expect_eq(round_to(f->largest, dt), f->largest, "%s", f->name);
    cr_expect_eq(round_to(f->largest + ulp / 2, dt), INFINITY, "%s", f->name);
    cr_expect_eq(round_to(nextafterf(f->largest + ulp / 2, 0.0f), dt), f->largest, "%s", f->name);
}

Test(format, float16_patterns_decode_to_its_limits) { check_codec(DTYPE_FLOAT16); }
Test(format, bfloat16_patterns_decode_to_its_limits) { check_codec(DTYPE_BFLOAT16); }

/*
 * cpu_store's counts class values at the row's patterns: the largest subnormal is subnormal,
 * the smallest normal is not; the largest stays finite, half an ulp above it overflows (in a
 * format narrower than float32, whose stores of a float32 can overflow); NaN is NaN. The
 * values sit at the start (the 16-lane vector loop) and at the end (the scalar tail).
 */
static void check_counts(dtype dt)
{
    const format_info *f = format_of(dt);
    cr_assert_not_null(f);
    bool narrow = f->bits < 32;
    float largest_sub = (float)decode(f, f->min_normal_pattern - 1u);
    /* the midpoint between the largest and the next power of two: rounds to inf */
    float over = narrow ? f->largest + ldexpf(1.0f, f->bias - f->mantissa_bits - 1) : 1.0f;
    const float edge[] = {largest_sub, f->smallest_normal, f->largest,           over,
                          NAN,         -largest_sub,       f->smallest_subnormal};
    enum { K = sizeof edge / sizeof edge[0], N = 16 + 16 + 5 };
    float pre[N];
    for (int i = 0; i < N; i++)
        pre[i] = 1.0f;
    memcpy(pre, edge, sizeof edge);
    memcpy(pre + N - K, edge, sizeof edge);
    uint32_t dst[N];
    round_stats st;
    round_stats_init(&st);
    cpu_store(pre, dst, dt, 0, N, &st);
    cr_expect_eq(st.counts.subnormal, 2 * 3, "%s subnormal", f->name);
    cr_expect_eq(st.counts.overflow, narrow ? 2 : 0, "%s overflow", f->name);
    cr_expect_eq(st.counts.nan, 2, "%s nan", f->name);
    cr_expect_eq(st.counts.zeros, 0, "%s zeros", f->name);
    cr_expect_eq(st.counts.amax, narrow ? INFINITY : f->largest, "%s amax", f->name);
    cr_expect_eq(st.counts.amin_nonzero, f->smallest_subnormal, "%s amin", f->name);

    /* without the overflow and NaN, amax is the largest finite (its pattern is inf's - 1) */
    float finite[N];
    for (int i = 0; i < N; i++)
        finite[i] = i % 3 ? f->largest : f->smallest_normal;
    round_stats_init(&st);
    cpu_store(finite, dst, dt, 0, N, &st);
    cr_expect_eq(st.counts.amax, f->largest, "%s amax", f->name);
    cr_expect_eq(st.counts.amin_nonzero, f->smallest_normal, "%s amin", f->name);
    cr_expect_eq(st.counts.subnormal + st.counts.overflow + st.counts.nan, 0, "%s", f->name);
}

Test(format, float32_counts_at_the_tables_patterns) { check_counts(DTYPE_FLOAT32); }
Test(format, float16_counts_at_the_tables_patterns) { check_counts(DTYPE_FLOAT16); }
Test(format, bfloat16_counts_at_the_tables_patterns) { check_counts(DTYPE_BFLOAT16); }

/* ---- `ampscope formats --json` ---- */

/* one object of the output: its keys and their values as written (strings unquoted) */
typedef struct json_object {
    int n;
    char key[64][40];
    char value[64][64];
    bool quoted[64];
} json_object;

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* a JSON string at p (no escapes in this output) into buf; the position after it */
static const char *read_string(const char *p, char *buf, size_t len)
{
    cr_assert_eq(*p, '"', "a string expected at: %.20s", p);
    const char *end = strchr(p + 1, '"');
    cr_assert_not_null(end);
    cr_assert_lt((size_t)(end - p - 1), len);
    memcpy(buf, p + 1, (size_t)(end - p - 1));
    buf[end - p - 1] = '\0';
    return end + 1;
}

/* the array of flat objects in text; returns how many */
static int parse_formats_json(const char *text, json_object *obj, int max)
{
    const char *p = skip_space(text);
    cr_assert_eq(*p, '[');
    p = skip_space(p + 1);
    int n = 0;
    while (*p == '{') {
        cr_assert_lt(n, max);
        json_object *o = &obj[n++];
        o->n = 0;
        p = skip_space(p + 1);
        while (*p == '"') {
            cr_assert_lt(o->n, 64);
            p = skip_space(read_string(p, o->key[o->n], sizeof o->key[0]));
            cr_assert_eq(*p, ':');
            p = skip_space(p + 1);
            o->quoted[o->n] = *p == '"';
            if (*p == '"') {
                p = read_string(p, o->value[o->n], sizeof o->value[0]);
            } else {
                size_t k = strcspn(p, ",}\n ");
                cr_assert(k > 0 && k < sizeof o->value[0], "a value expected at: %.20s", p);
                memcpy(o->value[o->n], p, k);
                o->value[o->n][k] = '\0';
                p += k;
            }
            o->n++;
            p = skip_space(p);
            if (*p == ',')
                p = skip_space(p + 1);
        }
        cr_assert_eq(*p, '}', "'}' expected at: %.20s", p);
        p = skip_space(p + 1);
        if (*p == ',')
            p = skip_space(p + 1);
    }
    cr_assert_eq(*p, ']', "']' expected at: %.20s", p);
    cr_expect_eq(*skip_space(p + 1), '\0', "nothing after the array");
    return n;
}

static const char *field(const json_object *o, const char *key, bool quoted)
{
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->key[i], key)) {
            cr_expect_eq(o->quoted[i], quoted, "%s: %s", key, quoted ? "a string" : "a value");
            return o->value[i];
        }
    cr_assert_fail("no field %s", key);
    return NULL;
}

static void expect_int(const json_object *o, const char *key, long want)
{
    char *end;
    const char *v = field(o, key, false);
    long got = strtol(v, &end, 10);
    cr_expect(*end == '\0' && got == want, "%s: %s, want %ld", key, v, want);
}

static void expect_pattern(const json_object *o, const char *key, uint32_t want)
{
    char *end;
    const char *v = field(o, key, true);
    cr_expect(!strncmp(v, "0x", 2), "%s: %s", key, v);
    unsigned long got = strtoul(v, &end, 16);
    cr_expect(*end == '\0' && got == want, "%s: %s, want 0x%x", key, v, want);
}

/* the decimal and the hex float both give the float exactly */
static void expect_limit(const json_object *o, const char *key, float want)
{
    char hex_key[64], *end;
    const char *v = field(o, key, false);
    double got = strtod(v, &end);
    cr_expect(*end == '\0' && got == (double)want, "%s: %s, want %a", key, v, (double)want);
    snprintf(hex_key, sizeof hex_key, "%s_hex", key);
    v = field(o, hex_key, true);
    got = strtod(v, &end);
    cr_expect(!strncmp(v, "0x", 2) && *end == '\0' && got == (double)want, "%s: %s", hex_key, v);
}

Test(format, json_output_is_the_table)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s formats --json", bin);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char text[65536];
    size_t len = fread(text, 1, sizeof text - 1, p);
    text[len] = '\0';
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);

    static json_object obj[DTYPE_COUNT + 1];
    const format_info *rows[DTYPE_COUNT];
    int n = number_formats(rows);
    cr_assert_eq(parse_formats_json(text, obj, DTYPE_COUNT + 1), n);
    for (int i = 0; i < n; i++) {
        const format_info *f = rows[i];
        const json_object *o = &obj[i];
        cr_expect_str_eq(field(o, "name", true), f->name);
        expect_int(o, "bits", f->bits);
        cr_expect_str_eq(field(o, "is_signed", false), f->is_signed ? "true" : "false");
        expect_int(o, "exponent_bits", f->exponent_bits);
        expect_int(o, "mantissa_bits", f->mantissa_bits);
        expect_int(o, "bias", f->bias);
        cr_expect_str_eq(field(o, "has_inf", false), f->has_inf ? "true" : "false");
        cr_expect_str_eq(field(o, "nan", true), f->nan == FORMAT_NAN_IEEE       ? "ieee"
                                                : f->nan == FORMAT_NAN_ALL_ONES ? "all_ones"
                                                                                : "none");
        expect_pattern(o, "nan_pattern", f->nan_pattern);
        expect_pattern(o, "inf_pattern", f->inf_pattern);
        expect_pattern(o, "max_pattern", f->max_pattern);
        expect_pattern(o, "min_normal_pattern", f->min_normal_pattern);
        expect_pattern(o, "magnitude_mask", f->magnitude_mask);
        expect_limit(o, "largest", f->largest);
        expect_limit(o, "smallest_normal", f->smallest_normal);
        expect_limit(o, "smallest_subnormal", f->smallest_subnormal);
        expect_limit(o, "epsilon", f->epsilon);
        expect_int(o, "min_normal_exp", f->min_normal_exp);
        expect_int(o, "min_subnormal_exp", f->min_subnormal_exp);
        expect_int(o, "zero_exp", f->zero_exp);
        expect_int(o, "zero_bin_max", f->zero_bin_max);
        cr_expect_str_eq(field(o, "cublas", true), f->cublas);
        cr_expect_str_eq(field(o, "cudnn", true), f->cudnn);
        cr_expect_str_eq(field(o, "torch", true), f->torch);
        cr_expect_str_eq(field(o, "torch_scalar", true), f->torch_scalar);
        cr_expect_str_eq(field(o, "torch_cpp", true), f->torch_cpp);
        cr_expect_str_eq(field(o, "torch_cuda_tensor", true), f->torch_cuda_tensor);
        /* every field is one of the above: 27, and a _hex for each of the 4 limits */
        cr_expect_eq(o->n, 27 + 4, "%s: %d fields", f->name, o->n);
    }
    cr_expect_str_eq(field(&obj[1], "cublas", true), "CUDA_R_16F");
    cr_expect_str_eq(field(&obj[1], "cudnn", true), "CUDNN_DATA_HALF");
    cr_expect_str_eq(field(&obj[2], "cublas", true), "CUDA_R_16BF");
    cr_expect_str_eq(field(&obj[2], "cudnn", true), "CUDNN_DATA_BFLOAT16");
    cr_expect_str_eq(field(&obj[1], "torch_cuda_tensor", true), "torch.cuda.HalfTensor");
    cr_expect_str_eq(field(&obj[2], "torch_cpp", true), "c10::BFloat16");
}

Test(format, plain_output_has_a_line_per_field)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[512], line[512];
    snprintf(cmd, sizeof cmd, "%s formats", bin);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    int lines = 0;
    bool saw_largest = false;
    while (fgets(line, sizeof line, p)) {
        lines++;
        if (!strncmp(line, "largest ", 8))
            saw_largest = strstr(line, "65504 (0x1.ffcp+15)") && strstr(line, "0x1.fep+127");
    }
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
    cr_expect_eq(lines, 27);
    cr_expect(saw_largest, "the largest line holds float16's and bfloat16's largest finite");
    static const char *const bad[] = {"--yaml", "--json --json", "--json x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s formats %s >/dev/null 2>&1", bin, bad[i]);
        int rc = system(cmd);
        cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "formats %s: bad usage (exit 2)", bad[i]);
    }
    snprintf(cmd, sizeof cmd, "%s --help", bin);
    p = popen(cmd, "r");
    cr_assert_not_null(p);
    bool listed = false;
    while (fgets(line, sizeof line, p))
        listed |= strstr(line, "ampscope formats [--json]") != NULL;
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
    cr_expect(listed, "--help lists the formats command");
}
