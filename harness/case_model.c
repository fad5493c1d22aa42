/*
 * case_model.c: [model]'s layers (`NAME = KIND [NUMBERS] [name=value]...`) and [train]'s
 * loss (`loss = KIND [name=value]...`), read as the kinds' definitions say (layers/layer.h):
 * the kind's name, the numbers of its signature, then its options.
 */
#include "case_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The words of a signature ("IN -> OUT") into w; returns how many. Upper-case words are
 * numbers, the others literal. */
static int signature_words(const char *sig, char *buf, size_t len, char **w, int max)
{
    snprintf(buf, len, "%s", sig);
    int n = 0;
    char *save;
    for (char *p = strtok_r(buf, " ", &save); p && n < max; p = strtok_r(NULL, " ", &save))
        w[n++] = p;
    return n;
}

static bool is_number_word(const char *w) { return w[0] >= 'A' && w[0] <= 'Z'; }

static bool parse_layer_words(parse_ctx *c, entry *e, const words *t, layer_spec *l)
{
    const char *kinds[LAYER_KIND_COUNT];
    for (int i = 0; i < LAYER_KIND_COUNT; i++)
        kinds[i] = layer_def_of((layer_kind)i)->name;
    int k = parse_choice(c, e, t->w[0], "layer kind", kinds, LAYER_KIND_COUNT);
    if (k < 0)
        return false;
    const layer_def *d = layer_def_of((layer_kind)k);
    if (d->n_inputs > 1) { /* until [model] can name a layer's inputs */
        err_at(c, e, "layer %s: %s takes %d inputs, which [model] cannot name yet", e->key,
               d->name, d->n_inputs);
        return false;
    }
    l->kind = (layer_kind)k;
    kind_option_defaults(d->opts, d->n_opts, l);
    char buf[128], *sig[MAX_WORDS];
    int n_sig = signature_words(d->signature, buf, sizeof buf, sig, MAX_WORDS);
    bool form = t->n >= 1 + n_sig;
    for (int i = 0; form && i < n_sig; i++)
        form = is_number_word(sig[i]) || strcmp(t->w[1 + i], sig[i]) == 0;
    if (!form) {
        err_at(c, e, "bad value '%s' for layer %s: expected %s %s, then options", e->value, e->key,
               d->name, d->signature);
        return false;
    }
    bool ok = true;
    for (int i = 0, a = 0; i < n_sig; i++) {
        if (!is_number_word(sig[i]))
            continue;
        const kind_arg *arg = &d->args[a++];
        ok = parse_int(c, e, t->w[1 + i], arg->name, arg->min,
                       (int64_t *)((char *)l + arg->offset)) &&
             ok;
    }
    const char *vals[LAYER_MAX_OPTS];
    if (!kind_option_names(c, e, t, 1 + n_sig, d->name, d->opts, d->n_opts, vals))
        return false;
    return kind_option_values(c, e, d->name, d->opts, d->n_opts, vals, l) && ok;
}

void parse_model_section(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    c->model_ok = true;
    for (int i = 0; i < c->n_entries; i++) {
        entry *e = &c->entries[i];
        if (e->sec != SEC_MODEL)
            continue;
        if (!need_value(c, e)) {
            c->model_ok = false;
            continue;
        }
        if (!valid_layer_name(e->key)) {
            err_at(c, e,
                   "bad layer name '%s': expected [A-Za-z_][A-Za-z0-9_]*, at most %d "
                   "characters",
                   e->key, LAYER_NAME_MAX - 1);
            c->model_ok = false;
            continue;
        }
        if (cfg->n_layers == CASE_MAX_LAYERS) {
            err_at(c, e, "too many layers (at most %d)", CASE_MAX_LAYERS);
            c->model_ok = false;
            continue;
        }
        layer_spec *l = &cfg->layers[cfg->n_layers];
        c->layer_entry[cfg->n_layers++] = e;
        *l = (layer_spec){.line = e->line};
        strcpy(l->name, e->key);
        words t;
        if (!split_words(c, e, &t)) {
            c->model_ok = false;
            continue;
        }
        c->model_ok = parse_layer_words(c, e, &t, l) && c->model_ok;
        free(t.buf);
    }
}

void key_loss(parse_ctx *c, entry *e)
{
    const char *kinds[LOSS_KIND_COUNT], *vals[LAYER_MAX_OPTS];
    for (int i = 0; i < LOSS_KIND_COUNT; i++)
        kinds[i] = loss_def_of((loss_kind)i)->name;
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "loss", kinds, LOSS_KIND_COUNT);
    const loss_def *d = k >= 0 ? loss_def_of((loss_kind)k) : NULL;
    if (d && kind_option_names(c, e, &t, 1, d->name, d->opts, d->n_opts, vals)) {
        c->cfg->loss = (loss_kind)k;
        kind_option_defaults(d->opts, d->n_opts, c->cfg);
        kind_option_values(c, e, d->name, d->opts, d->n_opts, vals, c->cfg);
    }
    free(t.buf);
}
