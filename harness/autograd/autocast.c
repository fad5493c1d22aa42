/* autocast.c: the casts autocast makes (see autocast.h), under the policy of the op's table
 * entry. */
#include "autocast.h"

#include <string.h>

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
    case AUTOCAST_LOWER_PRECISION_FP:
        return DTYPE_REASON_LOWER_PRECISION_FP;
    case AUTOCAST_FP32:
        return DTYPE_REASON_FP32;
    case AUTOCAST_FP32_SET_OPT_DTYPE:
        return DTYPE_REASON_FP32_SET_OPT_DTYPE;
    case AUTOCAST_FP32_APPEND_DTYPE:
        return DTYPE_REASON_FP32_APPEND_DTYPE;
    case AUTOCAST_PROMOTE:
        return DTYPE_REASON_PROMOTE;
    case AUTOCAST_NONE:
        return DTYPE_REASON_INPUT;
    case AUTOCAST_BANNED: /* autocast_arg fails the run first */
    case AUTOCAST_UNSET:
    case AUTOCAST_POLICY_COUNT:
        break;
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

dtype_reason autocast_reason(const run *r, const autocast_op *op, tensor *const *in, int n)
{
    autocast_policy p = op->policy;
    if (p == AUTOCAST_NONE)
        return operands_reason(in, n);
    if (r->autocast)
        return list_reason(p);
    if (r->cfg && r->cfg->autocast)
        return DTYPE_REASON_AUTOCAST_OFF;
    return operands_reason(in, n);
}

void autocast_why(const run *r, tensor *y, const autocast_op *op, tensor *const *in, int n)
{
    dtype_reason why = autocast_reason(r, op, in, n);
    bool by_operands = why == DTYPE_REASON_INPUT || why == DTYPE_REASON_PROMOTE ||
                       why == DTYPE_REASON_AUTOCAST_OFF;
    tensor *floating[NODE_MAX_INPUTS];
    int k = 0;
    for (int i = 0; by_operands && i < n && k < NODE_MAX_INPUTS; i++)
        if (in[i] && in[i]->dtype != DTYPE_INT64)
            floating[k++] = in[i];
    tensor_why(y, why, op->op, (const tensor *const *)floating, k);
}

tensor *cast_named(run *r, tensor *src, dtype dt, mem_category cat, const char *name,
                   dtype_reason why, const char *op, tensor_role role)
{
    tensor *y = run_tensor_like(r, src, name, dt, cat);
    y->is_cast = role == ROLE_CAST;
    const tensor *from = src;
    tensor_why(y, why, op, &from, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, src, y, stp));
    tape_record(r, "cast", cast_backward, y, &src, 1);
    observe_tensor(r->obs, y, role, stp);
    return y;
}

tensor *cast_to(run *r, tensor *src, dtype dt, mem_category cat, dtype_reason why, const char *op)
{
    char name[TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s@%s", src->name, dtype_name(dt));
    return cast_named(r, src, dt, cat, name, why, op, ROLE_CAST);
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
    return cast_named(r, src, dt, MEM_ACTIVATIONS, name, why, op, ROLE_CAST);
}

tensor *autocast_arg(run *r, const autocast_op *op, tensor *t)
{
    autocast_policy p = op->policy;
    bool floating = t->dtype != DTYPE_INT64;
    if (r->autocast && p == AUTOCAST_BANNED)
        run_fail(r,
                 "%s is unsafe to autocast: autocast_mode.cpp's banned list refuses it under "
                 "autocast (%s)",
                 op->op, op->pytorch_list);
    dtype want = t->dtype;
    if (r->autocast && floating && p == AUTOCAST_LOWER_PRECISION_FP)
        want = r->autocast_dtype;
    else if (r->autocast && floating && autocast_policy_is_fp32(p))
        want = DTYPE_FLOAT32;
    if (want == t->dtype) {
        tensor_retain(t);
        return t;
    }
    bool cacheable = p == AUTOCAST_LOWER_PRECISION_FP && t->is_leaf && t->requires_grad &&
                     t->dtype == DTYPE_FLOAT32;
    if (!cacheable)
        return cast_activation(r, t, want, list_reason(p), op->op);
    for (int i = 0; i < r->n_cache; i++)
        if (r->cache_src[i] == t) {
            tensor_retain(r->cache_copy[i]);
            return r->cache_copy[i];
        }
    if (r->n_cache == RUN_MAX_CACHE)
        run_fail(r, "more than %d parameters in one autocast region", RUN_MAX_CACHE);
    tensor *y = cast_to(r, t, want, MEM_AUTOCAST_CACHE, list_reason(p), op->op);
    r->cache_src[r->n_cache] = t;
    r->cache_copy[r->n_cache++] = y;
    tensor_retain(y);
    return y;
}

void autocast_args(run *r, const autocast_op *op, tensor *const *in, int n, tensor **out)
{
    if (!r->autocast || op->policy != AUTOCAST_PROMOTE) {
        for (int k = 0; k < n; k++)
            out[k] = autocast_arg(r, op, in[k]);
        return;
    }
    dtype want = r->autocast_dtype; /* autocast_mode.h's promote_type and prioritize */
    for (int k = 0; k < n; k++) {
        dtype next = in[k]->dtype;
        if (next == DTYPE_INT64)
            continue;
        if (want == DTYPE_FLOAT32 || next == DTYPE_FLOAT32)
            want = DTYPE_FLOAT32;
        else if (next != want)
            run_fail(r,
                     "Unexpected floating ScalarType in at::autocast::prioritize (%s: %s "
                     "under %s autocast)",
                     op->op, dtype_name(next), dtype_name(r->autocast_dtype));
    }
    for (int k = 0; k < n; k++) {
        if (in[k]->dtype == want || in[k]->dtype == DTYPE_INT64) {
            tensor_retain(in[k]);
            out[k] = in[k];
        } else {
            out[k] = cast_activation(r, in[k], want, DTYPE_REASON_PROMOTE, op->op);
        }
    }
}

dtype autocast_output_dtype(tensor *const *args, int n)
{
    dtype dt = DTYPE_INT64;
    for (int k = 0; k < n; k++)
        if (args[k]->dtype != DTYPE_INT64)
            dt = dt == DTYPE_INT64 ? args[k]->dtype : promote_types(dt, args[k]->dtype);
    return dt;
}

void autocast_exit(run *r)
{
    for (int i = 0; i < r->n_cache; i++)
        tensor_release(&r->pool, r->cache_copy[i]);
    r->n_cache = 0;
    r->n_cast_of = 0;
    r->autocast = false;
}
