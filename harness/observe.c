/* observe.c: tensors.csv and hist.csv rows, and the names and dtypes a run has seen
 * (see observe.h). */
#include "observe.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

const char *tensor_role_name(tensor_role r)
{
    static const char *const names[ROLE_COUNT] = {
        [ROLE_INPUT] = "input",
        [ROLE_TARGET] = "target",
        [ROLE_PARAM] = "param",
        [ROLE_ACTIVATION] = "activation",
        [ROLE_LOSS] = "loss",
        [ROLE_CAST] = "cast",
        [ROLE_GRAD_ACTIVATION] = "grad_activation",
        [ROLE_GRAD_CAST] = "grad_cast",
        [ROLE_GRAD_PARAM] = "grad_param",
        [ROLE_OPTIMIZER_STATE] = "optimizer_state",
        [ROLE_MASTER_PARAM] = "master_param",
        [ROLE_GRAD_MASTER] = "grad_master",
        [ROLE_BUFFER] = "buffer",
    };
    return r < ROLE_COUNT ? names[r] : "?";
}

const char *pass_name(pass_kind p)
{
    return p == PASS_FORWARD ? "forward" : p == PASS_BACKWARD ? "backward" : "optimizer";
}

void observe_begin_step(observer *o, int64_t step, bool recording)
{
    o->step = step;
    o->recording = recording;
    o->order = 0;
    o->first_nonfinite[0] = '\0';
    o->pass = PASS_FORWARD;
}

void observe_begin_pass(observer *o, pass_kind p) { o->pass = p; }

static void remember(observer *o, const tensor *t, tensor_role role)
{
    for (int i = 0; i < o->n_seen; i++)
        if (strcmp(o->seen[i].name, t->name) == 0) {
            o->seen[i].dt = t->dtype;
            return;
        }
    if (o->n_seen == o->cap_seen) {
        int cap = o->cap_seen ? 2 * o->cap_seen : 64;
        seen_tensor *s = realloc(o->seen, sizeof *s * (size_t)cap);
        if (!s) {
            o->write_failed = true;
            return;
        }
        o->seen = s;
        o->cap_seen = cap;
    }
    seen_tensor *s = &o->seen[o->n_seen++];
    snprintf(s->name, sizeof s->name, "%s", t->name);
    s->dt = t->dtype;
    s->role = role;
}

static bool is_grad_role(tensor_role r)
{
    return r == ROLE_GRAD_ACTIVATION || r == ROLE_GRAD_CAST || r == ROLE_GRAD_PARAM ||
           r == ROLE_GRAD_MASTER;
}

static void write_row(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    char shape[96];
    tensor_shape_str(t, shape, sizeof shape);
    int rc =
        fprintf(o->tensors, "%s,%lld,%s,%d,%s,%s,%s,%s,%lld,%lld", o->case_name, (long long)o->step,
                pass_name(o->pass), o->order, t->name, tensor_role_name(role), dtype_name(t->dtype),
                shape, (long long)t->numel, (long long)tensor_bytes(t));
    if (st) {
        const round_counts *c = &st->counts;
        char under[24] = "", over[24] = ""; /* empty: not seen (--gpu-math native) */
        if (!st->unseen) {
            snprintf(under, sizeof under, "%lld", (long long)c->underflow);
            snprintf(over, sizeof over, "%lld", (long long)c->overflow);
        }
        rc |= fprintf(o->tensors, ",%lld,%s,%lld,%s,%lld,%.9g,", (long long)c->zeros, under,
                      (long long)c->subnormal, over, (long long)c->nan, (double)c->amax);
        if (float_bits(c->amin_nonzero) != 0x7f800000u)
            rc |= fprintf(o->tensors, "%.9g", (double)c->amin_nonzero);
        rc |= fputc('\n', o->tensors) == EOF ? -1 : 0;
        for (int b = 0; b < HIST_BINS; b++) {
            if (!st->hist[b])
                continue;
            char bin[16];
            hist_bin_name(b, bin, sizeof bin);
            rc |= fprintf(o->hist, "%s,%lld,%s,%s,%s,%lld\n", o->case_name, (long long)o->step,
                          pass_name(o->pass), t->name, bin, (long long)st->hist[b]);
        }
    } else {
        rc |= fprintf(o->tensors, ",,,,,,,\n");
    }
    if (rc < 0)
        o->write_failed = true;
}

void observe_tensor(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    remember(o, t, role);
    if (o->pass != PASS_FORWARD && is_grad_role(role))
        o->grad_dtypes[role] |= 1u << t->dtype;
    if (st && !o->first_nonfinite[0] &&
        (st->counts.nan || st->counts.overflow || float_bits(st->counts.amax) == 0x7f800000u))
        snprintf(o->first_nonfinite, sizeof o->first_nonfinite, "%s", t->name);
    if (!o->recording)
        return;
    o->order++;
    if (o->pass == PASS_BACKWARD && is_grad_role(role) && st) {
        o->grad_underflow += st->counts.underflow;
        o->grad_numel += t->numel;
    }
    if (o->tensors)
        write_row(o, t, role, st);
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

bool observe_find(const observer *o, const char *name, dtype *dt)
{
    for (int i = 0; i < o->n_seen; i++)
        if (strcmp(o->seen[i].name, name) == 0) {
            *dt = o->seen[i].dt;
            return true;
        }
    return false;
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

void observe_free(observer *o)
{
    free(o->seen);
    o->seen = NULL;
    o->n_seen = o->cap_seen = 0;
}
