/*
 * report.c: report.md and config.csv for one case, REPORT.md for a results folder (see
 * report.h).
 *
 * The reports are made from the CSV files alone (plus, for report.md, the case_config and
 * case_result the run still holds): tensors.csv, steps.csv, memory.csv and config.csv are
 * read whole; hist.csv only for the rows of the step the report describes. Numbers are
 * either the CSV's own text (amax, loss, loss_scale, step_ms) or computed from its integer
 * columns. A percentage is 100 * count / total, printed with printf's %.2f (round to
 * nearest); a count of 0 prints as 0, and a non-zero count that %.2f would print as 0.00
 * (or a count short of the total that it would print as 100.00) prints as <0.01%
 * (>99.99%), so that no loss reads as none. MiB are bytes / 2^20, printed with %.2f.
 *
 * "The step" of a case is the first step whose backward pass has gradient rows with counts
 * (the one hist_grads.png shows; plot.py picks it by the same rule); without one, the first
 * step tensors.csv has.
 *
 * Files are written to a temporary name and renamed, and a write is checked once, by
 * ferror() and fclose(), at its end. Error messages are formatted best-effort (truncated
 * when long).
 */
#include "report.h"

#include "results.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const CONFIG_CSV_HEADER =
    "case,description,baseline,params,autocast,loss_in_autocast,master_weights,scaler,"
    "init_scale,growth_factor,backoff_factor,growth_interval,optimizer,loss,batch,steps,seed";

#define PATH_LEN 4096
#define STEPS_TABLE_MAX 20 /* report.md lists every step up to this many */
#define SKIPS_LISTED 10    /* and names this many skipped steps */
#define NONFINITE_LISTED 8 /* and this many tensor rows with inf or NaN */

/* ---- errors and paths ---- */

static int fail(char *err, int errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, int errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int path_join(char *buf, const char *dir, const char *name, char *err, int errlen)
{
    int n = snprintf(buf, PATH_LEN, "%s/%s", dir, name);
    if (n < 0 || n >= PATH_LEN)
        return fail(err, errlen, "path too long: %s/%s", dir, name);
    return 0;
}

static bool parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return false;
    *v = (int64_t)x;
    return true;
}

static bool parse_f64(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *s && !*end && errno == 0;
}

/* ---- CSV files ---- */

/* A CSV file: its header and rows, each an array of fields in one allocation with its text. */
typedef struct table {
    char path[PATH_LEN];
    int n_cols, n_rows, cap;
    char **header;
    char ***rows;
} table;

/* Keeps a row (true) or drops it while reading; t's header is set. */
typedef bool (*row_filter)(const table *t, char **fields, void *ctx);

/* Splits s in place into fields (quoted as results.c writes them: "" is a quote inside).
 * Returns the number of fields, or -1 for more than max fields or a malformed quote. */
static int split_csv(char *s, char **fields, int max)
{
    int n = 0;
    for (;;) {
        if (n == max)
            return -1;
        char *out = s;
        fields[n++] = out;
        if (*s == '"') {
            for (s++;; s++) {
                if (*s == '\0')
                    return -1;
                if (*s == '"' && s[1] != '"')
                    break;
                if (*s == '"')
                    s++;
                *out++ = *s;
            }
            s++;
            if (*s != ',' && *s != '\0')
                return -1;
        } else {
            while (*s && *s != ',')
                *out++ = *s++;
        }
        char sep = *s;
        *out = '\0';
        if (sep == '\0')
            return n;
        s++;
    }
}

/* One line as a field array followed by the fields' text, in one malloc'd block. Returns 0,
 * -1 when out of memory, -2 when the line is malformed. */
static int split_line(const char *line, char ***fields, int *n)
{
    size_t len = strlen(line), max = 1;
    for (const char *p = line; *p; p++)
        max += *p == ',';
    char **f = malloc(max * sizeof *f + len + 1);
    if (!f)
        return -1;
    char *text = (char *)(f + max);
    memcpy(text, line, len + 1);
    *n = split_csv(text, f, (int)max);
    if (*n < 0) {
        free(f);
        return -2;
    }
    *fields = f;
    return 0;
}

static void table_free(table *t)
{
    for (int r = 0; r < t->n_rows; r++)
        free(t->rows[r]);
    free(t->rows);
    free(t->header);
    t->rows = NULL;
    t->header = NULL;
    t->n_rows = t->cap = t->n_cols = 0;
}

static int table_add(table *t, char **fields)
{
    if (t->n_rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char ***rows = realloc(t->rows, sizeof *rows * (size_t)cap);
        if (!rows)
            return -1;
        t->rows = rows;
        t->cap = cap;
    }
    t->rows[t->n_rows++] = fields;
    return 0;
}

/* Reads DIR/NAME. Returns 0; 1 when the file does not exist and `optional`; -1 on an error. */
static int table_read(table *t, const char *dir, const char *name, bool optional, row_filter keep,
                      void *ctx, char *err, int errlen)
{
    memset(t, 0, sizeof *t);
    if (path_join(t->path, dir, name, err, errlen))
        return -1;
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (optional && errno == ENOENT)
            return 1;
        return fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, line_no = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        char **fields;
        int n, split = split_line(line, &fields, &n);
        if (split) {
            rc = fail(err, errlen,
                      split == -1 ? "out of memory reading %s"
                                  : "%s:%d: malformed "
                                    "CSV line",
                      t->path, line_no);
        } else if (!t->header) {
            t->header = fields;
            t->n_cols = n;
        } else if (n != t->n_cols) {
            free(fields);
            rc = fail(err, errlen, "%s:%d: %d fields, the header has %d", t->path, line_no, n,
                      t->n_cols);
        } else if (keep && !keep(t, fields, ctx)) {
            free(fields);
        } else if (table_add(t, fields)) {
            free(fields);
            rc = fail(err, errlen, "out of memory reading %s", t->path);
        }
    }
    if (rc == 0 && ferror(f))
        rc = fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    free(line);
    if (fclose(f) && rc == 0)
        rc = fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    if (rc == 0 && !t->header)
        rc = fail(err, errlen, "%s is empty", t->path);
    if (rc)
        table_free(t);
    return rc;
}

static int table_col(const table *t, const char *name)
{
    for (int k = 0; k < t->n_cols; k++)
        if (strcmp(t->header[k], name) == 0)
            return k;
    return -1;
}

/* The indexes of the n named columns into idx; fails when one is missing. */
static int table_cols(const table *t, const char *const *names, int n, int *idx, char *err,
                      int errlen)
{
    for (int i = 0; i < n; i++)
        if ((idx[i] = table_col(t, names[i])) < 0)
            return fail(err, errlen, "%s has no column %s", t->path, names[i]);
    return 0;
}

static int bad_number(const table *t, int row, const char *col, char *err, int errlen)
{
    return fail(err, errlen, "%s: row %d: %s is not a number", t->path, row + 1, col);
}

/* ---- the case's rows ---- */

typedef struct tensor_row {
    int64_t step, numel;
    const char *pass, *name, *role, *dtype, *shape, *amax;
    bool counted; /* counts present (absent for int64 labels and with --observe off) */
    int64_t zeros, underflow, subnormal, overflow, nan;
} tensor_row;

typedef struct step_row {
    int64_t step, lost_updates;
    const char *loss, *loss_scale, *first_nonfinite;
    double scale;
    bool found_inf, skipped;
} step_row;

typedef struct mem_row {
    const char *category;
    int64_t peak, end;
} mem_row;

