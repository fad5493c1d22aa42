/*
 * case/sections.c: the keys of [case], [data], [precision], [scaler], [train], [init],
 * [expect] and [fp8], each read into the case_config (its defaults are case.c's set_defaults).
 * [model] and [train]'s loss are case/model.c's; [train]'s optimizer is case/optim.c's.
 */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *const schedule_names[] = {"constant", "cosine"}; /* schedule_kind */
/* input_source */
const char *const input_names[] = {"randn", "file", "tokens"};
const char *const target_names[] = {"classes", "randn", "randn_like", "file"};

/* Only a description may be empty. */
bool need_value(parse_ctx *c, entry *e)
{
    if (*e->value || (e->sec == SEC_CASE && strcmp(e->key, "description") == 0))
        return true;
    err_at(c, e, "missing value for %s", e->key);
    return false;
}

typedef void (*key_fn)(parse_ctx *c, entry *e);
typedef struct key_def {
    const char *key;
    key_fn fn;
} key_def;

/* Sections with a fixed set of keys: each entry goes to its key's function. */
static void parse_keyed(parse_ctx *c, int sec, const key_def *defs, int n)
{
    const char *names[16]; /* the most keys a section has ([train]'s 12) */
    for (int i = 0; i < n && i < 16; i++)
        names[i] = defs[i].key;
    for (int i = 0; i < c->n_entries; i++) {
        entry *e = &c->entries[i];
        if (e->sec != sec)
            continue;
        int k = find_name(names, n, e->key);
        if (k < 0) {
            char *h = hint(e->key, names, n, "allowed keys");
            err_at(c, e, "unknown key '%s' in [%s]; %s", e->key, section_names[sec], h);
            free(h);
        } else if (need_value(c, e)) {
            defs[k].fn(c, e);
        }
    }
}

static void key_name(parse_ctx *c, entry *e)
{
    if (valid_case_name(e->value))
        strcpy(c->cfg->name, e->value);
    else
        err_at(c, e,
               "bad case name '%s': expected [A-Za-z0-9._-]+, at most %d characters, "
               "not . or ..",
               e->value, CASE_NAME_MAX - 1);
}

static void key_description(parse_ctx *c, entry *e)
{
    if (strlen(e->value) < CASE_TEXT_MAX)
        strcpy(c->cfg->description, e->value);
    else
        err_at(c, e, "description too long (at most %d bytes)", CASE_TEXT_MAX - 1);
}

static void key_baseline(parse_ctx *c, entry *e)
{
    if (valid_case_name(e->value))
        strcpy(c->cfg->baseline, e->value);
    else
        err_at(c, e, "bad value '%s' for baseline: expected a case name ([A-Za-z0-9._-]+)",
               e->value);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* observe = 0,1,2,100: sorted, repeats dropped. */
static void parse_step_list(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    char *s = xstrdup(e->value), *next;
    int n = 0;
    bool ok = true;
    for (char *p = s; ok && p; p = next) {
        char *comma = strchr(p, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        int64_t step;
        if (n == CASE_MAX_OBSERVE) {
            err_at(c, e, "too many observe steps (at most %d)", CASE_MAX_OBSERVE);
            ok = false;
        } else if (scan_i64(trim(p), &step) != 0 || step < 0) {
            err_at(c, e,
                   "bad value '%s' for observe: expected all, every N, or step indices "
                   "like 0,1,100",
                   e->value);
            ok = false;
        } else {
            cfg->observe_steps[n++] = step;
        }
    }
    free(s);
    if (!ok)
        return;
    qsort(cfg->observe_steps, (size_t)n, sizeof cfg->observe_steps[0], cmp_i64);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || cfg->observe_steps[m - 1] != cfg->observe_steps[i])
            cfg->observe_steps[m++] = cfg->observe_steps[i];
    cfg->n_observe_steps = m;
}

static void key_observe(parse_ctx *c, entry *e)
{
    const char *v = e->value;
    if (strcmp(v, "all") == 0) {
        c->cfg->observe_every = 1;
    } else if (strncmp(v, "every", 5) == 0 && is_blank(v[5])) {
        for (v += 5; is_blank(*v);)
            v++;
        parse_int(c, e, v, "observe every", 1, &c->cfg->observe_every);
    } else {
        parse_step_list(c, e);
    }
}

void parse_case_section(parse_ctx *c)
{
    static const key_def defs[] = {{"name", key_name},
                                   {"description", key_description},
                                   {"baseline", key_baseline},
                                   {"observe", key_observe}};
    parse_keyed(c, SEC_CASE, defs, 4);
}

static void key_batch(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "batch", 1, &c->cfg->batch);
}

