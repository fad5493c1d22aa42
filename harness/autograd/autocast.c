/* autocast.c: autocast's policy table, gathered from the layers' and losses' definitions
 * and the few ops of its own, and the casts it makes (see autocast.h). GradScaler.scale's
 * `loss * scale` is mul's entry (layers/mul.c). */
#include "autocast.h"

#include <string.h>

#include "layers/layer.h"

/* The ops that are no layer's or loss's: the layers' and losses' own entries are in their
 * definitions (layers/layer.h). */
static const autocast_op other_ops[] = {
    {"mean", AUTOCAST_NONE, "not listed: runs in its input's dtype"},
};

/* the group a policy is listed in: both float32 lists run in float32 */
static autocast_policy policy_group(autocast_policy p)
{
    return p == AUTOCAST_FP32_SET_OPT_DTYPE ? AUTOCAST_FP32 : p;
}

/* Calls visit on every entry: by policy (autocast dtype, float32, input dtype), and within
 * one policy the layers' in kind order, then the losses', then the others; stops when it
 * returns true and returns that entry. */
static const autocast_op *each_op(bool (*visit)(const autocast_op *op, void *ctx), void *ctx)
{
    static const autocast_policy order[] = {AUTOCAST_LOWER, AUTOCAST_FP32, AUTOCAST_NONE};
    for (int p = 0; p < COUNT_OF(order); p++) {
        for (int k = 0; k < LAYER_KIND_COUNT; k++) {
            const layer_def *d = layer_def_of((layer_kind)k);
            for (int i = 0; i < d->n_autocast; i++)
                if (policy_group(d->autocast[i].policy) == order[p] && visit(&d->autocast[i], ctx))
                    return &d->autocast[i];
        }
        for (int k = 0; k < LOSS_KIND_COUNT; k++) {
            const loss_def *d = loss_def_of((loss_kind)k);
            for (int i = 0; i < d->n_autocast; i++)
                if (policy_group(d->autocast[i].policy) == order[p] && visit(&d->autocast[i], ctx))
                    return &d->autocast[i];
        }
        for (int i = 0; i < COUNT_OF(other_ops); i++)
            if (policy_group(other_ops[i].policy) == order[p] && visit(&other_ops[i], ctx))
                return &other_ops[i];
    }
    return NULL;
}

static const char *policy_words(autocast_policy p)
{
    switch (p) {
    case AUTOCAST_LOWER:
        return "autocast dtype";
    case AUTOCAST_FP32:
    case AUTOCAST_FP32_SET_OPT_DTYPE:
        return "float32";
    case AUTOCAST_NONE:
        return "input dtype";
    }
    return "?";
}

static bool same_op(const autocast_op *op, void *name) { return strcmp(op->op, name) == 0; }

autocast_policy autocast_policy_of(const char *op)
{
    const autocast_op *e = each_op(same_op, (void *)op);
    return e ? e->policy : AUTOCAST_NONE;
}

/* the op column as wide as its widest name */
static bool widest_op(const autocast_op *op, void *width)
{
    int n = (int)strlen(op->op);
    if (n > *(int *)width)
        *(int *)width = n;
    return false;
}

typedef struct print_ctx {
    FILE *f;
    int width;
} print_ctx;

static bool print_op(const autocast_op *op, void *p)
{
    const print_ctx *c = p;
    fprintf(c->f, "%-*s %-15s %s\n", c->width, op->op, policy_words(op->policy), op->pytorch_list);
    return false;
}

void autocast_print_table(FILE *f)
{
    print_ctx c = {f, 12};
    each_op(widest_op, &c.width);
    fprintf(f, "%-*s %-15s %s\n", c.width, "op", "runs in", "PyTorch (CUDA autocast)");
    each_op(print_op, &c);
}

static void cast_backward(run *r, node *n)
{
    tensor *g = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, n->grad, g, stp));
    node_give_grad(r, n, 0, g, stp);
}

/* the reason an op's policy gives its output under autocast */
static dtype_reason list_reason(autocast_policy p)
{
    switch (p) {
    case AUTOCAST_LOWER:
        return DTYPE_REASON_LOWER_PRECISION_FP;
    case AUTOCAST_FP32:
        return DTYPE_REASON_FP32;
    case AUTOCAST_FP32_SET_OPT_DTYPE:
        return DTYPE_REASON_FP32_SET_OPT_DTYPE;
    case AUTOCAST_NONE:
        return DTYPE_REASON_INPUT;
    }
    return DTYPE_REASON_UNSET;
}

/* the operands' own reason: "input" when their floating dtypes agree, else "promote" */
static dtype_reason operands_reason(tensor *const *in, int n)
{
    int first = -1;
    for (int i = 0; i < n; i++) {
        if (!in[i] || in[i]->dtype == DTYPE_INT64)
            continue;
        if (first < 0)
            first = i;
        else if (in[i]->dtype != in[first]->dtype)
            return DTYPE_REASON_PROMOTE;
    }
    return DTYPE_REASON_INPUT;
}

