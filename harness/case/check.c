/*
 * case/check.c: the checks across sections, once every section is read: the shape walk
 * over the layers (each kind's shape rule, filling out_shape, and the memory limits), the
 * loss against the target, master weights against params, observe against steps, the
 * case's default name, and the .npy files of [init] and [data] against the shapes the
 * model needs.
 */
#include "parse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"

static int64_t numel(int64_t batch, int ndim, const int64_t *shape)
{
    int64_t n = batch;
    for (int i = 0; i < ndim; i++)
        n = size_mul(n, shape[i]);
    return n;
}

static int64_t layer_params(const layer_spec *l)
{
    layer_param ps[LAYER_MAX_PARAMS];
    int n = layer_def_of(l->kind)->params(l, ps);
    int64_t total = 0;
    for (int k = 0; k < n; k++)
        total = size_add(total, numel(1, ps[k].ndim, ps[k].shape));
    return total;
}

/* Where a shape rule's messages go: those about the input on `at` (the data shape, for the
 * first layer when one is given, else the layer), those about the layer on its entry. */
typedef struct shape_sink {
    shape_check sc; /* first: the rule's callback receives &sink.sc */
    parse_ctx *c;
    entry *at, *le;
} shape_sink;

static void sink_fail(shape_check *sc, shape_blame who, const char *msg)
{
    shape_sink *s = (shape_sink *)sc;
    switch (who) {
    case SHAPE_INPUT:
        err_at(s->c, s->at, "%s%s = %s: %s",
               s->at == s->le ? "" : "[data] shape does not match the first layer: ", s->le->key,
               s->le->value, msg);
        break;
    case SHAPE_LAYER:
        err_at(s->c, s->le, "%s = %s: %s", s->le->key, s->le->value, msg);
        break;
    }
}

/* Token ids (int64) go to the kinds that read them, and only there. */
static bool check_tokens(parse_ctx *c, const layer_spec *l, entry *le)
{
    const case_config *cfg = c->cfg;
    const layer_def *d = layer_def_of(l->kind);
    bool reads_input = false;
    for (int k = 0; k < l->n_inputs; k++)
        reads_input |= l->inputs[k] == LAYER_INPUT;
    if (d->reads_tokens && !(reads_input && cfg->input_tokens)) {
        err_at(c, le,
               "%s = %s: %s reads int64 token ids: from=input, with input = tokens "
               "vocab=V or an int64 file",
               le->key, le->value, d->name);
        return false;
    }
    if (d->reads_tokens && cfg->input == INPUT_TOKENS && cfg->vocab > l->in) {
        err_at(c, le,
               "%s = %s: input = tokens vocab=%" PRId64 " draws ids the embedding's %" PRId64
               " rows do not have (index out of range in self)",
               le->key, le->value, cfg->vocab, l->in);
        return false;
    }
    if (!d->reads_tokens && reads_input && cfg->input_tokens) {
        err_at(c, le,
               "%s = %s: the input is int64 token ids, which %s does not take (an "
               "embedding does)",
               le->key, le->value, d->name);
        return false;
    }
    return true;
}

/* The input is token ids when an embedding reads it (`input = tokens`, or an int64 .npy
 * file); then input_dtype, a float dtype, is refused. */
static void find_tokens(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    bool embedded = false;
    for (int i = 0; c->model_ok && i < cfg->n_layers; i++)
        for (int k = 0; k < cfg->layers[i].n_inputs; k++)
            embedded |= cfg->layers[i].inputs[k] == LAYER_INPUT &&
                        layer_def_of(cfg->layers[i].kind)->reads_tokens;
    cfg->input_tokens = cfg->input == INPUT_TOKENS || (cfg->input == INPUT_FILE && embedded);
    entry *de = find_entry(c, SEC_DATA, "input_dtype");
    if (cfg->input_tokens) {
        cfg->input_dtype = DTYPE_INT64;
        if (de && !de->failed)
            err_at(c, de, "input_dtype is not for token input: token ids are int64");
    }
}

/* The inputs of l whose shapes it reads: all but one read for its dtype only (`to q.dtype`,
 * the last) */
static int shaped_inputs(const layer_spec *l)
{
    const layer_def *d = layer_def_of(l->kind);
    for (int a = 0; a < d->n_args; a++)
        if (d->args[a].min == KIND_ARG_DTYPE &&
            *(const int64_t *)((const char *)l + d->args[a].offset) == KIND_DTYPE_OF_INPUT)
            return l->n_inputs - 1;
    return l->n_inputs;
}