typedef struct case_files {
    table tensors_csv, steps_csv, memory_csv;
    tensor_row *rows;
    int n_rows;
    step_row *steps;
    int n_steps;
    mem_row *mem;
    int n_mem;
} case_files;

enum {
    T_STEP,
    T_PASS,
    T_TENSOR,
    T_ROLE,
    T_DTYPE,
    T_SHAPE,
    T_NUMEL,
    T_ZEROS,
    T_UNDERFLOW,
    T_SUBNORMAL,
    T_OVERFLOW,
    T_NAN,
    T_AMAX,
    T_COLS
};
static const char *const tensor_cols[T_COLS] = {
    "step",  "pass",      "tensor",    "role",     "dtype", "shape", "numel",
    "zeros", "underflow", "subnormal", "overflow", "nan",   "amax"};

static int parse_tensors(case_files *c, char *err, int errlen)
{
    const table *t = &c->tensors_csv;
    int k[T_COLS];
    if (table_cols(t, tensor_cols, T_COLS, k, err, errlen))
        return -1;
    c->rows = calloc((size_t)t->n_rows + 1, sizeof *c->rows);
    if (!c->rows)
        return fail(err, errlen, "out of memory reading %s", t->path);
    for (int r = 0; r < t->n_rows; r++) {
        char **f = t->rows[r];
        tensor_row *x = &c->rows[r];
        *x = (tensor_row){.pass = f[k[T_PASS]],
                          .name = f[k[T_TENSOR]],
                          .role = f[k[T_ROLE]],
                          .dtype = f[k[T_DTYPE]],
                          .shape = f[k[T_SHAPE]],
                          .amax = f[k[T_AMAX]],
                          .counted = f[k[T_ZEROS]][0] != '\0'};
        if (!parse_i64(f[k[T_STEP]], &x->step))
            return bad_number(t, r, "step", err, errlen);
        if (!parse_i64(f[k[T_NUMEL]], &x->numel))
            return bad_number(t, r, "numel", err, errlen);
        int64_t *counts[] = {&x->zeros, &x->underflow, &x->subnormal, &x->overflow, &x->nan};
        for (int i = 0; x->counted && i < 5; i++)
            if (!parse_i64(f[k[T_ZEROS + i]], counts[i]))
                return bad_number(t, r, tensor_cols[T_ZEROS + i], err, errlen);
    }
    c->n_rows = t->n_rows;
    return 0;
}

enum { S_STEP, S_LOSS, S_SCALE, S_FOUND_INF, S_SKIPPED, S_LOST, S_FIRST, S_COLS };
static const char *const step_cols[S_COLS] = {
    "step", "loss", "loss_scale", "found_inf", "skipped", "lost_updates", "first_nonfinite"};

static int parse_steps(case_files *c, char *err, int errlen)
{
    const table *t = &c->steps_csv;
    int k[S_COLS];
    if (table_cols(t, step_cols, S_COLS, k, err, errlen))
        return -1;
    c->steps = calloc((size_t)t->n_rows + 1, sizeof *c->steps);
    if (!c->steps)
        return fail(err, errlen, "out of memory reading %s", t->path);
    for (int r = 0; r < t->n_rows; r++) {
        char **f = t->rows[r];
        step_row *s = &c->steps[r];
        int64_t found_inf, skipped;
        *s = (step_row){
            .loss = f[k[S_LOSS]], .loss_scale = f[k[S_SCALE]], .first_nonfinite = f[k[S_FIRST]]};
        if (!parse_i64(f[k[S_STEP]], &s->step) || !parse_f64(s->loss_scale, &s->scale) ||
            !parse_i64(f[k[S_FOUND_INF]], &found_inf) || !parse_i64(f[k[S_SKIPPED]], &skipped) ||
            !parse_i64(f[k[S_LOST]], &s->lost_updates))
            return fail(err, errlen, "%s: row %d: a number column is not a number", t->path, r + 1);
        s->found_inf = found_inf != 0;
        s->skipped = skipped != 0;
    }
    c->n_steps = t->n_rows;
    return 0;
}

static int parse_memory(case_files *c, char *err, int errlen)
{
    const table *t = &c->memory_csv;
    static const char *const cols[] = {"category", "peak_bytes", "end_bytes"};
    int k[3];
    if (table_cols(t, cols, 3, k, err, errlen))
        return -1;
    c->mem = calloc((size_t)t->n_rows + 1, sizeof *c->mem);
    if (!c->mem)
        return fail(err, errlen, "out of memory reading %s", t->path);
    for (int r = 0; r < t->n_rows; r++) {
        mem_row *m = &c->mem[r];
        m->category = t->rows[r][k[0]];
        if (!parse_i64(t->rows[r][k[1]], &m->peak) || !parse_i64(t->rows[r][k[2]], &m->end))
            return bad_number(t, r, "peak_bytes or end_bytes", err, errlen);
    }
    c->n_mem = t->n_rows;
    return 0;
}

static void case_files_free(case_files *c)
{
    table_free(&c->tensors_csv);
    table_free(&c->steps_csv);
    table_free(&c->memory_csv);
    free(c->rows);
    free(c->steps);
    free(c->mem);
    memset(c, 0, sizeof *c);
}

/* Reads a case folder's tensors.csv, steps.csv and memory.csv. Returns 0, 1 when the folder
 * has no tensors.csv and `optional`, or -1. */
static int case_files_read(case_files *c, const char *dir, bool optional, char *err, int errlen)
{
    memset(c, 0, sizeof *c);
    int rc = table_read(&c->tensors_csv, dir, "tensors.csv", optional, NULL, NULL, err, errlen);
    if (rc)
        return rc;
    if (parse_tensors(c, err, errlen) ||
        table_read(&c->steps_csv, dir, "steps.csv", false, NULL, NULL, err, errlen) ||
        parse_steps(c, err, errlen) ||
        table_read(&c->memory_csv, dir, "memory.csv", false, NULL, NULL, err, errlen) ||
        parse_memory(c, err, errlen)) {
        case_files_free(c);
        return -1;
    }
    return 0;
}

/* ---- what the rows say ---- */

static bool is_half(const char *dt) { return !strcmp(dt, "float16") || !strcmp(dt, "bfloat16"); }

static bool is_backward_grad(const tensor_row *r)
{
    return !strcmp(r->pass, "backward") &&
           (!strcmp(r->role, "grad_activation") || !strcmp(r->role, "grad_cast") ||
            !strcmp(r->role, "grad_param"));
}

/* The step the report describes (see the top of this file); -1 when tensors.csv is empty. */
static int64_t report_step(const case_files *c)
{
    int64_t first = -1;
    for (int i = 0; i < c->n_rows; i++)
        if (is_backward_grad(&c->rows[i]) && c->rows[i].counted)
            return c->rows[i].step;
    for (int i = 0; i < c->n_rows; i++)
        if (first < 0 || c->rows[i].step < first)
            first = c->rows[i].step;
    return first;
}

/* true when plot.py draws hist_grads.png for the case */
static bool has_hist_plot(const case_files *c)
{
    for (int i = 0; i < c->n_rows; i++)
        if (is_backward_grad(&c->rows[i]) && c->rows[i].counted)
            return true;
    return false;
}

static const tensor_row *find_row(const case_files *c, int64_t step, const char *pass,
                                  const char *name)
{
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step == step && !strcmp(r->pass, pass) && !strcmp(r->name, name))
            return r;
    }
    return NULL;
}

static const step_row *find_step(const case_files *c, int64_t step)
{
    for (int i = 0; i < c->n_steps; i++)
        if (c->steps[i].step == step)
            return &c->steps[i];
    return NULL;
}

