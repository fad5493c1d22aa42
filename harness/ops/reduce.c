/*
 * reduce.c: the reduction rows as data (rd_rows, reduce.h), made from the list, and the check
 * at start-up that every row names a policy and an ATen op.
 */
#include "reduce.h"

#include <stdio.h>
#include <stdlib.h>

#define RD_EXPAND(...) __VA_ARGS__
#define RD_ROW(name, backward, policy, opts, aten)                                                 \
    [RD_OP_##name] = {#name, backward, policy, {RD_EXPAND aten}},
const rd_row rd_rows[RD_OP_COUNT] = {REDUCE_OPS(RD_ROW)};
#undef RD_ROW

/* A row left half done is a bug of the build, found before any case is read. */
__attribute__((constructor)) static void rd_rows_check_at_start(void)
{
    for (int op = 0; op < RD_OP_COUNT; op++) {
        const rd_row *r = &rd_rows[op];
        const char *lacks = !autocast_policy_name(r->policy) ? "its autocast policy"
                            : !r->aten[0]                    ? "its ATen op"
                                                             : NULL;
        if (lacks) {
            fprintf(stderr,
                    "ampscope: internal error: reduction row %s has no %s "
                    "(harness/ops/reduce.h)\n",
                    r->name, lacks);
            abort();
        }
    }
}
