/*
 * format.h: the number formats tensors store values in, as data: one row per format of the
 * dtype enum (dtype.h), with its layout, its limits and its names in cuBLAS, cuDNN and
 * PyTorch. `ampscope formats [--json]` prints the table; plot/plot.py reads it from there.
 *
 * Every value is written once, as a FORMAT_<NAME>_<FIELD> macro below: format.c builds the
 * table from them, and code that must know a value at compile time (half.h's inline device
 * code, kernels/cuda.cuh's cuBLAS and cuDNN types) uses the same macro. Limits are hex float
 * literals, exact; bit patterns are of the format's own storage, sign clear.
 *
 * Adding a format:
 *  - a DTYPE_ value in dtype.h, and its aliases in dtype.c's dtype_parse;
 *  - the macro block below: BITS, SIGNED (1 with a sign bit), EXP_BITS, MAN_BITS, BIAS,
 *    HAS_INF, NAN (a format_nan),
 *    NAN_PATTERN (the NaN a conversion of float32's default NaN stores), INF_PATTERN
 *    (+inf; 0 when HAS_INF is 0), MAX_PATTERN (largest finite), MIN_NORMAL_PATTERN,
 *    MAG_MASK (every bit but the sign), LARGEST, SMALLEST_NORMAL, SMALLEST_SUBNORMAL,
 *    EPSILON (2^-MAN_BITS), CUBLAS (a cudaDataType_t), CUDNN (a cudnnDataType_t);
 *  - a FORMAT_ROW line in format.c's table: its name, PyTorch's scalar type name and C++
 *    type (torch.<name> and torch.cuda.<scalar type>Tensor follow);
 *  - then every switch over the dtype enum that -Wswitch names: half.h's dtype_min_normal,
 *    harness/ops/cpu/round.c's stores and counts, kernels/cuda.cuh's cuda_data_type and
 *    cudnn_data_type, selftest.c's and tests/test_format.c's decoders; and half.h's
 *    per-element codecs (round_to, load_as_float, store_from_float), ifs for speed whose
 *    static_assert on DTYPE_COUNT fails until they have the new branch; plot/plot.py's
 *    MARKED when the gradient histogram should mark the format's limits.
 *    round.c's bit-pattern counts assume IEEE ordering with +inf as the pattern just below
 *    the NaNs; the float8 formats have their own loop there (count_lanes8), which also
 *    takes a format without infinities (e4m3fn: S.1111.111 its only NaN, a finite value
 *    stored as it counted as overflow and NaN). tests/test_format.c derives every row's limits from its
 *    bits and bias: a new row is checked as soon as it exists.
 * int64 (class labels) is a dtype but not a number format: format_of() gives NULL for it.
 */
#ifndef AMPSCOPE_FORMAT_H
#define AMPSCOPE_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dtype.h"

/* which bit patterns are NaN */
typedef enum format_nan {
    FORMAT_NAN_IEEE,     /* exponent all ones, mantissa non-zero (either sign) */
    FORMAT_NAN_ALL_ONES, /* exponent and mantissa all ones only (float8_e4m3fn, float8_e8m0fnu) */
    FORMAT_NAN_NONE,     /* every pattern a number (float4_e2m1fn); a NaN converts to a number */
} format_nan;

