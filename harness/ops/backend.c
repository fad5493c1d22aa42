/*
 * backend.c: the contract every backend table is held to (backend.h): the names of the
 * ops, the check each open path runs on the table it fills (an empty slot only for an op
 * the backend leaves out), and the supports() query.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"

static const char *const op_names[BACKEND_OP_COUNT] = {
#define OP_NAME(name, params) [BACKEND_OP_##name] = #name,
    BACKEND_OPS(OP_NAME)
#undef OP_NAME
};

const char *backend_op_name(backend_op op)
{
    return (unsigned)op < BACKEND_OP_COUNT ? op_names[op] : "(no such op)";
}

int reduce_channel_sum(backend *be, const tensor *dy, int64_t outer, int64_t inner, tensor *db,
                       round_stats *st)
{
    tensor v = *dy;
    v.ndim = 3;
    v.shape[0] = outer, v.shape[1] = db->numel, v.shape[2] = inner;
    const op_params none = {.seed = 0};
    return be->reduce_forward(be, RD_OP_sum, &none, &v, 1u << 0 | 1u << 2, db, st);
}

int reduce_all(backend *be, rd_op op, const tensor *x, tensor *y, round_stats *st)
{
    const op_params none = {.seed = 0};
    return be->reduce_forward(be, op, &none, x, (1u << x->ndim) - 1, y, st);
}

/* appends name to the list in err (", " between names) */
static void name_missing(char *err, int errlen, int *n_missing, const char *name)
{
    size_t used = strlen(err);
    if (used + 1 < (size_t)errlen)
        snprintf(err + used, (size_t)errlen - used, "%s%s", *n_missing ? ", " : "", name);
    (*n_missing)++;
}

int backend_check(const backend *be, char *err, int errlen)
{
    char list[512] = "";
    int n = 0;
#define CHECK_MEMORY_FN(ret, name, params)                                                       \
    if (!be->name)                                                                               \
        name_missing(list, (int)sizeof list, &n, #name);
    BACKEND_MEMORY_FNS(CHECK_MEMORY_FN)
#undef CHECK_MEMORY_FN
#define CHECK_OP(name, params)                                                                   \
    if (!be->name && !backend_leaves_out(be, BACKEND_OP_##name))                                 \
        name_missing(list, (int)sizeof list, &n, #name);
    BACKEND_OPS(CHECK_OP)
#undef CHECK_OP
    if (n == 0)
        return 0;
    snprintf(err, (size_t)errlen, "the %s backend leaves %d function%s of its table empty: %s",
             be->name ? be->name : "(unnamed)", n, n == 1 ? "" : "s", list);
    return -1;
}

bool backend_supports(const backend *be, backend_op op, dtype dt)
{
    return !be->supports || be->supports(be, op, dt);
}

bool backend_leaves_out(const backend *be, backend_op op)
{
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (backend_supports(be, op, (dtype)d))
            return false;
    return true;
}