/* The histogram's largest bin k (2^k <= |x| < 2^(k+1)) whose values all round to zero in dt:
 * below half the smallest subnormal (float16 2^-25, bfloat16 2^-134). INT_MIN: not a half
 * dtype. */
static int zero_bin_max(const char *dt)
{
    return !strcmp(dt, "float16") ? -26 : !strcmp(dt, "bfloat16") ? -135 : INT_MIN;
}

/* The scale of the report's step and its log2 when it is a power of two, when the step
 * scaled its loss (a loss.scaled row) and completed (a steps.csv row); false otherwise.
 * plot.py's lower histogram panel uses the same rule. */
static bool step_scale(const case_files *c, int64_t step, int *log2_scale)
{
    const step_row *s = find_step(c, step);
    if (!s || !find_row(c, step, "forward", "loss.scaled") || !(s->scale > 0))
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
static bool count_below(const table *t, char **f, void *p)
{
    below_ctx *b = p;
    if (b->k_step < 0) {
        b->k_step = table_col(t, "step"), b->k_pass = table_col(t, "pass");
        b->k_tensor = table_col(t, "tensor"), b->k_bin = table_col(t, "bin");
        b->k_count = table_col(t, "count");
        if (b->k_step < 0 || b->k_pass < 0 || b->k_tensor < 0 || b->k_bin < 0 || b->k_count < 0)
            b->bad = true;
    }
    int64_t step, bin, count;
    if (b->bad || !parse_i64(f[b->k_step], &step) || step != b->step ||
        strcmp(f[b->k_pass], "backward") || !parse_i64(f[b->k_bin], &bin))
        return false; /* other steps and passes, and the zero, inf and nan bins */
    const tensor_row *r = find_row(b->c, step, "backward", f[b->k_tensor]);
    if (!r || !is_backward_grad(r) || !is_half(r->dtype))
        return false;
    if (!parse_i64(f[b->k_count], &count))
        b->bad = true;
    else if (bin + b->shift <= zero_bin_max(r->dtype))
        b->below += count;
    return false;
}

/* The values of the step's half-dtype backward gradient rows that would round to zero if
 * they were 2^shift times their size (hist.csv bins moved by shift). */
static int hist_below(const case_files *c, const char *dir, int64_t step, int shift, int64_t *below,
                      char *err, int errlen)
{
    below_ctx b = {.c = c, .step = step, .shift = shift, .k_step = -1};
    table t;
    if (table_read(&t, dir, "hist.csv", false, count_below, &b, err, errlen))
        return -1;
    table_free(&t);
    if (b.bad)
        return fail(err, errlen, "%s/hist.csv: not the columns or numbers hist.csv has", dir);
    *below = b.below;
    return 0;
}

/* ---- formatting ---- */

/* A percentage as the top of this file describes; "–" when total is 0. */
static void format_pct(int64_t count, int64_t total, char *buf, size_t len)
{
    if (total <= 0) {
        snprintf(buf, len, "–");
        return;
    }
    if (count == 0) {
        snprintf(buf, len, "0");
        return;
    }
    snprintf(buf, len, "%.2f%%", 100.0 * (double)count / (double)total);
    if (!strcmp(buf, "0.00%"))
        snprintf(buf, len, "<0.01%%");
    else if (count < total && !strcmp(buf, "100.00%"))
        snprintf(buf, len, ">99.99%%");
}

/* "12.34% (56 of 789)" or "0 of 789" */
static void format_share(int64_t count, int64_t total, char *buf, size_t len)
{
    char pct[32];
    format_pct(count, total, pct, sizeof pct);
    if (count == 0)
        snprintf(buf, len, "0 of %lld", (long long)total);
    else
        snprintf(buf, len, "%s (%lld of %lld)", pct, (long long)count, (long long)total);
}

/* a table cell: a count with its percentage of total, or "–" without counts */
static void format_count_cell(bool counted, int64_t count, int64_t total, char *buf, size_t len)
{
    char pct[32];
    format_pct(count, total, pct, sizeof pct);
    if (!counted)
        snprintf(buf, len, "–");
    else if (count == 0)
        snprintf(buf, len, "0");
    else
        snprintf(buf, len, "%s (%lld)", pct, (long long)count);
}

static double mib(int64_t bytes) { return (double)bytes / 1048576.0; }

/* Markdown text: the characters Markdown would read (\ ` * _ |) escaped, newlines as spaces */
static void put_md(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|' || *s == '`' || *s == '*' || *s == '_' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

/* Markdown code span: `s`, its backticks as quotes, newlines as spaces */
static void put_code(FILE *f, const char *s)
{
    fputc('`', f);
    for (; *s; s++)
        fputc(*s == '`' ? '\'' : *s == '\n' || *s == '\r' ? ' ' : *s, f);
    fputc('`', f);
}

/* "a", "a and b", "a, b and c", each in backticks */
static void put_names(FILE *f, const tensor_row *const *rows, int n, bool strip_grad)
{
    for (int i = 0; i < n; i++) {
        const char *name = rows[i]->name;
        int len = (int)strlen(name);
        if (strip_grad && len > 5 && !strcmp(name + len - 5, ".grad"))
            len -= 5;
        fprintf(f, "%s`%.*s`", i == 0 ? "" : i + 1 < n ? ", " : " and ", len, name);
    }
}

/* "float32|float16" as "float32 and float16" */
static void put_dtype_set(FILE *f, const char *set)
{
    for (; *set; set++) {
        if (*set == '|')
            fputs(" and ", f);
        else
            fputc(*set, f);
    }
}

typedef int (*write_fn)(FILE *f, const void *ctx, char *err, int errlen);

/* Writes DIR/NAME through fn into a temporary file, then renames it into place. */
static int write_atomically(const char *dir, const char *name, write_fn fn, const void *ctx,
                            char *err, int errlen)
{
    char path[PATH_LEN], tmp[PATH_LEN + 16];
    if (path_join(path, dir, name, err, errlen))
        return -1;
    int n = snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    if (n < 0 || n >= (int)sizeof tmp)
        return fail(err, errlen, "path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    int rc = fn(f, ctx, err, errlen);
    if (rc == 0 && ferror(f))
        rc = fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (fclose(f) && rc == 0)
        rc = fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path))
        rc = fail(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc && unlink(tmp) && errno != ENOENT) {
        size_t len = strlen(err);
        snprintf(err + len, (size_t)errlen - len, " (and %s could not be removed: %s)", tmp,
                 strerror(errno));
    }
    return rc;
}

/* ---- config.csv ---- */

static const char *const optim_kind_names[] = {"sgd", "adam", "rmsprop"};

static void format_optimizer(const optim_config *o, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s lr=%g", optim_kind_names[o->kind], o->lr);
    if (o->momentum != 0.0 && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " momentum=%g", o->momentum);
    if (o->weight_decay != 0.0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " weight_decay=%g", o->weight_decay);
}

static const char *autocast_name(const case_config *cfg)
{
    return cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off";
}

static const char *loss_name(const case_config *cfg)
{
    return cfg->loss == LOSS_CROSS_ENTROPY ? "cross_entropy" : "mse";
}