dtype_reason autocast_reason(const run *r, const char *op, tensor *const *in, int n)
{
    autocast_policy p = autocast_policy_of(op);
    if (p == AUTOCAST_NONE)
        return operands_reason(in, n);
    if (r->autocast)
        return list_reason(p);
    if (r->cfg && r->cfg->autocast)
        return DTYPE_REASON_AUTOCAST_OFF;
    return operands_reason(in, n);
}

void autocast_why(const run *r, tensor *y, const char *op, tensor *const *in, int n)
{
    dtype_reason why = autocast_reason(r, op, in, n);
    bool by_operands = why == DTYPE_REASON_INPUT || why == DTYPE_REASON_PROMOTE ||
                       why == DTYPE_REASON_AUTOCAST_OFF;
    tensor *floating[NODE_MAX_INPUTS];
    int k = 0;
    for (int i = 0; by_operands && i < n && k < NODE_MAX_INPUTS; i++)
        if (in[i] && in[i]->dtype != DTYPE_INT64)
            floating[k++] = in[i];
    tensor_why(y, why, op, (const tensor *const *)floating, k);
}

/* a cast of src named `name`, with dt for the reason why */
static tensor *cast_named(run *r, tensor *src, dtype dt, mem_category cat, const char *name,
                          dtype_reason why, const char *op)
{
    tensor *y = run_tensor_like(r, src, name, dt, cat);
    y->is_cast = true;
    const tensor *from = src;
    tensor_why(y, why, op, &from, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, src, y, stp));
    tape_record(r, "cast", cast_backward, y, &src, 1);
    observe_tensor(r->obs, y, ROLE_CAST, stp);
    return y;
}

tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat, dtype_reason why, const char *op)
{
    char name[TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s@%s", src->name, dtype_name(dt));
    return cast_named(r, src, dt, cat, name, why, op);
}

/* Autocast's cast of an activation: cached_cast caches only leaves (parameters), so each
 * consumer of an activation makes a cast node and a copy of its own (three linears reading
 * ln1.out: three float16 copies, three gradient casts). The copies are named in the order
 * they are made in the region: "ln1.out@float16", "ln1.out@float16_2", ... */
static tensor *cast_activation(run *r, tensor *src, dtype dt, dtype_reason why, const char *op)
{
    int k = 0;
    while (k < r->n_cast_of && strcmp(r->cast_of[k], src->name) != 0)
        k++;
    if (k == r->n_cast_of) {
        if (r->n_cast_of == RUN_MAX_CACHE)
            run_fail(r, "more than %d activations cast in one autocast region", RUN_MAX_CACHE);
        snprintf(r->cast_of[k], sizeof r->cast_of[k], "%s", src->name);
        r->cast_count[k] = 0;
        r->n_cast_of++;
    }
    int nth = ++r->cast_count[k];
    char name[TENSOR_NAME_MAX + 24];
    if (nth == 1)
        snprintf(name, sizeof name, "%s@%s", src->name, dtype_name(dt));
    else
        snprintf(name, sizeof name, "%s@%s_%d", src->name, dtype_name(dt), nth);
    return cast_named(r, src, dt, MEM_ACTIVATIONS, name, why, op);
}

tensor *autocast_arg(run *r, const char *op, tensor *t)
{
    autocast_policy p = autocast_policy_of(op);
    bool floating = t->dtype != DTYPE_INT64;
    dtype want = t->dtype;
    if (r->autocast && floating && p == AUTOCAST_LOWER)
        want = r->autocast_dtype;
    else if (r->autocast && floating && (p == AUTOCAST_FP32 || p == AUTOCAST_FP32_SET_OPT_DTYPE))
        want = DTYPE_FLOAT32;
    if (want == t->dtype) {
        tensor_retain(t);
        return t;
    }
    bool cacheable =
        p == AUTOCAST_LOWER && t->is_leaf && t->requires_grad && t->dtype == DTYPE_FLOAT32;
    if (!cacheable)
        return cast_activation(r, t, want, list_reason(p), op);
    for (int i = 0; i < r->n_cache; i++)
        if (r->cache_src[i] == t) {
            tensor_retain(r->cache_copy[i]);
            return r->cache_copy[i];
        }
    if (r->n_cache == RUN_MAX_CACHE)
        run_fail(r, "more than %d parameters in one autocast region", RUN_MAX_CACHE);
    tensor *y = cast_to(r, t, want, MEM_AUTOCAST_CACHE, list_reason(p), op);
    r->cache_src[r->n_cache] = t;
    r->cache_copy[r->n_cache++] = y;
    tensor_retain(y);
    return y;
}

void autocast_exit(run *r)
{
    for (int i = 0; i < r->n_cache; i++)
        tensor_release(&r->pool, r->cache_copy[i]);
    r->n_cache = 0;
    r->n_cast_of = 0;
    r->autocast = false;
}