static void key_shape(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    int n = 0;
    for (const char *p = e->value;;) {
        const char *x = strchr(p, 'x');
        size_t len = x ? (size_t)(x - p) : strlen(p);
        char part[64];
        if (n == LAYER_MAX_RANK || len == 0 || len >= sizeof part) {
            err_at(c, e,
                   "bad value '%s' for shape: expected 1 to %d sizes like 1024 or 3x32x32 (a "
                   "sample's: a tensor has at most %d dims with the batch dim)",
                   e->value, LAYER_MAX_RANK, TENSOR_MAX_DIMS);
            return;
        }
        memcpy(part, p, len);
        part[len] = '\0';
        if (!parse_int(c, e, trim(part), "shape", 1, &cfg->sample_shape[n++]))
            return;
        if (!x)
            break;
        p = x + 1;
    }
    cfg->sample_ndim = n;
}

/* `tokens vocab=V`: int64 token ids drawn uniformly in [0, V) (torch.randint) */
static void key_input_tokens(parse_ctx *c, entry *e)
{
    words t;
    if (!split_words(c, e, &t))
        return;
    static const char *const names[] = {"vocab"};
    const char *vals[1];
    if (parse_options(c, e, &t, 1, "input = tokens", names, 1, vals)) {
        if (!vals[0])
            err_at(c, e, "input = tokens needs vocab=V (ids are drawn in [0, V))");
        else if (parse_int(c, e, vals[0], "vocab", 1, &c->cfg->vocab))
            c->cfg->input = INPUT_TOKENS;
    }
    free(t.buf);
}

static void key_input(parse_ctx *c, entry *e)
{
    if (strncmp(e->value, "tokens", 6) == 0 && (e->value[6] == '\0' || is_blank(e->value[6]))) {
        key_input_tokens(c, e);
        return;
    }
    int k = parse_source(c, e, input_names, 2, c->cfg->input_path);
    if (k >= 0)
        c->cfg->input = (input_source)k;
}

static void key_input_dtype(parse_ctx *c, entry *e)
{
    parse_dtype(c, e, "input_dtype", false, &c->cfg->input_dtype);
}

static void key_target(parse_ctx *c, entry *e)
{
    int k = parse_source(c, e, target_names, 4, c->cfg->target_path);
    if (k >= 0)
        c->cfg->target = (target_kind)k;
}

void parse_data_section(parse_ctx *c)
{
    static const key_def defs[] = {{"batch", key_batch},
                                   {"shape", key_shape},
                                   {"input", key_input},
                                   {"input_dtype", key_input_dtype},
                                   {"target", key_target}};
    parse_keyed(c, SEC_DATA, defs, 5);
}

static void key_params(parse_ctx *c, entry *e)
{
    parse_dtype(c, e, "params", false, &c->cfg->params);
}