static int write_config_csv(FILE *f, const void *ctx, char *err, int errlen)
{
    const case_config *cfg = ctx;
    char optim[128];
    format_optimizer(&cfg->optim, optim, sizeof optim);
    fprintf(f, "%s\n", CONFIG_CSV_HEADER);
    csv_write_field(f, cfg->name);
    fputc(',', f);
    csv_write_field(f, cfg->description);
    fputc(',', f);
    csv_write_field(f, cfg->baseline);
    fprintf(f, ",%s,%s,%s,%s,%s,%.9g,%.9g,%.9g,%lld,", dtype_name(cfg->params), autocast_name(cfg),
            cfg->loss_in_autocast ? "yes" : "no", cfg->master_weights ? "yes" : "no",
            cfg->scaler ? "yes" : "no", cfg->init_scale, cfg->growth_factor, cfg->backoff_factor,
            (long long)cfg->growth_interval);
    csv_write_field(f, optim);
    fprintf(f, ",%s,%lld,%lld,%llu\n", loss_name(cfg), (long long)cfg->batch, (long long)cfg->steps,
            (unsigned long long)cfg->seed);
    return 0;
}

/* ---- report.md ---- */

typedef struct case_report {
    const case_config *cfg;
    const case_result *res;
    const case_files *c;
    int64_t step;      /* the step the answer describes; -1: no rows */
    bool scaled_count; /* the GradScaler paragraph has the counts below */
    int log2_scale;
    int64_t would_underflow, half_grad_numel, half_grad_underflow;
} case_report;

/* PyTorch's side of the errors the harness reproduces, found by a piece of their message. */
static const struct {
    const char *needle, *text;
} pytorch_errors[] = {
    {"Attempting to unscale FP16 gradients",
     "PyTorch raises this ValueError in `GradScaler.unscale_()` (which `scaler.step()` calls) "
     "when a parameter's `.grad` is float16, as it is for a `.half()` model: it refuses to "
     "unscale float16 gradients in place. Keep the parameters in float32 and let autocast "
     "compute in float16 (the float32 `.grad` then receives the float16 gradients cast up), "
     "or give the optimizer float32 master weights."},
    {"not implemented for 'BFloat16'",
     "PyTorch's `GradScaler.unscale_()` has no bfloat16 kernel and raises this error for "
     "bfloat16 gradients. bfloat16 has float32's exponent range and needs no loss scaling: "
     "drop the GradScaler, or keep float32 parameters."},
    {"must have the same dtype",
     "PyTorch's matrix multiply (`torch.nn.functional.linear`) raises this RuntimeError when "
     "its operands' dtypes differ outside autocast: it never casts implicitly. Cast the input "
     "to the weight's dtype, or run the forward pass under autocast, which casts both "
     "operands to its dtype."},
    {"should be the same",
     "PyTorch's `conv2d` raises this RuntimeError when the input's and the weight's (or "
     "bias's) dtypes differ outside autocast. Cast the input, or run under autocast."},
    {"does not require grad",
     "PyTorch raises this RuntimeError in `backward()` when nothing the loss depends on "
     "requires a gradient."},
};

static void put_config_line(FILE *f, const case_config *cfg)
{
    char optim[128];
    format_optimizer(&cfg->optim, optim, sizeof optim);
    fprintf(f, "**Configuration:** params %s; autocast %s", dtype_name(cfg->params),
            autocast_name(cfg));
    if (cfg->autocast)
        fprintf(f, " (loss %s autocast)", cfg->loss_in_autocast ? "inside" : "outside");
    if (cfg->master_weights)
        fputs("; float32 master weights", f);
    if (cfg->scaler)
        fprintf(f,
                "; GradScaler (init_scale %g, growth_factor %g, backoff_factor %g, "
                "growth_interval %lld)",
                cfg->init_scale, cfg->growth_factor, cfg->backoff_factor,
                (long long)cfg->growth_interval);
    else
        fputs("; no GradScaler", f);
    fprintf(f, "; input %s, batch %lld; loss %s; optimizer %s; %lld step%s, seed %llu",
            dtype_name(cfg->input_dtype), (long long)cfg->batch, loss_name(cfg), optim,
            (long long)cfg->steps, cfg->steps == 1 ? "" : "s", (unsigned long long)cfg->seed);
    if (cfg->baseline[0])
        fprintf(f, "; baseline %s", cfg->baseline);
    fputs(".\n\n**Model:** ", f);
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        fprintf(f, "%s%s = ", i ? ", " : "", l->name);
        if (l->kind == LAYER_LINEAR)
            fprintf(f, "linear %lld → %lld%s", (long long)l->in, (long long)l->out,
                    l->bias ? "" : " (no bias)");
        else if (l->kind == LAYER_CONV2D)
            fprintf(f, "conv2d %lld → %lld, kernel %lld, stride %lld, padding %lld%s",
                    (long long)l->in, (long long)l->out, (long long)l->kernel, (long long)l->stride,
                    (long long)l->padding, l->bias ? "" : " (no bias)");
        else
            fputs(l->kind == LAYER_RELU ? "relu" : "flatten", f);
    }
    fputs(".\n\n", f);
}

static void put_rounding_note(FILE *f)
{
    fputs("Numbers are copied from this folder's CSV files or counted from them. Percentages "
          "are 100 × count / total, printed with two decimals (printf `%.2f`, round to "
          "nearest); a count of 0 prints as 0, a non-zero count that would print as 0.00% "
          "prints as <0.01%, and one short of the total that would print as 100.00% as "
          ">99.99%. MiB = bytes / 2^20, two decimals.\n\n",
          f);
}

/* "In step S, U of N values (p) underflowed to zero: a p1 (u1), ...; K (q) are subnormal." */
static void put_losses(FILE *f, const tensor_row *const *rows, int n, int64_t step,
                       const char *where)
{
    int64_t under = 0, sub = 0, numel = 0;
    for (int i = 0; i < n; i++) {
        under += rows[i]->underflow;
        sub += rows[i]->subnormal;
        numel += rows[i]->numel;
    }
    char share[96];
    format_share(under, numel, share, sizeof share);
    fprintf(f, " In step %lld, %s values %s underflowed to zero%s", (long long)step, share, where,
            under ? ":" : "");
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (!rows[i]->underflow)
            continue;
        format_share(rows[i]->underflow, rows[i]->numel, share, sizeof share);
        fprintf(f, "%s `%s` %s", first ? "" : ",", rows[i]->name, share);
        first = false;
    }
    format_share(sub, numel, share, sizeof share);
    fprintf(f,
            "; %s are subnormal (non-zero, below the smallest normal: fewer significant "
            "bits).",
            share);
}

/* The copy autocast made of a parameter whose gradient row is g: the backward pass's
 * grad_cast row "<param>@<dtype>.grad"; NULL when none. */
static const tensor_row *param_copy_grad(const case_files *c, const tensor_row *g)
{
    size_t base = strlen(g->name);
    if (base <= 5 || strcmp(g->name + base - 5, ".grad"))
        return NULL;
    base -= 5;
    for (int j = 0; j < c->n_rows; j++) {
        const tensor_row *r = &c->rows[j];
        size_t len = strlen(r->name);
        if (r->step == g->step && !strcmp(r->pass, "backward") && !strcmp(r->role, "grad_cast") &&
            !strncmp(r->name, g->name, base) && r->name[base] == '@' && len > 5 &&
            !strcmp(r->name + len - 5, ".grad"))
            return r;
    }
    return NULL;
}

/* true when parameters i and j had their gradients made the same way */
static bool same_way(const tensor_row *const *grads, const tensor_row *const *copies, int i, int j)
{
    if (!copies[i] != !copies[j] || strcmp(grads[i]->dtype, grads[j]->dtype))
        return false;
    return !copies[i] || !strcmp(copies[i]->dtype, copies[j]->dtype);
}

/* The paragraph on parameter gradients, one sentence per way they were made. buf holds
 * 4 * c->n_rows pointers. */
