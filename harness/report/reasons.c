/*
 * report/reasons.c: why each float32 activation of an autocast case is float32 (see
 * report/reasons.h). The producer of a tensor is found by its name: "<layer>.out" is the
 * layer's output, "<layer>.<other>" a tensor its forward made inside the op,
 * "<op>.out" an op of the loss (cross_entropy's log_softmax). The reason is the first
 * autocast entry of that producer's definition (the op its forward runs first): a float32
 * policy is the reason itself; for an op on no list, the dtypes of its inputs (and of the
 * weight it reads) and what type promotion makes of them.
 */
#include "reasons.h"

#include <string.h>

#include "autograd/autocast.h"
#include "core/dtype.h"
#include "layers/layer.h"

#define NAME_MAX_LEN (LAYER_NAME_MAX + 16)

/* the dtype of tensor `name` in the forward pass of `step`; false when it has no row */
static bool row_dtype(const case_files *c, int64_t step, const char *name, dtype *dt)
{
    const tensor_row *r = case_files_row(c, step, "forward", name);
    return r && dtype_parse(r->dtype, dt);
}

/* the name of layer input j (an index into cfg->layers, or LAYER_INPUT) */
static void input_name(const case_config *cfg, int j, char *buf, size_t len)
{
    if (j == LAYER_INPUT)
        snprintf(buf, len, "input");
    else
        layer_out_name(&cfg->layers[j], buf, len);
}

/* the layer whose weight layer i reads: its own, or the one it is tied to */
static const char *weight_owner(const case_config *cfg, int i)
{
    const layer_spec *l = &cfg->layers[i];
    return l->tied >= 0 ? cfg->layers[l->tied].name : l->name;
}

/* an op on no autocast list: its inputs' dtypes and type promotion */
static void put_promotion(FILE *f, const case_config *cfg, const case_files *c, int64_t step, int i,
                          const char *op)
{
    const layer_spec *l = &cfg->layers[i];
    const layer_def *d = layer_def_of(l->kind);
    char weight[NAME_MAX_LEN];
    snprintf(weight, sizeof weight, "%s.weight", weight_owner(cfg, i));
    dtype wdt;
    bool has_weight = row_dtype(c, step, weight, &wdt);
    if (d->reads_tokens) {
        fprintf(f, "%s is on no autocast list and its weight `%s` is %s", op, weight,
                has_weight ? dtype_name(wdt) : "float32");
        return;
    }
    int n = l->n_inputs;
    dtype dts[LAYER_MAX_INPUTS + 1];
    char names[LAYER_MAX_INPUTS + 1][NAME_MAX_LEN];
    int k = 0;
    for (int j = 0; j < n; j++) {
        input_name(cfg, l->inputs[j], names[k], sizeof names[k]);
        if (row_dtype(c, step, names[k], &dts[k]))
            k++;
    }
    if (has_weight) {
        snprintf(names[k], sizeof names[k], "%s", weight);
        dts[k++] = wdt;
    }
    if (k == 0) {
        fprintf(f, "%s is on no autocast list and runs in its input's dtype", op);
        return;
    }
    bool mixed = false;
    dtype p = dts[0];
    for (int j = 1; j < k; j++) {
        mixed |= dts[j] != dts[0];
        p = promote_types(p, dts[j]);
    }
    fprintf(f, "%s is on no autocast list", op);
    if (k == 1) {
        fprintf(f, " and its input `%s` is %s", names[0], dtype_name(dts[0]));
        return;
    }
    fputs(mixed ? "; type promotion of " : " and its inputs ", f);
    for (int j = 0; j < k; j++) {
        fprintf(f, "%s`%s`", j == 0 ? "" : j + 1 < k ? ", " : " and ", names[j]);
        if (mixed)
            fprintf(f, " (%s)", dtype_name(dts[j]));
    }
    fprintf(f, mixed ? " is %s" : " are %s", dtype_name(p));
}

/* the reason for layer i's output `name` */
static void put_layer_reason(FILE *f, const case_config *cfg, const case_files *c, int64_t step,
                             int i, const char *name)
{
    const layer_def *d = layer_def_of(cfg->layers[i].kind);
    const autocast_op *a = d->n_autocast > 0 ? &d->autocast[0] : NULL;
    if (a && autocast_policy_is_fp32(a->policy)) {
        fprintf(f, "`%s` is float32 because %s runs in float32 under autocast (%s)", name, a->op,
                a->pytorch_list);
        return;
    }
    fprintf(f, "`%s` is float32: ", name);
    put_promotion(f, cfg, c, step, i, a ? a->op : d->name);
}

/* the reason for `name`, made inside layer i's forward (not its output) */
static void put_inner_reason(FILE *f, const case_config *cfg, const case_files *c, int64_t step,
                             int i, const char *name)
{
    const layer_spec *l = &cfg->layers[i];
    char out[NAME_MAX_LEN];
    layer_out_name(l, out, sizeof out);
    dtype odt;
    fprintf(f, "`%s` is float32: %s (`%s`) computes it inside the op", name,
            layer_def_of(l->kind)->name, l->name);
    if (row_dtype(c, step, out, &odt))
        fprintf(f, ", whose output `%s` is %s", out, dtype_name(odt));
}

/* the loss's op whose output `name` is, or NULL */
static const autocast_op *loss_op_of(const case_config *cfg, const char *name)
{
    const loss_def *d = loss_def_of(cfg->loss);
    for (int i = 0; i < d->n_autocast; i++) {
        char out[NAME_MAX_LEN];
        snprintf(out, sizeof out, "%s.out", d->autocast[i].op);
        if (!strcmp(out, name))
            return &d->autocast[i];
    }
    return NULL;
}

/* one tensor's reason; false when no registry entry produced it */
static bool put_reason(FILE *f, const case_config *cfg, const case_files *c, int64_t step,
                       const char *name)
{
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        size_t len = strlen(l->name);
        char out[NAME_MAX_LEN];
        layer_out_name(l, out, sizeof out);
        if (!strcmp(out, name)) {
            put_layer_reason(f, cfg, c, step, i, name);
            return true;
        }
        if (!strncmp(name, l->name, len) && name[len] == '.') {
            put_inner_reason(f, cfg, c, step, i, name);
            return true;
        }
    }
    const autocast_op *a = loss_op_of(cfg, name);
    if (!a)
        return false;
    if (!cfg->loss_in_autocast)
        fprintf(f, "`%s` is float32: the loss runs outside autocast, on its float32 input", name);
    else if (autocast_policy_is_fp32(a->policy))
        fprintf(f, "`%s` is float32 because %s's %s runs in float32 under autocast (%s)", name,
                loss_def_of(cfg->loss)->name, a->op, a->pytorch_list);
    else
        fprintf(f, "`%s` is float32: %s's %s runs in its input's dtype (%s)", name,
                loss_def_of(cfg->loss)->name, a->op, a->pytorch_list);
    return true;
}

void report_put_float32_reasons(FILE *f, const case_config *cfg, const case_files *c, int64_t step)
{
    if (!cfg->autocast)
        return;
    int n = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step != step || strcmp(r->pass, "forward") || strcmp(r->role, "activation") ||
            strcmp(r->dtype, "float32"))
            continue;
        fputs(n++ ? ". " : "**Why float32 under autocast:** ", f);
        if (!put_reason(f, cfg, c, step, r->name))
            fprintf(f, "`%s` is float32 (no layer or loss of the registry names it)", r->name);
    }
    if (n)
        fputs(".\n\n", f);
}