static void key_autocast(parse_ctx *c, entry *e)
{
    dtype dt;
    if (strcmp(e->value, "off") == 0) {
        c->cfg->autocast = false;
    } else if (dtype_parse(e->value, &dt) && dtype_is_half(dt)) {
        c->cfg->autocast = true;
        c->cfg->autocast_dtype = dt;
    } else if (dtype_parse(e->value, &dt) && dtype_is_float8(dt)) {
        err_at(c, e,
               "bad value '%s' for autocast: expected off, float16 or bfloat16 (torch.autocast "
               "has no float8 dtype: [fp8] runs linear layers in float8 inside autocast float16 "
               "or bfloat16)",
               e->value);
    } else {
        err_at(c, e, "bad value '%s' for autocast: expected off, float16 or bfloat16", e->value);
    }
}

static void key_loss_in_autocast(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "loss_in_autocast", &c->cfg->loss_in_autocast);
}

static void key_master_weights(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "master_weights", &c->cfg->master_weights);
}

/* export_params: the dtype an imported model's graph was exported with (ampscope import) */
static void key_export_params(parse_ctx *c, entry *e)
{
    c->cfg->exported = parse_dtype(c, e, "export_params", false, &c->cfg->export_params);
}

void parse_precision_section(parse_ctx *c)
{
    static const key_def defs[] = {{"params", key_params},
                                   {"autocast", key_autocast},
                                   {"loss_in_autocast", key_loss_in_autocast},
                                   {"master_weights", key_master_weights},
                                   {"export_params", key_export_params}};
    parse_keyed(c, SEC_PRECISION, defs, 5);
    /* torch.export bakes dtype-dependent Python into the graph (`.to(x.dtype)` becomes
     * `.to(torch.float32)`): the graph holds for the dtype it was exported with only */
    entry *e = find_entry(c, SEC_PRECISION, "params");
    if (c->cfg->exported && c->cfg->params != c->cfg->export_params)
        err_at(c, e ? e : find_entry(c, SEC_PRECISION, "export_params"),
               "params = %s, but the graph was exported with %s parameters (export_params): "
               "an export bakes dtype-dependent code into the graph (.to(x.dtype) becomes "
               ".to(torch.%s)); import the model again with --params %s",
               dtype_name(c->cfg->params), dtype_name(c->cfg->export_params),
               dtype_name(c->cfg->export_params), dtype_name(c->cfg->params));
}

static void key_enabled(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "enabled", &c->cfg->scaler);
}

static void key_init_scale(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "init_scale", POSITIVE, &c->cfg->init_scale);
}

static void key_growth_factor(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "growth_factor", ABOVE_ONE, &c->cfg->growth_factor);
}

static void key_backoff_factor(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "backoff_factor", UNIT_OPEN, &c->cfg->backoff_factor);
}

static void key_growth_interval(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "growth_interval", 1, &c->cfg->growth_interval);
}

void parse_scaler_section(parse_ctx *c)
{
    static const key_def defs[] = {{"enabled", key_enabled},
                                   {"init_scale", key_init_scale},
                                   {"growth_factor", key_growth_factor},
                                   {"backoff_factor", key_backoff_factor},
                                   {"growth_interval", key_growth_interval}};
    c->cfg->scaler = c->sec_given[SEC_SCALER];
    parse_keyed(c, SEC_SCALER, defs, 5);
}

static void key_schedule(parse_ctx *c, entry *e)
{
    static const char *const opts[] = {"T_max", "eta_min"};
    case_config *cfg = c->cfg;
    const char *v[2];
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "schedule", schedule_names, 2);
    bool cosine = k == SCHEDULE_COSINE;
    if (k >= 0 && parse_options(c, e, &t, 1, schedule_names[k], opts, cosine ? 2 : 0, v)) {
        cfg->schedule = (schedule_kind)k;
        if (cosine && !v[0])
            err_at(c, e, "cosine needs T_max=N");
        else if (cosine)
            parse_int(c, e, v[0], "T_max", 1, &cfg->t_max);
        if (cosine && v[1])
            parse_real(c, e, v[1], "eta_min", ANY, &cfg->eta_min);
    }
    free(t.buf);
}

static void key_steps(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "steps", 1, &c->cfg->steps);
}

