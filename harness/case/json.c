/*
 * case/json.c: the normalized configuration as one JSON object, every default filled in
 * (`ampscope check --json`; case.h's case_write_json).
 */
#include "parse.h"

#include "core/json.h"
#include "distributed/distributed.h"
#include "train/optimizers.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string, or null when it is empty (case/parse.h). */
void json_text(FILE *f, const char *s)
{
    if (*s)
        json_string(f, s);
    else
        fputs("null", f);
}

/* The shortest form that reads back as v, with ".0" when it would look like an integer. */
/* a KIND_OPT_DIMS mask as a list of dims, in the order 0, 1, ..., then -1, -2, ...; null
 * when none is given */
static void json_dims(FILE *f, const char *name, int64_t mask)
{
    fprintf(f, ", \"%s\": ", name);
    if (!mask) {
        fputs("null", f);
        return;
    }
    const char *sep = "[";
    for (int b = 0; b < 2 * KIND_DIMS_NEG; b++)
        if (mask & ((int64_t)1 << b)) {
            fprintf(f, "%s%d", sep, b < KIND_DIMS_NEG ? b : KIND_DIMS_NEG - 1 - b);
            sep = ", ";
        }
    fputs("]", f);
}

static void json_real(FILE *f, double v)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
    if (!strpbrk(buf, ".e"))
        fputs(".0", f);
}

static void json_bool(FILE *f, bool b) { fputs(b ? "true" : "false", f); }

static void json_shape(FILE *f, int ndim, const int64_t *shape)
{
    fputc('[', f);
    for (int i = 0; i < ndim; i++)
        fprintf(f, "%s%" PRId64, i ? ", " : "", shape[i]);
    fputc(']', f);
}

/* name, kind and line, the numbers of its signature and its options (a refused option
 * has no value), then out_shape */
static void json_layer(FILE *f, const case_config *cfg, const layer_spec *l)
{
    const layer_def *d = layer_def_of(l->kind);
    fputs("    {\"name\": ", f);
    json_string(f, l->name);
    fprintf(f, ", \"kind\": \"%s\", \"line\": %d", d->name, l->line);
    for (int i = 0; i < d->n_args; i++) {
        const void *v = (const char *)l + d->args[i].offset;
        if (d->args[i].min == KIND_ARG_REAL)
            fprintf(f, ", \"%s\": %.17g", d->args[i].json, *(const double *)v);
        else if (d->args[i].min == KIND_ARG_DTYPE) /* a dtype, or the last input's: "like" */
            fprintf(f, ", \"%s\": \"%s\"", d->args[i].json,
                    *(const int64_t *)v == KIND_DTYPE_OF_INPUT
                        ? "like"
                        : dtype_name((dtype) * (const int64_t *)v));
        else
            fprintf(f, ", \"%s\": %" PRId64, d->args[i].json, *(const int64_t *)v);
    }
    for (int i = 0; i < d->n_opts; i++) {
        const kind_opt *o = &d->opts[i];
        const char *field = (const char *)l + o->offset;
        switch (o->type) {
        case KIND_OPT_INT:
            fprintf(f, ", \"%s\": %" PRId64, o->name, *(const int64_t *)field);
            break;
        case KIND_OPT_REAL:
            fprintf(f, ", \"%s\": ", o->name);
            json_real(f, *(const double *)field);
            break;
        case KIND_OPT_BOOL:
            fprintf(f, ", \"%s\": ", o->name);
            json_bool(f, *(const bool *)field);
            break;
        case KIND_OPT_CHOICE:
            fprintf(f, ", \"%s\": \"%s\"", o->name, o->choices[*(const int *)field]);
            break;
        case KIND_OPT_DIMS:
            json_dims(f, o->name, *(const int64_t *)field);
            break;
        case KIND_OPT_INTS:
            fprintf(f, ", \"%s\": ", o->name);
            json_shape(f, ((const int_list *)field)->n, ((const int_list *)field)->v);
            break;
        case KIND_OPT_REFUSED:
            break;
        }
    }
    /* the graph: the layers it reads ("input": the model's), in operand order, a Python
     * scalar operand as its number */
    fputs(", \"inputs\": [", f);
    for (int k = 0, t = 0; t < l->n_inputs || (l->scalar_operands >> k); k++) {
        fputs(k ? ", " : "", f);
        if (l->scalar_operands & (1u << k))
            json_real(f, l->scalar);
        else {
            json_string(f, l->inputs[t] == LAYER_INPUT ? "input" : cfg->layers[l->inputs[t]].name);
            t++;
        }
    }
    fputs("], \"weight_of\": ", f); /* weight=LAYER.weight: that layer; else null */
    if (l->tied >= 0)
        json_string(f, cfg->layers[l->tied].name);
    else
        fputs("null", f);
    if (l->autocast_disabled) /* autocast=no; absent: the case's autocast */
        fputs(", \"autocast\": false", f);
    if (l->n_dims) { /* a parameter's shape, a constant's file's, reshape's sizes (-1 kept) */
        fputs(", \"sizes\": ", f);
        json_shape(f, l->n_dims, l->dims);
    }
    fputs(", \"out_shape\": ", f);
    json_shape(f, l->out_ndim, l->out_shape);
    if (l->out_whole) /* a constant's, a parameter's: out_shape is the whole tensor's */
        fputs(", \"batch_dim\": false", f);
    fputc('}', f);
}

