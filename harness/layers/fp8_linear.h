/*
 * fp8_linear.h: the linear layers [fp8] chooses, run as Transformer Engine's te.Linear under
 * fp8_autocast (transformer_engine/pytorch/module/linear.py, _Linear.forward and backward),
 * and the per-layer, per-tensor scaling state that lives across steps.
 *
 * Forward of layer L (x [M, I] with M the input's leading dims, w [O, I]):
 *   x is cast to the autocast dtype as TE's cast_if_needed(inp, activation_dtype) does, then
 *   quantized to E4M3 ("L.input@float8_e4m3fn"); the weight is quantized from the parameter
 *   itself, float32 (TE's get_weight_workspace(tensor=weight, quantizer=...) takes the module's
 *   parameter, not an autocast copy, and quantizes it with quantizer.quantize(tensor,
 *   dtype=workspace_dtype), that dtype only the copy's nominal one: module/base.py)
 *   ("L.weight@float8_e4m3fn"); the bias is cast to the
 *   autocast dtype; y = fp8_gemm(xq, wq) * scale_inv_x * scale_inv_w + b with fast
 *   accumulation, in the surrounding dtype (the autocast dtype, else float32).
 * Backward (dy in y's dtype):
 *   the bias gradient from dy unquantized (TE's fused bgrad_quantize); dy quantized
 *   ("L.out.grad@float8_e5m2" under hybrid, "@float8_e4m3fn" under e4m3) with its transposed
 *   copy; dgrad dx = dyq [M, O] x wq^T-copy [I, O] and wgrad dw = dyq^T-copy [O, M] x
 *   xq^T-copy [I, M], both TN as cuBLASLt's FP8 kernels take them, split accumulation (no
 *   fast_accum), in the activation dtype; dw then goes to the parameter cast into its dtype
 *   ("L.weight.grad@bfloat16" -> "L.weight.grad"), as autograd casts a gradient to its
 *   input's dtype.
 * Scales: delayed scaling uses each tensor's state.scale, computed from its amax history
 * before this quantization, and records the amax into the history's row 0; the forward
 * tensors' states are updated when the forward ends (TE's reduce_and_update_fp8_tensors
 * (forward=True) at fp8_autocast's exit), the gradients' when the backward ends
 * (forward=False, queued by the backward of the first fp8 module): per micro-batch under
 * accumulation, as TE's autocast region is a micro-batch's forward. Current scaling takes
 * each quantization's scale from its own amax. Every quantization writes one row of fp8.csv.
 * MXFP8 (recipe = mxfp8, the CPU only: MXFP8BlockScaling in transformer_engine/common/recipe/
 * __init__.py, MXFP8Quantizer in transformer_engine/pytorch/tensor/mxfp8_tensor.py): every
 * operand is quantized twice, as TE makes an MXFP8 tensor's row-wise and column-wise data,
 * each with one E8M0 scale per 32 values along the reduction dimension of the GEMM that reads
 * it (backend.h's fp8_block_quantize): the row-wise copies "L.input@float8_e4m3fn" [M, I],
 * "L.weight@float8_e4m3fn" [O, I], "L.out.grad@<F8>" [M, O], blocks along the last dim; the
 * column-wise copies, stored transposed as the `.t` copies are but quantized on their own
 * blocks (so not the row-wise bytes transposed), "L.input@float8_e4m3fn.colwise" [I, M],
 * "L.weight@float8_e4m3fn.colwise" [I, O], "L.out.grad@<F8>.colwise" [O, M], blocks along
 * their last dim. y = xq . wq^T (row-wise both), dx = dyq . wt^T (the gradient's row-wise,
 * the weight's column-wise), dw = dyt . xt^T (both column-wise), through fp8_block_gemm, which
 * applies the block scales (no scale_inv). fp8.csv has a row per copy ("L.input",
 * "L.input.colwise", ...): amax the tensor's max |x|, scale the multiplier of the block that
 * holds it (2^-(e - 127) for the copy's largest E8M0 e: its smallest block multiplier).
 *
 * NVFP4 and MXFP4 (recipe = nvfp4 | mxfp4, the CPU only; docs/FP4.md) run as MXFP8 does, every
 * copy float4_e2m1fn ("L.input@float4_e2m1fn", "...colwise") through fp4_block_quantize and
 * fp4_block_gemm: under NVFP4 (TE's NVFP4BlockScaling) the weight's copies in 16x16 tiles
 * (disable_2d_quantization: 1x16), the column-wise copies of the input and the output
 * gradient through the RHT (disable_rht), both copies of the output gradient rounded
 * stochastically (disable_stochastic_rounding), each from its own seed (the case's seed, the
 * step, the layer, the operand, the copy). fp8.csv's scale: NVFP4's S_enc; MXFP4's
 * multiplier of the block holding the amax.
 */
#ifndef AMPSCOPE_FP8_LINEAR_H
#define AMPSCOPE_FP8_LINEAR_H

#include <stdio.h>

#include "ops/fp4_recipe.h"
#include "ops/fp8_recipe.h"
#include "autograd/run.h"

/* one fp8 layer's scaling state: delayed scaling's per tensor (unused under current), and
 * the scale inverses of its last forward's quantized copies, which its backward's GEMMs take */
typedef struct fp8_layer_state {
    fp8_delayed input, weight, grad;
    float input_scale_inv, weight_scale_inv;
    /* MXFP8: the E8M0 block scales of the last forward's column-wise copies (host memory);
     * NVFP4 and MXFP4: those copies' block scales (E4M3 or E8M0), with how each copy was
     * quantized and its per-tensor S_enc (1 under MXFP4) */
    uint8_t *input_colwise_e8m0, *weight_colwise_e8m0;
    fp4_quant_opts input_colwise_opts, weight_colwise_opts;
    float input_colwise_s_enc, weight_colwise_s_enc;
} fp8_layer_state;

typedef struct fp8_state {
    fp8_layer_state layer[CASE_MAX_LAYERS]; /* by layer index; those [fp8] chose */
} fp8_state;

/* NULL when be runs cfg's [fp8] (or cfg has none); else why not, in buf: the backend has no
 * float8 GEMMs, or for recipe = mxfp8 not both block-scaled ops (the CPU backend only: the
 * CUDA backend leaves them out). The CLI refuses such a case before it runs, at
 * cfg->fp8_line; fp8_begin ends a run with the same message. */
const char *fp8_refusal(const case_config *cfg, const backend *be, char *buf, size_t len);
/* r->fp8 for a case with [fp8] enabled (nothing otherwise); every quantization is a row of
 * the run's record (fp8.csv), when the observer keeps one. Ends the run when the backend
 * has no float8 GEMMs (for mxfp8: no block-scaled ones, which only the CPU backend has) or
 * memory runs out */
void fp8_begin(run *r);
/* frees r->fp8 (NULL does nothing) */
void fp8_free(run *r);
/* whether layer l runs as te.Linear */
bool fp8_linear_chosen(const run *r, const layer_spec *l);
/* te.Linear's forward of layer l: a new reference to L.out */
tensor *fp8_linear_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b);
/* delayed scaling: the forward tensors' (input, weight) states updated after a forward,
 * the gradients' after a backward; nothing under current scaling or without [fp8] */
void fp8_forward_done(run *r);
void fp8_backward_done(run *r);

#endif
