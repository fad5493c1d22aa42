/* fp8_linear.c: te.Linear under fp8_autocast for the linear layers [fp8] chose, its scaling
 * state and fp8.csv (see fp8_linear.h). The node of an fp8 layer keeps the transposed
 * quantized copies its backward's GEMMs read (saved[0]: the input's [I, M], saved[1]: the
 * weight's [I, O]; under MXFP8 the column-wise copies, whose E8M0 bytes the layer's state
 * keeps) and its layer index (index). */
#include "fp8_linear.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/autocast.h"
#include "core/format.h"
#include "layer.h"

static float fp8_max_of(dtype dt) { return format_of(dt)->largest; }

/* the float8 dtype of the output gradient: E5M2 under hybrid, E4M3 under e4m3 */
static dtype grad_dtype(const case_config *cfg)
{
    return cfg->fp8_format == FP8_FORMAT_HYBRID ? DTYPE_FLOAT8_E5M2 : DTYPE_FLOAT8_E4M3FN;
}

const char *fp8_refusal(const case_config *cfg, const backend *be, char *buf, size_t len)
{
    if (!cfg->fp8)
        return NULL;
    if (FP8_RECIPE_IS_FP4(cfg->fp8_recipe)) {
        if (backend_supports(be, BACKEND_OP_fp4_block_quantize, DTYPE_FLOAT4_E2M1FN) &&
            backend_supports(be, BACKEND_OP_fp4_block_gemm, DTYPE_FLOAT4_E2M1FN))
            return NULL;
        snprintf(buf, len,
                 "recipe = %s on the %s backend (%s): NVFP4 and MXFP4 run on the CPU only in "
                 "ampscope (cuBLASLt's FP4 GEMMs need sm_100)\n---> HINT: run the case with "
                 "--device cpu",
                 cfg->fp8_recipe == FP8_RECIPE_NVFP4 ? "nvfp4" : "mxfp4", be->name, be->device);
        return buf;
    }
    if (cfg->fp8_recipe == FP8_RECIPE_MXFP8) {
        if (backend_supports(be, BACKEND_OP_fp8_block_quantize, DTYPE_FLOAT8_E4M3FN) &&
            backend_supports(be, BACKEND_OP_fp8_block_gemm, DTYPE_FLOAT8_E4M3FN))
            return NULL;
        snprintf(buf, len,
                 "recipe = mxfp8 on the %s backend (%s): MXFP8 runs on the CPU only in ampscope "
                 "(cuBLASLt's MXFP8 GEMMs need sm_100)\n---> HINT: run the case with --device cpu",
                 be->name, be->device);
        return buf;
    }
    if (backend_supports(be, BACKEND_OP_fp8_gemm, DTYPE_FLOAT8_E4M3FN))
        return NULL;
    snprintf(buf, len,
             "the %s backend (%s) has no float8 GEMMs: cuBLASLt's need compute capability 8.9 "
             "or newer (Ada, Hopper)\n---> HINT: run the case with --device cpu",
             be->name, be->device);
    return buf;
}

void fp8_begin(run *r)
{
    const case_config *cfg = r->cfg;
    char why[512];
    if (fp8_refusal(cfg, r->be, why, sizeof why))
        run_fail(r, "%s", why);
    if (!cfg->fp8)
        return;
    r->fp8 = calloc(1, sizeof *r->fp8);
    if (!r->fp8)
        run_fail(r, "out of host memory for [fp8]'s scaling state");
    if (cfg->fp8_recipe != FP8_RECIPE_DELAYED)
        return;
    int len = (int)cfg->fp8_amax_history_len, margin = (int)cfg->fp8_margin;
    fp8_amax_algo algo = (fp8_amax_algo)cfg->fp8_amax_compute_algo;
    float e4m3 = fp8_max_of(DTYPE_FLOAT8_E4M3FN), g = fp8_max_of(grad_dtype(cfg));
    for (int i = 0; i < cfg->n_layers; i++) {
        fp8_layer_state *s = &r->fp8->layer[i];
        if (cfg->fp8_layer[i] && (!fp8_delayed_init(&s->input, len, algo, margin, e4m3) ||
                                  !fp8_delayed_init(&s->weight, len, algo, margin, e4m3) ||
                                  !fp8_delayed_init(&s->grad, len, algo, margin, g)))
            run_fail(r, "out of host memory for [fp8]'s amax histories");
    }
}

