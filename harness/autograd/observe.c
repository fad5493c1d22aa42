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

/*
 * A CSV line built in a buffer and written with one fwrite: the same bytes as fprintf's
 * "%s" and "%lld", without its format parsing (a step's hist.csv rows are most of what
 * observation costs outside the counting). Floats are written by float_text_g9 (stats.h),
 * byte for byte what "%.9g" writes.
 */
typedef struct line_buf {
    char s[TENSOR_NAME_MAX * 2 + 512];
    int n;
    bool overflow; /* a field did not fit: the line is written by fprintf instead */
} line_buf;

static void put_str(line_buf *l, const char *s)
{
    size_t len = strlen(s);
    if (l->n + len + 1 > sizeof l->s) {
        l->overflow = true;
        return;
    }
    memcpy(l->s + l->n, s, len);
    l->n += (int)len;
}

static void put_char(line_buf *l, char c)
{
    if (l->n + 2 > (int)sizeof l->s) {
        l->overflow = true;
        return;
    }
    l->s[l->n++] = c;
}

static void put_int(line_buf *l, long long v)
{
    char digits[24];
    int k = sizeof digits;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        digits[--k] = '-';
    if (l->n + (int)sizeof digits - k + 1 > (int)sizeof l->s) {
        l->overflow = true;
        return;
    }
    memcpy(l->s + l->n, digits + k, sizeof digits - (size_t)k);
    l->n += (int)sizeof digits - k;
}

static void put_float(line_buf *l, float v)
{
    char s[32];
    float_text_g9(v, s);
    put_str(l, s);
}

static int line_write(const line_buf *l, FILE *f)
{
    return fwrite(l->s, 1, (size_t)l->n, f) == (size_t)l->n ? 0 : -1;
}

/* the row's first ten fields, as "case,step,pass,order,name,role,dtype,shape,numel,bytes" */
/* tensor_shape_str's "64x16000" (or "scalar"), cut as its 96-byte buffer cuts it */
static void put_shape(line_buf *l, const tensor *t)
{
    if (t->ndim == 0) {
        put_str(l, "scalar");
        return;
    }
    line_buf s = {.n = 0};
    for (int i = 0; i < t->ndim; i++) {
        if (i)
            put_char(&s, 'x');
        put_int(&s, (long long)t->shape[i]);
    }
    s.s[s.n < 95 ? s.n : 95] = '\0';
    put_str(l, s.s);
}

static void put_row_head(line_buf *l, observer *o, const tensor *t, tensor_role role)
{
    put_str(l, o->case_name), put_char(l, ','), put_int(l, (long long)o->step), put_char(l, ',');
    put_str(l, pass_name(o->pass)), put_char(l, ','), put_int(l, o->order), put_char(l, ',');
    put_str(l, t->name), put_char(l, ','), put_str(l, tensor_role_name(role)), put_char(l, ',');
    put_str(l, dtype_name(t->dtype)), put_char(l, ','), put_shape(l, t), put_char(l, ',');
    put_int(l, (long long)t->numel), put_char(l, ','), put_int(l, (long long)tensor_bytes(t));
}

/* the same row by fprintf, for a line longer than line_buf (a very long case name) */
static int write_row_slow(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    char shape[96];
    tensor_shape_str(t, shape, sizeof shape);
    int rc =
        fprintf(o->tensors, "%s,%lld,%s,%d,%s,%s,%s,%s,%lld,%lld", o->case_name, (long long)o->step,
                pass_name(o->pass), o->order, t->name, tensor_role_name(role), dtype_name(t->dtype),
                shape, (long long)t->numel, (long long)tensor_bytes(t));
    if (!st)
        return rc | fprintf(o->tensors, ",,,,,,,\n");
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
    return rc | (fputc('\n', o->tensors) == EOF ? -1 : 0);
}

/* hist.csv's rows of st: "case,step,pass,name,bin,count", one per bin that holds values */
/* hist.csv's rows of st: "case,step,pass,name,bin,count", one per bin that holds values,
 * gathered in a buffer and written a buffer at a time */
static int write_hist_rows(observer *o, const tensor *t, const round_stats *st)
{
    line_buf head = {.n = 0};
    put_str(&head, o->case_name), put_char(&head, ','), put_int(&head, (long long)o->step);
    put_char(&head, ','), put_str(&head, pass_name(o->pass)), put_char(&head, ',');
    put_str(&head, t->name), put_char(&head, ',');
    char batch[16384];
    int n = 0, rc = 0;
    for (int b = 0; b < HIST_BINS; b++) {
        if (!st->hist[b])
            continue;
        char bin[16];
        hist_bin_name(b, bin, sizeof bin);
        if (head.overflow) {
            rc |= fprintf(o->hist, "%s,%lld,%s,%s,%s,%lld\n", o->case_name, (long long)o->step,
                          pass_name(o->pass), t->name, bin, (long long)st->hist[b]);
            continue;
        }
        line_buf row = {.n = 0};
        put_str(&row, bin), put_char(&row, ','), put_int(&row, (long long)st->hist[b]);
        put_char(&row, '\n');
        if (n + head.n + row.n > (int)sizeof batch) {
            rc |= fwrite(batch, 1, (size_t)n, o->hist) == (size_t)n ? 0 : -1;
            n = 0;
        }
        memcpy(batch + n, head.s, (size_t)head.n), n += head.n;
        memcpy(batch + n, row.s, (size_t)row.n), n += row.n;
    }
    if (n)
        rc |= fwrite(batch, 1, (size_t)n, o->hist) == (size_t)n ? 0 : -1;
    return rc;
}

static void write_row(observer *o, const tensor *t, tensor_role role, const round_stats *st)
{
    line_buf l = {.n = 0};
    put_row_head(&l, o, t, role);
    if (st) {
        const round_counts *c = &st->counts;
        put_char(&l, ','), put_int(&l, (long long)c->zeros), put_char(&l, ',');
        if (!st->unseen) /* empty: not seen (--gpu-math native) */
            put_int(&l, (long long)c->underflow);
        put_char(&l, ','), put_int(&l, (long long)c->subnormal), put_char(&l, ',');
        if (!st->unseen)
            put_int(&l, (long long)c->overflow);
        put_char(&l, ','), put_int(&l, (long long)c->nan), put_char(&l, ',');
        put_float(&l, c->amax), put_char(&l, ',');
        if (float_bits(c->amin_nonzero) != 0x7f800000u)
            put_float(&l, c->amin_nonzero);
    } else {
        put_str(&l, ",,,,,,,");
    }
    put_char(&l, '\n');
    int rc = l.overflow ? write_row_slow(o, t, role, st) : line_write(&l, o->tensors);
    if (st)
        rc |= write_hist_rows(o, t, st);
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