static void key_seed(parse_ctx *c, entry *e)
{
    const char *s = e->value;
    char *end;
    errno = 0;
    if (isdigit((unsigned char)s[0])) {
        unsigned long long v = strtoull(s, &end, 10);
        if (!*end && errno != ERANGE) {
            c->cfg->seed = v;
            return;
        }
    }
    err_at(c, e, "bad number '%s' for seed: expected an integer from 0 to 2^64-1", s);
}

static void key_accumulate(parse_ctx *c, entry *e)
{
    if (parse_int(c, e, e->value, "accumulate", 1, &c->cfg->accumulate) &&
        c->cfg->accumulate > CASE_MAX_ACCUMULATE)
        err_at(c, e, "accumulate = %lld: at most %d micro-batches per step",
               (long long)c->cfg->accumulate, CASE_MAX_ACCUMULATE);
}

static void key_delay_unscale(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "delay_unscale", &c->cfg->delay_unscale);
}

static void key_clip_grad_norm(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "clip_grad_norm", POSITIVE, &c->cfg->clip_grad_norm);
}

/* clip_grad_norm_'s norm_type: a positive number or inf */
static void key_norm_type(parse_ctx *c, entry *e)
{
    if (strcmp(e->value, "inf") == 0)
        c->cfg->norm_type = INFINITY;
    else
        parse_real(c, e, e->value, "norm_type", POSITIVE, &c->cfg->norm_type);
}

static void key_error_if_nonfinite(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "error_if_nonfinite", &c->cfg->error_if_nonfinite);
}

static void key_clip_grad_value(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "clip_grad_value", POSITIVE, &c->cfg->clip_grad_value);
}

static void key_clip_before_unscale(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "clip_before_unscale", &c->cfg->clip_before_unscale);
}

/* the [train] keys that need another key or section ([precision] is parsed before) */
static void train_checks(parse_ctx *c)
{
    const case_config *cfg = c->cfg;
    entry *e = find_entry(c, SEC_TRAIN, "delay_unscale");
    if (e && cfg->delay_unscale && !cfg->master_weights)
        err_at(c, e, "delay_unscale = yes needs [precision] master_weights = yes (without "
                     "master weights .grad always accumulates in its own dtype)");
    static const char *const needs_clip[] = {"norm_type", "error_if_nonfinite"};
    for (int i = 0; i < 2; i++)
        if ((e = find_entry(c, SEC_TRAIN, needs_clip[i])) && cfg->clip_grad_norm == 0)
            err_at(c, e, "%s is an option of clip_grad_norm: set clip_grad_norm = MAX",
                   needs_clip[i]);
    e = find_entry(c, SEC_TRAIN, "clip_before_unscale");
    if (e && cfg->clip_before_unscale && cfg->clip_grad_norm == 0 && cfg->clip_grad_value == 0)
        err_at(c, e, "clip_before_unscale = yes needs clip_grad_norm or clip_grad_value");
    if (e && cfg->clip_before_unscale && !cfg->scaler)
        err_at(c, e, "clip_before_unscale = yes needs a [scaler]: without one nothing is scaled");
    if (e && cfg->clip_before_unscale && cfg->master_weights && !cfg->delay_unscale &&
        cfg->accumulate > 1)
        err_at(c, e, "clip_before_unscale = yes with master weights and accumulate > 1 needs "
                     "delay_unscale = yes: else each micro-batch is unscaled as it is added");
}

void parse_train_section(parse_ctx *c)
{
    static const key_def defs[] = {{"loss", key_loss},
                                   {"optimizer", key_optimizer},
                                   {"schedule", key_schedule},
                                   {"steps", key_steps},
                                   {"seed", key_seed},
                                   {"accumulate", key_accumulate},
                                   {"delay_unscale", key_delay_unscale},
                                   {"clip_grad_norm", key_clip_grad_norm},
                                   {"norm_type", key_norm_type},
                                   {"error_if_nonfinite", key_error_if_nonfinite},
                                   {"clip_grad_value", key_clip_grad_value},
                                   {"clip_before_unscale", key_clip_before_unscale}};
    c->cfg->accumulate = 1; /* the defaults of the keys below (set_defaults' are the others') */
    c->cfg->norm_type = 2.0;
    parse_keyed(c, SEC_TRAIN, defs, (int)(sizeof defs / sizeof defs[0]));
    train_checks(c);
}