static void json_data(FILE *f, const case_config *cfg)
{
    const layer_spec *last = cfg->n_layers ? &cfg->layers[cfg->n_layers - 1] : NULL;
    fprintf(f, "  \"data\": {\"batch\": %" PRId64 ", \"shape\": ", cfg->batch);
    json_shape(f, cfg->sample_ndim, cfg->sample_shape);
    fprintf(f, ", \"input\": \"%s\", \"input_path\": ", input_names[cfg->input]);
    json_text(f, cfg->input == INPUT_FILE ? cfg->input_path : "");
    fprintf(f, ", \"input_dtype\": \"%s\", \"target\": \"%s\", \"target_path\": ",
            dtype_name(cfg->input_dtype), target_names[cfg->target]);
    json_text(f, cfg->target == TARGET_FILE ? cfg->target_path : "");
    fprintf(f, ", \"vocab\": %" PRId64, cfg->input == INPUT_TOKENS ? cfg->vocab : 0);
    if (cfg->target == TARGET_CLASSES && last && last->out_ndim >= 1)
        fprintf(f, ", \"classes\": %" PRId64 "},\n", last->out_shape[last->out_ndim - 1]);
    else
        fputs(", \"classes\": null},\n", f);
}

static void json_train(FILE *f, const case_config *cfg)
{
    fprintf(f, "  \"train\": {\"loss\": \"%s\", \"reduction\": \"%s\", \"optimizer\": ",
            loss_def_of(cfg->loss)->name, reduction_names[cfg->loss_reduction]);
    optim_write_json(f, &cfg->optim, json_real);
    fprintf(f, ", \"schedule\": {\"kind\": \"%s\"", schedule_names[cfg->schedule]);
    if (cfg->schedule == SCHEDULE_COSINE) {
        fprintf(f, ", \"T_max\": %" PRId64 ", \"eta_min\": ", cfg->t_max);
        json_real(f, cfg->eta_min);
    }
    fprintf(f, "}, \"steps\": %" PRId64 ", \"seed\": %" PRIu64, cfg->steps, cfg->seed);
    fprintf(f, ", \"accumulate\": %" PRId64 ", \"delay_unscale\": %s, \"clip_grad_norm\": ",
            cfg->accumulate, cfg->delay_unscale ? "true" : "false");
    if (cfg->clip_grad_norm > 0)
        json_real(f, cfg->clip_grad_norm);
    else
        fputs("null", f);
    fputs(", \"norm_type\": ", f);
    if (isinf(cfg->norm_type))
        fputs("\"inf\"", f);
    else
        json_real(f, cfg->norm_type);
    fprintf(f, ", \"error_if_nonfinite\": %s, \"clip_grad_value\": ",
            cfg->error_if_nonfinite ? "true" : "false");
    if (cfg->clip_grad_value > 0)
        json_real(f, cfg->clip_grad_value);
    else
        fputs("null", f);
    fprintf(f, ", \"clip_before_unscale\": %s},\n", cfg->clip_before_unscale ? "true" : "false");
}