static void put_param_grads(FILE *f, const case_report *cr, const tensor_row **buf)
{
    const case_files *c = cr->c;
    const tensor_row **grads = buf, **copies = buf + c->n_rows;
    const tensor_row **group_grads = buf + 2 * c->n_rows, **group_copies = buf + 3 * c->n_rows;
    fputs("**Parameter gradients (`.grad`): ", f);
    if (!cr->res->param_grad_dtypes[0]) {
        fputs("none.** The run ended before a backward pass made them.\n\n", f);
        return;
    }
    put_dtype_set(f, cr->res->param_grad_dtypes);
    fputs(".**", f);
    int n = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *g = &c->rows[i];
        if (g->step == cr->step && !strcmp(g->pass, "backward") && !strcmp(g->role, "grad_param")) {
            grads[n] = g;
            copies[n++] = param_copy_grad(c, g);
        }
    }
    for (int i = 0; i < n; i++) {
        bool told = false;
        for (int k = 0; k < i && !told; k++)
            told = same_way(grads, copies, i, k);
        if (told)
            continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (same_way(grads, copies, i, j)) {
                group_grads[m] = grads[j];
                group_copies[m++] = copies[j];
            }
        fputs(" The gradients of ", f);
        put_names(f, group_grads, m, true);
        if (copies[i]) {
            fprintf(f,
                    " were computed in %s, as the gradients of autocast's %s copies of the "
                    "parameters (",
                    copies[i]->dtype, copies[i]->dtype);
            put_names(f, group_copies, m, false);
            fprintf(f, "), and cast to %s when autograd accumulated them into `.grad`.",
                    grads[i]->dtype);
            if (is_half(copies[i]->dtype) && !is_half(grads[i]->dtype))
                fputs(" The cast up is exact: what the half-precision computation lost stays "
                      "lost.",
                      f);
            put_losses(f, group_copies, m, cr->step, "of these copies' gradients");
        } else {
            fprintf(f, " were computed directly in %s: autocast made no copy of %s.",
                    grads[i]->dtype, m == 1 ? "this parameter" : "these parameters");
            if (is_half(grads[i]->dtype))
                put_losses(f, group_grads, m, cr->step, "of these gradients");
        }
    }
    fputs("\n\n", f);
}

/* Collects into buf the step's optimizer-pass rows of a role, each name once; returns n. */
static int optimizer_rows(const case_files *c, int64_t step, const char *role,
                          const tensor_row **buf)
{
    int n = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = !strcmp(buf[k]->name, r->name);
        if (!seen && r->step == step && !strcmp(r->pass, "optimizer") && !strcmp(r->role, role))
            buf[n++] = r;
    }
    return n;
}

/* With master weights: where the gradients went after backward. buf holds 2 * c->n_rows. */
static void put_master(FILE *f, const case_report *cr, const tensor_row **buf)
{
    const tensor_row **grads = buf, **masters = buf + cr->c->n_rows;
    int n = optimizer_rows(cr->c, cr->step, "grad_master", grads);
    int m = optimizer_rows(cr->c, cr->step, "master_param", masters);
    if (n == 0)
        return;
    fprintf(f, "**Master weights:** the optimizer copied these gradients to %s (", grads[0]->dtype);
    put_names(f, grads, n, false);
    fputs(")", f);
    if (m) {
        fprintf(f, " and updated its %s master copies of the parameters with them (",
                masters[0]->dtype);
        put_names(f, masters, m, false);
        fprintf(f, "), then rounded these back into the %s parameters",
                dtype_name(cr->cfg->params));
    }
    fputs(".\n\n", f);
}

/* The paragraph on activation gradients, by dtype, and the casts between them. */
static void put_activation_grads(FILE *f, const case_report *cr, const tensor_row **buf)
{
    const case_files *c = cr->c;
    static const char *const dtypes[] = {"float16", "bfloat16", "float32"};
    fputs("**Activation gradients:**", f);
    bool any = false;
    for (int d = 0; d < 3; d++) {
        int n = 0;
        for (int i = 0; i < c->n_rows; i++) {
            const tensor_row *r = &c->rows[i];
            if (r->step == cr->step && !strcmp(r->pass, "backward") &&
                !strcmp(r->role, "grad_activation") && !strcmp(r->dtype, dtypes[d]))
                buf[n++] = r;
        }
        if (n == 0)
            continue;
        fprintf(f, "%s %s for ", any ? ";" : "", dtypes[d]);
        put_names(f, buf, n, false);
        any = true;
    }
    fputs(any ? "." : " none in this step.", f);
    /* gradients of autocast's copies of activations, and where they went */
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        const char *at = strchr(r->name, '@');
        if (r->step != cr->step || strcmp(r->pass, "backward") || strcmp(r->role, "grad_cast") ||
            !at)
            continue;
        char base[512];
        int len = snprintf(base, sizeof base, "%.*s.grad", (int)(at - r->name), r->name);
        const tensor_row *to =
            len > 0 && len < (int)sizeof base ? find_row(c, cr->step, "backward", base) : NULL;
        if (!to || strcmp(to->role, "grad_activation"))
            continue;
        fprintf(f,
                " `%s` (%s), the gradient of autocast's %s copy of `%.*s`, was cast to %s "
                "as `%s`.",
                r->name, r->dtype, r->dtype, (int)(at - r->name), r->name, to->dtype, to->name);
    }
    for (int d = 0; d < 2; d++) {
        int n = 0;
        for (int i = 0; i < c->n_rows; i++) {
            const tensor_row *r = &c->rows[i];
            if (r->step == cr->step && !strcmp(r->pass, "backward") &&
                !strcmp(r->role, "grad_activation") && !strcmp(r->dtype, dtypes[d]) && r->counted)
                buf[n++] = r;
        }
        if (n) {
            char where[64];
            snprintf(where, sizeof where, "of the %s activation gradients", dtypes[d]);
            put_losses(f, buf, n, cr->step, where);
        }
    }
    fputs("\n\n", f);
}

static void put_nonfinite(FILE *f, const case_report *cr)
{
    const case_files *c = cr->c;
    int n = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step != cr->step || !r->counted ||
            !(r->overflow || r->nan || !strcmp(r->amax, "inf")))
            continue;
        if (n == 0)
            fprintf(f, "**Inf and NaN in step %lld:**", (long long)cr->step);
        if (n++ >= NONFINITE_LISTED)
            continue;
        fprintf(f, "%s `%s` (%s:", n > 1 ? "," : "", r->name, r->pass);
        if (r->overflow)
            fprintf(f, " %lld overflowed to inf%s", (long long)r->overflow, r->nan ? "," : "");
        else if (!strcmp(r->amax, "inf"))
            fprintf(f, " holds inf%s", r->nan ? "," : "");
        if (r->nan)
            fprintf(f, " %lld NaN", (long long)r->nan);
        fputc(')', f);
    }
    if (n > NONFINITE_LISTED)
        fprintf(f, " and %d more rows (tensors.csv)", n - NONFINITE_LISTED);
    if (n)
        fputs(".\n\n", f);
    else
        fprintf(f, "**Inf and NaN in step %lld:** none.\n\n", (long long)cr->step);
}