/* Walks the layers from the data shape, filling out_shape and checking the memory limits. */
static void walk_shapes(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    entry *shape_e = find_entry(c, SEC_DATA, "shape");
    if (!c->model_ok || cfg->n_layers == 0 || (shape_e && shape_e->failed))
        return;
    layer_shape in;
    const layer_def *first = layer_def_of(cfg->layers[0].kind);
    if (!shape_e && !first->input_shape(&cfg->layers[0], &in)) {
        report(c, c->sec_line[SEC_DATA], NULL, "[data] shape is required: the first layer is %s",
               first->name);
        return;
    }
    if (cfg->batch <= 0) /* missing or refused */
        return;
    if (!shape_e) {
        cfg->sample_ndim = in.ndim;
        memcpy(cfg->sample_shape, in.dim, sizeof(int64_t) * (size_t)in.ndim);
    }
    layer_shape x;
    x.ndim = cfg->sample_ndim;
    memcpy(x.dim, cfg->sample_shape, sizeof x.dim);
    if (numel(cfg->batch, x.ndim, x.dim) > MEMORY_LIMIT) {
        char s[128];
        shape_text(&x, s, sizeof s);
        entry *at = shape_e ? shape_e : find_entry(c, SEC_DATA, "batch");
        err_at(c, at,
               "the input batch %" PRId64 " x %s cannot fit in memory (more than 2^40 "
               "elements)",
               cfg->batch, s);
        return;
    }
    const layer_shape data = x;
    int64_t params = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        layer_spec *l = &cfg->layers[i];
        entry *le = c->layer_entry[i];
        shape_sink sink = {{sink_fail}, c, i == 0 && shape_e ? shape_e : le, le};
        layer_shape in[LAYER_MAX_INPUTS], y;
        for (int k = 0; k < l->n_inputs; k++) {
            int j = l->inputs[k];
            if (j == LAYER_INPUT) {
                in[k] = data;
                continue;
            }
            in[k].ndim = cfg->layers[j].out_ndim;
            memcpy(in[k].dim, cfg->layers[j].out_shape, sizeof in[k].dim);
            if (cfg->layers[j].out_whole && k < shaped_inputs(l) &&
                !layer_def_of(l->kind)->whole_inputs) {
                err_at(c, le,
                       "%s = %s: %s has no batch dim (a %s), and %s takes activations "
                       "[B, ...]",
                       le->key, le->value, cfg->layers[j].name,
                       layer_def_of(cfg->layers[j].kind)->name, layer_def_of(l->kind)->name);
                return;
            }
            l->whole_inputs |= cfg->layers[j].out_whole ? 1u << k : 0;
        }
        /* no batch dim: a kind that takes no input, or one whose inputs have none */
        int n_shaped = shaped_inputs(l);
        unsigned all = (1u << n_shaped) - 1;
        bool whole = n_shaped == 0 || (l->whole_inputs & all) == all;
        if (!check_tokens(c, l, le) || !layer_def_of(l->kind)->shape(l, in, &y, &sink.sc))
            return;
        if (whole && i == cfg->n_layers - 1) {
            err_at(c, le,
                   "%s = %s: the model's output has no batch dim; the last layer must give "
                   "[B, ...]",
                   le->key, le->value);
            return;
        }
        x = y;
        if (l->tied < 0)
            params = size_add(params, layer_params(l));
        if (params > MEMORY_LIMIT) {
            err_at(c, le,
                   "%s = %s: the model's parameters cannot fit in memory (more than 2^40 "
                   "elements)",
                   le->key, le->value);
            return;
        }
        if (numel(whole ? 1 : cfg->batch, x.ndim, x.dim) > MEMORY_LIMIT) {
            char s[128];
            shape_text(&x, s, sizeof s);
            err_at(c, le,
                   "%s = %s: its output batch %" PRId64 " x %s cannot fit in memory "
                   "(more than 2^40 elements)",
                   le->key, le->value, cfg->batch, s);
            return;
        }
        l->out_ndim = x.ndim;
        memcpy(l->out_shape, x.dim, sizeof l->out_shape);
        l->out_whole = whole;
    }
    c->shapes_ok = true;
}

/* "a or b": the losses whose target is class labels; the caller frees it */
static char *class_losses(void)
{
    const char *names[LOSS_KIND_COUNT];
    int n = 0;
    for (int k = 0; k < LOSS_KIND_COUNT; k++)
        if (loss_def_of((loss_kind)k)->class_target)
            names[n++] = loss_def_of((loss_kind)k)->name;
    return join_names(names, n, " or ");
}

