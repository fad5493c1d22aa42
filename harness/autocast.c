/* autocast.c: autocast's policy table, gathered from the layers' and losses' definitions
 * and the few ops of its own, and the casts it makes (see autocast.h). */
#include "autocast.h"

#include <string.h>

#include "layers/layer.h"

/* The ops that are no layer's or loss's: the layers' and losses' own entries are in their
 * definitions (layers/layer.h). */
static const autocast_op other_ops[] = {
    {"mean", AUTOCAST_NONE, "not listed: runs in its input's dtype"},
    {"mul", AUTOCAST_NONE, "not listed: type promotion (GradScaler.scale: loss * scale)"},
};

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
                if (d->autocast[i].policy == order[p] && visit(&d->autocast[i], ctx))
                    return &d->autocast[i];
        }
        for (int k = 0; k < LOSS_KIND_COUNT; k++) {
            const loss_def *d = loss_def_of((loss_kind)k);
            for (int i = 0; i < d->n_autocast; i++)
                if (d->autocast[i].policy == order[p] && visit(&d->autocast[i], ctx))
                    return &d->autocast[i];
        }
        for (int i = 0; i < COUNT_OF(other_ops); i++)
            if (other_ops[i].policy == order[p] && visit(&other_ops[i], ctx))
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

tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat)
{
    char name[TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s@%s", src->name, dtype_name(dt));
    tensor *y = run_tensor_like(r, src, name, dt, cat);
    y->is_cast = true;
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, src, y, stp));
    tape_record(r, "cast", cast_backward, y, &src, 1);
    observe_tensor(r->obs, y, ROLE_CAST, stp);
    return y;
}

tensor *autocast_arg(run *r, const char *op, tensor *t)
{
    autocast_policy p = autocast_policy_of(op);
    bool floating = t->dtype != DTYPE_INT64;
    dtype want = t->dtype;
    if (r->autocast && floating && p == AUTOCAST_LOWER)
        want = r->autocast_dtype;
    else if (r->autocast && floating && p == AUTOCAST_FP32)
        want = DTYPE_FLOAT32;
    if (want == t->dtype) {
        tensor_retain(t);
        return t;
    }
    bool cacheable =
        p == AUTOCAST_LOWER && t->is_leaf && t->requires_grad && t->dtype == DTYPE_FLOAT32;
    if (!cacheable)
        return cast_to(r, t, want, MEM_ACTIVATIONS);
    for (int i = 0; i < r->n_cache; i++)
        if (r->cache_src[i] == t) {
            tensor_retain(r->cache_copy[i]);
            return r->cache_copy[i];
        }
    if (r->n_cache == RUN_MAX_CACHE)
        run_fail(r, "more than %d parameters in one autocast region", RUN_MAX_CACHE);
    tensor *y = cast_to(r, t, want, MEM_AUTOCAST_CACHE);
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
    r->autocast = false;
}