static void put_error(FILE *f, const case_report *cr)
{
    const case_result *res = cr->res;
    fprintf(f, "## Error\n\nThe run ended in an error after %d completed step%s (%s):\n\n    ",
            cr->c->n_steps, cr->c->n_steps == 1 ? "" : "s",
            res->passed ? "the case expects it" : "the case did not expect it");
    for (const char *p = res->error; *p; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
    fputs("\n\n", f);
    for (size_t i = 0; i < sizeof pytorch_errors / sizeof pytorch_errors[0]; i++)
        if (strstr(res->error, pytorch_errors[i].needle)) {
            fprintf(f, "What PyTorch does: %s\n\n", pytorch_errors[i].text);
            break;
        }
    fputs("The tables below hold what the run computed before the error.\n\n", f);
}

static void put_scaler(FILE *f, const case_report *cr)
{
    const case_files *c = cr->c;
    fputs("## GradScaler\n\n", f);
    if (!cr->cfg->scaler) {
        fputs("None: nothing scaled the loss, so the gradients above have their true size, "
              "and what underflowed in a half-precision rounding is lost.\n\n",
              f);
        return;
    }
    const step_row *s = find_step(c, cr->step);
    if (s)
        fprintf(f,
                "In step %lld the loss was multiplied by %s (steps.csv `loss_scale`) before "
                "backward (`loss.scaled`), so every gradient of that step's backward pass above "
                "is %s times the true one; `scaler.step()` unscales the %s (multiplies them by "
                "1/%s) and skips the optimizer step when it finds an inf or NaN there.",
                (long long)s->step, s->loss_scale, s->loss_scale,
                cr->cfg->master_weights ? "float32 master gradients" : "parameters' `.grad`",
                s->loss_scale);
    if (cr->scaled_count) {
        char would[96], did[96];
        format_share(cr->would_underflow, cr->half_grad_numel, would, sizeof would);
        format_share(cr->half_grad_underflow, cr->half_grad_numel, did, sizeof did);
        fprintf(f,
                " Divided by the scale, 2^%d, that is at their size without the scaler, %s "
                "values of the step's half-precision gradients would lie below half the "
                "smallest subnormal (2^-25 in float16, 2^-134 in bfloat16) and round to zero; "
                "with the scaler, %s underflowed (hist.csv, tensors.csv; the lower panel of "
                "hist_grads.png).",
                cr->log2_scale, would, did);
    } else if (cr->step >= 0)
        fprintf(f,
                "steps.csv has no row for step %lld (the run ended in it), so its loss scale "
                "is not recorded.",
                (long long)cr->step);
    if (c->n_steps == 0) {
        fputs(" No step completed.\n\n", f);
        return;
    }
    const step_row *first = &c->steps[0], *last = &c->steps[c->n_steps - 1];
    int found = 0, skipped = 0, grew = 0, backed_off = 0;
    for (int i = 0; i < c->n_steps; i++) {
        found += c->steps[i].found_inf;
        skipped += c->steps[i].skipped;
        if (i > 0 && c->steps[i].scale > c->steps[i - 1].scale)
            grew++;
        if (i > 0 && c->steps[i].scale < c->steps[i - 1].scale)
            backed_off++;
    }
    if (c->n_steps == 1)
        fprintf(f, "\n\nOver 1 step: loss scale %s", first->loss_scale);
    else
        fprintf(f, "\n\nOver %d steps: loss scale %s in step %lld and %s in step %lld", c->n_steps,
                first->loss_scale, (long long)first->step, last->loss_scale, (long long)last->step);
    fprintf(f, "; inf or NaN found in %d step%s, %d skipped", found, found == 1 ? "" : "s",
            skipped);
    for (int i = 0, k = 0; i < c->n_steps; i++)
        if (c->steps[i].skipped && k++ < SKIPS_LISTED)
            fprintf(f, "%s step %lld (first non-finite tensor `%s`)", k > 1 ? "," : ":",
                    (long long)c->steps[i].step, c->steps[i].first_nonfinite);
    if (skipped > SKIPS_LISTED)
        fprintf(f, " and %d more (steps.csv)", skipped - SKIPS_LISTED);
    fprintf(f,
            "; from one step to the next the scale grew %d time%s and backed off %d time%s."
            "\n\n",
            grew, grew == 1 ? "" : "s", backed_off, backed_off == 1 ? "" : "s");
}

static void put_steps(FILE *f, const case_report *cr)
{
    const case_files *c = cr->c;
    fputs("## Steps\n\n", f);
    if (c->n_steps == 0) {
        fputs("No step completed (steps.csv has no rows).\n\n", f);
        return;
    }
    int64_t lost = 0;
    for (int i = 0; i < c->n_steps; i++)
        lost += c->steps[i].lost_updates;
    const step_row *first = &c->steps[0], *last = &c->steps[c->n_steps - 1];
    fprintf(f, "%d step%s completed; loss %s in step %lld", c->n_steps, c->n_steps == 1 ? "" : "s",
            first->loss, (long long)first->step);
    if (c->n_steps > 1)
        fprintf(f, ", %s in step %lld", last->loss, (long long)last->step);
    fprintf(f,
            "; median step time %.3f ms; lost updates (parameter elements a step meant to "
            "change and rounding left as they were): %lld in all.\n\n",
            cr->res->step_ms, (long long)lost);
    if (c->n_steps > STEPS_TABLE_MAX) {
        fputs("Every step is in steps.csv.\n\n", f);
        return;
    }
    fputs("| step | loss | loss_scale | found_inf | skipped | lost_updates | first_nonfinite |\n"
          "|---:|---:|---:|---:|---:|---:|---|\n",
          f);
    for (int i = 0; i < c->n_steps; i++) {
        const step_row *s = &c->steps[i];
        fprintf(f, "| %lld | %s | %s | %d | %d | %lld | %s%s%s |\n", (long long)s->step, s->loss,
                cr->cfg->scaler ? s->loss_scale : "–", s->found_inf, s->skipped,
                (long long)s->lost_updates, s->first_nonfinite[0] ? "`" : "", s->first_nonfinite,
                s->first_nonfinite[0] ? "`" : "");
    }
    fputs("\n", f);
}

static void put_tensor_table(FILE *f, const case_files *c, int64_t step)
{
    fprintf(f,
            "## Tensors, step %lld\n\n| # | pass | tensor | role | dtype | shape | numel | "
            "underflow | subnormal | overflow | NaN | amax |\n"
            "|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n",
            (long long)step);
    int k = 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step != step)
            continue;
        char under[64], sub[64], over[32], nan[32];
        format_count_cell(r->counted, r->underflow, r->numel, under, sizeof under);
        format_count_cell(r->counted, r->subnormal, r->numel, sub, sizeof sub);
        snprintf(over, sizeof over, r->counted ? "%lld" : "–", (long long)r->overflow);
        snprintf(nan, sizeof nan, r->counted ? "%lld" : "–", (long long)r->nan);
        fprintf(f, "| %d | %s | `%s` | %s | %s | %s | %lld | %s | %s | %s | %s | %s |\n", ++k,
                r->pass, r->name, r->role, r->dtype, r->shape, (long long)r->numel, under, sub,
                over, nan, r->counted ? r->amax : "–");
    }
    fputs("\n", f);
}

static const char *mem_meaning(const char *category)
{
    static const struct {
        const char *name, *meaning;
    } m[] = {
        {"params", "the model's parameters, in their dtype"},
        {"grads", "parameters' `.grad`, gradients of autocast copies, activation gradients"},
        {"master_params", "float32 master copies kept by the optimizer"},
        {"optimizer_state", "momentum, Adam's exp_avg and exp_avg_sq, RMSprop's square_avg"},
        {"activations", "tensors the forward pass produced, kept for backward"},
        {"autocast_cache", "autocast's low-precision copies of the parameters"},
        {"inputs", "the input batch and the targets"},
        {"workspace", "backend scratch, not in the total (PyTorch would not hold it)"},
        {"total", "peak of the sum of the categories above workspace, at one moment"},
        {"saved_for_backward", "most bytes the autograd graph kept for backward at the end of a "
                               "forward pass, parameters and autocast copies left out (a measure, "
                               "not a category of the total)"},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!strcmp(m[i].name, category))
            return m[i].meaning;
    return "";
}

