/*
 * report/files.c: reading a case folder's CSV files for the reports, and what their rows say
 * (see report/files.h). Columns are found by their names in columns.h.
 */
#include "files.h"

#include "core/format.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

static int bad_number(const csv_table *t, int row, const char *col, char *err, int errlen)
{
    return report_fail(err, errlen, "%s: row %d: %s is not a number", t->path, row + 1, col);
}

static int parse_tensors(case_files *c, char *err, int errlen)
{
    const csv_table *t = &c->tensors_csv;
    static const int want[] = {TENSORS_COL_STEP,      TENSORS_COL_PASS,     TENSORS_COL_TENSOR,
                               TENSORS_COL_ROLE,      TENSORS_COL_DTYPE,    TENSORS_COL_SHAPE,
                               TENSORS_COL_NUMEL,     TENSORS_COL_ZEROS,    TENSORS_COL_UNDERFLOW,
                               TENSORS_COL_SUBNORMAL, TENSORS_COL_OVERFLOW, TENSORS_COL_NAN,
                               TENSORS_COL_AMAX};
    int k[TENSORS_N_COLS];
    if (csv_table_find(t, &csv_tensors, want, (int)(sizeof want / sizeof *want), k, err, errlen))
        return -1;
    c->rows = calloc((size_t)t->n_rows + 1, sizeof *c->rows);
    if (!c->rows)
        return report_fail(err, errlen, "out of memory reading %s", t->path);
    static const int count_cols[] = {TENSORS_COL_ZEROS, TENSORS_COL_UNDERFLOW,
                                     TENSORS_COL_SUBNORMAL, TENSORS_COL_OVERFLOW, TENSORS_COL_NAN};
    for (int r = 0; r < t->n_rows; r++) {
        char **f = t->rows[r];
        tensor_row *x = &c->rows[r];
        *x = (tensor_row){.pass = f[k[TENSORS_COL_PASS]],
                          .name = f[k[TENSORS_COL_TENSOR]],
                          .role = f[k[TENSORS_COL_ROLE]],
                          .dtype = f[k[TENSORS_COL_DTYPE]],
                          .shape = f[k[TENSORS_COL_SHAPE]],
                          .amax = f[k[TENSORS_COL_AMAX]],
                          .counted = f[k[TENSORS_COL_ZEROS]][0] != '\0'};
        if (!csv_parse_i64(f[k[TENSORS_COL_STEP]], &x->step))
            return bad_number(t, r, csv_tensors.names[TENSORS_COL_STEP], err, errlen);
        if (!csv_parse_i64(f[k[TENSORS_COL_NUMEL]], &x->numel))
            return bad_number(t, r, csv_tensors.names[TENSORS_COL_NUMEL], err, errlen);
        int64_t *counts[] = {&x->zeros, &x->underflow, &x->subnormal, &x->overflow, &x->nan};
        for (int i = 0; x->counted && i < 5; i++)
            if (!csv_parse_i64(f[k[count_cols[i]]], counts[i]))
                return bad_number(t, r, csv_tensors.names[count_cols[i]], err, errlen);
    }
    c->n_rows = t->n_rows;
    return 0;
}

/* a field of an appended column, "" when the file has no such column */
static const char *appended_field(char **f, int k) { return k < 0 ? "" : f[k]; }

