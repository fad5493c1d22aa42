/*
 * write.c: a run's record as its case folder's CSV files (see write.h). Floats are written
 * by float_text_g9 (stats.h) or "%.9g", which read back to the same value (read.c).
 */
#include "write.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "case/parse.h"
#include "columns.h"
#include "results.h"

/* ---- tensors.csv and hist.csv: lines built in a buffer ---- */

/* A line grown in place: its inline bytes, or a heap copy once a field does not fit. */
typedef struct line_buf {
    char *s;
    size_t n, cap;
    bool failed; /* out of memory: the line is not written */
    char inline_bytes[1024];
} line_buf;

static void line_init(line_buf *l)
{
    l->s = l->inline_bytes;
    l->n = 0;
    l->cap = sizeof l->inline_bytes;
    l->failed = false;
}

static void line_free(line_buf *l)
{
    if (l->s != l->inline_bytes)
        free(l->s);
}

static void put_bytes(line_buf *l, const char *s, size_t len)
{
    if (l->n + len > l->cap) {
        size_t cap = 2 * (l->n + len);
        char *p = l->s == l->inline_bytes ? malloc(cap) : realloc(l->s, cap);
        if (!p) {
            l->failed = true;
            return;
        }
        if (l->s == l->inline_bytes)
            memcpy(p, l->s, l->n);
        l->s = p;
        l->cap = cap;
    }
    memcpy(l->s + l->n, s, len);
    l->n += len;
}

static void put_str(line_buf *l, const char *s) { put_bytes(l, s, strlen(s)); }
static void put_char(line_buf *l, char c) { put_bytes(l, &c, 1); }

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
    put_bytes(l, digits + k, sizeof digits - (size_t)k);
}

static void put_float(line_buf *l, float v)
{
    char s[32];
    put_bytes(l, s, (size_t)float_text_g9(v, s));
}

/* "case,step,pass,tensor," of a row's histogram lines */
static void put_hist_head(line_buf *l, const char *name, const record_tensor *t)
{
    put_str(l, name), put_char(l, ','), put_int(l, (long long)t->step), put_char(l, ',');
    put_str(l, pass_name(t->pass)), put_char(l, ','), put_str(l, t->name), put_char(l, ',');
}

static void put_tensor_row(line_buf *l, const char *name, const record_tensor *t)
{
    put_str(l, name), put_char(l, ','), put_int(l, (long long)t->step), put_char(l, ',');
    put_str(l, pass_name(t->pass)), put_char(l, ','), put_int(l, t->order), put_char(l, ',');
    put_str(l, t->name), put_char(l, ','), put_str(l, tensor_role_name(t->role)), put_char(l, ',');
    put_str(l, dtype_name(t->dtype)), put_char(l, ','), put_str(l, t->shape), put_char(l, ',');
    put_int(l, (long long)t->numel), put_char(l, ','), put_int(l, (long long)t->bytes);
    if (t->counted) {
        put_char(l, ','), put_int(l, (long long)t->zeros), put_char(l, ',');
        if (!t->unseen) /* empty: not seen (--gpu-math native) */
            put_int(l, (long long)t->underflow);
        put_char(l, ','), put_int(l, (long long)t->subnormal), put_char(l, ',');
        if (!t->unseen)
            put_int(l, (long long)t->overflow);
        put_char(l, ','), put_int(l, (long long)t->nan), put_char(l, ',');
        put_float(l, t->amax), put_char(l, ',');
        if (float_bits(t->amin_nonzero) != 0x7f800000u)
            put_float(l, t->amin_nonzero);
    } else {
        put_str(l, ",,,,,,,");
    }
    put_char(l, ','), put_str(l, dtype_reason_name(t->reason));
    put_char(l, ','), put_str(l, t->op), put_char(l, ','), put_str(l, t->from);
    put_char(l, '\n');
}

/* a buffer of whole lines, written when the next would not fit */
typedef struct out_buf {
    FILE *f;
    char s[16384];
    size_t n;
    int rc;
} out_buf;

static void out_flush(out_buf *o)
{
    if (o->n && fwrite(o->s, 1, o->n, o->f) != o->n)
        o->rc = -1;
    o->n = 0;
}

static void out_line(out_buf *o, const line_buf *l)
{
    if (l->failed) {
        o->rc = -1;
        return;
    }
    if (o->n + l->n > sizeof o->s)
        out_flush(o);
    if (l->n > sizeof o->s) {
        o->rc |= fwrite(l->s, 1, l->n, o->f) == l->n ? 0 : -1;
        return;
    }
    memcpy(o->s + o->n, l->s, l->n);
    o->n += l->n;
}

