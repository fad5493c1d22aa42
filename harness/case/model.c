/*
 * case/model.c: [model]'s layers (`NAME = KIND [NUMBERS] [INPUTS] [name=value]...`) and
 * [train]'s loss (`loss = KIND [name=value]...`), read as the kinds' definitions say
 * (layers/layer.h): the kind's name, the numbers of its signature, a multi-input kind's
 * input names, then its options, among them the graph's own: `from=NAME` (a one-input
 * kind's input) and `weight=LAYER.weight` (a tied weight). The names resolve once every
 * layer is read: to a layer above the line, or `input` (a reserved name). A kind that takes
 * Python scalars (a binary pointwise row) reads a number in an input's place as one:
 * `v = add ms 1e-6`, `r = sub 1.0 x` (layer_spec.scalar_operands). A one-input kind may
 * name its input first instead of from=: `p = pow x 2.0`.
 */
#include "parse.h"

#include "core/npy.h"

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

/* A word in an input's place that is a number (a layer's name starts with a letter or _) */
static bool is_scalar_word(const char *w)
{
    return (w[0] >= '0' && w[0] <= '9') || w[0] == '-' || w[0] == '+' || w[0] == '.';
}

/* The names a line gives for its inputs and tied weight, resolved once every layer is read
 * (a name defined below the line is an error of its own). "" where none is given. */
typedef struct layer_names {
    char in[LAYER_MAX_INPUTS][LAYER_NAME_MAX];
    char tied[LAYER_NAME_MAX + 8]; /* "tok.weight" */
    entry *e;
} layer_names;

/* Copies the value of a graph option (`from`, `weight`) out of the words and drops the
 * triple from t, so the kind's own options are read from what is left; false after an
 * error (given twice, too long, not a name=value triple). */
static bool take_graph_option(parse_ctx *c, entry *e, words *t, int first, const char *name,
                              char *out, size_t len)
{
    for (int i = first; i + 2 < t->n; i++) {
        if (strcmp(t->w[i], name) != 0 || strcmp(t->w[i + 1], "=") != 0)
            continue;
        if (*out) {
            err_at(c, e, "option '%s' given twice", name);
            return false;
        }
        if (strlen(t->w[i + 2]) >= len) {
            err_at(c, e, "%s=%s: the name is too long", name, t->w[i + 2]);
            return false;
        }
        strcpy(out, t->w[i + 2]);
        memmove(&t->w[i], &t->w[i + 3], sizeof(char *) * (size_t)(t->n - i - 3));
        t->n -= 3;
        i--;
    }
    return true;
}

/* A dtype number of a signature (KIND_ARG_DTYPE): a float dtype's name into *field, or
 * `OTHER.dtype`: OTHER becomes the layer's next input (resolved with the others) and
 * *field KIND_DTYPE_OF_INPUT. */
static bool parse_dtype_arg(parse_ctx *c, entry *e, const char *w, const char *what,
                            layer_spec *l, layer_names *ln, int64_t *field)
{
    const char *dot = strrchr(w, '.');
    if (dot && strcmp(dot + 1, "dtype") == 0) {
        if (dot == w || dot - w >= LAYER_NAME_MAX || l->n_inputs == LAYER_MAX_INPUTS) {
            err_at(c, e, "bad value '%s' for %s: expected LAYER.dtype, LAYER a layer's name", w,
                   what);
            return false;
        }
        snprintf(ln->in[l->n_inputs++], LAYER_NAME_MAX, "%.*s", (int)(dot - w), w);
        *field = KIND_DTYPE_OF_INPUT;
        return true;
    }
    dtype dt;
    if (dtype_parse(w, &dt) && !dtype_is_float8(dt)) {
        *field = dt;
        return true;
    }
    err_at(c, e, "bad value '%s' for %s: expected float32, float16, bfloat16 or LAYER.dtype", w,
           what);
    return false;
}

/* A constant's file (KIND_WORDS_PATH): its header's shape and dtype into l, and the file
 * the [init] entry of its value, "NAME.value" */
