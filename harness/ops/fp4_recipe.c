/* fp4_recipe.c: NVFP4's and MXFP4's scale rules, TE's RHT matrix and the stochastic E2M1
 * rounding (see fp4_recipe.h for the source of each). */
#include "fp4_recipe.h"

#include <float.h>
#include <math.h>

#include "core/half.h"

float fp4_nv_s_enc(float amax)
{
    if (amax == 0.0f)
        return 1.0f;
    float s = (FORMAT_FLOAT8_E4M3FN_LARGEST * FORMAT_FLOAT4_E2M1FN_LARGEST) / amax;
    return s > FLT_MAX ? FLT_MAX : s;
}

uint8_t fp4_nv_block_scale(float block_amax, float s_enc)
{
    float t = s_enc * (1.0f / FORMAT_FLOAT4_E2M1FN_LARGEST);
    float v = block_amax * t;
    if (v > FORMAT_FLOAT8_E4M3FN_LARGEST) /* satfinite */
        v = FORMAT_FLOAT8_E4M3FN_LARGEST;
    return e4m3fn_from_float(v);
}

float fp4_nv_multiplier(uint8_t s, float s_enc)
{
    float s_dec = 1.0f / s_enc;
    float m = 1.0f / (float_from_e4m3fn(s) * s_dec);
    return m > FLT_MAX ? FLT_MAX : m;
}

uint8_t fp4_mx_scale(float amax)
{
    if (isnan(amax))
        return FORMAT_FLOAT8_E8M0FNU_NAN_PATTERN;
    int e = (int)((float_bits(amax) >> 23) & 0xffu) - 2; /* E2M1's largest exponent */
    return (uint8_t)(e < 0 ? 0 : e > 0xfe ? 0xfe : e);
}

float fp4_mx_multiplier(uint8_t e)
{
    if (e == FORMAT_FLOAT8_E8M0FNU_NAN_PATTERN)
        return NAN;
    return bits_float((uint32_t)(254 - (e < 1 ? 1 : e)) << 23); /* 2^(127 - e) */
}

void fp4_rht_matrix(float m[FP4_NV_BLOCK * FP4_NV_BLOCK])
{
    static const int signs[FP4_NV_BLOCK] = {1, 1, 1, -1, 1, -1, -1, -1,
                                            -1, -1, -1, 1, -1, 1, -1, -1};
    for (int i = 0; i < FP4_NV_BLOCK; i++)
        for (int j = 0; j < FP4_NV_BLOCK; j++) {
            /* Sylvester's H16: (-1)^popcount(i & j), as TE writes it out */
            int h = __builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1;
            m[i * FP4_NV_BLOCK + j] = round_to(0.25f * (float)(signs[i] * h), DTYPE_BFLOAT16);
        }
}

uint8_t fp4_e2m1_stochastic(float a, uint32_t r)
{
    if (isnan(a))
        return FORMAT_FLOAT4_E2M1FN_NAN_PATTERN;
    uint8_t sign = signbit(a) ? 0x8u : 0u;
    float x = fabsf(a);
    if (x >= FORMAT_FLOAT4_E2M1FN_LARGEST)
        return (uint8_t)(sign | FORMAT_FLOAT4_E2M1FN_MAX_PATTERN);
    float step = x < 2.0f ? 0.5f : x < 4.0f ? 1.0f : 2.0f; /* the spacing at x */
    float lo = floorf(x / step) * step;                      /* exact: step a power of 2 */
    double frac = (double)((x - lo) / step);                 /* exact, < 1 */
    float v = (double)r < frac * 0x1p32 ? lo + step : lo;
    return (uint8_t)(sign | e2m1_from_float(v));
}
