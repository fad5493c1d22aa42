/* optimizers.c: the optimizer registry's rows (see optimizers.h): torch.optim.SGD, Adam,
 * RMSprop and AdamW of PyTorch 2.x, their keywords and defaults. */
#include "optimizers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT(name, type, field)                                                                     \
    {                                                                                              \
        name, type, offsetof(optim_config, field)                                                  \
    }

static const char *sgd_check(const optim_config *o)
{
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return "nesterov=yes requires momentum > 0 and dampening = 0";
    return NULL;
}

static const int sgd_json_order[] = {0, 4, 1, 2, 3}; /* lr, weight_decay, momentum, ... */

const optim_def optim_defs[OPTIM_KIND_COUNT] = {
    [OPTIM_SGD] = {.n_opts = 5,
                   .opts = {OPT("lr", OPTIM_OPT_NONNEG, lr),
                            OPT("momentum", OPTIM_OPT_NONNEG, momentum),
                            OPT("dampening", OPTIM_OPT_ANY, dampening),
                            OPT("nesterov", OPTIM_OPT_BOOL, nesterov),
                            OPT("weight_decay", OPTIM_OPT_NONNEG, weight_decay)},
                   .defaults = {.lr = 1e-3},
                   .check = sgd_check,
                   .n_states = 1,
                   .states = {{"momentum_buffer", OPTIM_STATE_IF_MOMENTUM}},
                   .json_order = sgd_json_order},
    [OPTIM_ADAM] = {.n_opts = 5,
                    .opts = {OPT("lr", OPTIM_OPT_NONNEG, lr),
                             OPT("betas", OPTIM_OPT_BETAS, beta1),
                             OPT("eps", OPTIM_OPT_NONNEG, eps),
                             OPT("weight_decay", OPTIM_OPT_NONNEG, weight_decay),
                             {"amsgrad", OPTIM_OPT_NO_ONLY, 0}},
                    .defaults = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8},
                    .n_states = 2,
                    .states = {{"exp_avg", OPTIM_STATE_ALWAYS},
                               {"exp_avg_sq", OPTIM_STATE_ALWAYS}}},
    [OPTIM_RMSPROP] = {.n_opts = 6,
                       .opts = {OPT("lr", OPTIM_OPT_NONNEG, lr),
                                OPT("alpha", OPTIM_OPT_NONNEG, alpha),
                                OPT("eps", OPTIM_OPT_NONNEG, eps),
                                OPT("weight_decay", OPTIM_OPT_NONNEG, weight_decay),
                                OPT("momentum", OPTIM_OPT_NONNEG, momentum),
                                OPT("centered", OPTIM_OPT_BOOL, centered)},
                       .defaults = {.lr = 1e-2, .alpha = 0.99, .eps = 1e-8},
                       .n_states = 3,
                       .states = {{"square_avg", OPTIM_STATE_ALWAYS},
                                  {"momentum_buffer", OPTIM_STATE_IF_MOMENTUM},
                                  {"grad_avg", OPTIM_STATE_IF_CENTERED}}},
    /* torch/optim/adamw.py: Adam's keywords with weight_decay=1e-2, decoupled */
    [OPTIM_ADAMW] =
        {.n_opts = 5,
         .opts = {OPT("lr", OPTIM_OPT_NONNEG, lr),
                  OPT("betas", OPTIM_OPT_BETAS, beta1),
                  OPT("eps", OPTIM_OPT_NONNEG, eps),
                  OPT("weight_decay", OPTIM_OPT_NONNEG, weight_decay),
                  {"amsgrad", OPTIM_OPT_NO_ONLY, 0}},
         .defaults = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2},
         .n_states = 2,
         .states = {{"exp_avg", OPTIM_STATE_ALWAYS}, {"exp_avg_sq", OPTIM_STATE_ALWAYS}}},
};

int optim_find(const char *name)
{
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        if (strcmp(optim_name((optim_kind)k), name) == 0)
            return k;
    return -1;
}

optim_config optim_default(optim_kind kind)
{
    optim_config o = optim_defs[kind].defaults;
    o.kind = kind;
    return o;
}

static bool state_present(const optim_config *c, optim_state_when when)
{
    switch (when) {
    case OPTIM_STATE_ALWAYS:
        return true;
    case OPTIM_STATE_IF_MOMENTUM:
        return c->momentum > 0;
    case OPTIM_STATE_IF_CENTERED:
        return c->centered;
    }
    return false;
}