int results_write_tensor_rows(FILE *tensors, FILE *hist, const run_record *rec)
{
    out_buf *t = malloc(sizeof *t), *h = malloc(sizeof *h);
    if (!t || !h) {
        free(t), free(h);
        return -1;
    }
    t->f = tensors, t->n = 0, t->rc = 0;
    h->f = hist, h->n = 0, h->rc = 0;
    const char *name = rec->config.name;
    line_buf l, head;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *r = &rec->tensors[i];
        line_init(&l);
        put_tensor_row(&l, name, r);
        out_line(t, &l);
        line_free(&l);
        if (r->n_bins == 0)
            continue;
        line_init(&head);
        put_hist_head(&head, name, r);
        const record_bin *b = record_bins_of(rec, r);
        for (int k = 0; k < r->n_bins; k++) {
            char bin[16];
            hist_bin_name(b[k].bin, bin, sizeof bin);
            line_init(&l);
            put_bytes(&l, head.s, head.n);
            put_str(&l, bin), put_char(&l, ','), put_int(&l, (long long)b[k].count);
            put_char(&l, '\n');
            out_line(h, &l);
            line_free(&l);
        }
        line_free(&head);
    }
    out_flush(t);
    out_flush(h);
    int rc = t->rc | h->rc;
    free(t), free(h);
    return rc;
}

/* ---- the other files, by fprintf ---- */

static void write_steps(FILE *f, const run_record *rec)
{
    const char *name = rec->config.name;
    for (int64_t i = 0; i < rec->n_steps; i++) {
        const record_step *s = &rec->steps[i];
        fprintf(f, "%s,%lld,%.9g,%.9g,%d,%d,%.6f,%.9g,%lld,%s,", name, (long long)s->step,
                (double)s->loss, (double)s->loss_scale, s->found_inf, s->skipped, s->step_ms, s->lr,
                (long long)s->lost_updates, s->first_nonfinite);
        /* the columns appended for accumulation and clipping: empty where the case has none */
        if (s->accumulates)
            fprintf(f, "%lld", (long long)s->lost_accumulations);
        if (s->clips)
            fprintf(f, ",%.9g,%.9g", s->total_norm, s->clip_coef);
        else
            fputs(",,", f);
        fprintf(f, ",%s,%s\n", s->nonfinite_op, s->nonfinite_input);
    }
}

static void write_memory(FILE *f, const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_memory; i++) {
        const record_memory *m = &rec->memory[i];
        fprintf(f, "%s,%s,%lld,%lld,", rec->config.name, m->category, (long long)m->peak,
                (long long)m->end);
        for (int d = 0, n = 0; d < DTYPE_COUNT; d++)
            if (m->by_dtype[d])
                fprintf(f, "%s%s:%lld", n++ ? "|" : "", dtype_name((dtype)d),
                        (long long)m->by_dtype[d]);
        fputc('\n', f);
    }
}

static void write_fp8(FILE *f, const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_fp8; i++) {
        const record_fp8 *q = &rec->fp8[i];
        fprintf(f, "%s,%lld,%s,%s,%.9g,%.9g,%lld,%lld\n", rec->config.name, (long long)q->step,
                q->tensor, dtype_name(q->format), (double)q->amax, (double)q->scale,
                (long long)q->saturated, (long long)q->underflow);
    }
}

static void write_allreduce(FILE *f, const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_allreduce; i++) {
        const record_allreduce *a = &rec->allreduce[i];
        fprintf(f, "%s,%lld,%s,%s,%s,%s,%lld,%s,%lld,%lld,%lld,%lld,%.9g,%.9g\n", rec->config.name,
                (long long)a->step, a->tensor, dtype_name(a->dtype), a->comm, dtype_name(a->wire),
                (long long)a->world_size, a->algorithm, (long long)a->numel,
                (long long)a->underflow, (long long)a->overflow, (long long)a->nonfinite,
                a->rel_error, a->sqnr_db);
    }
}