/* float32: IEEE binary32 */
#define FORMAT_FLOAT32_BITS 32
#define FORMAT_FLOAT32_SIGNED 1
#define FORMAT_FLOAT32_EXP_BITS 8
#define FORMAT_FLOAT32_MAN_BITS 23
#define FORMAT_FLOAT32_BIAS 127
#define FORMAT_FLOAT32_HAS_INF 1
#define FORMAT_FLOAT32_NAN FORMAT_NAN_IEEE
#define FORMAT_FLOAT32_NAN_PATTERN 0x7fc00000u
#define FORMAT_FLOAT32_INF_PATTERN 0x7f800000u
#define FORMAT_FLOAT32_MAX_PATTERN 0x7f7fffffu
#define FORMAT_FLOAT32_MIN_NORMAL_PATTERN 0x00800000u
#define FORMAT_FLOAT32_MAG_MASK 0x7fffffffu
#define FORMAT_FLOAT32_LARGEST 0x1.fffffep127f
#define FORMAT_FLOAT32_SMALLEST_NORMAL 0x1p-126f
#define FORMAT_FLOAT32_SMALLEST_SUBNORMAL 0x1p-149f
#define FORMAT_FLOAT32_EPSILON 0x1p-23f
#define FORMAT_FLOAT32_CUBLAS CUDA_R_32F
#define FORMAT_FLOAT32_CUDNN CUDNN_DATA_FLOAT

/* float16: IEEE binary16 */
#define FORMAT_FLOAT16_BITS 16
#define FORMAT_FLOAT16_SIGNED 1
#define FORMAT_FLOAT16_EXP_BITS 5
#define FORMAT_FLOAT16_MAN_BITS 10
#define FORMAT_FLOAT16_BIAS 15
#define FORMAT_FLOAT16_HAS_INF 1
#define FORMAT_FLOAT16_NAN FORMAT_NAN_IEEE
#define FORMAT_FLOAT16_NAN_PATTERN 0x7e00u
#define FORMAT_FLOAT16_INF_PATTERN 0x7c00u
#define FORMAT_FLOAT16_MAX_PATTERN 0x7bffu
#define FORMAT_FLOAT16_MIN_NORMAL_PATTERN 0x0400u
#define FORMAT_FLOAT16_MAG_MASK 0x7fffu
#define FORMAT_FLOAT16_LARGEST 0x1.ffcp15f
#define FORMAT_FLOAT16_SMALLEST_NORMAL 0x1p-14f
#define FORMAT_FLOAT16_SMALLEST_SUBNORMAL 0x1p-24f
#define FORMAT_FLOAT16_EPSILON 0x1p-10f
#define FORMAT_FLOAT16_CUBLAS CUDA_R_16F
#define FORMAT_FLOAT16_CUDNN CUDNN_DATA_HALF

/* bfloat16: the top 16 bits of a float32 */
#define FORMAT_BFLOAT16_BITS 16
#define FORMAT_BFLOAT16_SIGNED 1
#define FORMAT_BFLOAT16_EXP_BITS 8
#define FORMAT_BFLOAT16_MAN_BITS 7
#define FORMAT_BFLOAT16_BIAS 127
#define FORMAT_BFLOAT16_HAS_INF 1
#define FORMAT_BFLOAT16_NAN FORMAT_NAN_IEEE
#define FORMAT_BFLOAT16_NAN_PATTERN 0x7fc0u
#define FORMAT_BFLOAT16_INF_PATTERN 0x7f80u
#define FORMAT_BFLOAT16_MAX_PATTERN 0x7f7fu
#define FORMAT_BFLOAT16_MIN_NORMAL_PATTERN 0x0080u
#define FORMAT_BFLOAT16_MAG_MASK 0x7fffu
#define FORMAT_BFLOAT16_LARGEST 0x1.fep127f
#define FORMAT_BFLOAT16_SMALLEST_NORMAL 0x1p-126f
#define FORMAT_BFLOAT16_SMALLEST_SUBNORMAL 0x1p-133f
#define FORMAT_BFLOAT16_EPSILON 0x1p-7f
#define FORMAT_BFLOAT16_CUBLAS CUDA_R_16BF
#define FORMAT_BFLOAT16_CUDNN CUDNN_DATA_BFLOAT16

/* float8_e4m3fn: OCP FP8 E4M3 (c10::Float8_e4m3fn): no infinity, S.1111.111 its only NaN,
 * S.1111.000 to S.1111.110 numbers up to 448 */