static void put_memory(FILE *f, const case_files *c)
{
    fputs("## Memory\n\nPeak bytes of each category (memory.csv); each category peaks at its "
          "own moment, so the total's peak is not the sum of theirs.\n\n"
          "| category | peak bytes | peak MiB | at the end, bytes | what |\n"
          "|---|---:|---:|---:|---|\n",
          f);
    for (int i = 0; i < c->n_mem; i++) {
        const mem_row *m = &c->mem[i];
        bool total = !strcmp(m->category, "total");
        fprintf(f,
                total ? "| **%s** | **%lld** | **%.2f** | %lld | %s |\n"
                      : "| %s | %lld | %.2f | %lld | %s |\n",
                m->category, (long long)m->peak, mib(m->peak), (long long)m->end,
                mem_meaning(m->category));
    }
    fputs("\n", f);
}

static void put_plots(FILE *f, const case_report *cr)
{
    fputs("## Plots\n\nDrawn by `plot/plot.py` (`make plots`).\n\n", f);
    if (has_hist_plot(cr->c))
        fputs("![log2|x| histogram of the gradients](hist_grads.png)\n\n", f);
    if (cr->c->n_steps >= 2)
        fputs("![loss and loss scale over the steps](loss_scale.png)\n\n", f);
    fputs("![memory by category](memory.png)\n", f);
}

static int write_report_md(FILE *f, const void *ctx, char *err, int errlen)
{
    const case_report *cr = ctx;
    const case_files *c = cr->c;
    const case_result *res = cr->res;
    fputs("# ", f);
    put_md(f, cr->cfg->name);
    fputs("\n\n", f);
    if (cr->cfg->description[0]) {
        fputc('*', f);
        put_md(f, cr->cfg->description);
        fputs("*\n\n", f);
    }
    put_config_line(f, cr->cfg);
    fprintf(f, "**Result:** %s on %s; %d of %d expectations held.",
            res->ok ? "ran"
                    : "ended in "
                      "an error",
            res->device, res->expect_passed, res->expect_total);
    if (res->ok)
        fprintf(f, " Final loss %.9g.", res->final_loss);
    fputs(" Compared with the other cases and the baseline in [REPORT.md](../REPORT.md).\n\n", f);
    if (!res->passed && res->failures[0]) {
        fputs("```\n", f);
        fputs(res->failures, f);
        fputs("```\n\n", f);
    }
    put_rounding_note(f);
    if (!res->ok)
        put_error(f, cr);
    if (cr->step >= 0) {
        const tensor_row **buf = calloc(4 * (size_t)c->n_rows + 1, sizeof *buf);
        if (!buf)
            return fail(err, errlen, "out of memory writing report.md");
        fprintf(f, "## Answer (step %lld)\n\n", (long long)cr->step);
        put_param_grads(f, cr, buf);
        put_master(f, cr, buf);
        put_activation_grads(f, cr, buf);
        free(buf);
        char share[96];
        format_share(res->grad_underflow, res->grad_numel, share, sizeof share);
        fprintf(f,
                "**In all**, over the backward passes of the observed steps, %s gradient "
                "values underflowed to zero (summary.csv `grad_underflow` of `grad_numel`).\n\n",
                share);
        put_nonfinite(f, cr);
    }
    put_scaler(f, cr);
    put_steps(f, cr);
    int64_t first = -1, last = -1;
    for (int i = 0; i < c->n_rows; i++) {
        if (first < 0 || c->rows[i].step < first)
            first = c->rows[i].step;
        if (c->rows[i].step > last)
            last = c->rows[i].step;
    }
    if (first < 0)
        fputs("## Tensors\n\nNone: tensors.csv has no rows.\n\n", f);
    else
        put_tensor_table(f, c, first);
    if (last > first)
        put_tensor_table(f, c, last);
    put_memory(f, c);
    put_plots(f, cr);
    return 0;
}

/* Fills the counts of the GradScaler paragraph (hist.csv). */
static int count_scaled(case_report *cr, const char *case_dir, char *err, int errlen)
{
    const case_files *c = cr->c;
    if (cr->step < 0 || !step_scale(c, cr->step, &cr->log2_scale))
        return 0;
    for (int i = 0; i < c->n_rows; i++) {
        const tensor_row *r = &c->rows[i];
        if (r->step == cr->step && is_backward_grad(r) && r->counted && is_half(r->dtype)) {
            cr->half_grad_numel += r->numel;
            cr->half_grad_underflow += r->underflow;
        }
    }
    if (cr->half_grad_numel == 0)
        return 0;
    cr->scaled_count = true;
    return hist_below(c, case_dir, cr->step, -cr->log2_scale, &cr->would_underflow, err, errlen);
}

int report_case(const case_config *cfg, const case_result *res, const char *case_dir, char *err,
                int errlen)
{
    case_files c;
    err[0] = '\0';
    if (case_files_read(&c, case_dir, false, err, errlen))
        return -1;
    case_report cr = {.cfg = cfg, .res = res, .c = &c, .step = report_step(&c)};
    int rc = count_scaled(&cr, case_dir, err, errlen);
    if (rc == 0)
        rc = write_atomically(case_dir, "config.csv", write_config_csv, cfg, err, errlen);
    if (rc == 0)
        rc = write_atomically(case_dir, "report.md", write_report_md, &cr, err, errlen);
    case_files_free(&c);
    return rc;
}

/* ---- REPORT.md ---- */

enum {
    U_CASE,
    U_STATUS,
    U_ERROR,
    U_PARAMS,
    U_AUTOCAST,
    U_OUTPUT,
    U_LOSS,
    U_PGRAD,
    U_UNDER,
    U_NUMEL,
    U_PEAK,
    U_STEP_MS,
    U_PASSED,
    U_TOTAL,
    U_COLS
};
static const char *const summary_cols[U_COLS] = {
    "case",           "status",       "error",      "params",
    "autocast",       "output_dtype", "loss_dtype", "param_grad_dtypes",
    "grad_underflow", "grad_numel",   "peak_bytes", "step_ms",
    "expect_passed",  "expect_total"};

/* What REPORT.md takes from one case's folder. */
typedef struct case_entry {
    char **sum; /* its summary.csv row */
    int64_t grad_underflow, grad_numel, peak;
    bool have_files; /* tensors.csv, steps.csv, memory.csv were read */
    bool hist_plot;
    int n_steps;
    int64_t lost_updates;
    bool have_config;
    char scaler[8], baseline[CASE_NAME_MAX], description[CASE_TEXT_MAX];
} case_entry;

typedef struct all_report {
    case_entry *cases;
    int n;
} all_report;

static int cmp_entry(const void *a, const void *b)
{
    const case_entry *x = a, *y = b;
    return strcmp(x->sum[U_CASE], y->sum[U_CASE]);
}

