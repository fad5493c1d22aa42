/*
 * fp4_recipe.h: the rules of the two 4-bit block-scaled recipes, as the libraries cited at
 * each function compute them; the CPU's quantizer (harness/ops/cpu/fp4_block.c) applies them.
 * Values are float4_e2m1fn (largest 6), one scale per block of consecutive values along a
 * GEMM's reduction dim:
 *  - NVFP4 (Transformer Engine's NVFP4BlockScaling: transformer_engine/common/recipe/
 *    __init__.py; the quantization in common/util's core_nvfp4.cuh and
 *    quantize_transpose_nvfp4.cuh): blocks of 16 (1x16; 16x16 tiles for weights), an E4M3
 *    scale per block and a float32 per-tensor scale S_enc = 448 * 6 / amax, so that the
 *    tensor's largest block scale is near E4M3's 448;
 *  - MXFP4 (the OCP MX specification v1.0, section 6.3; torchao's MXTensor.to_mx with its
 *    default ScaleCalculationMode.FLOOR; TE has no MXFP4 recipe): blocks of 32, an E8M0 scale
 *    2^(floor(log2 amax) - 2) per block (2 = E2M1's largest exponent), no per-tensor scale.
 *    Unlike the round-up rule of TE's MXFP8 (fp8_recipe.h's fp8_e8m0_te, which takes amax /
 *    fp8_max rounded up to a power of two, so that no value saturates), FLOOR leaves amax /
 *    scale in [4, 8): a block's values from 6 * scale up saturate to 6.
 */
#ifndef AMPSCOPE_FP4_RECIPE_H
#define AMPSCOPE_FP4_RECIPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum fp4_recipe {
    FP4_NVFP4, /* E4M3 block scales of 16 and a per-tensor scale */
    FP4_MXFP4, /* E8M0 block scales of 32 (OCP FLOOR) */
} fp4_recipe;

/* NVFP4_BLOCK_SCALING_SIZE (transformer_engine/pytorch/constants.py); MXFP4's is the OCP
 * specification's 32 */
#define FP4_NV_BLOCK 16
#define FP4_MX_BLOCK 32

/* how one copy is quantized (fp4_block_quantize in ops/backend.h) */
typedef struct fp4_quant_opts {
    fp4_recipe recipe;
    bool colwise;    /* quantize x's transpose: blocks run along x's rows (wgrad's operands) */
    bool block_2d;   /* NVFP4: 16x16 tiles, one scale each (TE's 2D quantization of weights) */
    bool rht;        /* NVFP4: each 16 values along the block dim times the RHT matrix first */
    bool stochastic; /* stochastic rounding of the E2M1 conversion (TE's gradients) */
    uint64_t seed;   /* the stream of random bits stochastic rounding draws from */
} fp4_quant_opts;

/* what one quantization did; `blocks` counts scales (tiles under block_2d) */
typedef struct fp4_quant_stats {
    float amax;       /* max |v| of the values quantized (after the RHT) */
    float s_enc;      /* NVFP4's per-tensor S_enc; 1 under MXFP4 */
    int64_t saturated; /* finite values whose scaled magnitude exceeded 6, clamped to +-6 */
    int64_t blocks;
    int64_t blocks_underflow;  /* blocks where a non-zero value became 0 */
    int64_t blocks_saturated;  /* blocks where a value saturated */
    int64_t scales_underflow;  /* block scales that rounded to zero (NVFP4: E4M3 0 from a
                                * non-zero block amax; MXFP4: floor(log2 amax) - 2 below
                                * E8M0's -127, clamped) */
    int64_t scales_saturated;  /* NVFP4: block scales clamped to E4M3's 448 (never, with
                                * S_enc from the same amax) */
} fp4_quant_stats;

/* NVFP4's per-tensor encode scale (core_nvfp4.cuh's compute_global_encode_scaling_factor_FP4):
 * fp32(448 * 6 / amax), FLT_MAX where that is infinite, 1 when amax is 0 */
float fp4_nv_s_enc(float amax);
/* NVFP4's block scale byte: e4m3_satfinite_rne(block_amax * fp32(s_enc * fp32(1 / 6))) */
uint8_t fp4_nv_block_scale(float block_amax, float s_enc);
/* what a block's values are multiplied by before the E2M1 conversion:
 * min(1 / (float(s) * S_dec), FLT_MAX), S_dec = 1 / s_enc in float32 */
float fp4_nv_multiplier(uint8_t s, float s_enc);
/* MXFP4's E8M0 scale byte (torchao's FLOOR): amax's float32 exponent field - 2, clamped to
 * [0, 254]; 0xff for a NaN amax */
uint8_t fp4_mx_scale(float amax);
/* what a block's values are multiplied by: 2^(127 - e), with torchao's floor of the scale at
 * float32's smallest normal (e = 0 multiplies by 2^126, as e = 1 does) */
float fp4_mx_multiplier(uint8_t e);
/* TE's RHT matrix (transformer_engine/pytorch/tensor/nvfp4_tensor.py's get_rht_matrix):
 * diag(get_wgrad_sign_vector()) @ H16 / 4, held in bfloat16 (its entries +-1/4, exact);
 * a block of 16 values v becomes v @ m (row-major m[i * 16 + j]) */
void fp4_rht_matrix(float m[FP4_NV_BLOCK * FP4_NV_BLOCK]);
/* a with stochastic rounding to float4_e2m1fn (cvt.rs.satfinite's rule, with the harness's
 * random bits instead of the GPU's Philox stream): |a| beyond 6 gives +-6; between two
 * neighbours lo < |a| < hi it rounds up when r < (|a| - lo) / (hi - lo) * 2^32, i.e. with that
 * probability to within 2^-32; a NaN +6 as the nearest rounding's */
uint8_t fp4_e2m1_stochastic(float a, uint32_t r);

#endif