#define FORMAT_FLOAT8_E4M3FN_BITS 8
#define FORMAT_FLOAT8_E4M3FN_SIGNED 1
#define FORMAT_FLOAT8_E4M3FN_EXP_BITS 4
#define FORMAT_FLOAT8_E4M3FN_MAN_BITS 3
#define FORMAT_FLOAT8_E4M3FN_BIAS 7
#define FORMAT_FLOAT8_E4M3FN_HAS_INF 0
#define FORMAT_FLOAT8_E4M3FN_NAN FORMAT_NAN_ALL_ONES
#define FORMAT_FLOAT8_E4M3FN_NAN_PATTERN 0x7fu
#define FORMAT_FLOAT8_E4M3FN_INF_PATTERN 0x00u
#define FORMAT_FLOAT8_E4M3FN_MAX_PATTERN 0x7eu
#define FORMAT_FLOAT8_E4M3FN_MIN_NORMAL_PATTERN 0x08u
#define FORMAT_FLOAT8_E4M3FN_MAG_MASK 0x7fu
#define FORMAT_FLOAT8_E4M3FN_LARGEST 0x1.cp8f
#define FORMAT_FLOAT8_E4M3FN_SMALLEST_NORMAL 0x1p-6f
#define FORMAT_FLOAT8_E4M3FN_SMALLEST_SUBNORMAL 0x1p-9f
#define FORMAT_FLOAT8_E4M3FN_EPSILON 0x1p-3f
#define FORMAT_FLOAT8_E4M3FN_CUBLAS CUDA_R_8F_E4M3
#define FORMAT_FLOAT8_E4M3FN_CUDNN CUDNN_DATA_FP8_E4M3
/* |x| above this float32 pattern (464, the midpoint between 448 and 480) becomes NaN in
 * c10::Float8_e4m3fn's conversion (c10/util/Float8_e4m3fn.h: f_bits >= 480 gives NaN, and
 * (464, 480) rounds up to the NaN pattern; 464 itself ties to even 448) */
#define FORMAT_FLOAT8_E4M3FN_OVERFLOW_ABOVE 0x43e80000u

/* float8_e5m2: the top byte of a float16 (c10::Float8_e5m2): infinities, IEEE NaNs */
#define FORMAT_FLOAT8_E5M2_BITS 8
#define FORMAT_FLOAT8_E5M2_SIGNED 1
#define FORMAT_FLOAT8_E5M2_EXP_BITS 5
#define FORMAT_FLOAT8_E5M2_MAN_BITS 2
#define FORMAT_FLOAT8_E5M2_BIAS 15
#define FORMAT_FLOAT8_E5M2_HAS_INF 1
#define FORMAT_FLOAT8_E5M2_NAN FORMAT_NAN_IEEE
/* c10/util/Float8_e5m2.h stores 0x7F for every NaN (the sign kept) */
#define FORMAT_FLOAT8_E5M2_NAN_PATTERN 0x7fu
#define FORMAT_FLOAT8_E5M2_INF_PATTERN 0x7cu
#define FORMAT_FLOAT8_E5M2_MAX_PATTERN 0x7bu
#define FORMAT_FLOAT8_E5M2_MIN_NORMAL_PATTERN 0x04u
#define FORMAT_FLOAT8_E5M2_MAG_MASK 0x7fu
#define FORMAT_FLOAT8_E5M2_LARGEST 0x1.cp15f
#define FORMAT_FLOAT8_E5M2_SMALLEST_NORMAL 0x1p-14f
#define FORMAT_FLOAT8_E5M2_SMALLEST_SUBNORMAL 0x1p-16f
#define FORMAT_FLOAT8_E5M2_EPSILON 0x1p-2f
#define FORMAT_FLOAT8_E5M2_CUBLAS CUDA_R_8F_E5M2
#define FORMAT_FLOAT8_E5M2_CUDNN CUDNN_DATA_FP8_E5M2
/* |x| above this pattern (just below 61440, the midpoint between 57344 and 65536, which ties
 * to the even inf) becomes inf (c10/util/Float8_e5m2.h) */