static bool parse_constant_file(parse_ctx *c, entry *e, const char *word, layer_spec *l)
{
    case_config *cfg = c->cfg;
    if (cfg->n_inits == CASE_MAX_INITS) {
        err_at(c, e, "too many [init] keys and constants (at most %d)", CASE_MAX_INITS);
        return false;
    }
    init_spec *in = &cfg->inits[cfg->n_inits];
    if (!parse_path_word(c, e, word, in->path))
        return false;
    npy_array a;
    char err[CASE_PATH_MAX + 256];
    if (npy_read(in->path, &a, NULL, err, sizeof err)) {
        err_at(c, e, "%s", err);
        return false;
    }
    dtype dt = a.dt;
    int ndim = a.ndim;
    int64_t numel = a.numel;
    for (int j = 0; j < ndim && j < LAYER_MAX_RANK; j++)
        l->dims[j] = a.shape[j];
    npy_free(&a);
    if (dt == DTYPE_INT64) {
        err_at(c, e, "%s: an int64 array; a constant is a float array (float32, float16)",
               in->path);
        return false;
    }
    if (ndim < 1 || ndim > LAYER_MAX_RANK || numel == 0) {
        err_at(c, e, "%s: %d dims; a constant has 1 to %d dims, none of size 0", in->path, ndim,
               LAYER_MAX_RANK);
        return false;
    }
    l->n_dims = ndim;
    l->file_dtype = dt;
    snprintf(in->tensor, sizeof in->tensor, "%s.value", l->name);
    in->line = e->line;
    cfg->n_inits++;
    return true;
}

/* The words of a kind that takes no input (KIND_WORDS_DIMS, KIND_WORDS_PATH): its shape
 * or its file, then its options; or of one that takes a sample's sizes (KIND_WORDS_SHAPE),
 * one of them -1, then from= and its options */
static bool parse_source_words(parse_ctx *c, entry *e, words *t, layer_spec *l,
                               const layer_def *d, layer_names *ln)
{
    int n = 0; /* the words before its options */
    while (1 + n < t->n && strcmp(t->w[1 + n], "=") != 0 &&
           (2 + n >= t->n || strcmp(t->w[2 + n], "=") != 0))
        n++;
    l->n_inputs = d->words == KIND_WORDS_SHAPE ? 1 : 0;
    if (d->words == KIND_WORDS_PATH) {
        if (n != 1) {
            err_at(c, e, "bad value '%s' for layer %s: expected %s PATH, then options", e->value,
                   e->key, d->name);
            return false;
        }
        if (!parse_constant_file(c, e, t->w[1], l))
            return false;
    } else {
        if (n < 1 || n > LAYER_MAX_RANK) {
            err_at(c, e,
                   "bad value '%s' for layer %s: expected %s and 1 to %d sizes, then options "
                   "(%s %d dims)",
                   e->value, e->key, d->name, LAYER_MAX_RANK,
                   d->words == KIND_WORDS_SHAPE ? "a sample's: with the batch dim at most"
                                                : "a tensor without a batch dim: at most",
                   d->words == KIND_WORDS_SHAPE ? TENSOR_MAX_DIMS : LAYER_MAX_RANK);
            return false;
        }
        bool infer = d->words == KIND_WORDS_SHAPE; /* -1: the size the others leave */
        for (int j = 0; j < n; j++) {
            if (infer && strcmp(t->w[1 + j], "-1") == 0)
                l->dims[j] = -1;
            else if (!parse_int(c, e, t->w[1 + j], infer ? "size (or -1)" : "size", 1,
                                &l->dims[j]))
                return false;
        }
        l->n_dims = n;
    }
    if (d->words == KIND_WORDS_SHAPE &&
        !take_graph_option(c, e, t, 1 + n, "from", ln->in[0], sizeof ln->in[0]))
        return false;
    const char *vals[LAYER_MAX_OPTS];
    if (!kind_option_names(c, e, t, 1 + n, d->name, d->opts, d->n_opts, vals))
        return false;
    return kind_option_values(c, e, d->name, d->opts, d->n_opts, vals, l);
}

/* params=PREFIX: a state_dict prefix, words of [A-Za-z0-9_] joined by dots
 * (model.layers.0.self_attn.q_proj) */
static bool check_params_prefix(parse_ctx *c, entry *e, const char *prefix)
{
    size_t n = strlen(prefix);
    bool ok = n > 0 && prefix[0] != '.' && prefix[n - 1] != '.' && !strstr(prefix, "..") &&
              valid_tensor_name(prefix) && !strchr(prefix, '@');
    if (!ok)
        err_at(c, e,
               "params=%s: expected a state_dict prefix, words of [A-Za-z0-9_] joined by dots",
               prefix);
    return ok;
}