static void write_ranks(FILE *f, const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_ranks; i++) {
        const record_rank *k = &rec->ranks[i];
        fprintf(f, "%s,%lld,%d,%s,%s,%lld,%lld,%lld,%lld,%lld,%.9g\n", rec->config.name,
                (long long)k->step, k->rank, k->tensor, dtype_name(k->dtype), (long long)k->numel,
                (long long)k->zeros, (long long)k->subnormal, (long long)k->inf, (long long)k->nan,
                k->amax);
    }
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void write_config(FILE *f, const run_record *rec)
{
    const record_config *c = &rec->config;
    csv_write_field(f, c->name);
    fputc(',', f);
    csv_write_field(f, c->description);
    fputc(',', f);
    csv_write_field(f, c->baseline);
    fprintf(f, ",%s,%s,%s,%s,%s,%.9g,%.9g,%.9g,%lld,", dtype_name(c->params),
            c->autocast ? dtype_name(c->autocast_dtype) : "off", yes_no(c->loss_in_autocast),
            yes_no(c->master_weights), yes_no(c->scaler), c->init_scale, c->growth_factor,
            c->backoff_factor, (long long)c->growth_interval);
    csv_write_field(f, c->optimizer);
    fprintf(f, ",%s,%lld,%lld,%llu,", c->loss, (long long)c->batch, (long long)c->steps,
            (unsigned long long)c->seed);
    csv_write_field(f, c->path);
    fprintf(f, ",%s,", dtype_name(c->input_dtype));
    csv_write_field(f, c->model);
    fprintf(f, ",%lld,%s,%.9g,%.9g,%.9g,%s,%s,%lld,%s,%s,%s,%lld,%lld\n", (long long)c->accumulate,
            yes_no(c->delay_unscale), c->clip_grad_norm, c->norm_type, c->clip_grad_value,
            yes_no(c->clip_before_unscale), c->fp8 ? fp8_recipe_names[c->fp8_recipe] : "off",
            (long long)c->world_size, c->comm, dtype_name(c->reduce_dtype), c->allreduce_algorithm,
            (long long)c->gemm_sgemm, (long long)c->gemm_bf16);
}

static void write_expect(FILE *f, const run_record *rec)
{
    for (int64_t i = 0; i < rec->n_expects; i++) {
        const record_expect *e = &rec->expects[i];
        csv_write_field(f, rec->config.name);
        if (e->line >= 0)
            fprintf(f, ",%d,", e->line);
        else /* the run's error no expectation names */
            fputs(",,", f);
        csv_write_field(f, e->expectation);
        fprintf(f, ",%s,", yes_no(e->held));
        csv_write_field(f, e->failure);
        fputc('\n', f);
    }
}

/* one file: its header, then rows; -1 with a message when it cannot be written */
static int write_file(const char *dir, const csv_columns *cols,
                      void (*rows)(FILE *f, const run_record *rec), const run_record *rec,
                      char *err, int errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, cols->file);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, (size_t)errlen, "cannot write %.3900s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\n", cols->header);
    rows(f, rec);
    if (ferror(f) | fclose(f)) {
        snprintf(err, (size_t)errlen, "cannot write %.3900s", path);
        return -1;
    }
    return 0;
}

/* tensors.csv and hist.csv together */
static int write_tensors(const char *dir, const run_record *rec, char *err, int errlen)
{
    char tpath[4096], hpath[4096];
    snprintf(tpath, sizeof tpath, "%s/%s", dir, csv_tensors.file);
    snprintf(hpath, sizeof hpath, "%s/%s", dir, csv_hist.file);
    FILE *t = fopen(tpath, "w"), *h = t ? fopen(hpath, "w") : NULL;
    int rc = t && h ? 0 : -1;
    if (rc == 0) {
        fprintf(t, "%s\n", csv_tensors.header);
        fprintf(h, "%s\n", csv_hist.header);
        rc = results_write_tensor_rows(t, h, rec);
    }
    if (t && (ferror(t) | fclose(t)))
        rc = -1;
    if (h && (ferror(h) | fclose(h)))
        rc = -1;
    if (rc)
        snprintf(err, (size_t)errlen, "cannot write %.3900s or %s", tpath, csv_hist.file);
    return rc;
}

int results_write_case(const char *dir, const run_record *rec, char *err, int errlen)
{
    int rc = write_tensors(dir, rec, err, errlen);
    if (rc == 0)
        rc = write_file(dir, &csv_steps, write_steps, rec, err, errlen);
    if (rc == 0)
        rc = write_file(dir, &csv_memory, write_memory, rec, err, errlen);
    if (rc == 0)
        rc = write_file(dir, &csv_config, write_config, rec, err, errlen);
    if (rc == 0)
        rc = write_file(dir, &csv_expect, write_expect, rec, err, errlen);
    if (rc == 0 && rec->has_fp8)
        rc = write_file(dir, &csv_fp8, write_fp8, rec, err, errlen);
    if (rc == 0 && rec->has_allreduce)
        rc = write_file(dir, &csv_allreduce, write_allreduce, rec, err, errlen);
    if (rc == 0 && rec->has_allreduce)
        rc = write_file(dir, &csv_ranks, write_ranks, rec, err, errlen);
    return rc;
}