#define FORMAT_FLOAT8_E5M2_OVERFLOW_ABOVE 0x476fffffu

/* float4_e2m1fn: OCP MX FP4 E2M1 (ml_dtypes.float4_e2m1fn; PyTorch has only the packed
 * torch.float4_e2m1fn_x2): S.EE.M, bias 1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6, no infinity
 * and no NaN. Stored one value a byte in the low four bits, as ml_dtypes stores it. The
 * conversion from float32 is Transformer Engine's `cvt.rn.satfinite.e2m1x2.f32`: round to
 * nearest even, |x| beyond 6 (and +-inf) saturates to +-6; a NaN, which E2M1 cannot hold,
 * becomes +6 (NAN_PATTERN: the pattern a NaN stores; ml_dtypes stores 0x8, -0, instead), and
 * the counting store counts it as nan (harness/ops/cpu/round.c). */
#define FORMAT_FLOAT4_E2M1FN_BITS 4
#define FORMAT_FLOAT4_E2M1FN_SIGNED 1
#define FORMAT_FLOAT4_E2M1FN_EXP_BITS 2
#define FORMAT_FLOAT4_E2M1FN_MAN_BITS 1
#define FORMAT_FLOAT4_E2M1FN_BIAS 1
#define FORMAT_FLOAT4_E2M1FN_HAS_INF 0
#define FORMAT_FLOAT4_E2M1FN_NAN FORMAT_NAN_NONE
#define FORMAT_FLOAT4_E2M1FN_NAN_PATTERN 0x7u
#define FORMAT_FLOAT4_E2M1FN_INF_PATTERN 0x0u
#define FORMAT_FLOAT4_E2M1FN_MAX_PATTERN 0x7u
#define FORMAT_FLOAT4_E2M1FN_MIN_NORMAL_PATTERN 0x2u
#define FORMAT_FLOAT4_E2M1FN_MAG_MASK 0x7u
#define FORMAT_FLOAT4_E2M1FN_LARGEST 0x1.8p2f
#define FORMAT_FLOAT4_E2M1FN_SMALLEST_NORMAL 0x1p0f
#define FORMAT_FLOAT4_E2M1FN_SMALLEST_SUBNORMAL 0x1p-1f
#define FORMAT_FLOAT4_E2M1FN_EPSILON 0x1p-1f
#define FORMAT_FLOAT4_E2M1FN_CUBLAS CUDA_R_4F_E2M1
#define FORMAT_FLOAT4_E2M1FN_CUDNN CUDNN_DATA_FP4_E2M1
/* |x| from 7 up (7 is the midpoint between 6 and 8, a tie to the even 8) saturates to 6;
 * below it round to nearest even reaches at most 6 */
#define FORMAT_FLOAT4_E2M1FN_OVERFLOW_ABOVE 0x40dfffffu

/* float8_e8m0fnu: OCP MX E8M0 scale (c10::Float8_e8m0fnu, ml_dtypes.float8_e8m0fnu): eight
 * exponent bits, no sign, no mantissa, bias 127: 2^-127 (pattern 0x00) to 2^127 (0xfe), 0xff
 * the only NaN, no zero, no infinity. Exponent field 0 is a number, 2^-127, not a subnormal:
 * the smallest normal and the smallest subnormal are both 2^-127. The conversion from float32
 * is c10's (c10/util/Float8_e8m0fnu-inl.h, fp8e8m0_from_fp32_value): the sign ignored, the
 * significand rounded to 1 or 2 by guard, round and sticky bits with the implicit bit as the
 * last kept one, so that a tie (1.5 * 2^e) rounds up to 2^(e+1); 0 and float32 subnormals
 * below 1.5 * 2^-127 give 2^-127; inf, NaN and values from 1.5 * 2^127 up give NaN.
 * ml_dtypes agrees but for 0 and negative values, which it makes NaN. */
