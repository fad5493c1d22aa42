/*
 * case_optim.c: [train]'s optimizer key, `optimizer = sgd|adam|rmsprop [name=value]...`:
 * each optimizer's options (the opt_def tables), PyTorch's defaults, and the checks
 * PyTorch makes of their values.
 */
#include "case_parse.h"

#include <stdlib.h>
#include <string.h>

const char *const optim_names[] = {"sgd", "adam", "rmsprop"}; /* optim_kind */

/* How an optimizer option is read, and into which field of optim_config. */
typedef enum opt_type { OPT_NONNEG, OPT_ANY, OPT_BOOL, OPT_BETAS, OPT_NO_ONLY } opt_type;
typedef struct opt_def {
    const char *name;
    opt_type type;
    size_t offset;
} opt_def;
#define OPT(name, type, field)                                                                     \
    {                                                                                              \
        name, type, offsetof(optim_config, field)                                                  \
    }

static const opt_def sgd_opts[] = {OPT("lr", OPT_NONNEG, lr), OPT("momentum", OPT_NONNEG, momentum),
                                   OPT("dampening", OPT_ANY, dampening),
                                   OPT("nesterov", OPT_BOOL, nesterov),
                                   OPT("weight_decay", OPT_NONNEG, weight_decay)};
static const opt_def adam_opts[] = {OPT("lr", OPT_NONNEG, lr),
                                    OPT("betas", OPT_BETAS, beta1),
                                    OPT("eps", OPT_NONNEG, eps),
                                    OPT("weight_decay", OPT_NONNEG, weight_decay),
                                    {"amsgrad", OPT_NO_ONLY, 0}};
static const opt_def rmsprop_opts[] = {OPT("lr", OPT_NONNEG, lr),
                                       OPT("alpha", OPT_NONNEG, alpha),
                                       OPT("eps", OPT_NONNEG, eps),
                                       OPT("weight_decay", OPT_NONNEG, weight_decay),
                                       OPT("momentum", OPT_NONNEG, momentum),
                                       OPT("centered", OPT_BOOL, centered)};
static const struct {
    const opt_def *defs;
    int n;
} optim_opts[] = {[OPTIM_SGD] = {sgd_opts, 5},
                  [OPTIM_ADAM] = {adam_opts, 5},
                  [OPTIM_RMSPROP] = {rmsprop_opts, 6}};

/* PyTorch 2.x's defaults. */
optim_config default_optim(optim_kind kind)
{
    return (optim_config){.kind = kind,
                          .lr = kind == OPTIM_RMSPROP ? 1e-2 : 1e-3,
                          .beta1 = 0.9,
                          .beta2 = 0.999,
                          .eps = 1e-8,
                          .alpha = 0.99};
}

static bool parse_betas(parse_ctx *c, entry *e, const char *v, optim_config *o)
{
    char *s = xstrdup(v), *comma = strchr(s, ',');
    bool ok = false;
    if (!comma || strchr(comma + 1, ',')) {
        err_at(c, e, "bad value '%s' for betas: expected two numbers like 0.9,0.999", v);
    } else {
        *comma = '\0';
        ok = parse_real(c, e, s, "beta1", UNIT_HALF, &o->beta1);
        ok = parse_real(c, e, comma + 1, "beta2", UNIT_HALF, &o->beta2) && ok;
    }
    free(s);
    return ok;
}

static bool parse_opt_value(parse_ctx *c, entry *e, const opt_def *d, const char *v,
                            optim_config *o)
{
    char *field = (char *)o + d->offset;
    bool yes;
    switch (d->type) {
    case OPT_NONNEG:
        return parse_real(c, e, v, d->name, NONNEG, (double *)field);
    case OPT_ANY:
        return parse_real(c, e, v, d->name, ANY, (double *)field);
    case OPT_BOOL:
        return parse_bool(c, e, v, d->name, (bool *)field);
    case OPT_BETAS:
        return parse_betas(c, e, v, o);
    case OPT_NO_ONLY:
        if (!parse_bool(c, e, v, d->name, &yes))
            return false;
        if (yes)
            err_at(c, e, "%s=yes is not supported", d->name);
        return !yes;
    }
    return false;
}

static void parse_optimizer(parse_ctx *c, entry *e, const words *t, optim_kind kind)
{
    const opt_def *defs = optim_opts[kind].defs;
    int n = optim_opts[kind].n;
    const char *names[8], *vals[8];
    for (int i = 0; i < n; i++)
        names[i] = defs[i].name;
    if (!parse_options(c, e, t, 1, optim_names[kind], names, n, vals))
        return;
    optim_config o = default_optim(kind);
    bool ok = true;
    for (int i = 0; i < n; i++)
        if (vals[i])
            ok = parse_opt_value(c, e, &defs[i], vals[i], &o) && ok;
    if (ok && kind == OPTIM_SGD && o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
        err_at(c, e, "nesterov=yes requires momentum > 0 and dampening = 0");
        ok = false;
    }
    if (ok)
        c->cfg->optim = o;
}

void key_optimizer(parse_ctx *c, entry *e)
{
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "optimizer", optim_names, 3);
    if (k >= 0)
        parse_optimizer(c, e, &t, (optim_kind)k);
    free(t.buf);
}
