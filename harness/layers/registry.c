/*
 * registry.c: the arrays of layer and loss kinds (layer.h), indexed by kinds.h's enums,
 * the check that every definition is complete (run at start-up, and by the tests on broken
 * copies), and the helpers the kinds' files share.
 */
#include "layer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const layer_def *const layer_defs[] = {
    [LAYER_LINEAR] = &linear_def,
    [LAYER_CONV2D] = &conv2d_def,
    [LAYER_FLATTEN] = &flatten_def,
    /* softmax and the causal mask */
    [LAYER_SOFTMAX] = &softmax_def,
    [LAYER_LOG_SOFTMAX] = &log_softmax_def,
    [LAYER_CAUSAL_MASK] = &causal_mask_def,
    /* scaled_dot_product_attention */
    [LAYER_SCALED_DOT_PRODUCT_ATTENTION] = &scaled_dot_product_attention_def,
    /* normalization and pooling */
    [LAYER_LAYER_NORM] = &layer_norm_def,
    [LAYER_GROUP_NORM] = &group_norm_def,
    [LAYER_RMS_NORM] = &rms_norm_def,
    [LAYER_BATCH_NORM2D] = &batch_norm2d_def,
    [LAYER_MAX_POOL2D] = &max_pool2d_def,
    [LAYER_AVG_POOL2D] = &avg_pool2d_def,
    [LAYER_ADAPTIVE_AVG_POOL2D] = &adaptive_avg_pool2d_def,
    [LAYER_INTERPOLATE] = &interpolate_def,
    /* graph models */
    [LAYER_EMBEDDING] = &embedding_def,
    [LAYER_POSITION_EMBEDDING] = &position_embedding_def,
    [LAYER_MATMUL] = &matmul_def,
    [LAYER_TRANSPOSE] = &transpose_def,
    [LAYER_SPLIT_HEADS] = &split_heads_def,
    [LAYER_MERGE_HEADS] = &merge_heads_def,
    /* explicit casts */
    [LAYER_TO] = &to_def,
    /* shape ops */
    [LAYER_SLICE] = &slice_def,
    [LAYER_CAT] = &cat_def,
    [LAYER_UNSQUEEZE] = &unsqueeze_def,
    [LAYER_SQUEEZE] = &squeeze_def,
    [LAYER_PAD] = &pad_def,
    [LAYER_SELECT] = &select_def,
    [LAYER_STACK] = &stack_def,
    [LAYER_PERMUTE] = &permute_def,
    [LAYER_EXPAND] = &expand_def,
    [LAYER_REPEAT_INTERLEAVE] = &repeat_interleave_def,
    /* tensors without a batch dim */
    [LAYER_CONSTANT] = &constant_def,
    [LAYER_PARAMETER] = &parameter_def,
    [LAYER_RESHAPE] = &reshape_def,
/* the pointwise rows' kinds */
#define ROW_KIND(name, ...) [LAYER_POINTWISE + PW_OP_##name] = &pointwise_defs[PW_OP_##name],
    POINTWISE_OPS(ROW_KIND)
#undef ROW_KIND
/* the reduction rows' kinds */
#define REDUCE_KIND(name, ...) [LAYER_REDUCE + RD_OP_##name] = &reduce_defs[RD_OP_##name],
        REDUCE_OPS(REDUCE_KIND)
#undef REDUCE_KIND
};
_Static_assert(sizeof layer_defs / sizeof layer_defs[0] == LAYER_KIND_COUNT,
               "layer_defs needs one entry per layer_kind");

static const loss_def *const loss_defs[] = {
    [LOSS_CROSS_ENTROPY] = &cross_entropy_def,
    [LOSS_MSE] = &mse_def,
    /* losses bce_with_logits and l1 */
    [LOSS_BCE_WITH_LOGITS] = &bce_with_logits_def,
    [LOSS_L1] = &l1_def,
};
_Static_assert(sizeof loss_defs / sizeof loss_defs[0] == LOSS_KIND_COUNT,
               "loss_defs needs one entry per loss_kind");

const char *const reduction_names[REDUCTION_COUNT] = {
    [REDUCTION_MEAN] = "mean", [REDUCTION_NONE] = "none"};

const layer_def *layer_def_of(layer_kind k) { return layer_defs[k]; }

const loss_def *loss_def_of(loss_kind k) { return loss_defs[k]; }

void layer_param_name(const layer_spec *l, const layer_param *p, char *buf, size_t len)
{
    if (!*l->params_prefix)
        snprintf(buf, len, "%s.%s", l->name, p->name);
    else if (layer_defs[l->kind]->named_by_params)
        snprintf(buf, len, "%s", l->params_prefix);
    else
        snprintf(buf, len, "%s.%s", l->params_prefix, p->name);
}

int layer_kind_of_name(const char *name)
{
    for (int k = 0; k < LAYER_KIND_COUNT; k++)
        if (strcmp(layer_defs[k]->name, name) == 0)
            return k;
    return -1;
}

