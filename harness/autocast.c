/* autocast.c: autocast's policy table and casts (see autocast.h). */
#include "autocast.h"

#include <string.h>

static const autocast_op autocast_ops[] = {
    {"linear", AUTOCAST_LOWER, "lower_precision_fp: KERNEL_CUDA(linear, lower_precision_fp)"},
    {"conv2d", AUTOCAST_LOWER, "lower_precision_fp: KERNEL_CUDA(conv2d, lower_precision_fp)"},
    {"log_softmax", AUTOCAST_FP32,
     "fp32_set_opt_dtype: KERNEL_CUDA(log_softmax, fp32_set_opt_dtype) (cross_entropy's first op)"},
    {"nll_loss", AUTOCAST_FP32, "fp32: KERNEL_CUDA(nll_loss, fp32) (cross_entropy's second op)"},
    {"mse_loss", AUTOCAST_FP32, "fp32: KERNEL_CUDA(mse_loss, fp32)"},
    {"relu", AUTOCAST_NONE, "not listed: runs in its input's dtype"},
    {"flatten", AUTOCAST_NONE, "not listed: a view, keeps its input's dtype"},
    {"mean", AUTOCAST_NONE, "not listed: runs in its input's dtype"},
    {"mul", AUTOCAST_NONE, "not listed: type promotion (GradScaler.scale: loss * scale)"},
};

static const char *policy_words(autocast_policy p)
{
    return p == AUTOCAST_LOWER ? "autocast dtype" : p == AUTOCAST_FP32 ? "float32" : "input dtype";
}

autocast_policy autocast_policy_of(const char *op)
{
    for (size_t i = 0; i < sizeof autocast_ops / sizeof autocast_ops[0]; i++)
        if (strcmp(autocast_ops[i].op, op) == 0)
            return autocast_ops[i].policy;
    return AUTOCAST_NONE;
}

void autocast_print_table(FILE *f)
{
    fprintf(f, "%-12s %-15s %s\n", "op", "runs in", "PyTorch (CUDA autocast)");
    for (size_t i = 0; i < sizeof autocast_ops / sizeof autocast_ops[0]; i++)
        fprintf(f, "%-12s %-15s %s\n", autocast_ops[i].op, policy_words(autocast_ops[i].policy),
                autocast_ops[i].pytorch_list);
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