/* the present states' count, and the name of slot k (NULL past the last) */
static int present_states(const optim_config *c, int k, const char **name)
{
    const optim_def *d = &optim_defs[c->kind];
    int n = 0;
    *name = NULL;
    for (int i = 0; i < d->n_states; i++) {
        if (!state_present(c, d->states[i].when))
            continue;
        if (n == k)
            *name = d->states[i].name;
        n++;
    }
    return n;
}

const char *optim_state_name(const optim_config *c, int k)
{
    const char *name;
    present_states(c, k, &name);
    return name;
}

void optim_format(const optim_config *o, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s lr=%g", optim_name(o->kind), o->lr);
    if (o->momentum != 0.0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " momentum=%g", o->momentum);
    if (o->weight_decay != 0.0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " weight_decay=%g", o->weight_decay);
}

static void write_option(FILE *f, const optim_opt *d, const optim_config *o,
                         void (*real)(FILE *f, double v))
{
    const char *field = (const char *)o + d->offset;
    fprintf(f, "\"%s\": ", d->name);
    switch (d->type) {
    case OPTIM_OPT_NONNEG:
    case OPTIM_OPT_ANY:
        real(f, *(const double *)field);
        return;
    case OPTIM_OPT_BOOL:
        fputs(*(const bool *)field ? "true" : "false", f);
        return;
    case OPTIM_OPT_BETAS:
        fputc('[', f);
        real(f, o->beta1);
        fputs(", ", f);
        real(f, o->beta2);
        fputc(']', f);
        return;
    case OPTIM_OPT_NO_ONLY:
        fputs("false", f);
        return;
    }
}

void optim_write_json(FILE *f, const optim_config *o, void (*real)(FILE *f, double v))
{
    const optim_def *d = &optim_defs[o->kind];
    fprintf(f, "{\"kind\": \"%s\", \"options\": {", optim_name(o->kind));
    for (int i = 0; i < d->n_opts; i++) {
        fputs(i ? ", " : "", f);
        write_option(f, &d->opts[d->json_order ? d->json_order[i] : i], o, real);
    }
    fputs("}}", f);
}

bool optim_registry_check(char *err, size_t len)
{
    for (int k = 0; k < OPTIM_KIND_COUNT; k++) {
        const optim_def *d = &optim_defs[k];
        const char *name = optim_name((optim_kind)k);
        if (d->n_opts <= 0 || d->n_opts > OPTIM_MAX_OPTS || d->n_states > OPTIM_MAX_STATE) {
            snprintf(err, len, "optimizer kind %d (%s): its registry row is not filled", k, name);
            return false;
        }
        for (int i = 0; i < d->n_opts; i++) {
            if (!d->opts[i].name) {
                snprintf(err, len, "optimizer %s: option %d has no name", name, i);
                return false;
            }
        }
        unsigned seen = 0; /* json_order: each option once */
        for (int i = 0; i < d->n_opts && d->json_order; i++)
            if (d->json_order[i] >= 0 && d->json_order[i] < d->n_opts)
                seen |= 1u << d->json_order[i];
        if (d->json_order && seen != (1u << d->n_opts) - 1) {
            snprintf(err, len, "optimizer %s: json_order does not list each option once", name);
            return false;
        }
        for (int v = 0; v < 4; v++) { /* momentum off/on x centered off/on */
            optim_config c = optim_default((optim_kind)k);
            c.momentum = v & 1 ? 0.9 : 0.0;
            c.centered = v & 2;
            const char *name;
            int n = present_states(&c, 0, &name);
            if (n != optim_state_count(&c)) {
                snprintf(err, len,
                         "optimizer %s (momentum %g, centered %s): %d state names, but "
                         "optim_state_count says %d",
                         name, c.momentum, c.centered ? "yes" : "no", n, optim_state_count(&c));
                return false;
            }
            if (!(optim_kind_states((optim_kind)k) & OPTIM_NS(n))) {
                snprintf(err, len,
                         "optimizer %s (momentum %g, centered %s) keeps %d states, a count its "
                         "row in OPTIM_KINDS (ops/optim_math.h) does not list",
                         name, c.momentum, c.centered ? "yes" : "no", n);
                return false;
            }
        }
    }
    return true;
}

/* A kind left half done is a bug of the build, found before any case is read (as the layer
 * registry's check in harness/layers/registry.c). */
__attribute__((constructor)) static void optim_registry_check_at_start(void)
{
    char err[256];
    if (!optim_registry_check(err, sizeof err)) {
        fprintf(stderr, "ampscope: internal error: %s (harness/train/optimizers.c)\n", err);
        abort();
    }
}