/* Reads what REPORT.md needs from the case's folder; a folder without files is noted. */
static int read_entry(const char *results_dir, case_entry *e, char *err, int errlen)
{
    char dir[PATH_LEN];
    if (path_join(dir, results_dir, e->sum[U_CASE], err, errlen))
        return -1;
    case_files c;
    int rc = case_files_read(&c, dir, true, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        e->have_files = true;
        e->hist_plot = has_hist_plot(&c);
        e->n_steps = c.n_steps;
        for (int i = 0; i < c.n_steps; i++)
            e->lost_updates += c.steps[i].lost_updates;
        case_files_free(&c);
    }
    table cfg;
    rc = table_read(&cfg, dir, "config.csv", true, NULL, NULL, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        static const char *const cols[] = {"scaler", "baseline", "description"};
        int k[3];
        if (table_cols(&cfg, cols, 3, k, err, errlen) || cfg.n_rows != 1) {
            if (cfg.n_rows != 1)
                fail(err, errlen, "%s: expected one row", cfg.path);
            table_free(&cfg);
            return -1;
        }
        e->have_config = true;
        snprintf(e->scaler, sizeof e->scaler, "%s", cfg.rows[0][k[0]]);
        snprintf(e->baseline, sizeof e->baseline, "%s", cfg.rows[0][k[1]]);
        snprintf(e->description, sizeof e->description, "%s", cfg.rows[0][k[2]]);
        table_free(&cfg);
    }
    return 0;
}

static const case_entry *find_entry(const all_report *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->cases[i].sum[U_CASE], name))
            return &a->cases[i];
    return NULL;
}

/* "[name](name/file)" with the case name escaped */
static void put_link(FILE *f, const char *text, const char *name, const char *file)
{
    fputc('[', f);
    put_md(f, text);
    fprintf(f, "](%s/%s)", name, file);
}

static int write_all_md(FILE *f, const void *ctx, char *err, int errlen)
{
    const all_report *a = ctx;
    fprintf(f,
            "# ampscope results\n\n%d case%s (summary.csv), sorted by name. Numbers are "
            "copied from the CSV files or counted from them. Gradient underflow: summary.csv's "
            "`grad_underflow` of `grad_numel`, the gradient values of the observed steps' "
            "backward passes that a rounding turned to zero; percentages are 100 × count / total "
            "with two decimals (printf `%%.2f`; a non-zero count that would print as 0.00%% "
            "prints as <0.01%%, one short of the total that would print as 100.00%% as "
            ">99.99%%). Lost updates: the sum of steps.csv's `lost_updates`. Peak: summary.csv's "
            "`peak_bytes` / 2^20 (MiB, two decimals), and its ratio to the case's baseline (two "
            "decimals). Step: the median step time, ms.\n\n",
            a->n, a->n == 1 ? "" : "s");
    fputs("| case | status | params | autocast | scaler | output | loss | param grads | "
          "grad underflow | lost updates | peak MiB | vs baseline | step ms | expectations |\n"
          "|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (int i = 0; i < a->n; i++) {
        const case_entry *e = &a->cases[i];
        char **s = e->sum;
        char under[96], lost[32], ratio[CASE_NAME_MAX + 64] = "–";
        format_share(e->grad_underflow, e->grad_numel, under, sizeof under);
        if (e->grad_numel == 0)
            snprintf(under, sizeof under, "–");
        snprintf(lost, sizeof lost, e->n_steps ? "%lld" : "–", (long long)e->lost_updates);
        const case_entry *base = e->baseline[0] ? find_entry(a, e->baseline) : NULL;
        if (base && base->peak > 0)
            snprintf(ratio, sizeof ratio, "%.2f× %s", (double)e->peak / (double)base->peak,
                     e->baseline);
        else if (e->baseline[0])
            snprintf(ratio, sizeof ratio, "(%s not in summary.csv)", e->baseline);
        fputs("| ", f);
        put_link(f, s[U_CASE], s[U_CASE], "report.md");
        fprintf(f, " | %s | %s | %s | %s | %s | %s | ", s[U_STATUS], s[U_PARAMS], s[U_AUTOCAST],
                e->have_config ? e->scaler : "?", s[U_OUTPUT][0] ? s[U_OUTPUT] : "–",
                s[U_LOSS][0] ? s[U_LOSS] : "–");
        put_md(f, s[U_PGRAD][0] ? s[U_PGRAD] : "–");
        fprintf(f, " | %s | %s | %.2f | ", under, lost, mib(e->peak));
        put_md(f, ratio);
        fprintf(f, " | %s | %s/%s |\n", strcmp(s[U_STEP_MS], "nan") ? s[U_STEP_MS] : "–",
                s[U_PASSED], s[U_TOTAL]);
    }
    fputs("\n## Cases\n\n", f);
    for (int i = 0; i < a->n; i++) {
        const case_entry *e = &a->cases[i];
        const char *name = e->sum[U_CASE];
        fputs("- **", f);
        put_md(f, name);
        fputs("**", f);
        if (e->description[0]) {
            fputs(": ", f);
            put_md(f, e->description);
        }
        if (!strcmp(e->sum[U_STATUS], "error")) {
            fputs(". Ended in an error (", f);
            put_code(f, e->sum[U_ERROR]);
            fputc(')', f);
        }
        if (!e->have_files) {
            fputs(". (Its folder has no tensors.csv.)\n", f);
            continue;
        }
        fputs(". ", f);
        put_link(f, "report", name, "report.md");
        fputs(", plots: ", f);
        if (e->hist_plot) {
            put_link(f, "gradient histogram", name, "hist_grads.png");
            fputs(", ", f);
        }
        if (e->n_steps >= 2) {
            put_link(f, "loss and loss scale", name, "loss_scale.png");
            fputs(", ", f);
        }
        put_link(f, "memory", name, "memory.png");
        fputs("\n", f);
    }
    bool any_hist = false;
    for (int i = 0; i < a->n; i++)
        any_hist |= a->cases[i].hist_plot;
    fputs("\n## Across cases\n\n![peak memory by category, per case](memory.png)\n", f);
    if (any_hist)
        fputs("\n![underflow per gradient tensor, per case](underflow.png)\n", f);
    return 0;
}

int report_all(const char *results_dir, char *err, int errlen)
{
    err[0] = '\0';
    table sum;
    if (table_read(&sum, results_dir, "summary.csv", false, NULL, NULL, err, errlen))
        return -1;
    all_report a = {.n = sum.n_rows};
    int k[U_COLS];
    int rc = table_cols(&sum, summary_cols, U_COLS, k, err, errlen);
    if (rc == 0 && !(a.cases = calloc((size_t)sum.n_rows + 1, sizeof *a.cases)))
        rc = fail(err, errlen, "out of memory reading %s", sum.path);
    /* each entry's sum[] holds its row's fields in summary_cols' order */
    char **fields = rc == 0 ? calloc((size_t)sum.n_rows * U_COLS + 1, sizeof *fields) : NULL;
    if (rc == 0 && !fields)
        rc = fail(err, errlen, "out of memory reading %s", sum.path);
    for (int i = 0; rc == 0 && i < sum.n_rows; i++) {
        case_entry *e = &a.cases[i];
        e->sum = fields + (size_t)i * U_COLS;
        for (int j = 0; j < U_COLS; j++)
            e->sum[j] = sum.rows[i][k[j]];
        if (!parse_i64(e->sum[U_UNDER], &e->grad_underflow) ||
            !parse_i64(e->sum[U_NUMEL], &e->grad_numel) || !parse_i64(e->sum[U_PEAK], &e->peak))
            rc = bad_number(&sum, i, "grad_underflow, grad_numel or peak_bytes", err, errlen);
    }
    if (rc == 0)
        qsort(a.cases, (size_t)a.n, sizeof *a.cases, cmp_entry);
    for (int i = 0; rc == 0 && i < a.n; i++)
        rc = read_entry(results_dir, &a.cases[i], err, errlen);
    if (rc == 0)
        rc = write_atomically(results_dir, "REPORT.md", write_all_md, &a, err, errlen);
    free(fields);
    free(a.cases);
    table_free(&sum);
    return rc;
}