static void check_target(parse_ctx *c)
{
    const case_config *cfg = c->cfg;
    const loss_def *loss = loss_def_of(cfg->loss);
    entry *te = find_entry(c, SEC_DATA, "target"), *le = find_entry(c, SEC_TRAIN, "loss");
    entry *at = te ? te : le;
    int line = at ? at->line : c->sec_line[SEC_DATA];
    const char *set = at ? at->set : NULL;
    if ((te && te->failed) || (le && le->failed))
        return;
    if (!loss->class_target && cfg->target == TARGET_CLASSES) {
        char *who = class_losses();
        report(c, line, set,
               "loss = %s needs target = randn, randn_like or file (target = "
               "classes is for %s)",
               loss->name, who);
        free(who);
    } else if (loss->class_target &&
               (cfg->target == TARGET_RANDN || cfg->target == TARGET_RANDN_LIKE)) {
        report(c, line, set, "loss = %s needs target = classes or file", loss->name);
    } else if (cfg->target == TARGET_CLASSES && c->shapes_ok &&
               cfg->layers[cfg->n_layers - 1].out_ndim > 2) {
        const layer_spec *last = &cfg->layers[cfg->n_layers - 1];
        char s[128];
        shape_text(&(layer_shape){last->out_ndim,
                                  {last->out_shape[0], last->out_shape[1], last->out_shape[2]}},
                   s, sizeof s);
        report(c, line, set,
               "target = classes needs a 1-d model output, or [T, V] (classes over the "
               "last dim), not %s (end the model with flatten and linear)",
               s);
    }
}

static void check_observe(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    entry *e = find_entry(c, SEC_CASE, "observe");
    if (e && !e->failed && !entry_failed(c, SEC_TRAIN, "steps")) {
        for (int i = 0; i < cfg->n_observe_steps; i++) {
            if (cfg->observe_steps[i] >= cfg->steps) {
                err_at(c, e,
                       "observe step %" PRId64 " is past the last step, %" PRId64
                       " (steps = %" PRId64 ")",
                       cfg->observe_steps[i], cfg->steps - 1, cfg->steps);
                break;
            }
        }
    } else if (!e && cfg->steps <= 10) {
        for (int64_t s = 0; s < cfg->steps; s++)
            cfg->observe_steps[s] = s;
        cfg->n_observe_steps = (int)cfg->steps;
    } else if (!e) {
        cfg->observe_every = cfg->steps / 10 + (cfg->steps % 10 != 0);
    }
}

/* "3x4" for a shape; "scalar" for none */
static void shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? "x%" PRId64 : "%" PRId64, shape[i]);
    if (ndim == 0)
        snprintf(buf, len, "scalar");
}

/* Why a data file's first dim is more than batch, or "" */
static const char *samples_note(const case_config *cfg)
{
    static char note[256];
    note[0] = '\0';
    if (cfg->accumulate > 1 && cfg->world_size > 1) /* model_file_rows's layout */
        snprintf(note, sizeof note,
                 " (accumulate = %" PRId64 " micro-batches x world_size = %" PRId64
                 " ranks of batch %" PRId64 ": sample i of micro-batch k of rank r is row "
                 "(k * batch + i) * world_size + r)",
                 cfg->accumulate, cfg->world_size, cfg->batch);
    else if (cfg->accumulate > 1)
        snprintf(note, sizeof note,
                 " (accumulate = %" PRId64 " micro-batches of batch %" PRId64 ")", cfg->accumulate,
                 cfg->batch);
    else if (cfg->world_size > 1)
        snprintf(note, sizeof note, " (world_size = %" PRId64 " ranks of batch %" PRId64 ")",
                 cfg->world_size, cfg->batch);
    return note;
}

/* Reads an .npy file a key names and checks it holds what the key needs: float data of the
 * given shape, or (labels) int64 class indices in [0, classes). */