void fp8_free(run *r)
{
    if (!r->fp8)
        return;
    for (int i = 0; i < CASE_MAX_LAYERS; i++) {
        fp8_delayed_free(&r->fp8->layer[i].input);
        fp8_delayed_free(&r->fp8->layer[i].weight);
        fp8_delayed_free(&r->fp8->layer[i].grad);
        free(r->fp8->layer[i].input_colwise_e8m0);
        free(r->fp8->layer[i].weight_colwise_e8m0);
    }
    free(r->fp8);
    r->fp8 = NULL;
}

bool fp8_linear_chosen(const run *r, const layer_spec *l)
{
    return r->fp8 && r->cfg->fp8_layer[l - r->cfg->layers];
}

static void update_all(run *r, bool forward)
{
    const case_config *cfg = r->cfg;
    if (!r->fp8 || cfg->fp8_recipe != FP8_RECIPE_DELAYED)
        return;
    for (int i = 0; i < cfg->n_layers; i++) {
        fp8_layer_state *s = &r->fp8->layer[i];
        if (!cfg->fp8_layer[i])
            continue;
        if (forward) {
            fp8_delayed_update(&s->input);
            fp8_delayed_update(&s->weight);
        } else {
            fp8_delayed_update(&s->grad);
        }
    }
}

void fp8_forward_done(run *r) { update_all(r, true); }
void fp8_backward_done(run *r) { update_all(r, false); }

/* fp8.csv's row of one quantization of tensor `what` (with `suffix`: ".colwise" for MXFP8's
 * column-wise copy), in the run's record when it keeps one */