static void json_init_expect(FILE *f, const case_config *cfg)
{
    fputs("  \"init\": [", f);
    for (int i = 0; i < cfg->n_inits; i++) {
        fputs(i ? ",\n    {\"tensor\": " : "\n    {\"tensor\": ", f);
        json_string(f, cfg->inits[i].tensor);
        fputs(", \"path\": ", f);
        json_string(f, cfg->inits[i].path);
        fprintf(f, ", \"line\": %d}", cfg->inits[i].line);
    }
    fputs("],\n  \"expect\": [", f);
    for (int i = 0; i < cfg->n_expects; i++) {
        const expect_spec *x = &cfg->expects[i];
        fputs(i ? ",\n    " : "\n    ", f);
        if (x->kind == EXPECT_DTYPE) {
            fputs("{\"kind\": \"dtype\", \"tensor\": ", f);
            json_string(f, x->tensor);
            fprintf(f, ", \"dtype\": \"%s\"", dtype_name(x->dt));
        } else if (x->kind == EXPECT_SATURATED) {
            fputs("{\"kind\": \"saturated\", \"tensor\": ", f);
            json_string(f, x->tensor);
            fprintf(f, ", \"saturated\": %s", x->saturated ? "true" : "false");
        } else {
            fputs("{\"kind\": \"error\", \"text\": ", f); /* null: `error = none` */
            json_text(f, x->text);
        }
        fprintf(f, ", \"line\": %d}", x->line);
    }
    fputs("],\n", f);
}

/* Write errors are not checked call by call: the stream's error flag, tested at the end,
 * records any of them. */
/* [fp8], when enabled: the recipe's keys and the layers that run as te.Linear */
static void json_fp8(FILE *f, const case_config *cfg)
{
    if (!cfg->fp8)
        return;
    fprintf(f, "  \"fp8\": {\"format\": \"%s\", \"recipe\": \"%s\"",
            fp8_format_names[cfg->fp8_format], fp8_recipe_names[cfg->fp8_recipe]);
    if (cfg->fp8_recipe == FP8_RECIPE_DELAYED)
        fprintf(f,
                ", \"amax_history_len\": %" PRId64 ", \"amax_compute_algo\": \"%s\", "
                "\"margin\": %" PRId64,
                cfg->fp8_amax_history_len, fp8_amax_algo_names[cfg->fp8_amax_compute_algo],
                cfg->fp8_margin);
    fputs(", \"layers\": [", f);
    for (int i = 0, n = 0; i < cfg->n_layers; i++)
        if (cfg->fp8_layer[i]) {
            fputs(n++ ? ", " : "", f);
            json_text(f, cfg->layers[i].name);
        }
    fputs("]},\n", f);
}

int case_write_json(const case_config *cfg, FILE *f)
{
    fputs("{\n  \"path\": ", f);
    json_string(f, cfg->path);
    fputs(",\n  \"dir\": ", f);
    json_string(f, cfg->dir);
    fputs(",\n  \"name\": ", f);
    json_string(f, cfg->name);
    fputs(",\n  \"description\": ", f);
    json_string(f, cfg->description);
    fputs(",\n  \"baseline\": ", f);
    json_text(f, cfg->baseline);
    fprintf(f, ",\n  \"observe\": {\"every\": %" PRId64 ", \"steps\": [", cfg->observe_every);
    for (int i = 0; i < cfg->n_observe_steps; i++)
        fprintf(f, "%s%" PRId64, i ? ", " : "", cfg->observe_steps[i]);
    fputs("]},\n  \"model\": [", f);
    for (int i = 0; i < cfg->n_layers; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_layer(f, cfg, &cfg->layers[i]);
    }
    fputs("],\n", f);
    json_data(f, cfg);
    fprintf(f,
            "  \"precision\": {\"params\": \"%s\", \"autocast\": \"%s\", "
            "\"loss_in_autocast\": ",
            dtype_name(cfg->params), cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off");
    json_bool(f, cfg->loss_in_autocast);
    fputs(", \"master_weights\": ", f);
    json_bool(f, cfg->master_weights);
    fputs("},\n  \"scaler\": {\"enabled\": ", f);
    json_bool(f, cfg->scaler);
    fputs(", \"init_scale\": ", f);
    json_real(f, cfg->init_scale);
    fputs(", \"growth_factor\": ", f);
    json_real(f, cfg->growth_factor);
    fputs(", \"backoff_factor\": ", f);
    json_real(f, cfg->backoff_factor);
    fprintf(f, ", \"growth_interval\": %" PRId64 "},\n", cfg->growth_interval);
    json_train(f, cfg);
    json_init_expect(f, cfg);
    distributed_write_json(cfg, f); /* nothing for a one-process case */
    json_fp8(f, cfg);               /* nothing without [fp8] enabled */
    fprintf(f, "  \"n_sets\": %d\n}\n", cfg->n_sets);
    return ferror(f) ? -1 : 0;
}