static void check_npy(parse_ctx *c, entry *e, const char *path, int ndim, const int64_t *shape,
                      int64_t classes, const char *note)
{
    npy_array a;
    char err[600], got[128], want[128];
    if (npy_read(path, &a, NULL, err, sizeof err)) {
        err_at(c, e, "%s", err);
        return;
    }
    bool same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = a.shape[i] == shape[i];
    shape_str(a.ndim, a.shape, got, sizeof got);
    shape_str(ndim, shape, want, sizeof want);
    if (!same) {
        err_at(c, e, "%s: shape %s, expected %s%s", path, got, want, note);
    } else if (classes > 0 && a.dt != DTYPE_INT64) {
        err_at(c, e, "%s: %s values, expected int64 class labels ('<i8')", path, dtype_name(a.dt));
    } else if (classes == 0 && a.dt == DTYPE_INT64) {
        err_at(c, e, "%s: int64 values, expected floats ('<f4', '<f2' or '<f8')", path);
    } else {
        for (int64_t i = 0; classes > 0 && i < a.numel; i++) {
            int64_t v = ((const int64_t *)a.data)[i];
            if (v < 0 || v >= classes) {
                err_at(c, e,
                       "%s: label %" PRId64 " at index %" PRId64 " is out of bounds for "
                       "%" PRId64 " classes",
                       path, v, i, classes);
                break;
            }
        }
    }
    npy_free(&a);
}

/* The smallest vocabulary among the embeddings that read the input: every id must be below */
static int64_t token_vocab(const case_config *cfg)
{
    int64_t v = INT64_MAX;
    for (int i = 0; i < cfg->n_layers; i++)
        if (layer_def_of(cfg->layers[i].kind)->reads_tokens && cfg->layers[i].in < v)
            v = cfg->layers[i].in;
    return v;
}

/* The .npy files of [init], input and target, against the shapes the model needs. */
static void check_files(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    if (!c->shapes_ok)
        return;
    for (int k = 0; k < cfg->n_inits; k++) {
        const init_spec *in = &cfg->inits[k];
        entry *e = find_entry(c, SEC_INIT, in->tensor);
        for (int i = 0; e && i < cfg->n_layers; i++) {
            const layer_spec *l = &cfg->layers[i];
            layer_param ps[LAYER_MAX_PARAMS];
            int n = layer_def_of(l->kind)->params(l, ps);
            for (int p = 0; p < n; p++) {
                char name[CASE_NAME_MAX];
                layer_param_name(l, &ps[p], name, sizeof name);
                if (strcmp(name, in->tensor) == 0)
                    check_npy(c, e, in->path, ps[p].ndim, ps[p].shape, 0, "");
            }
        }
    }
    /* a data file holds every micro-batch of every rank: accumulate x world_size x batch
     * samples (model_file_rows says which rows each takes) */
    int64_t shape[TENSOR_MAX_DIMS] = {cfg->batch * (cfg->accumulate > 1 ? cfg->accumulate : 1) *
                        (cfg->world_size > 1 ? cfg->world_size : 1)};
    entry *ie = find_entry(c, SEC_DATA, "input");
    if (cfg->input == INPUT_FILE && ie && !ie->failed) {
        memcpy(shape + 1, cfg->sample_shape, sizeof(int64_t) * (size_t)cfg->sample_ndim);
        check_npy(c, ie, cfg->input_path, cfg->sample_ndim + 1, shape,
                  cfg->input_tokens ? token_vocab(cfg) : 0, samples_note(cfg));
    }
    entry *te = find_entry(c, SEC_DATA, "target");
    const layer_spec *last = &cfg->layers[cfg->n_layers - 1];
    if (cfg->target == TARGET_FILE && te && !te->failed) {
        if (loss_def_of(cfg->loss)->class_target) {
            memcpy(shape + 1, last->out_shape, sizeof(int64_t) * (size_t)(last->out_ndim - 1));
            check_npy(c, te, cfg->target_path, last->out_ndim, shape,
                      last->out_shape[last->out_ndim - 1], samples_note(cfg));
        } else {
            memcpy(shape + 1, last->out_shape, sizeof(int64_t) * (size_t)last->out_ndim);
            check_npy(c, te, cfg->target_path, last->out_ndim + 1, shape, 0, samples_note(cfg));
        }
    }
}

/* The case's name when [case] has none: the file name without ".case". */
static void default_name(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    const char *base = strrchr(c->path, '/');
    base = base ? base + 1 : c->path;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".case") == 0)
        n -= 5;
    if (n < CASE_NAME_MAX) {
        memcpy(cfg->name, base, n);
        cfg->name[n] = '\0';
    }
    if (n >= CASE_NAME_MAX || !valid_case_name(cfg->name))
        report(c, 0, NULL,
               "the file name '%s' is not a case name ([A-Za-z0-9._-]+): set name "
               "in [case]",
               base);
}