/* Whether layer `name` exists and has parameter `param` ("weight" or "bias"). */
static bool check_init_layer(parse_ctx *c, entry *e, const char *name, const char *param)
{
    const case_config *cfg = c->cfg;
    const char *names[CASE_MAX_LAYERS];
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        names[i] = l->name;
        if (strcmp(l->name, name) != 0)
            continue;
        const layer_def *d = layer_def_of(l->kind);
        layer_param ps[LAYER_MAX_PARAMS];
        int n = d->params(l, ps);
        if (n == 0) {
            err_at(c, e, "layer %s is a %s: it has no parameters", name, d->name);
            return false;
        }
        if (*l->params_prefix) {
            char first[CASE_NAME_MAX];
            layer_param_name(l, &ps[0], first, sizeof first);
            err_at(c, e, "layer %s names its tensors after params=%s: give %s, ...", name,
                   l->params_prefix, first);
            return false;
        }
        if (l->tied >= 0 && strcmp(param, "weight") == 0) { /* weight=LAYER.weight */
            err_at(c, e, "%s.weight is %s.weight (a tied weight): give %s.weight", name,
                   cfg->layers[l->tied].name, cfg->layers[l->tied].name);
            return false;
        }
        for (int k = 0; k < n; k++)
            if (strcmp(ps[k].name, param) == 0)
                return true;
        /* a parameter a layer of its kind has is missing when its option of that name says no */
        err_at(c, e, "layer %s has %s=no: there is no %s.%s", name, param, name, param);
        return false;
    }
    char *h = hint(name, names, cfg->n_layers, "layers");
    err_at(c, e, "unknown layer '%s' in [init] key '%s.%s'; %s", name, name, param, h);
    free(h);
    return false;
}

/* Checks an [init] key's form, LAYER.weight or LAYER.bias; on success the layer name goes to
 * layer and its parameter to *param. */
static bool parse_init_key(parse_ctx *c, entry *e, char *layer, const char **param)
{
    static const char *const params[] = {"weight", "bias"};
    const char *dot = strrchr(e->key, '.');
    size_t len = dot ? (size_t)(dot - e->key) : 0;
    if (!dot || find_name(params, 2, dot + 1) < 0) {
        const char *near = dot ? closest(dot + 1, params, 2) : NULL;
        if (near)
            err_at(c, e, "bad key '%s' in [init]; did you mean '%.*s.%s'?", e->key, (int)len,
                   e->key, near);
        else
            err_at(c, e, "bad key '%s' in [init]: expected LAYER.weight or LAYER.bias", e->key);
        return false;
    }
    if (len >= LAYER_NAME_MAX) {
        err_at(c, e, "bad layer name in [init] key '%s'", e->key);
        return false;
    }
    memcpy(layer, e->key, len);
    layer[len] = '\0';
    *param = dot + 1;
    if (!valid_layer_name(layer)) {
        err_at(c, e, "bad layer name '%s' in [init] key", layer);
        return false;
    }
    return true;
}

/* Whether `key` is the name of a parameter or buffer of a layer with params=PREFIX
 * (model.fc1.weight, bn.running_mean, cls_token) */
static bool prefixed_param(const case_config *cfg, const char *key)
{
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        layer_param ps[LAYER_MAX_PARAMS];
        int n = *l->params_prefix ? layer_def_of(l->kind)->params(l, ps) : 0;
        for (int k = l->tied >= 0; k < n; k++) {
            char name[CASE_NAME_MAX];
            layer_param_name(l, &ps[k], name, sizeof name);
            if (strcmp(name, key) == 0)
                return true;
        }
    }
    return false;
}

