/*
 * case/optim.c: [train]'s optimizer key, `optimizer = KIND [name=value]...`, read through
 * the optimizer registry (optimizers.h: each kind's name, options, PyTorch's defaults and
 * the checks PyTorch makes of their values).
 */
#include "parse.h"

#include <stdlib.h>
#include <string.h>

#include "train/optimizers.h"

/* The optimizer's betas: "b1,b2", each in [0, 1). */
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

/* One optimizer option into its optim_config field (optimizers.h says how it is read). */
static bool parse_opt_value(parse_ctx *c, entry *e, const optim_opt *d, const char *v,
                            optim_config *o)
{
    char *field = (char *)o + d->offset;
    bool yes;
    switch (d->type) {
    case OPTIM_OPT_NONNEG:
        return parse_real(c, e, v, d->name, NONNEG, (double *)field);
    case OPTIM_OPT_ANY:
        return parse_real(c, e, v, d->name, ANY, (double *)field);
    case OPTIM_OPT_BOOL:
        return parse_bool(c, e, v, d->name, (bool *)field);
    case OPTIM_OPT_BETAS:
        return parse_betas(c, e, v, o);
    case OPTIM_OPT_NO_ONLY:
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
    const optim_def *d = optim_def_of(kind);
    const char *names[OPTIM_MAX_OPTS] = {0}, *vals[OPTIM_MAX_OPTS];
    for (int i = 0; i < d->n_opts; i++)
        names[i] = d->opts[i].name;
    if (!parse_options(c, e, t, 1, optim_name(kind), names, d->n_opts, vals))
        return;
    optim_config o = optim_default(kind);
    bool ok = true;
    for (int i = 0; i < d->n_opts; i++)
        if (vals[i])
            ok = parse_opt_value(c, e, &d->opts[i], vals[i], &o) && ok;
    const char *why = ok && d->check ? d->check(&o) : NULL;
    if (why) {
        err_at(c, e, "%s", why);
        ok = false;
    }
    if (ok)
        c->cfg->optim = o;
}

void key_optimizer(parse_ctx *c, entry *e)
{
    const char *names[OPTIM_KIND_COUNT];
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        names[k] = optim_name((optim_kind)k);
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "optimizer", names, OPTIM_KIND_COUNT);
    if (k >= 0)
        parse_optimizer(c, e, &t, (optim_kind)k);
    free(t.buf);
}
