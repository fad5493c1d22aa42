/* run.c: a run's failures and tensor allocation (see run.h). */
#include "run.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/interrupt.h"

void run_fail(run *r, const char *fmt, ...)
{
    int off = 0;
    if (r->backward_op)
        off = snprintf(r->error, sizeof r->error, "%s backward: ", r->backward_op);
    if (off >= (int)sizeof r->error)
        off = (int)sizeof r->error - 1;
    r->backward_op = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error + off, sizeof r->error - (size_t)off, fmt, ap);
    va_end(ap);
    longjmp(r->fail, 1);
}

tensor *run_tensor(run *r, const char *name, dtype dt, int ndim, const int64_t *shape,
                   mem_category cat)
{
    if (interrupt_stop_now()) { /* a second signal: the step is not finished */
        r->interrupted = true;
        run_fail(r, "interrupted by a second %s", interrupt_name(interrupt_signal()));
    }
    char err[512];
    tensor *t = tensor_new(&r->pool, name, dt, ndim, shape, cat, err, sizeof err);
    if (!t)
        run_fail(r, "%s", err);
    return t;
}

tensor *run_tensor_like(run *r, const tensor *like, const char *name, dtype dt, mem_category cat)
{
    return run_tensor(r, name, dt, like->ndim, like->shape, cat);
}

round_stats *run_stats(run *r, round_stats *st)
{
    if (!r->counting)
        return NULL;
    round_stats_init(st);
    return st;
}

void run_check(run *r, int rc)
{
    if (rc)
        run_fail(r, "%s", r->be->err);
}