static int parse_steps(case_files *c, char *err, int errlen)
{
    const csv_table *t = &c->steps_csv;
    static const int want[] = {STEPS_COL_STEP,           STEPS_COL_LOSS,    STEPS_COL_LOSS_SCALE,
                               STEPS_COL_FOUND_INF,      STEPS_COL_SKIPPED, STEPS_COL_LOST_UPDATES,
                               STEPS_COL_FIRST_NONFINITE};
    /* appended later (results/README.md): results written before them read as empty */
    static const int appended[] = {STEPS_COL_LOST_ACCUMULATIONS, STEPS_COL_TOTAL_NORM,
                                   STEPS_COL_CLIP_COEF, STEPS_COL_FIRST_NONFINITE_OP,
                                   STEPS_COL_FIRST_NONFINITE_INPUT};
    int k[STEPS_N_COLS];
    if (csv_table_find(t, &csv_steps, want, (int)(sizeof want / sizeof *want), k, err, errlen))
        return -1;
    for (size_t i = 0; i < sizeof appended / sizeof *appended; i++)
        k[appended[i]] = csv_table_col(t, csv_steps.names[appended[i]]);
    c->steps = calloc((size_t)t->n_rows + 1, sizeof *c->steps);
    if (!c->steps)
        return report_fail(err, errlen, "out of memory reading %s", t->path);
    for (int r = 0; r < t->n_rows; r++) {
        char **f = t->rows[r];
        step_row *s = &c->steps[r];
        int64_t found_inf, skipped;
        *s = (step_row){.loss = f[k[STEPS_COL_LOSS]],
                        .loss_scale = f[k[STEPS_COL_LOSS_SCALE]],
                        .first_nonfinite = f[k[STEPS_COL_FIRST_NONFINITE]],
                        .lost_accumulations = appended_field(f, k[STEPS_COL_LOST_ACCUMULATIONS]),
                        .total_norm = appended_field(f, k[STEPS_COL_TOTAL_NORM]),
                        .clip_coef = appended_field(f, k[STEPS_COL_CLIP_COEF]),
                        .first_nonfinite_op = appended_field(f, k[STEPS_COL_FIRST_NONFINITE_OP]),
                        .first_nonfinite_input =
                            appended_field(f, k[STEPS_COL_FIRST_NONFINITE_INPUT])};
        if (!csv_parse_i64(f[k[STEPS_COL_STEP]], &s->step) ||
            !csv_parse_f64(s->loss_scale, &s->scale) ||
            !csv_parse_i64(f[k[STEPS_COL_FOUND_INF]], &found_inf) ||
            !csv_parse_i64(f[k[STEPS_COL_SKIPPED]], &skipped) ||
            !csv_parse_i64(f[k[STEPS_COL_LOST_UPDATES]], &s->lost_updates))
            return report_fail(err, errlen, "%s: row %d: a number column is not a number", t->path,
                               r + 1);
        s->found_inf = found_inf != 0;
        s->skipped = skipped != 0;
    }
    c->n_steps = t->n_rows;
    return 0;
}

static int parse_memory(case_files *c, char *err, int errlen)
{
    const csv_table *t = &c->memory_csv;
    static const int want[] = {MEMORY_COL_CATEGORY, MEMORY_COL_PEAK_BYTES, MEMORY_COL_END_BYTES};
    int k[MEMORY_N_COLS];
    if (csv_table_find(t, &csv_memory, want, 3, k, err, errlen))
        return -1;
    c->mem = calloc((size_t)t->n_rows + 1, sizeof *c->mem);
    if (!c->mem)
        return report_fail(err, errlen, "out of memory reading %s", t->path);
    for (int r = 0; r < t->n_rows; r++) {
        char **f = t->rows[r];
        mem_row *m = &c->mem[r];
        m->category = f[k[MEMORY_COL_CATEGORY]];
        if (!csv_parse_i64(f[k[MEMORY_COL_PEAK_BYTES]], &m->peak) ||
            !csv_parse_i64(f[k[MEMORY_COL_END_BYTES]], &m->end))
            return bad_number(t, r, "peak_bytes or end_bytes", err, errlen);
    }
    c->n_mem = t->n_rows;
    return 0;
}

void case_files_free(case_files *c)
{
    csv_table_free(&c->tensors_csv);
    csv_table_free(&c->steps_csv);
    csv_table_free(&c->memory_csv);
    free(c->rows);
    free(c->steps);
    free(c->mem);
    memset(c, 0, sizeof *c);
}

int case_files_read(case_files *c, const char *dir, bool optional, char *err, int errlen)
{
    memset(c, 0, sizeof *c);
    int rc = csv_table_read_in(&c->tensors_csv, dir, csv_tensors.file, optional, NULL, NULL, err,
                               errlen);
    if (rc)
        return rc;
    if (parse_tensors(c, err, errlen) ||
        csv_table_read_in(&c->steps_csv, dir, csv_steps.file, false, NULL, NULL, err, errlen) ||
        parse_steps(c, err, errlen) ||
        csv_table_read_in(&c->memory_csv, dir, csv_memory.file, false, NULL, NULL, err, errlen) ||
        parse_memory(c, err, errlen)) {
        case_files_free(c);
        return -1;
    }
    return 0;
}

bool is_half_name(const char *dtype)
{
    enum dtype dt;
    return dtype_parse(dtype, &dt) && dtype_is_half(dt);
}

bool row_is_backward_grad(const tensor_row *r)
{
    return !strcmp(r->pass, "backward") &&
           (!strcmp(r->role, "grad_activation") || !strcmp(r->role, "grad_cast") ||
            !strcmp(r->role, "grad_param"));
}