int loss_kind_of_name(const char *name)
{
    for (int k = 0; k < LOSS_KIND_COUNT; k++)
        if (strcmp(loss_defs[k]->name, name) == 0)
            return k;
    return -1;
}

int layer_describe(const layer_spec *l, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s = ", l->name);
    if (n < 0)
        return n;
    size_t off = (size_t)n < len ? (size_t)n : len;
    int m = layer_defs[l->kind]->describe(l, buf + off, len - off);
    return m < 0 ? m : n + m;
}

int layer_describe_at(const case_config *cfg, int i, char *buf, size_t len)
{
    const layer_spec *l = &cfg->layers[i];
    int n = layer_describe(l, buf, len);
    bool given = l->n_inputs > 1 || (l->n_inputs == 1 && l->inputs[0] != i - 1);
    for (int k = 0; given && k < l->n_inputs && n >= 0; k++) {
        size_t off = (size_t)n < len ? (size_t)n : len;
        int j = l->inputs[k];
        n += snprintf(buf + off, len - off, "%s%s%s",
                      k                 ? ", "
                      : l->n_inputs > 1 ? " ("
                                        : " (from ",
                      j == LAYER_INPUT ? "input" : cfg->layers[j].name,
                      k == l->n_inputs - 1 ? ")" : "");
    }
    if (l->tied >= 0 && n >= 0) {
        size_t off = (size_t)n < len ? (size_t)n : len;
        n += snprintf(buf + off, len - off, " (weight: %s.weight)", cfg->layers[l->tied].name);
    }
    if (l->autocast_disabled && n >= 0) {
        size_t off = (size_t)n < len ? (size_t)n : len;
        n += snprintf(buf + off, len - off, " (autocast disabled)");
    }
    return n;
}

/* ---- the check ---- */

static int bad(char *err, size_t len, const char *what, int i, const char *name, const char *lacks)
{
    snprintf(err, len, "%s kind %d (%s) %s", what, i, name ? name : "unnamed", lacks);
    return -1;
}

/* NULL when the options are complete, else what is wrong */
static const char *opts_problem(const kind_opt *opts, int n)
{
    if (n < 0 || n > LAYER_MAX_OPTS || (n > 0 && !opts))
        return "has no options table for its option count";
    for (int i = 0; i < n; i++) {
        const kind_opt *o = &opts[i];
        if (!o->name || !*o->name)
            return "has an option without a name";
        if (o->type == KIND_OPT_CHOICE && (!o->choices || o->n_choices < 1))
            return "has a choice option without choices";
        if (o->type == KIND_OPT_REFUSED && !o->refusal)
            return "has a refused option without its message";
        for (int j = 0; j < i; j++)
            if (strcmp(opts[j].name, o->name) == 0)
                return "has two options of one name";
    }
    return NULL;
}

static const char *autocast_problem(const autocast_op *ops, int n)
{
    if (!ops || n < 1)
        return "has no autocast entry";
    for (int i = 0; i < n; i++) {
        if (!ops[i].op || !ops[i].pytorch_list)
            return "has an autocast entry without its op or PyTorch list";
        if (!autocast_policy_name(ops[i].policy))
            return "has an autocast entry without its policy (autocast_policy.h)";
        if (!ops[i].aten[0])
            return "has an autocast entry without its ATen op";
    }
    return NULL;
}

/* upper-case words of a signature: the numbers it reads */
static int signature_numbers(const char *s)
{
    int n = 0;
    for (const char *p = s; *p;) {
        while (*p == ' ')
            p++;
        if (*p >= 'A' && *p <= 'Z')
            n++;
        while (*p && *p != ' ')
            p++;
    }
    return n;
}

int layer_defs_check(const layer_def *const *defs, int n, char *err, size_t len)
{
    for (int i = 0; i < n; i++) {
        const layer_def *d = defs[i];
        if (!d)
            return bad(err, len, "layer", i, NULL, "has no definition in the registry");
        const char *p = !d->name || !*d->name ? "has no name"
                        : !d->signature       ? "has no signature (\"\" for none)"
                        : (d->words == KIND_WORDS_SIGNATURE &&
                           signature_numbers(d->signature) != d->n_args) ||
                                (d->n_args && !d->args)
                            ? "has a signature whose numbers are not its args"
                        : !d->shape       ? "has no shape rule"
                        : !d->input_shape ? "has no input_shape rule"
                        : !d->params      ? "has no params rule"
                        : !d->forward     ? "has no forward"
                        : !d->describe    ? "has no description"
                                          : NULL;
        if (!p)
            p = opts_problem(d->opts, d->n_opts);
        if (!p)
            p = autocast_problem(d->autocast, d->n_autocast);
        for (int j = 0; !p && j < i; j++)
            if (defs[j] && defs[j]->name && strcmp(defs[j]->name, d->name) == 0)
                p = "has the name of another kind";
        if (p)
            return bad(err, len, "layer", i, d->name, p);
    }
    return 0;
}

