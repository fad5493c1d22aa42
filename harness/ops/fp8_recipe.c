/* fp8_recipe.c: delayed and current scaling and MXFP8's E8M0 block scales, as Transformer
 * Engine computes them (see fp8_recipe.h for the source of each rule). The delayed scale's
 * rule is _default_sf_compute of transformer_engine/pytorch/fp8.py (quantization.py in
 * later releases): sf = (fp8_max / amax) / 2^margin, kept where amax is not > 0 or not
 * finite, FLT_MAX where infinite. */
#include "fp8_recipe.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"

bool fp8_delayed_init(fp8_delayed *d, int history_len, fp8_amax_algo algo, int margin,
                      float fp8_max)
{
    d->history = calloc((size_t)history_len, sizeof(float));
    d->history_len = history_len;
    d->algo = algo;
    d->margin = margin;
    d->fp8_max = fp8_max;
    d->scale = d->scale_inv = 1.0f;
    return d->history != NULL;
}

void fp8_delayed_free(fp8_delayed *d)
{
    free(d->history);
    d->history = NULL;
}

void fp8_delayed_record(fp8_delayed *d, float amax)
{
    if (!(amax <= d->history[0])) /* the larger, and a NaN kept */
        d->history[0] = amax;
}

float fp8_delayed_update(fp8_delayed *d)
{
    float amax = d->history[0];
    if (d->algo == FP8_AMAX_MAX)
        for (int i = 1; i < d->history_len; i++) { /* torch.max: a NaN wins */
            float h = d->history[i];
            if (!isnan(amax) && (isnan(h) || h > amax))
                amax = h;
        }
    if (isfinite(amax) && amax > 0.0f) {
        float s = d->fp8_max / amax / exp2f((float)d->margin);
        d->scale = isinf(s) ? FLT_MAX : s;
        d->scale_inv = 1.0f / d->scale;
    }
    /* torch.roll(history, -1, 0), then row 0 zeroed */
    float first = d->history[0];
    memmove(d->history, d->history + 1, sizeof(float) * (size_t)(d->history_len - 1));
    d->history[d->history_len - 1] = first;
    d->history[0] = 0.0f;
    return amax;
}

float fp8_scale_from_amax(float amax, float fp8_max, bool pow2)
{
    if (amax == 0.0f || !isfinite(amax))
        return 1.0f;
    float scale = fp8_max / amax;
    if (isinf(scale))
        scale = FLT_MAX;
    if (pow2)
        scale = bits_float(float_bits(scale) & 0xff800000u);
    return scale;
}

uint8_t fp8_e8m0_te(float amax, float fp8_max)
{
    float v = amax * (1.0f / fp8_max);
    if (isnan(v))
        return 0xff;
    if (isinf(v))
        return 0xfe;
    if (v == 0.0f)
        return 0x00;
    uint32_t u = float_bits(v);
    uint32_t exponent = (u >> 23) & 0xffu, mantissa = u & 0x7fffffu;
    if (mantissa > 0 && exponent != 0xfe && !(exponent == 0 && mantissa <= 0x400000u))
        exponent++; /* round up; 0xfe stays (satfinite) */
    return (uint8_t)exponent;
}

uint8_t fp8_e8m0_ocp(float amax, int emax)
{
    if (isnan(amax))
        return 0xff;
    if (amax == 0.0f)
        return 0x00;
    int x = ilogbf(amax) - emax + 127;
    return (uint8_t)(x < 0 ? 0 : x > 0xfe ? 0xfe : x);
}

float fp8_e8m0_value(uint8_t e)
{
    return e == 0xff ? NAN : ldexpf(1.0f, (int)e - 127);
}

float fp8_e8m0_multiplier(uint8_t e)
{
    if (e == 0xff)
        return NAN;
    return e == 0 ? 1.0f : bits_float((uint32_t)(254 - e) << 23);
}