static void keep_row(run *r, const char *what, const char *suffix, dtype format, float amax,
                     float scale, int64_t saturated, int64_t underflow)
{
    run_record *rec = r->obs->rec;
    if (!rec)
        return;
    char name[TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s%s", what, suffix);
    record_fp8 *row = record_add_fp8(rec);
    if (row)
        *row = (record_fp8){.step = r->obs->step,
                            .tensor = record_intern(rec, name),
                            .format = format,
                            .amax = amax,
                            .scale = scale,
                            .saturated = saturated,
                            .underflow = underflow};
}

/* q, a quantized copy of x, observed in role with st's counts of its rounding */
static void observe_copy(run *r, tensor *x, tensor *q, tensor_role role, round_stats *st)
{
    const tensor *src = x;
    tensor_why(q, DTYPE_REASON_FP8, "te.Linear", &src, 1);
    observe_tensor(r->obs, q, role, r->counting ? st : NULL);
}

/* the largest of n scale bytes (E8M0: the block holding the amax has it) */
static uint8_t largest_byte(const uint8_t *b, int64_t n)
{
    uint8_t top = 0;
    for (int64_t i = 0; i < n; i++)
        top = b[i] > top ? b[i] : top;
    return top;
}

/* q (and qt, when not NULL) = float8(x * scale), the scale from d's state (delayed: x's amax
 * recorded) or from x's own amax (current); q observed in role, one row of fp8.csv named
 * `what`. Returns the scale inverse the GEMMs take: 1 / scale in float32, as TE stores it. */
static float quantize(run *r, fp8_delayed *d, tensor *x, tensor *q, tensor *qt, const char *what,
                      tensor_role role)
{
    backend *be = r->be;
    float amax = 0.0f; /* the counting backend leaves it */
    run_check(r, be->amax(be, x, &amax));
    float scale;
    if (r->cfg->fp8_recipe == FP8_RECIPE_DELAYED) {
        scale = d->scale;
        fp8_delayed_record(d, amax);
    } else {
        scale = fp8_scale_from_amax(amax, fp8_max_of(q->dtype), false);
    }
    round_stats st; /* counted also with observation off: fp8.csv's underflow */
    round_stats_init(&st);
    int64_t saturated = 0;
    run_check(r, be->fp8_quantize(be, x, scale, true, q, qt, &saturated, &st));
    observe_copy(r, x, q, role, &st);
    keep_row(r, what, "", q->dtype, amax, scale, saturated, st.counts.underflow);
    return 1.0f / scale;
}

/* MXFP8: q = x's block-quantized copy, row-wise or column-wise (fp8_block_quantize), its
 * E8M0 bytes into e8m0 (calloc'd here: the counting backend leaves them; the caller frees);
 * q observed in role, one row of fp8.csv named `what` (".colwise" added for that copy) with
 * the scale of the block holding x's amax */
static uint8_t *quantize_mx(run *r, tensor *x, bool colwise, tensor *q, const char *what,
                            tensor_role role)
{
    backend *be = r->be;
    float amax = 0.0f;
    run_check(r, be->amax(be, x, &amax));
    int64_t blocks = x->numel / FP8_MX_BLOCK;
    uint8_t *e8m0 = calloc((size_t)blocks, 1);
    if (!e8m0)
        run_fail(r, "out of host memory for %s's MXFP8 block scales", what);
    round_stats st;
    round_stats_init(&st);
    int64_t saturated = 0;
    if (be->fp8_block_quantize(be, x, colwise, q, e8m0, &saturated, &st)) {
        free(e8m0);
        run_check(r, -1);
    }
    observe_copy(r, x, q, role, &st);
    keep_row(r, what, colwise ? ".colwise" : "", q->dtype, amax,
             fp8_e8m0_multiplier(largest_byte(e8m0, blocks)),
             saturated, st.counts.underflow);
    return e8m0;
}

/* the 4-bit operands of a layer, for their seeds */
typedef enum fp4_operand { FP4_INPUT, FP4_WEIGHT, FP4_GRAD } fp4_operand;

/* how operand op's row-wise or column-wise copy is quantized under the case's 4-bit recipe
 * (fp8_linear.h), its seed from the case's, the step, the layer and the copy */
static fp4_quant_opts fp4_opts(const run *r, int layer, fp4_operand op, bool colwise)
{
    const case_config *cfg = r->cfg;
    bool nv = cfg->fp8_recipe == FP8_RECIPE_NVFP4;
    uint64_t k = (((uint64_t)r->obs->step * CASE_MAX_LAYERS + (uint64_t)layer) * 3 + op) * 2 +
                 colwise;
    return (fp4_quant_opts){
        .recipe = nv ? FP4_NVFP4 : FP4_MXFP4,
        .colwise = colwise,
        .block_2d = nv && op == FP4_WEIGHT && !cfg->fp4_disable_2d_quantization,
        .rht = nv && colwise && op != FP4_WEIGHT && !cfg->fp4_disable_rht,
        .stochastic = nv && op == FP4_GRAD && !cfg->fp4_disable_stochastic_rounding,
        .seed = cfg->seed * 0x9e3779b97f4a7c15ull + k * 0xbf58476d1ce4e5b9ull,
    };
}

/* NVFP4 and MXFP4: q = x's copy quantized as o says (fp4_block_quantize), its block scales
 * (calloc'd here: the counting backend leaves them; the caller frees) and *s_enc; q observed
 * in role, one row of fp8.csv named `what` (".colwise" added for that copy) */
static uint8_t *quantize_fp4(run *r, tensor *x, const fp4_quant_opts *o, tensor *q,
                             const char *what, tensor_role role, float *s_enc)
{
    backend *be = r->be;
    uint8_t *scales = calloc((size_t)(x->numel / FP4_NV_BLOCK), 1);
    if (!scales)
        run_fail(r, "out of host memory for %s's block scales", what);
    round_stats st;
    round_stats_init(&st);
    fp4_quant_stats out = {.s_enc = 1.0f};
    if (be->fp4_block_quantize(be, x, o, q, scales, &out, &st)) {
        free(scales);
        run_check(r, -1);
    }
    observe_copy(r, x, q, role, &st);
    keep_row(r, what, o->colwise ? ".colwise" : "", q->dtype, out.amax,
             o->recipe == FP4_NVFP4 ? out.s_enc
                                    : fp4_mx_multiplier(largest_byte(scales, out.blocks)),
             out.saturated,
             st.counts.underflow);
    *s_enc = out.s_enc;
    return scales;
}

/* a forward operand's two 4-bit copies: q row-wise (its scales returned, its S_enc in
 * *s_enc), and qt, when not NULL, column-wise, whose scales, options and S_enc replace the
 * layer state's (*col_scales, *col_opts, *col_s_enc) for the backward */
static uint8_t *quantize_fp4_copies(run *r, int layer, fp4_operand op, tensor *x, tensor *q,
                                    tensor *qt, const char *what, float *s_enc,
                                    uint8_t **col_scales, fp4_quant_opts *col_opts,
                                    float *col_s_enc)
{
    fp4_quant_opts o = fp4_opts(r, layer, op, false);
    uint8_t *scales = quantize_fp4(r, x, &o, q, what, ROLE_CAST, s_enc);
    free(*col_scales);
    *col_opts = fp4_opts(r, layer, op, true);
    *col_scales = qt ? quantize_fp4(r, x, col_opts, qt, what, ROLE_CAST, col_s_enc) : NULL;
    return scales;
}

/* "<name>@<dtype>" */
static void copy_name(char *buf, size_t len, const char *name, dtype dt)
{
    snprintf(buf, len, "%s@%s", name, dtype_name(dt));
}

/* a [rows, cols] float8 tensor: a transposed copy */
static tensor *matrix(run *r, const char *name, dtype dt, int64_t rows, int64_t cols,
                      mem_category cat)
{
    int64_t shape[2] = {rows, cols};
    return run_tensor(r, name, dt, 2, shape, cat);
}

/* a backward GEMM's quantized operand: its block scales (MXFP8, NVFP4, MXFP4), how it was
 * quantized and its S_enc (4-bit), its scale inverse (per-tensor float8) */
typedef struct gemm_operand {
    tensor *q;
    const uint8_t *scales;
    const fp4_quant_opts *opts;
    float s_enc, scale_inv;
} gemm_operand;

/* y = a . b^T under the case's recipe, as the backward's GEMMs run it (no bias) */
static int backward_gemm(run *r, gemm_operand a, gemm_operand b, tensor *y, round_stats *st)
{
    backend *be = r->be;
    fp8_recipe_kind k = r->cfg->fp8_recipe;
    if (FP8_RECIPE_IS_FP4(k))
        return be->fp4_block_gemm(be, a.q, a.scales, a.opts, a.s_enc, b.q, b.scales, b.opts,
                                  b.s_enc, NULL, y, st);
    if (k == FP8_RECIPE_MXFP8)
        return be->fp8_block_gemm(be, a.q, a.scales, b.q, b.scales, NULL, y, st);
    return be->fp8_gemm(be, a.q, b.q, a.scale_inv, b.scale_inv, NULL, false, y, st);
}

static void fp8_linear_backward(run *r, node *n)
{
    backend *be = r->be;
    const case_config *cfg = r->cfg;
    const layer_spec *l = &cfg->layers[n->index];
    fp8_layer_state *s = &r->fp8->layer[n->index];
    tensor *dy = n->grad, *xt = n->saved[0], *wt = n->saved[1];
    int64_t out = l->out, rows = dy->numel / out;
    round_stats st;
    if (node_needs_grad(n, 2)) { /* from dy itself, before it is quantized */
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, reduce_channel_sum(be, dy, rows, 1, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
    bool dgrad = node_needs_grad(n, 0), wgrad = node_needs_grad(n, 1);
    bool fp4 = FP8_RECIPE_IS_FP4(cfg->fp8_recipe);
    bool mx = cfg->fp8_recipe == FP8_RECIPE_MXFP8 || fp4; /* column-wise copies */
    dtype gdt = fp4 ? DTYPE_FLOAT4_E2M1FN : grad_dtype(cfg);
    char name[TENSOR_NAME_MAX + 32], what[TENSOR_NAME_MAX];
    snprintf(what, sizeof what, "%s.out.grad", l->name);
    copy_name(name, sizeof name, what, gdt);
    tensor *dyq = run_tensor_like(r, dy, name, gdt, MEM_GRADS);
    strcat(name, mx ? ".colwise" : ".t");
    tensor *dyt = wgrad ? matrix(r, name, gdt, out, rows, MEM_GRADS) : NULL;
    float g_inv = 0.0f;
    uint8_t *g_e8m0 = NULL, *gt_e8m0 = NULL; /* MXFP8: dyq's and dyt's block scales */
    fp4_quant_opts go = fp4_opts(r, n->index, FP4_GRAD, false);
    fp4_quant_opts gto = fp4_opts(r, n->index, FP4_GRAD, true);
    float g_senc = 1.0f, gt_senc = 1.0f;
    if (fp4) {
        g_e8m0 = quantize_fp4(r, dy, &go, dyq, what, ROLE_GRAD_CAST, &g_senc);
        gt_e8m0 = dyt ? quantize_fp4(r, dy, &gto, dyt, what, ROLE_GRAD_CAST, &gt_senc) : NULL;
    } else if (mx) {
        g_e8m0 = quantize_mx(r, dy, false, dyq, what, ROLE_GRAD_CAST);
        gt_e8m0 = dyt ? quantize_mx(r, dy, true, dyt, what, ROLE_GRAD_CAST) : NULL;
    } else {
        g_inv = quantize(r, &s->grad, dy, dyq, dyt, what, ROLE_GRAD_CAST);
    }
    if (dgrad) { /* dx [M, I] = dyq [M, O] . wt [I, O]^T */
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, backward_gemm(r, (gemm_operand){dyq, g_e8m0, &go, g_senc, g_inv},
                                   (gemm_operand){wt, s->weight_colwise_e8m0,
                                                  &s->weight_colwise_opts,
                                                  s->weight_colwise_s_enc, s->weight_scale_inv},
                                   dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    free(g_e8m0);
    tensor_release(&r->pool, dyq);
    if (wgrad) { /* dw [O, I] = dyt [O, M] . xt [I, M]^T, in dy's dtype, then the weight's */
        char gname[TENSOR_NAME_MAX + 8];
        node_grad_name(r, n, 1, gname, sizeof gname);
        bool same = n->in[1].dtype == dy->dtype;
        if (!same)
            copy_name(name, sizeof name, gname, dy->dtype);
        tensor *dw = same ? node_grad_tensor(r, n, 1)
                          : run_tensor_like(r, &n->in[1], name, dy->dtype, MEM_GRADS);
        round_stats *stp = run_stats(r, &st);
        run_check(r, backward_gemm(r, (gemm_operand){dyt, gt_e8m0, &gto, gt_senc, g_inv},
                                   (gemm_operand){xt, s->input_colwise_e8m0,
                                                  &s->input_colwise_opts,
                                                  s->input_colwise_s_enc, s->input_scale_inv},
                                   dw, stp));
        if (same) {
            node_give_grad(r, n, 1, dw, stp);
        } else { /* the GEMM's output in its activation dtype, dy's */
            const tensor *from = dy;
            tensor_why(dw, DTYPE_REASON_INPUT, "te.Linear", &from, 1);
            observe_tensor(r->obs, dw, ROLE_GRAD_CAST, stp);
            give_grad_as_is(r, n, 1, dw);
            tensor_release(&r->pool, dw);
        }
    }
    free(gt_e8m0);
    tensor_release(&r->pool, dyt);
}

tensor *fp8_linear_forward(run *r, const layer_spec *l, tensor *x, tensor *w, tensor *b)
{
    backend *be = r->be;
    fp8_layer_state *s = &r->fp8->layer[l - r->cfg->layers];
    /* TE: inputmat = cast_if_needed(inp, activation_dtype); bias likewise */
    const autocast_op *ac = layer_def_of(l->kind)->autocast; /* linear's */
    tensor *xa = autocast_arg(r, ac, x);
    tensor *ba = b ? autocast_arg(r, ac, b) : NULL;
    int64_t in = l->in, out = l->out, rows = xa->numel / in;
    char name[TENSOR_NAME_MAX + 32], what[TENSOR_NAME_MAX];
    bool fp4 = FP8_RECIPE_IS_FP4(r->cfg->fp8_recipe);
    dtype e4m3 = fp4 ? DTYPE_FLOAT4_E2M1FN : DTYPE_FLOAT8_E4M3FN; /* every forward copy's */
    bool mx = r->cfg->fp8_recipe == FP8_RECIPE_MXFP8 || fp4; /* column-wise copies */
    int li = (int)(l - r->cfg->layers);
    fp4_quant_opts xo = fp4_opts(r, li, FP4_INPUT, false), wo = fp4_opts(r, li, FP4_WEIGHT, false);
    float x_senc = 1.0f, w_senc = 1.0f;
    const char *t_suffix = mx ? ".colwise" : ".t";
    /* the input: rowwise for this GEMM, its transpose for wgrad (weights require grad) */
    snprintf(what, sizeof what, "%s.input", l->name);
    copy_name(name, sizeof name, what, e4m3);
    tensor *xq = run_tensor_like(r, xa, name, e4m3, MEM_ACTIVATIONS);
    strcat(name, t_suffix);
    tensor *xt = w->requires_grad ? matrix(r, name, e4m3, in, rows, MEM_ACTIVATIONS) : NULL;
    uint8_t *x_e8m0 = NULL, *w_e8m0 = NULL; /* MXFP8: xq's and wq's block scales */
    if (fp4) { /* the column-wise copies' scales stay for the backward */
        x_e8m0 = quantize_fp4_copies(r, li, FP4_INPUT, xa, xq, xt, what, &x_senc,
                                     &s->input_colwise_e8m0, &s->input_colwise_opts,
                                     &s->input_colwise_s_enc);
    } else if (mx) { /* the column-wise copies' scales stay for the backward */
        x_e8m0 = quantize_mx(r, xa, false, xq, what, ROLE_CAST);
        free(s->input_colwise_e8m0);
        s->input_colwise_e8m0 = xt ? quantize_mx(r, xa, true, xt, what, ROLE_CAST) : NULL;
    } else {
        s->input_scale_inv = quantize(r, &s->input, xa, xq, xt, what, ROLE_CAST);
    }
    /* the weight, from the parameter itself; its transpose for dgrad */
    snprintf(what, sizeof what, "%s.weight", l->name);
    copy_name(name, sizeof name, what, e4m3);
    tensor *wq = run_tensor_like(r, w, name, e4m3, MEM_AUTOCAST_CACHE);
    strcat(name, t_suffix);
    tensor *wt = xa->requires_grad ? matrix(r, name, e4m3, in, out, MEM_AUTOCAST_CACHE) : NULL;
    if (fp4) {
        w_e8m0 = quantize_fp4_copies(r, li, FP4_WEIGHT, w, wq, wt, what, &w_senc,
                                     &s->weight_colwise_e8m0, &s->weight_colwise_opts,
                                     &s->weight_colwise_s_enc);
    } else if (mx) {
        w_e8m0 = quantize_mx(r, w, false, wq, what, ROLE_CAST);
        free(s->weight_colwise_e8m0);
        s->weight_colwise_e8m0 = wt ? quantize_mx(r, w, true, wt, what, ROLE_CAST) : NULL;
    } else {
        s->weight_scale_inv = quantize(r, &s->weight, w, wq, wt, what, ROLE_CAST);
    }

    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, xa->shape, sizeof shape);
    shape[xa->ndim - 1] = out;
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, xa->dtype, xa->ndim, shape, MEM_ACTIVATIONS);
    tensor *operands[2] = {xa, ba}; /* the surrounding dtype: autocast's, else the input's */
    autocast_why(r, y, ac, operands, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, fp4  ? be->fp4_block_gemm(be, xq, x_e8m0, &xo, x_senc, wq, w_e8m0, &wo, w_senc,
                                           ba, y, stp)
                 : mx ? be->fp8_block_gemm(be, xq, x_e8m0, wq, w_e8m0, ba, y, stp)
                      : be->fp8_gemm(be, xq, wq, s->input_scale_inv, s->weight_scale_inv, ba,
                                     true, y, stp));
    free(x_e8m0);
    free(w_e8m0);
    tensor *args[3] = {xa, w, ba};
    node *n = tape_record(r, "linear", fp8_linear_backward, y, args, b ? 3 : 2);
    if (n) {
        n->index = l - r->cfg->layers;
        if (xt)
            tape_save(n, 0, xt);
        if (wt)
            tape_save(n, 1, wt);
    }
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, xq);
    tensor_release(&r->pool, wq);
    tensor_release(&r->pool, xt);
    tensor_release(&r->pool, wt);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, ba);
    return y;
}
