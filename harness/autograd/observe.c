/* observe.c: the observed tensors' rows and histograms in the run's record, the names and
 * dtypes a run has seen, and --dump (see observe.h). */
#include "observe.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

void observe_begin_step(observer *o, int64_t step, bool recording)
{
    o->step = step;
    o->recording = recording;
    o->order = 0;
    o->first_nonfinite[0] = '\0';
    o->pass = PASS_FORWARD;
}

void observe_begin_pass(observer *o, pass_kind p) { o->pass = p; }

/* t's row (and its histogram's non-empty bins) at the end of the record */
static void keep_row(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    run_record *rec = o->rec;
    char shape[TENSOR_SHAPE_TEXT_MAX]; /* "64x16000" or "scalar" */
    tensor_shape_str(t, shape, sizeof shape);
    record_tensor *row = record_add_tensor(rec);
    if (!row)
        return;
    *row = (record_tensor){.step = o->step,
                           .order = o->order,
                           .pass = o->pass,
                           .role = role,
                           .dtype = t->dtype,
                           .name = record_intern(rec, t->name),
                           .shape = record_intern(rec, shape),
                           .numel = t->numel,
                           .bytes = tensor_bytes(t),
                           .counted = st != NULL,
                           .unseen = st && st->unseen,
                           .reason = t->why.reason,
                           .op = record_intern(rec, t->why.op),
                           .from = record_intern(rec, t->why.from)};
    if (!st)
        return;
    const round_counts *c = &st->counts;
    row->zeros = c->zeros, row->underflow = c->underflow, row->subnormal = c->subnormal;
    row->overflow = c->overflow, row->nan = c->nan;
    row->amax = c->amax, row->amin_nonzero = c->amin_nonzero;
    for (int b = 0; b < HIST_BINS; b++)
        if (st->hist[b])
            record_add_bin(rec, rec->n_tensors - 1, b, st->hist[b]);
}

void observe_tensor(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    if (o->rec)
        record_seen(o->rec, t->name, t->dtype);
    if (o->pass != PASS_FORWARD && tensor_role_is_grad(role))
        o->grad_dtypes[role] |= 1u << t->dtype;
    if (st && !o->first_nonfinite[0] &&
        (st->counts.nan || st->counts.overflow || float_bits(st->counts.amax) == 0x7f800000u))
        snprintf(o->first_nonfinite, sizeof o->first_nonfinite, "%s", t->name);
    if (!o->recording)
        return;
    o->order++;
    if (o->pass == PASS_BACKWARD && tensor_role_is_grad(role) && st) {
        o->grad_underflow += st->counts.underflow;
        o->grad_numel += t->numel;
    }
    if (o->rec)
        keep_row(o, t, role, st);
    if (o->dump_dir && (!o->dump_only || fnmatch(o->dump_only, t->name, 0) == 0)) {
        o->dump_bytes += tensor_bytes(t);
        if (o->dump_dry)
            return;
        char sub[32];
        snprintf(sub, sizeof sub, "%lld", (long long)o->step);
        if (!o->dump_error[0] &&
            dump_tensor(o->be, o->dump_dir, sub, t, o->dump_error, sizeof o->dump_error))
            o->write_failed = true;
    }
}

void observe_dtype_set(const observer *o, tensor_role role, char *buf, int len)
{
    int off = 0;
    buf[0] = '\0';
    for (int d = 0; d < DTYPE_COUNT && off < len; d++)
        if (o->grad_dtypes[role] & (1u << d))
            off += snprintf(buf + off, (size_t)(len - off), "%s%s", off ? "|" : "",
                            dtype_name((dtype)d));
}