static bool parse_layer_words(parse_ctx *c, entry *e, words *t, layer_spec *l, layer_names *ln)
{
    const char *kinds[LAYER_KIND_COUNT];
    for (int i = 0; i < LAYER_KIND_COUNT; i++)
        kinds[i] = layer_def_of((layer_kind)i)->name;
    int k = parse_choice(c, e, t->w[0], "layer kind", kinds, LAYER_KIND_COUNT);
    if (k < 0)
        return false;
    const layer_def *d = layer_def_of((layer_kind)k);
    l->kind = (layer_kind)k;
    l->n_inputs = d->n_inputs > 0 ? d->n_inputs : 1;
    kind_option_defaults(d->opts, d->n_opts, l);
    if (!take_graph_option(c, e, t, 1, "params", l->params_prefix, sizeof l->params_prefix) ||
        (*l->params_prefix && !check_params_prefix(c, e, l->params_prefix)))
        return false;
    if (d->words != KIND_WORDS_SIGNATURE)
        return parse_source_words(c, e, t, l, d, ln);
    char buf[128], *sig[MAX_WORDS];
    int n_sig = signature_words(d->signature, buf, sizeof buf, sig, MAX_WORDS);
    int n_pos = d->n_inputs > 1 ? d->n_inputs : 0; /* positional input names */
    /* a one-input kind may name its input first, as a kind of several does (`p = pow x 2.0`
     * is `p = pow 2.0 from=x`): a name, not a number, where its words start */
    char lead[LAYER_NAME_MAX] = "";
    int n_lead_words = 0; /* the words before its options: one more than its signature's */
    while (1 + n_lead_words < t->n && strcmp(t->w[1 + n_lead_words], "=") != 0 &&
           (2 + n_lead_words >= t->n || strcmp(t->w[2 + n_lead_words], "=") != 0))
        n_lead_words++;
    if (n_pos == 0 && n_lead_words == n_sig + 1 && valid_layer_name(t->w[1]) &&
        (n_sig == 0 || is_number_word(sig[0]))) {
        snprintf(lead, sizeof lead, "%s", t->w[1]);
        memmove(&t->w[1], &t->w[2], sizeof(char *) * (size_t)(t->n - 2));
        t->n--;
    }
    if (d->min_inputs > 0) { /* as many as the line gives before its options, within range */
        n_pos = 0;
        for (int i = 1 + n_sig; i < t->n && n_pos < d->n_inputs; i++, n_pos++)
            if (strcmp(t->w[i], "=") == 0 || (i + 1 < t->n && strcmp(t->w[i + 1], "=") == 0))
                break;
        if (n_pos < d->min_inputs) {
            err_at(c, e,
                   "bad value '%s' for layer %s: %s takes %d to %d input names, then options",
                   e->value, e->key, d->name, d->min_inputs, d->n_inputs);
            return false;
        }
        l->n_inputs = n_pos;
    }
    /* a name, not an option's: a word that no "=" follows */
    for (int left = d->n_optional_inputs; left > 0; left--) {
        int at = n_sig + n_pos; /* the last name's word */
        if (at < t->n && strcmp(t->w[at], "=") && (at + 1 >= t->n || strcmp(t->w[at + 1], "=")))
            break;
        n_pos--;
    }
    l->n_inputs = n_pos > 0 ? n_pos : l->n_inputs;
    bool form = t->n >= 1 + n_sig + n_pos;
    for (int i = 0; form && i < n_sig; i++)
        form = is_number_word(sig[i]) || strcmp(t->w[1 + i], sig[i]) == 0;
    for (int i = 0; form && i < n_pos; i++) {
        const char *w = t->w[1 + n_sig + i];
        form = strcmp(w, "=") != 0 && (2 + n_sig + i >= t->n || strcmp(t->w[2 + n_sig + i], "="));
    }
    static const char *const in_words[] = {"", " A", " A B", " A B C", " A B C D"}; /* n_pos */
    _Static_assert(sizeof in_words / sizeof in_words[0] > LAYER_MAX_INPUTS, "a form per count");
    if (!form) {
        err_at(c, e, "bad value '%s' for layer %s: expected %s%s%s%s, then options", e->value,
               e->key, d->name, *d->signature ? " " : "", d->signature, in_words[n_pos]);
        return false;
    }
    bool ok = true;
    for (int i = 0, a = 0; i < n_sig; i++) {
        if (!is_number_word(sig[i]))
            continue;
        const kind_arg *arg = &d->args[a++];
        void *field = (char *)l + arg->offset;
        ok = (arg->min == KIND_ARG_REAL    ? parse_real(c, e, t->w[1 + i], arg->name, ANY, field)
              : arg->min == KIND_ARG_DTYPE ? parse_dtype_arg(c, e, t->w[1 + i], arg->name, l, ln,
                                                             field)
                                           : parse_int(c, e, t->w[1 + i], arg->name, arg->min,
                                                       field)) &&
             ok;
    }
    int n_names = 0;
    for (int i = 0; i < n_pos; i++) {
        const char *w = t->w[1 + n_sig + i];
        if (d->scalar_inputs && is_scalar_word(w)) {
            if (l->scalar_operands) {
                err_at(c, e,
                       "%s = %s: both operands of %s are numbers; at most one may be a Python "
                       "scalar, the other names a layer",
                       e->key, e->value, d->name);
                return false;
            }
            if (!parse_real(c, e, w, "scalar operand", ANY, &l->scalar))
                return false;
            l->scalar_operands = 1u << i;
            continue;
        }
        if (strlen(w) >= LAYER_NAME_MAX) {
            err_at(c, e, "%s: the input name '%s' is too long", e->key, w);
            return false;
        }
        strcpy(ln->in[n_names++], w);
    }
    if (l->scalar_operands)
        l->n_inputs = n_names;
    int first = 1 + n_sig + n_pos;
    char from[LAYER_NAME_MAX] = "";
    if (!take_graph_option(c, e, t, first, "from", from, sizeof from) ||
        !take_graph_option(c, e, t, first, "weight", ln->tied, sizeof ln->tied))
        return false;
    if (*from && n_pos) {
        err_at(c, e, "%s takes its %d inputs by position (%s%s), not from=", d->name, n_pos,
               d->name, in_words[n_pos]);
        return false;
    }
    if (*from && *lead) {
        err_at(c, e, "%s names its input twice (%s and from=%s)", e->key, lead, from);
        return false;
    }
    if (*lead)
        strcpy(from, lead);
    if (*from)
        strcpy(ln->in[0], from);
    /* autocast=no: torch.autocast(device_type, enabled=False) around the layer's ops */
    char enabled[8] = "";
    bool on = true;
    if (!take_graph_option(c, e, t, first, "autocast", enabled, sizeof enabled) ||
        (*enabled && !parse_bool(c, e, enabled, "autocast", &on)))
        return false;
    l->autocast_disabled = !on;
    const char *vals[LAYER_MAX_OPTS];
    if (!kind_option_names(c, e, t, first, d->name, d->opts, d->n_opts, vals))
        return false;
    return kind_option_values(c, e, d->name, d->opts, d->n_opts, vals, l) && ok;
}