int64_t case_files_report_step(const case_files *c)
{
    int64_t first = -1;
    for (int i = 0; i < c->n_rows; i++)
        if (row_is_backward_grad(&c->rows[i]) && c->rows[i].counted)
            return c->rows[i].step;
    for (int i = 0; i < c->n_rows; i++)
        if (first < 0 || c->rows[i].step < first)
            first = c->rows[i].step;
    return first;
}

bool case_files_has_hist_plot(const case_files *c)
{
    for (int i = 0; i < c->n_rows; i++)
        if (row_is_backward_grad(&c->rows[i]) && c->rows[i].counted)
            return true;
    return false;
}

const tensor_row *case_files_row(const case_files *c, int64_t step, const char *pass,
                                 const char *name)
{
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step == step && !strcmp(r->pass, pass) && !strcmp(r->name, name))
            return r;
    }
    return NULL;
}

const step_row *case_files_step(const case_files *c, int64_t step)
{
    for (int i = 0; i < c->n_steps; i++)
        if (c->steps[i].step == step)
            return &c->steps[i];
    return NULL;
}

/* The histogram's largest bin k (2^k <= |x| < 2^(k+1)) whose values all round to zero in
 * the dtype named dt (format.h's zero_bin_max); INT_MIN: not a number format. */
static int zero_bin_max(const char *dt)
{
    enum dtype d;
    const format_info *f = dtype_parse(dt, &d) ? format_of(d) : NULL;
    return f ? f->zero_bin_max : INT_MIN;
}

bool case_files_step_scale(const case_files *c, int64_t step, int *log2_scale)
{
    const step_row *s = case_files_step(c, step);
    if (!s || !case_files_row(c, step, "forward", "loss.scaled") || !(s->scale > 0))
        return false;
    int e;
    double m = frexp(s->scale, &e);
    *log2_scale = e - 1;
    return m == 0.5;
}

typedef struct below_ctx {
    const case_files *c;
    int64_t step;
    int shift;     /* bins are moved by this many powers of two */
    int64_t below; /* sum of the counts whose moved bin rounds to zero */
    int k_step, k_pass, k_tensor, k_bin, k_count;
    bool bad; /* a row that is not as hist.csv writes it */
} below_ctx;

/* hist.csv row filter: adds to ctx->below and keeps nothing */
static bool count_below(const csv_table *t, char **f, void *p)
{
    below_ctx *b = p;
    if (b->k_step < 0) {
        b->k_step = csv_table_col(t, csv_hist.names[HIST_COL_STEP]);
        b->k_pass = csv_table_col(t, csv_hist.names[HIST_COL_PASS]);
        b->k_tensor = csv_table_col(t, csv_hist.names[HIST_COL_TENSOR]);
        b->k_bin = csv_table_col(t, csv_hist.names[HIST_COL_BIN]);
        b->k_count = csv_table_col(t, csv_hist.names[HIST_COL_COUNT]);
        if (b->k_step < 0 || b->k_pass < 0 || b->k_tensor < 0 || b->k_bin < 0 || b->k_count < 0)
            b->bad = true;
    }
    int64_t step, bin, count;
    if (b->bad || !csv_parse_i64(f[b->k_step], &step) || step != b->step ||
        strcmp(f[b->k_pass], "backward") || !csv_parse_i64(f[b->k_bin], &bin))
        return false; /* other steps and passes, and the zero, inf and nan bins */
    const tensor_row *r = case_files_row(b->c, step, "backward", f[b->k_tensor]);
    if (!r || !row_is_backward_grad(r) || !is_half_name(r->dtype))
        return false;
    if (!csv_parse_i64(f[b->k_count], &count))
        b->bad = true;
    else if (bin + b->shift <= zero_bin_max(r->dtype))
        b->below += count;
    return false;
}

int case_files_hist_below(const case_files *c, const char *dir, int64_t step, int shift,
                          int64_t *below, char *err, int errlen)
{
    below_ctx b = {.c = c, .step = step, .shift = shift, .k_step = -1};
    csv_table t;
    if (csv_table_read_in(&t, dir, csv_hist.file, false, count_below, &b, err, errlen))
        return -1;
    csv_table_free(&t);
    if (b.bad)
        return report_fail(err, errlen, "%s/%s: not the columns or numbers %s has", dir,
                           csv_hist.file, csv_hist.file);
    *below = b.below;
    return 0;
}
