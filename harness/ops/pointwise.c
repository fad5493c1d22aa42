/*
 * pointwise.c: the pointwise rows as data (pw_rows, pointwise.h), made from the list, and
 * the check at start-up that every row names a policy and an ATen op.
 */
#include "pointwise.h"

#include <stdio.h>
#include <stdlib.h>

#define PW_EXPAND(...) __VA_ARGS__
#define PW_ROW(name, arity, backward, policy, signature, args, opts, aten)                         \
    [PW_OP_##name] = {#name, arity, backward, policy, {PW_EXPAND aten}},
const pw_row pw_rows[PW_OP_COUNT] = {POINTWISE_OPS(PW_ROW)};
#undef PW_ROW

/* A row left half done is a bug of the build, found before any case is read. */
__attribute__((constructor)) static void pw_rows_check_at_start(void)
{
    for (int op = 0; op < PW_OP_COUNT; op++) {
        const pw_row *r = &pw_rows[op];
        const char *lacks = !autocast_policy_name(r->policy)          ? "its autocast policy"
                            : !r->aten[0]                             ? "its ATen op"
                            : r->arity < 1 || r->arity > PW_MAX_ARITY ? "an arity of 1 to 3"
                                                                      : NULL;
        if (lacks) {
            fprintf(stderr,
                    "ampscope: internal error: pointwise row %s has no %s "
                    "(harness/ops/pointwise.h)\n",
                    r->name, lacks);
            abort();
        }
    }
}