static void parse_init_entry(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    char layer[LAYER_NAME_MAX];
    const char *param;
    bool named = c->model_ok && prefixed_param(cfg, e->key);
    /* a [model] with errors may have lost the params= a key names: its errors come first */
    if (!named && !c->model_ok && (!strchr(e->key, '.') || strchr(e->key, '.') != strrchr(e->key, '.')))
        return;
    if (!named && !parse_init_key(c, e, layer, &param))
        return;
    if (!named && c->model_ok && cfg->n_layers > 0 && !check_init_layer(c, e, layer, param))
        return;
    if (cfg->n_inits == CASE_MAX_INITS) {
        err_at(c, e, "too many [init] keys (at most %d)", CASE_MAX_INITS);
        return;
    }
    init_spec *in = &cfg->inits[cfg->n_inits];
    int r = parse_file_value(c, e, in->path);
    if (r == 0)
        err_at(c, e, "bad value '%s' for %s: expected file PATH", e->value, e->key);
    if (r <= 0)
        return;
    strcpy(in->tensor, e->key);
    in->line = e->line;
    cfg->n_inits++;
}

void parse_init_section(parse_ctx *c)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == SEC_INIT && need_value(c, &c->entries[i]))
            parse_init_entry(c, &c->entries[i]);
}

static void parse_expect_entry(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    expect_spec x = {.line = e->line};
    if (cfg->n_expects == CASE_MAX_EXPECTS) {
        err_at(c, e, "too many [expect] keys (at most %d)", CASE_MAX_EXPECTS);
        return;
    }
    if (strcmp(e->key, "error") == 0) {
        const char *text = strcmp(e->value, "none") == 0 ? "" : e->value;
        if (strlen(text) >= CASE_TEXT_MAX) {
            err_at(c, e, "expected error text too long (at most %d bytes)", CASE_TEXT_MAX - 1);
            return;
        }
        x.kind = EXPECT_ERROR;
        strcpy(x.text, text);
    } else if (strncmp(e->key, "dtype ", 6) == 0) {
        const char *tensor = e->key + 6;
        if (!valid_tensor_name(tensor)) {
            err_at(c, e,
                   "bad tensor name '%s' in [expect]: expected [A-Za-z0-9_.@]+, at most "
                   "%d characters",
                   tensor, CASE_NAME_MAX - 1);
            return;
        }
        if (!parse_dtype(c, e, e->key, true, &x.dt))
            return;
        x.kind = EXPECT_DTYPE;
        strcpy(x.tensor, tensor);
    } else if (strncmp(e->key, "saturated ", 10) == 0) {
        const char *tensor = e->key + 10; /* an fp8 operand: check_expect_fp8 once [fp8] is read */
        if (!valid_tensor_name(tensor)) {
            err_at(c, e,
                   "bad operand name '%s' in [expect]: expected LAYER.input, LAYER.weight or "
                   "LAYER.out.grad, at most %d characters",
                   tensor, CASE_NAME_MAX - 1);
            return;
        }
        if (!parse_bool(c, e, e->value, e->key, &x.saturated))
            return;
        x.kind = EXPECT_SATURATED;
        strcpy(x.tensor, tensor);
    } else {
        static const char *const error_key[] = {"error"};
        if (closest(e->key, error_key, 1))
            err_at(c, e, "unknown key '%s' in [expect]; did you mean 'error'?", e->key);
        else
            err_at(c, e,
                   "unknown key '%s' in [expect]; expected 'dtype TENSOR', 'saturated OPERAND' "
                   "or 'error'",
                   e->key);
        return;
    }
    cfg->expects[cfg->n_expects++] = x;
}