/* Index of the layer named `name` among layers[0..n), or -1. */
static int layer_index(const case_config *cfg, int n, const char *name)
{
    for (int j = 0; j < n; j++)
        if (strcmp(cfg->layers[j].name, name) == 0)
            return j;
    return -1;
}

/* A name layer i reads, into an index of an earlier layer or LAYER_INPUT; -2 after an
 * error (with a "did you mean" among the names it could read). */
static int resolve_name(parse_ctx *c, entry *e, int i, const char *name)
{
    const case_config *cfg = c->cfg;
    if (strcmp(name, "input") == 0)
        return LAYER_INPUT;
    int j = layer_index(cfg, cfg->n_layers, name);
    if (j >= 0 && j < i)
        return j;
    if (j >= i) {
        err_at(c, e,
               "%s = %s: layer '%s' is defined below this line (line %d); a layer reads only "
               "the input and the layers above it",
               e->key, e->value, name, cfg->layers[j].line);
        return -2;
    }
    const char *names[CASE_MAX_LAYERS + 1] = {"input"};
    for (int k = 0; k < i; k++)
        names[k + 1] = cfg->layers[k].name;
    char *h = hint(name, names, i + 1, "it can read");
    err_at(c, e, "%s = %s: no layer named '%s'; %s", e->key, e->value, name, h);
    free(h);
    return -2;
}