/* The rows of linear layer l's GEMM: the batch times the leading dims of its input (its
 * output keeps them) */
static int64_t linear_rows(const case_config *cfg, const layer_spec *l)
{
    int64_t rows = cfg->batch;
    for (int d = 0; d + 1 < l->out_ndim; d++)
        rows *= l->out_shape[d];
    return rows;
}

/* Transformer Engine's FP8 GEMM shapes: rows a multiple of 8, in and out multiples of 16
 * (transformer_engine/pytorch/utils.py, assert_dim_for_fp8_exec); under MXFP8 all three
 * multiples of 32, as MXFP8Quantizer.is_quantizable asks of the input [rows, in], the weight
 * [out, in] and the output gradient [rows, out] (the last dim and the product of the leading
 * dims multiples of MXFP8_BLOCK_SCALING_SIZE: transformer_engine/pytorch/tensor/
 * mxfp8_tensor.py) */
static int fp8_rows_multiple(const case_config *cfg)
{
    return cfg->fp8_recipe == FP8_RECIPE_MXFP8 || cfg->fp8_recipe == FP8_RECIPE_MXFP4 ? 32
           : cfg->fp8_recipe == FP8_RECIPE_NVFP4                                      ? 16
                                                                                      : 8;
}
/* NVFP4Quantizer.is_quantizable: the last dim and the leading dims' product multiples of
 * NVFP4_BLOCK_SCALING_SIZE, 16 (transformer_engine/pytorch/tensor/nvfp4_tensor.py); MXFP4
 * the OCP block of 32 */
static int fp8_dims_multiple(const case_config *cfg)
{
    return cfg->fp8_recipe == FP8_RECIPE_MXFP8 || cfg->fp8_recipe == FP8_RECIPE_MXFP4 ? 32 : 16;
}
static const char *fp8_recipe_label(const case_config *cfg)
{
    return cfg->fp8_recipe == FP8_RECIPE_MXFP8   ? "MXFP8"
           : cfg->fp8_recipe == FP8_RECIPE_NVFP4 ? "NVFP4"
           : cfg->fp8_recipe == FP8_RECIPE_MXFP4 ? "MXFP4"
                                                 : "FP8";
}
static bool fp8_shape_ok(const case_config *cfg, const layer_spec *l)
{
    int rm = fp8_rows_multiple(cfg), dm = fp8_dims_multiple(cfg);
    return linear_rows(cfg, l) % rm == 0 && l->in % dm == 0 && l->out % dm == 0;
}

void check_fp8(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    entry *en = find_entry(c, SEC_FP8, "enabled");
    if (!cfg->fp8) {
        memset(cfg->fp8_layer, 0, sizeof cfg->fp8_layer);
        return;
    }
    bool dtypes_ok = cfg->autocast ? dtype_is_half(cfg->autocast_dtype)
                                   : cfg->params == DTYPE_FLOAT32;
    if (!dtypes_ok && !entry_failed(c, SEC_PRECISION, "params"))
        err_at(c, en,
               "[fp8] needs autocast = float16 or bfloat16, or params = float32 without "
               "autocast: te.Linear's output takes the surrounding dtype (params = %s here)",
               dtype_name(cfg->params));
    if (cfg->world_size > 1)
        err_at(c, en, "[fp8] with [distributed] world_size > 1 is not supported: TE's amax "
                      "reduction across ranks (reduce_amax) is not modelled");
    if (!c->shapes_ok)
        return;
    entry *le = find_entry(c, SEC_FP8, "layers");
    if (le && le->failed)
        return;
    int chosen = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        layer_spec *l = &cfg->layers[i];
        if (!layer_def_of(l->kind)->te_linear || (le && !cfg->fp8_layer[i]))
            continue;
        bool ok = fp8_shape_ok(cfg, l);
        if (le && !ok)
            err_at(c, le,
                   "layers: '%s' is not a shape Transformer Engine runs in %s: the input's "
                   "leading dims must multiply to a multiple of %d (here %lld) and in_features "
                   "and out_features be multiples of %d (here %lld and %lld)",
                   l->name, fp8_recipe_label(cfg),
                   fp8_rows_multiple(cfg), (long long)linear_rows(cfg, l),
                   fp8_dims_multiple(cfg), (long long)l->in, (long long)l->out);
        cfg->fp8_layer[i] = ok;
        chosen += ok;
    }
    if (!le && chosen == 0)
        err_at(c, en, "[fp8] enabled, but no linear layer of [model] has a shape Transformer "
                      "Engine runs in %s (leading dims a multiple of %d, in_features and "
                      "out_features multiples of %d)",
               fp8_recipe_label(cfg), fp8_rows_multiple(cfg),
               fp8_dims_multiple(cfg));
}