void parse_expect_section(parse_ctx *c)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == SEC_EXPECT && need_value(c, &c->entries[i]))
            parse_expect_entry(c, &c->entries[i]);
}

/* ---- [fp8]: te.Linear under fp8_autocast (FP8-SPEC.md; fp8_linear.h) ---- */

const char *const fp8_format_names[] = {"e4m3", "hybrid"};              /* fp8_format_kind */
const char *const fp8_recipe_names[FP8_RECIPE_COUNT] = {"delayed", "current", "mxfp8", "nvfp4",
                                                        "mxfp4"}; /* fp8_recipe_kind */
const char *const fp8_amax_algo_names[] = {"max", "most_recent"};       /* fp8_amax_algo */

static void key_fp8_enabled(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "enabled", &c->cfg->fp8);
}

static void key_fp8_format(parse_ctx *c, entry *e)
{
    int k = parse_choice(c, e, e->value, "format", fp8_format_names, 2);
    if (k >= 0)
        c->cfg->fp8_format = (fp8_format_kind)k;
}

static void key_fp8_recipe(parse_ctx *c, entry *e)
{
    int k = parse_choice(c, e, e->value, "recipe", fp8_recipe_names, FP8_RECIPE_COUNT);
    if (k >= 0)
        c->cfg->fp8_recipe = (fp8_recipe_kind)k;
}

static void key_fp8_history(parse_ctx *c, entry *e)
{
    int64_t v = 0;
    if (parse_int(c, e, e->value, "amax_history_len", 1, &v) && v > (1 << 20))
        err_at(c, e, "amax_history_len = %lld: at most %d rows", (long long)v, 1 << 20);
    else if (!e->failed)
        c->cfg->fp8_amax_history_len = v;
}

static void key_fp8_algo(parse_ctx *c, entry *e)
{
    int k = parse_choice(c, e, e->value, "amax_compute_algo", fp8_amax_algo_names, 2);
    if (k >= 0)
        c->cfg->fp8_amax_compute_algo = k;
}

static void key_fp8_margin(parse_ctx *c, entry *e)
{
    int64_t v = 0;
    if (parse_int(c, e, e->value, "margin", 0, &v) && v > 64)
        err_at(c, e, "margin = %lld: at most 64 (scale / 2^margin)", (long long)v);
    else if (!e->failed)
        c->cfg->fp8_margin = v;
}

static void key_fp4_disable_rht(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "disable_rht", &c->cfg->fp4_disable_rht);
}
static void key_fp4_disable_sr(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "disable_stochastic_rounding",
               &c->cfg->fp4_disable_stochastic_rounding);
}
static void key_fp4_disable_2d(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "disable_2d_quantization", &c->cfg->fp4_disable_2d_quantization);
}

/* layers = q, k, v: layers of [model] whose kind runs as te.Linear (layer_def.te_linear),
 * each once */
static void key_fp8_layers(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    if (!c->model_ok) /* the names resolve against [model], whose errors are reported */
        return;
    char *list = xstrdup(e->value);
    bool any = false;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        name = trim(name);
        int i = 0;
        while (i < cfg->n_layers && strcmp(cfg->layers[i].name, name) != 0)
            i++;
        if (!*name) {
            err_at(c, e, "layers: an empty name in '%s'", e->value);
        } else if (i == cfg->n_layers) {
            err_at(c, e, "layers: no layer '%s' in [model]", name);
        } else if (!layer_def_of(cfg->layers[i].kind)->te_linear) {
            err_at(c, e, "layers: '%s' is a %s layer; te.Linear replaces linear layers only",
                   name, layer_def_of(cfg->layers[i].kind)->name);
        } else if (cfg->fp8_layer[i]) {
            err_at(c, e, "layers: '%s' is named twice", name);
        } else {
            cfg->fp8_layer[i] = any = true;
        }
    }
    free(list);
    if (!any && !e->failed)
        err_at(c, e, "layers: no layer named");
}