/* `weight=LAYER.weight`: the earlier layer whose weight layer i shares, of the same shape */
static bool resolve_tied(parse_ctx *c, entry *e, int i, const char *tied)
{
    layer_spec *l = &c->cfg->layers[i];
    layer_param mine[LAYER_MAX_PARAMS], theirs[LAYER_MAX_PARAMS];
    int n = layer_def_of(l->kind)->params(l, mine);
    if (n == 0 || strcmp(mine[0].name, "weight") != 0) {
        err_at(c, e, "%s = %s: %s has no weight to share", e->key, e->value,
               layer_def_of(l->kind)->name);
        return false;
    }
    const char *dot = strrchr(tied, '.');
    if (!dot || strcmp(dot + 1, "weight") != 0) {
        err_at(c, e, "%s = %s: bad value '%s' for weight: expected LAYER.weight", e->key, e->value,
               tied);
        return false;
    }
    char name[LAYER_NAME_MAX + 8];
    snprintf(name, sizeof name, "%.*s", (int)(dot - tied), tied);
    int j = resolve_name(c, e, i, name);
    if (j == LAYER_INPUT) {
        err_at(c, e, "%s = %s: the input has no weight", e->key, e->value);
        return false;
    }
    if (j < 0)
        return false;
    const layer_spec *o = &c->cfg->layers[j];
    int m = layer_def_of(o->kind)->params(o, theirs);
    bool same = m > 0 && strcmp(theirs[0].name, "weight") == 0 && theirs[0].ndim == mine[0].ndim;
    for (int d = 0; same && d < mine[0].ndim; d++)
        same = theirs[0].shape[d] == mine[0].shape[d];
    if (!same) {
        err_at(c, e, "%s = %s: %s.weight is not of this layer's weight's shape", e->key, e->value,
               name);
        return false;
    }
    if (o->tied >= 0) {
        err_at(c, e, "%s = %s: %s.weight is %s.weight: name that layer", e->key, e->value, name,
               c->cfg->layers[o->tied].name);
        return false;
    }
    l->tied = j;
    return true;
}

/* Every layer's inputs and tied weight, once all are read: the names given, else the
 * previous layer's output (the input, for the first). */
static void resolve_graph(parse_ctx *c, const layer_names *names)
{
    case_config *cfg = c->cfg;
    for (int i = 0; i < cfg->n_layers; i++) {
        layer_spec *l = &cfg->layers[i];
        entry *e = names[i].e;
        for (int k = 0; k < l->n_inputs; k++) {
            int j = names[i].in[k][0] ? resolve_name(c, e, i, names[i].in[k])
                                      : i - 1; /* LAYER_INPUT for the first */
            if (j == -2) {
                c->model_ok = false;
                break;
            }
            l->inputs[k] = j;
        }
        if (names[i].tied[0] && !resolve_tied(c, e, i, names[i].tied))
            c->model_ok = false;
    }
}

/* params= names the tensors of a layer that has some, from its own line (not a constant's
 * value, named after the layer; not a tied weight, named after its owner) */
static bool params_prefix_fits(parse_ctx *c, entry *e, const layer_spec *l)
{
    const layer_def *d = layer_def_of(l->kind);
    layer_param ps[LAYER_MAX_PARAMS];
    if (d->words == KIND_WORDS_PATH || d->params(l, ps) == 0) {
        err_at(c, e, "params=%s: a %s has no parameters to name", l->params_prefix, d->name);
        return false;
    }
    return true;
}

void parse_model_section(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    c->model_ok = true;
    layer_names *names = calloc(CASE_MAX_LAYERS, sizeof *names);
    if (!names) {
        report(c, 0, NULL, "out of memory reading [model]");
        c->model_ok = false;
        return;
    }
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
        if (strcmp(e->key, "input") == 0) {
            err_at(c, e,
                   "'input' is a reserved name (the model's input, which from=input "
                   "reads): name the layer otherwise");
            c->model_ok = false;
            continue;
        }
        if (cfg->n_layers == CASE_MAX_LAYERS) {
            err_at(c, e, "too many layers (at most %d)", CASE_MAX_LAYERS);
            c->model_ok = false;
            continue;
        }
        layer_names *ln = &names[cfg->n_layers];
        layer_spec *l = &cfg->layers[cfg->n_layers];
        ln->e = e;
        c->layer_entry[cfg->n_layers++] = e;
        *l = (layer_spec){.line = e->line, .tied = -1};
        strcpy(l->name, e->key);
        words t;
        if (!split_words(c, e, &t)) {
            c->model_ok = false;
            continue;
        }
        bool ok = parse_layer_words(c, e, &t, l, ln);
        c->model_ok = ok && c->model_ok;
        if (ok && *l->params_prefix && !params_prefix_fits(c, e, l))
            c->model_ok = false;
        free(t.buf);
    }
    if (c->model_ok)
        resolve_graph(c, names);
    free(names);
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