int loss_defs_check(const loss_def *const *defs, int n, char *err, size_t len)
{
    for (int i = 0; i < n; i++) {
        const loss_def *d = defs[i];
        if (!d)
            return bad(err, len, "loss", i, NULL, "has no definition in the registry");
        const char *p = !d->name || !*d->name ? "has no name"
                        : !d->forward         ? "has no forward"
                                              : NULL;
        if (!p)
            p = opts_problem(d->opts, d->n_opts);
        if (!p)
            p = autocast_problem(d->autocast, d->n_autocast);
        for (int j = 0; !p && j < i; j++)
            if (defs[j] && defs[j]->name && strcmp(defs[j]->name, d->name) == 0)
                p = "has the name of another kind";
        if (p)
            return bad(err, len, "loss", i, d->name, p);
    }
    return 0;
}

/* A kind left half done is a bug of the build, found before any case is read. */
__attribute__((constructor)) static void registry_check_at_start(void)
{
    char err[256];
    if (layer_defs_check(layer_defs, LAYER_KIND_COUNT, err, sizeof err) ||
        loss_defs_check(loss_defs, LOSS_KIND_COUNT, err, sizeof err)) {
        fprintf(stderr, "ampscope: internal error: %s (harness/layers/registry.c)\n", err);
        abort();
    }
}

/* ---- shared by the kinds ---- */

void shape_fail(shape_check *sc, shape_blame who, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sc->fail(sc, who, msg);
}

void shape_text(const layer_shape *s, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? "x%lld" : "%lld", (long long)s->dim[i]);
}

int64_t size_mul(int64_t a, int64_t b) { return b != 0 && a > INT64_MAX / b ? INT64_MAX : a * b; }

int64_t size_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

bool shape_same(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    *out = in[0];
    return true;
}

bool no_input_shape(const layer_spec *l, layer_shape *in) { return false; }

int no_params(const layer_spec *l, layer_param *out) { return 0; }

bool shape_of_dims(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc)
{
    out->ndim = l->n_dims;
    for (int j = 0; j < l->n_dims; j++)
        out->dim[j] = l->dims[j];
    return true;
}

tensor *forward_param_itself(run *r, const layer_spec *l, tensor *const *in,
                             tensor *const *params)
{
    tensor_retain(params[0]); /* the module's attribute, read as it is: no op, no node */
    return params[0];
}

void layer_out_name(const layer_spec *l, char *buf, size_t len)
{
    snprintf(buf, len, "%s.out", l->name);
}

tensor *view_or_fail(run *r, tensor *base, const char *name, int ndim, const int64_t *shape)
{
    char err[512];
    tensor *v = tensor_view(&r->pool, base, name, ndim, shape, err, sizeof err);
    if (!v)
        run_fail(r, "%s", err);
    return v;
}

static void reduce_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->reduce_backward(r->be, n->reduction, &n->pw, n->grad, n->saved[0],
                                        n->saved[1], n->dims, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

tensor *reduce_record(run *r, rd_op op, tensor *x, unsigned dims, const char *name, int ndim,
                      const int64_t *shape, tensor_role role)
{
    const autocast_op row = {rd_rows[op].name, rd_rows[op].policy, "", {NULL}};
    const op_params none = {.seed = 0};
    return reduce_record_as(r, op, &none, &row, x, dims, name, ndim, shape, x->dtype, role);
}

tensor *reduce_record_as(run *r, rd_op op, const op_params *p, const autocast_op *ac, tensor *x,
                         unsigned dims, const char *name, int ndim, const int64_t *shape, dtype dt,
                         tensor_role role)
{
    tensor *y = run_tensor(r, name, dt, ndim, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, ac, &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->reduce_forward(r->be, op, p, x, dims, y, stp));
    node *n = tape_record(r, rd_rows[op].name, reduce_backward, y, &x, 1);
    if (n) {
        n->reduction = op;
        n->dims = dims;
        n->pw = *p;
        if (rd_rows[op].backward & RD_SAVE_X)
            tape_save(n, 0, x);
        if (rd_rows[op].backward & RD_SAVE_OUT)
            tape_save(n, 1, y);
    }
    observe_tensor(r->obs, y, role, stp);
    return y;
}

void give_grad_as_is(run *r, node *n, int i, tensor *g)
{
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    if (g->dtype == n->in[i].dtype) {
        char name[TENSOR_NAME_MAX + 8];
        node_grad_name(r, n, i, name, sizeof name);
        tensor *v = view_or_fail(r, g, name, n->in[i].ndim, n->in[i].shape);
        if (stp)
            run_check(r, r->be->observe(r->be, v, stp));
        node_give_grad(r, n, i, v, stp);
        return;
    }
    tensor *dx = node_grad_tensor(r, n, i);
    run_check(r, r->be->cast(r->be, g, dx, stp));
    node_give_grad(r, n, i, dx, stp);
}