void parse_fp8_section(parse_ctx *c)
{
    static const key_def defs[] = {{"enabled", key_fp8_enabled},
                                   {"format", key_fp8_format},
                                   {"recipe", key_fp8_recipe},
                                   {"amax_history_len", key_fp8_history},
                                   {"amax_compute_algo", key_fp8_algo},
                                   {"margin", key_fp8_margin},
                                   {"disable_rht", key_fp4_disable_rht},
                                   {"disable_stochastic_rounding", key_fp4_disable_sr},
                                   {"disable_2d_quantization", key_fp4_disable_2d},
                                   {"layers", key_fp8_layers}};
    parse_keyed(c, SEC_FP8, defs, 10);
    entry *where = find_entry(c, SEC_FP8, "recipe");
    where = where ? where : find_entry(c, SEC_FP8, "enabled");
    c->cfg->fp8_line = where ? where->line : 0;
    fp8_recipe_kind recipe = c->cfg->fp8_recipe;
    /* MXFP8BlockScaling's fp8_format defaults to E4M3 (transformer_engine/common/recipe/
     * __init__.py; HYBRID is accepted there and quantizes the gradients to E5M2) */
    if (recipe == FP8_RECIPE_MXFP8 && !find_entry(c, SEC_FP8, "format"))
        c->cfg->fp8_format = FP8_FORMAT_E4M3;
    /* the delayed-scaling keys mean nothing to current scaling or MXFP8 (MXFP8BlockScaling's
     * margin is unused by its quantizer: each block's scale comes from the block's amax) */
    static const char *const delayed_only[] = {"amax_history_len", "amax_compute_algo", "margin"};
    for (int k = 0; k < 3 && recipe != FP8_RECIPE_DELAYED; k++) {
        entry *e = find_entry(c, SEC_FP8, delayed_only[k]);
        if (e && !e->failed)
            err_at(c, e, "%s applies to recipe = delayed only (%s%s)", delayed_only[k],
                   recipe == FP8_RECIPE_CURRENT ? "current scaling takes each tensor's own amax"
                                                : fp8_recipe_names[recipe],
                   recipe == FP8_RECIPE_CURRENT ? ""
                                                : " takes each block's scale from the block's amax");
    }
    /* NVFP4BlockScaling's switches (transformer_engine/common/recipe/__init__.py), their
     * defaults from TE's NVTE_NVFP4_DISABLE_* variables; the float8 format means nothing to
     * the 4-bit recipes, whose values are all E2M1 */
    static const struct {
        const char *key, *env;
        size_t off;
    } nv_only[] = {
        {"disable_rht", "NVTE_NVFP4_DISABLE_RHT", offsetof(case_config, fp4_disable_rht)},
        {"disable_stochastic_rounding", "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING",
         offsetof(case_config, fp4_disable_stochastic_rounding)},
        {"disable_2d_quantization", "NVTE_NVFP4_DISABLE_2D_QUANTIZATION",
         offsetof(case_config, fp4_disable_2d_quantization)},
    };
    for (int k = 0; k < 3; k++) {
        entry *e = find_entry(c, SEC_FP8, nv_only[k].key);
        const char *env = getenv(nv_only[k].env);
        if (e && !e->failed && recipe != FP8_RECIPE_NVFP4)
            err_at(c, e, "%s applies to recipe = nvfp4 only (TE's NVFP4BlockScaling)",
                   nv_only[k].key);
        else if (!e && recipe == FP8_RECIPE_NVFP4 && env && strcmp(env, "1") == 0)
            *(bool *)((char *)c->cfg + nv_only[k].off) = true;
    }
    entry *fe = find_entry(c, SEC_FP8, "format");
    if (fe && !fe->failed && FP8_RECIPE_IS_FP4(recipe))
        err_at(c, fe, "format applies to the float8 recipes; %s quantizes every operand to "
                      "float4_e2m1fn", fp8_recipe_names[recipe]);
}