#define FORMAT_FLOAT8_E8M0FNU_BITS 8
#define FORMAT_FLOAT8_E8M0FNU_SIGNED 0
#define FORMAT_FLOAT8_E8M0FNU_EXP_BITS 8
#define FORMAT_FLOAT8_E8M0FNU_MAN_BITS 0
#define FORMAT_FLOAT8_E8M0FNU_BIAS 127
#define FORMAT_FLOAT8_E8M0FNU_HAS_INF 0
#define FORMAT_FLOAT8_E8M0FNU_NAN FORMAT_NAN_ALL_ONES
#define FORMAT_FLOAT8_E8M0FNU_NAN_PATTERN 0xffu
#define FORMAT_FLOAT8_E8M0FNU_INF_PATTERN 0x00u
#define FORMAT_FLOAT8_E8M0FNU_MAX_PATTERN 0xfeu
#define FORMAT_FLOAT8_E8M0FNU_MIN_NORMAL_PATTERN 0x00u
#define FORMAT_FLOAT8_E8M0FNU_MAG_MASK 0xffu
#define FORMAT_FLOAT8_E8M0FNU_LARGEST 0x1p127f
#define FORMAT_FLOAT8_E8M0FNU_SMALLEST_NORMAL 0x1p-127f
#define FORMAT_FLOAT8_E8M0FNU_SMALLEST_SUBNORMAL 0x1p-127f
#define FORMAT_FLOAT8_E8M0FNU_EPSILON 0x1p0f
#define FORMAT_FLOAT8_E8M0FNU_CUBLAS CUDA_R_8F_UE8M0
#define FORMAT_FLOAT8_E8M0FNU_CUDNN CUDNN_DATA_FP8_E8M0

typedef struct format_info {
    dtype dt;
    const char *name; /* PyTorch's name without "torch.": dtype_name() */
    int bits;         /* the encoding's width (storage: dtype_size, whole bytes) */
    bool is_signed;   /* a sign bit (all but float8_e8m0fnu) */
    int exponent_bits, mantissa_bits, bias;
    bool has_inf;
    format_nan nan;
    uint32_t nan_pattern;        /* the NaN a conversion of float32's default NaN stores */
    uint32_t inf_pattern;        /* +inf (0 without infinities) */
    uint32_t max_pattern;        /* the largest finite value */
    uint32_t min_normal_pattern; /* the smallest normal value */
    uint32_t magnitude_mask;     /* every bit but the sign */
    float largest, smallest_normal, smallest_subnormal, epsilon;
    /* log2 of smallest_normal: 1 - bias, or -bias where exponent field 0 is a number
     * (float8_e8m0fnu, min_normal_pattern 0) */
    int min_normal_exp;
    int min_subnormal_exp; /* log2 of smallest_subnormal: min_normal_exp - mantissa_bits */
    /* |x| <= 2^zero_exp (half the smallest subnormal) rounds to zero, 2^zero_exp itself a
     * tie to the even zero; hist.csv's bins k <= zero_exp - 1 (2^k <= |x| < 2^(k+1)) hold
     * only values that round to zero (float8_e8m0fnu has no zero: nothing rounds to it,
     * and zero_exp is only the exponent below its range) */
    int zero_exp;
    int zero_bin_max;                   /* zero_exp - 1 */
    const char *cublas, *cudnn, *torch; /* "CUDA_R_16F", "CUDNN_DATA_HALF", "torch.float16" */
    /* as PyTorch's error messages name it: "Half", "c10::Half", "torch.cuda.HalfTensor" */
    const char *torch_scalar, *torch_cpp, *torch_cuda_tensor;
} format_info;

#ifdef __cplusplus
extern "C" {
#endif

/* dt's row; NULL for int64 (not a number format) and for values outside the enum */
const format_info *format_of(dtype dt);
/* The table: plain, one line per field and a column per format; or one JSON array of
 * objects with every field (limits as %.17g and as C hex floats, patterns as "0x..."). */
void format_print_table(FILE *out);
void format_print_json(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