/* An fp8 layer L's GEMM operands as fp8.csv names them (FP8-SPEC.md): L.input, L.weight,
 * L.out.grad */
static const char *const fp8_operand_suffix[] = {"input", "weight", "out.grad"};
#define FP8_OPERANDS 3

/* The index of the layer whose GEMM operand `name` would be (LAYER.input, ...), or -1 */
static int operand_layer(const case_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->n_layers; i++) {
        size_t n = strlen(cfg->layers[i].name);
        if (strncmp(name, cfg->layers[i].name, n) != 0 || name[n] != '.')
            continue;
        for (int k = 0; k < FP8_OPERANDS; k++)
            if (strcmp(name + n + 1, fp8_operand_suffix[k]) == 0)
                return i;
    }
    return -1;
}

/* Each `saturated OPERAND` of [expect] names a GEMM operand of a layer [fp8] runs in float8 */
static void check_expect_fp8(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    char names[CASE_MAX_LAYERS * FP8_OPERANDS][CASE_NAME_MAX + 16];
    const char *list[CASE_MAX_LAYERS * FP8_OPERANDS];
    int n = 0;
    for (int i = 0; cfg->fp8 && i < cfg->n_layers; i++)
        for (int k = 0; cfg->fp8_layer[i] && k < FP8_OPERANDS; k++) {
            snprintf(names[n], sizeof names[n], "%s.%s", cfg->layers[i].name,
                     fp8_operand_suffix[k]);
            list[n] = names[n];
            n++;
        }
    bool fp8_known = !entry_failed(c, SEC_FP8, "enabled") && (!cfg->fp8 || c->shapes_ok) &&
                     !entry_failed(c, SEC_FP8, "layers");
    for (int x = 0; fp8_known && x < cfg->n_expects; x++) {
        const expect_spec *s = &cfg->expects[x];
        if (s->kind != EXPECT_SATURATED || find_name(list, n, s->tensor) >= 0)
            continue;
        char key[CASE_NAME_MAX + 16];
        snprintf(key, sizeof key, "saturated %s", s->tensor);
        int layer;
        entry *e = find_entry(c, SEC_EXPECT, key);
        if (n == 0) {
            err_at(c, e,
                   "%s: the case runs no layer in float8 ([fp8] enabled = yes runs its linear "
                   "layers as te.Linear, whose GEMM operands fp8.csv counts)",
                   key);
        } else if ((layer = operand_layer(cfg, s->tensor)) >= 0) {
            err_at(c, e,
                   "%s: layer %s does not run in float8 (the float8 layers are those [fp8]'s "
                   "layers names, by default every linear of a shape Transformer Engine runs "
                   "in FP8)",
                   key, cfg->layers[layer].name);
        } else {
            char *h = hint(s->tensor, list, n, "the float8 GEMM operands");
            err_at(c, e, "%s: '%s' is not a float8 GEMM operand of this case; %s", key, s->tensor,
                   h);
            free(h);
        }
    }
}

void cross_checks(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    if (!c->sec_given[SEC_MODEL])
        report(c, 0, NULL, "missing [model] section");
    else if (!has_entries(c, SEC_MODEL))
        report(c, c->sec_line[SEC_MODEL], NULL, "[model] has no layers");
    if (!find_entry(c, SEC_DATA, "batch"))
        report(c, c->sec_line[SEC_DATA], NULL, "[data] batch is required");
    if (!find_entry(c, SEC_CASE, "name"))
        default_name(c);
    entry *be = find_entry(c, SEC_CASE, "baseline");
    if (be && !be->failed && strcmp(cfg->baseline, cfg->name) == 0)
        err_at(c, be, "baseline names this case itself");
    entry *mw = find_entry(c, SEC_PRECISION, "master_weights");
    if (cfg->master_weights && !dtype_is_half(cfg->params) &&
        !entry_failed(c, SEC_PRECISION, "params"))
        err_at(c, mw, "master_weights = yes needs params = float16 or bfloat16");
    find_tokens(c);
    walk_shapes(c);
    check_target(c);
    check_observe(c);
    check_files(c);
    check_fp8(c);
    check_expect_fp8(c);
}
