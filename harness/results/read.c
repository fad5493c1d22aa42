/*
 * read.c: a results folder's CSV files into run records (see read.h). Each file is read
 * into a csv_table and its rows parsed by column name into the record's rows; hist.csv,
 * the largest, row by row through a filter, its bins handed to the tensor rows in order (a
 * row's bins follow each other and add up to its numel).
 */
#include "read.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "case/parse.h"
#include "columns.h"

/* ---- one row's fields ---- */

/* a row being parsed: its table, index, columns by id, and the first bad field */
typedef struct row_ctx {
    const csv_table *t;
    char **f;
    int row;
    const csv_columns *cols;
    const int *k; /* k[id]: the column, -1 when the file has none */
    const char *bad, *bad_what; /* the first bad field's column, and what it should be */
} row_ctx;

/* the field of column id; "" when the file has no such column */
static const char *text(row_ctx *c, int id) { return c->k[id] < 0 ? "" : c->f[c->k[id]]; }

static void bad_as(row_ctx *c, int id, const char *what)
{
    if (!c->bad) {
        c->bad = c->cols->names[id];
        c->bad_what = what;
    }
}

static void bad(row_ctx *c, int id) { bad_as(c, id, "a word the file's writer writes there"); }

static int64_t i64(row_ctx *c, int id)
{
    int64_t v = 0;
    if (!csv_parse_i64(text(c, id), &v))
        bad_as(c, id, "a number");
    return v;
}

/* an integer of an appended column: def when the file has no such column or it is empty */
static int64_t i64_or(row_ctx *c, int id, int64_t def)
{
    return text(c, id)[0] ? i64(c, id) : def;
}

static double f64(row_ctx *c, int id)
{
    double v = 0;
    if (!csv_parse_f64(text(c, id), &v))
        bad_as(c, id, "a number");
    return v;
}

static double f64_or(row_ctx *c, int id, double def) { return text(c, id)[0] ? f64(c, id) : def; }

/* a float as the files print it (%.9g): the same float read back */
static float f32(row_ctx *c, int id)
{
    const char *s = text(c, id);
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (!*s || *end)
        bad_as(c, id, "a number");
    return v;
}

static bool yes(row_ctx *c, int id)
{
    const char *s = text(c, id);
    if (strcmp(s, "yes") && strcmp(s, "no") && s[0])
        bad_as(c, id, "yes or no");
    return !strcmp(s, "yes");
}

/* a dtype as dtype_name() writes it (int64 too) */
static dtype dtype_of(row_ctx *c, int id)
{
    const char *s = text(c, id);
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (!strcmp(s, dtype_name((dtype)d)))
            return (dtype)d;
    bad_as(c, id, "a dtype");
    return DTYPE_FLOAT32;
}

static dtype dtype_or(row_ctx *c, int id, dtype def) { return text(c, id)[0] ? dtype_of(c, id) : def; }

static void copy(char *dst, size_t len, row_ctx *c, int id) { snprintf(dst, len, "%s", text(c, id)); }

/* ---- one file ---- */

typedef int (*row_fn)(row_ctx *c, run_record *rec);

/* DIR/<cols->file> into rec, row by row through fn; want: the columns it must have. Returns
 * 0, 1 when the file does not exist and `optional`, -1 with a message. */
static int read_file(const char *dir, const csv_columns *cols, const int *want, int n_want,
                     bool optional, row_fn fn, run_record *rec, char *err, int errlen)
{
    csv_table t;
    int rc = csv_table_read_in(&t, dir, cols->file, optional, NULL, NULL, err, errlen);
    if (rc)
        return rc;
    int *k = malloc(sizeof *k * (size_t)cols->n);
    rc = k ? csv_table_find(&t, cols, want, n_want, k, err, errlen)
           : csv_fail(err, errlen, "out of memory reading %s", t.path);
    for (int i = 0; k && i < cols->n && rc == 0; i++) /* the appended ones, where present */
        if (k[i] < 0)
            k[i] = csv_table_col(&t, cols->names[i]);
    for (int r = 0; rc == 0 && r < t.n_rows; r++) {
        row_ctx c = {.t = &t, .f = t.rows[r], .row = r, .cols = cols, .k = k};
        if (fn(&c, rec))
            rc = csv_fail(err, errlen, "out of memory reading %s", t.path);
        else if (c.bad)
            rc = csv_fail(err, errlen, "%s: row %d: %s is not %s", t.path, r + 1, c.bad, c.bad_what);
    }
    if (rc == 0 && rec->out_of_memory)
        rc = csv_fail(err, errlen, "out of memory reading %s", t.path);
    free(k);
    csv_table_free(&t);
    return rc;
}

/* ---- the files' rows ---- */

static int tensor_row(row_ctx *c, run_record *rec)
{
    record_tensor *t = record_add_tensor(rec);
    if (!t)
        return -1;
    const char *pass = text(c, TENSORS_COL_PASS), *role = text(c, TENSORS_COL_ROLE);
    if (!pass_parse(pass, &t->pass))
        bad(c, TENSORS_COL_PASS);
    if (!tensor_role_parse(role, &t->role))
        bad(c, TENSORS_COL_ROLE);
    if (!dtype_reason_parse(text(c, TENSORS_COL_DTYPE_REASON), &t->reason))
        bad(c, TENSORS_COL_DTYPE_REASON);
    t->step = i64(c, TENSORS_COL_STEP);
    t->order = (int)i64(c, TENSORS_COL_ORDER);
    t->name = record_intern(rec, text(c, TENSORS_COL_TENSOR));
    t->dtype = dtype_of(c, TENSORS_COL_DTYPE);
    t->shape = record_intern(rec, text(c, TENSORS_COL_SHAPE));
    t->numel = i64(c, TENSORS_COL_NUMEL);
    t->bytes = i64(c, TENSORS_COL_BYTES);
    t->op = record_intern(rec, text(c, TENSORS_COL_OP));
    t->from = record_intern(rec, text(c, TENSORS_COL_DTYPE_FROM));
    t->amin_nonzero = INFINITY;
    t->counted = text(c, TENSORS_COL_ZEROS)[0] != '\0';
    if (!t->counted)
        return 0;
    t->unseen = !text(c, TENSORS_COL_UNDERFLOW)[0];
    t->zeros = i64(c, TENSORS_COL_ZEROS);
    t->underflow = t->unseen ? 0 : i64(c, TENSORS_COL_UNDERFLOW);
    t->subnormal = i64(c, TENSORS_COL_SUBNORMAL);
    t->overflow = t->unseen ? 0 : i64(c, TENSORS_COL_OVERFLOW);
    t->nan = i64(c, TENSORS_COL_NAN);
    t->amax = f32(c, TENSORS_COL_AMAX);
    if (text(c, TENSORS_COL_AMIN_NONZERO)[0])
        t->amin_nonzero = f32(c, TENSORS_COL_AMIN_NONZERO);
    return 0;
}

/* hist.csv, as its rows are read: each bin to the tensor row it belongs to */
typedef struct hist_ctx {
    run_record *rec;
    int k[HIST_N_COLS];
    bool have_cols;
    int64_t row, filled; /* the tensor row taking bins, and the values its bins hold */
    const char *bad;     /* the first row that fits no tensor row, or a bad field */
    int line;
} hist_ctx;

/* the histogram bin whose hist.csv name is s (hist_bin_name's: an exponent, zero, inf, nan) */
static bool bin_of(const char *s, int *bin)
{
    int64_t e;
    int b = !strcmp(s, "zero")            ? HIST_ZERO
            : !strcmp(s, "inf")           ? HIST_INF
            : !strcmp(s, "nan")           ? HIST_NAN
            : csv_parse_i64(s, &e) && e >= HIST_MIN_EXP && e < HIST_MIN_EXP + HIST_ZERO
                ? (int)(e - HIST_MIN_EXP)
                : -1;
    char name[16];
    if (b < 0)
        return false;
    hist_bin_name(b, name, sizeof name); /* the name it writes is the one read */
    *bin = b;
    return !strcmp(name, s);
}

static bool hist_row(const csv_table *t, char **f, void *p)
{
    hist_ctx *h = p;
    h->line++;
    if (h->bad)
        return false;
    if (!h->have_cols) {
        static const int want[] = {HIST_COL_STEP, HIST_COL_PASS, HIST_COL_TENSOR, HIST_COL_BIN,
                                   HIST_COL_COUNT};
        char err[8];
        h->have_cols = true;
        if (csv_table_find(t, &csv_hist, want, 5, h->k, err, sizeof err)) {
            h->bad = "the columns";
            return false;
        }
    }
    int64_t step, count;
    int bin;
    pass_kind pass;
    const char *name = f[h->k[HIST_COL_TENSOR]];
    if (!csv_parse_i64(f[h->k[HIST_COL_STEP]], &step) || !pass_parse(f[h->k[HIST_COL_PASS]], &pass) ||
        !bin_of(f[h->k[HIST_COL_BIN]], &bin) || !csv_parse_i64(f[h->k[HIST_COL_COUNT]], &count)) {
        h->bad = "a field";
        return false;
    }
    run_record *rec = h->rec;
    /* the next row of this step, pass and name that is counted and not yet full */
    while (h->row < rec->n_tensors) {
        const record_tensor *r = &rec->tensors[h->row];
        if (r->step == step && r->pass == pass && r->counted && !strcmp(r->name, name) &&
            h->filled < r->numel)
            break;
        h->row++;
        h->filled = 0;
    }
    if (h->row == rec->n_tensors) {
        h->bad = "a row of no tensors.csv row";
        return false;
    }
    record_add_bin(rec, h->row, bin, count);
    if (rec->out_of_memory)
        return false;
    h->filled += count;
    return false;
}

static int read_hist(const char *dir, run_record *rec, char *err, int errlen)
{
    hist_ctx h = {.rec = rec};
    csv_table t;
    int rc = csv_table_read_in(&t, dir, csv_hist.file, true, hist_row, &h, err, errlen);
    if (rc)
        return rc > 0 ? 0 : -1; /* without hist.csv: no histograms */
    csv_table_free(&t);
    if (rec->out_of_memory)
        return csv_fail(err, errlen, "out of memory reading %s/%s", dir, csv_hist.file);
    if (h.bad)
        return csv_fail(err, errlen, "%s/%s: row %d: %s that %s does not write", dir, csv_hist.file,
                    h.line, h.bad, csv_hist.file);
    return 0;
}

static int step_row(row_ctx *c, run_record *rec)
{
    record_step *s = record_add_step(rec);
    if (!s)
        return -1;
    s->step = i64(c, STEPS_COL_STEP);
    s->loss = f32(c, STEPS_COL_LOSS);
    s->loss_scale = f32(c, STEPS_COL_LOSS_SCALE);
    s->found_inf = i64(c, STEPS_COL_FOUND_INF) != 0;
    s->skipped = i64(c, STEPS_COL_SKIPPED) != 0;
    s->step_ms = f64(c, STEPS_COL_STEP_MS);
    s->lr = f64(c, STEPS_COL_LR);
    s->lost_updates = i64(c, STEPS_COL_LOST_UPDATES);
    s->first_nonfinite = record_intern(rec, text(c, STEPS_COL_FIRST_NONFINITE));
    s->accumulates = text(c, STEPS_COL_LOST_ACCUMULATIONS)[0] != '\0';
    s->lost_accumulations = i64_or(c, STEPS_COL_LOST_ACCUMULATIONS, 0);
    s->clips = text(c, STEPS_COL_TOTAL_NORM)[0] != '\0';
    s->total_norm = f64_or(c, STEPS_COL_TOTAL_NORM, 0);
    s->clip_coef = f64_or(c, STEPS_COL_CLIP_COEF, 0);
    s->nonfinite_op = record_intern(rec, text(c, STEPS_COL_FIRST_NONFINITE_OP));
    s->nonfinite_input = record_intern(rec, text(c, STEPS_COL_FIRST_NONFINITE_INPUT));
    return 0;
}

/* memory.csv's by_dtype, "float16:4096|float32:512" */
static void by_dtype(row_ctx *c, int64_t out[DTYPE_COUNT])
{
    for (const char *p = text(c, MEMORY_COL_BY_DTYPE); *p;) {
        size_t len = strcspn(p, "|"), name = strcspn(p, ":");
        char item[64];
        int64_t v;
        snprintf(item, sizeof item, "%.*s", (int)len, p);
        int d = 0;
        while (d < DTYPE_COUNT && (name >= len || strlen(dtype_name((dtype)d)) != name ||
                                   strncmp(p, dtype_name((dtype)d), name)))
            d++;
        if (d == DTYPE_COUNT || !csv_parse_i64(item + name + 1, &v)) {
            bad(c, MEMORY_COL_BY_DTYPE);
            return;
        }
        out[d] = v;
        p += len + (p[len] == '|');
    }
}

static int memory_row(row_ctx *c, run_record *rec)
{
    record_memory *m = record_add_memory(rec);
    if (!m)
        return -1;
    m->category = record_intern(rec, text(c, MEMORY_COL_CATEGORY));
    m->peak = i64(c, MEMORY_COL_PEAK_BYTES);
    m->end = i64(c, MEMORY_COL_END_BYTES);
    by_dtype(c, m->by_dtype);
    return 0;
}

static int fp8_row(row_ctx *c, run_record *rec)
{
    record_fp8 *q = record_add_fp8(rec);
    if (!q)
        return -1;
    *q = (record_fp8){.step = i64(c, FP8_COL_STEP),
                      .tensor = record_intern(rec, text(c, FP8_COL_TENSOR)),
                      .format = dtype_of(c, FP8_COL_FORMAT),
                      .amax = f32(c, FP8_COL_AMAX),
                      .scale = f32(c, FP8_COL_SCALE),
                      .saturated = i64(c, FP8_COL_SATURATED),
                      .underflow = i64(c, FP8_COL_UNDERFLOW)};
    return 0;
}

static int allreduce_row(row_ctx *c, run_record *rec)
{
    record_allreduce *a = record_add_allreduce(rec);
    if (!a)
        return -1;
    *a = (record_allreduce){.step = i64(c, ALLREDUCE_COL_STEP),
                            .tensor = record_intern(rec, text(c, ALLREDUCE_COL_TENSOR)),
                            .comm = record_intern(rec, text(c, ALLREDUCE_COL_COMM)),
                            .algorithm = record_intern(rec, text(c, ALLREDUCE_COL_ALGORITHM)),
                            .dtype = dtype_of(c, ALLREDUCE_COL_DTYPE),
                            .wire = dtype_of(c, ALLREDUCE_COL_WIRE_DTYPE),
                            .world_size = i64(c, ALLREDUCE_COL_WORLD_SIZE),
                            .numel = i64(c, ALLREDUCE_COL_NUMEL),
                            .underflow = i64(c, ALLREDUCE_COL_UNDERFLOW),
                            .overflow = i64(c, ALLREDUCE_COL_OVERFLOW),
                            .nonfinite = i64(c, ALLREDUCE_COL_NONFINITE),
                            .rel_error = f64(c, ALLREDUCE_COL_REL_ERROR),
                            .sqnr_db = f64(c, ALLREDUCE_COL_SQNR_DB)};
    return 0;
}

static int rank_row(row_ctx *c, run_record *rec)
{
    record_rank *k = record_add_rank(rec);
    if (!k)
        return -1;
    *k = (record_rank){.step = i64(c, RANKS_COL_STEP),
                       .rank = (int)i64(c, RANKS_COL_RANK),
                       .tensor = record_intern(rec, text(c, RANKS_COL_TENSOR)),
                       .dtype = dtype_of(c, RANKS_COL_DTYPE),
                       .numel = i64(c, RANKS_COL_NUMEL),
                       .zeros = i64(c, RANKS_COL_ZEROS),
                       .subnormal = i64(c, RANKS_COL_SUBNORMAL),
                       .inf = i64(c, RANKS_COL_INF),
                       .nan = i64(c, RANKS_COL_NAN),
                       .amax = f64(c, RANKS_COL_AMAX)};
    return 0;
}

static int expect_row(row_ctx *c, run_record *rec)
{
    record_expect *e = record_add_expect(rec);
    if (!e)
        return -1;
    *e = (record_expect){.line = (int)i64_or(c, EXPECT_COL_LINE, -1),
                         .expectation = record_intern(rec, text(c, EXPECT_COL_EXPECTATION)),
                         .held = yes(c, EXPECT_COL_HELD),
                         .failure = record_intern(rec, text(c, EXPECT_COL_FAILURE))};
    return 0;
}

/* the index of s in names[0..n); -1 when none */
static int index_of(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s))
            return i;
    return -1;
}

static int config_row(row_ctx *c, run_record *rec)
{
    record_config *g = &rec->config;
    rec->has_config = true;
    copy(g->name, sizeof g->name, c, CONFIG_COL_CASE);
    copy(g->description, sizeof g->description, c, CONFIG_COL_DESCRIPTION);
    copy(g->baseline, sizeof g->baseline, c, CONFIG_COL_BASELINE);
    g->params = dtype_of(c, CONFIG_COL_PARAMS);
    g->autocast = strcmp(text(c, CONFIG_COL_AUTOCAST), "off") != 0;
    g->autocast_dtype = g->autocast ? dtype_of(c, CONFIG_COL_AUTOCAST) : DTYPE_FLOAT16;
    g->loss_in_autocast = yes(c, CONFIG_COL_LOSS_IN_AUTOCAST);
    g->master_weights = yes(c, CONFIG_COL_MASTER_WEIGHTS);
    g->scaler = yes(c, CONFIG_COL_SCALER);
    g->init_scale = f64(c, CONFIG_COL_INIT_SCALE);
    g->growth_factor = f64(c, CONFIG_COL_GROWTH_FACTOR);
    g->backoff_factor = f64(c, CONFIG_COL_BACKOFF_FACTOR);
    g->growth_interval = i64(c, CONFIG_COL_GROWTH_INTERVAL);
    copy(g->optimizer, sizeof g->optimizer, c, CONFIG_COL_OPTIMIZER);
    copy(g->loss, sizeof g->loss, c, CONFIG_COL_LOSS);
    g->batch = i64(c, CONFIG_COL_BATCH);
    g->steps = i64(c, CONFIG_COL_STEPS);
    g->seed = (uint64_t)strtoull(text(c, CONFIG_COL_SEED), NULL, 10);
    /* appended */
    copy(g->path, sizeof g->path, c, CONFIG_COL_PATH);
    g->input_dtype = dtype_or(c, CONFIG_COL_INPUT_DTYPE, DTYPE_FLOAT32);
    copy(g->model, sizeof g->model, c, CONFIG_COL_MODEL);
    g->accumulate = i64_or(c, CONFIG_COL_ACCUMULATE, 1);
    g->delay_unscale = yes(c, CONFIG_COL_DELAY_UNSCALE);
    g->clip_grad_norm = f64_or(c, CONFIG_COL_CLIP_GRAD_NORM, 0);
    g->norm_type = f64_or(c, CONFIG_COL_NORM_TYPE, 2);
    g->clip_grad_value = f64_or(c, CONFIG_COL_CLIP_GRAD_VALUE, 0);
    g->clip_before_unscale = yes(c, CONFIG_COL_CLIP_BEFORE_UNSCALE);
    const char *fp8 = text(c, CONFIG_COL_FP8);
    g->fp8_recipe = index_of(fp8_recipe_names, FP8_RECIPE_COUNT, fp8);
    g->fp8 = g->fp8_recipe >= 0;
    if (!g->fp8 && fp8[0] && strcmp(fp8, "off"))
        bad(c, CONFIG_COL_FP8);
    g->world_size = i64_or(c, CONFIG_COL_WORLD_SIZE, 1);
    snprintf(g->comm, sizeof g->comm, "%s", text(c, CONFIG_COL_COMM)[0] ? text(c, CONFIG_COL_COMM) : "ddp");
    g->reduce_dtype = dtype_or(c, CONFIG_COL_REDUCE_DTYPE, DTYPE_FLOAT32);
    snprintf(g->allreduce_algorithm, sizeof g->allreduce_algorithm, "%s",
             text(c, CONFIG_COL_ALLREDUCE_ALGORITHM)[0] ? text(c, CONFIG_COL_ALLREDUCE_ALGORITHM)
                                                       : "default");
    g->gemm_sgemm = i64_or(c, CONFIG_COL_GEMM_SGEMM, 0);
    g->gemm_bf16 = i64_or(c, CONFIG_COL_GEMM_BF16, 0);
    return 0;
}

int results_read_case(const char *case_dir, run_record *rec, char *err, int errlen)
{
    record_clear(rec);
    static const int tensors_want[] = {
        TENSORS_COL_STEP,     TENSORS_COL_PASS,      TENSORS_COL_ORDER,     TENSORS_COL_TENSOR,
        TENSORS_COL_ROLE,     TENSORS_COL_DTYPE,     TENSORS_COL_SHAPE,     TENSORS_COL_NUMEL,
        TENSORS_COL_BYTES,    TENSORS_COL_ZEROS,     TENSORS_COL_UNDERFLOW, TENSORS_COL_SUBNORMAL,
        TENSORS_COL_OVERFLOW, TENSORS_COL_NAN,       TENSORS_COL_AMAX,      TENSORS_COL_AMIN_NONZERO};
    static const int steps_want[] = {STEPS_COL_STEP,      STEPS_COL_LOSS,         STEPS_COL_LOSS_SCALE,
                                     STEPS_COL_FOUND_INF, STEPS_COL_SKIPPED,      STEPS_COL_STEP_MS,
                                     STEPS_COL_LR,        STEPS_COL_LOST_UPDATES, STEPS_COL_FIRST_NONFINITE};
    static const int memory_want[] = {MEMORY_COL_CATEGORY, MEMORY_COL_PEAK_BYTES,
                                      MEMORY_COL_END_BYTES};
    static const int fp8_want[] = {FP8_COL_STEP,  FP8_COL_TENSOR,    FP8_COL_FORMAT,   FP8_COL_AMAX,
                                   FP8_COL_SCALE, FP8_COL_SATURATED, FP8_COL_UNDERFLOW};
    static const int config_want[] = {
        CONFIG_COL_CASE,          CONFIG_COL_DESCRIPTION,      CONFIG_COL_BASELINE,
        CONFIG_COL_PARAMS,        CONFIG_COL_AUTOCAST,         CONFIG_COL_LOSS_IN_AUTOCAST,
        CONFIG_COL_MASTER_WEIGHTS, CONFIG_COL_SCALER,          CONFIG_COL_INIT_SCALE,
        CONFIG_COL_GROWTH_FACTOR, CONFIG_COL_BACKOFF_FACTOR,   CONFIG_COL_GROWTH_INTERVAL,
        CONFIG_COL_OPTIMIZER,     CONFIG_COL_LOSS,             CONFIG_COL_BATCH,
        CONFIG_COL_STEPS,         CONFIG_COL_SEED};
    static const int expect_want[] = {EXPECT_COL_LINE, EXPECT_COL_EXPECTATION, EXPECT_COL_HELD,
                                      EXPECT_COL_FAILURE};
    int allreduce_want[ALLREDUCE_N_COLS - 1], ranks_want[RANKS_N_COLS - 1];
    for (int i = 0; i < ALLREDUCE_N_COLS - 1; i++) /* every column but the case */
        allreduce_want[i] = i + 1;
    for (int i = 0; i < RANKS_N_COLS - 1; i++)
        ranks_want[i] = i + 1;
#define N(a) ((int)(sizeof(a) / sizeof *(a)))
    int rc = read_file(case_dir, &csv_tensors, tensors_want, N(tensors_want), true, tensor_row,
                       rec, err, errlen);
    if (rc)
        return rc;
    if (read_hist(case_dir, rec, err, errlen) ||
        read_file(case_dir, &csv_steps, steps_want, N(steps_want), false, step_row, rec, err,
                  errlen) ||
        read_file(case_dir, &csv_memory, memory_want, N(memory_want), false, memory_row, rec, err,
                  errlen) ||
        read_file(case_dir, &csv_config, config_want, N(config_want), true, config_row, rec, err,
                  errlen) < 0)
        return -1;
    int fp8 = read_file(case_dir, &csv_fp8, fp8_want, N(fp8_want), true, fp8_row, rec, err, errlen);
    int all = fp8 < 0 ? -1
                      : read_file(case_dir, &csv_allreduce, allreduce_want, N(allreduce_want), true,
                                  allreduce_row, rec, err, errlen);
    int ranks = all < 0 ? -1
                        : read_file(case_dir, &csv_ranks, ranks_want, N(ranks_want), true,
                                    rank_row, rec, err, errlen);
    int expect = ranks < 0 ? -1
                           : read_file(case_dir, &csv_expect, expect_want, N(expect_want), true,
                                       expect_row, rec, err, errlen);
#undef N
    if (expect < 0)
        return -1;
    rec->has_fp8 = fp8 == 0;
    rec->has_allreduce = all == 0;
    rec->has_expect = expect == 0;
    return 0;
}

int results_read_summary(const char *out, csv_table *t, char *err, int errlen)
{
    static const int want[] = {
        SUMMARY_COL_CASE,           SUMMARY_COL_DEVICE,           SUMMARY_COL_STATUS,
        SUMMARY_COL_ERROR,          SUMMARY_COL_PARAMS,           SUMMARY_COL_AUTOCAST,
        SUMMARY_COL_INPUT_DTYPE,    SUMMARY_COL_OUTPUT_DTYPE,     SUMMARY_COL_LOSS_DTYPE,
        SUMMARY_COL_PARAM_GRAD_DTYPES, SUMMARY_COL_CAST_GRAD_DTYPES,
        SUMMARY_COL_ACTIVATION_GRAD_DTYPES, SUMMARY_COL_GRAD_UNDERFLOW, SUMMARY_COL_GRAD_NUMEL,
        SUMMARY_COL_FINAL_LOSS,     SUMMARY_COL_PEAK_BYTES,       SUMMARY_COL_STEP_MS,
        SUMMARY_COL_EXPECT_PASSED,  SUMMARY_COL_EXPECT_TOTAL};
    if (csv_table_read_in(t, out, csv_summary.file, false, NULL, NULL, err, errlen))
        return -1;
    int k[SUMMARY_N_COLS];
    if (csv_table_find(t, &csv_summary, want, (int)(sizeof want / sizeof *want), k, err, errlen)) {
        csv_table_free(t);
        return -1;
    }
    return 0;
}

int results_summary_row(const csv_table *t, int r, case_result *res, char *err, int errlen)
{
    int k[SUMMARY_N_COLS];
    for (int i = 0; i < SUMMARY_N_COLS; i++)
        k[i] = csv_table_col(t, csv_summary.names[i]);
    row_ctx c = {.t = t, .f = t->rows[r], .row = r, .cols = &csv_summary, .k = k};
    memset(res, 0, sizeof *res);
    copy(res->name, sizeof res->name, &c, SUMMARY_COL_CASE);
    copy(res->device, sizeof res->device, &c, SUMMARY_COL_DEVICE);
    const char *status = text(&c, SUMMARY_COL_STATUS);
    res->interrupted = !strcmp(status, "interrupted");
    res->ok = !strcmp(status, "ok") || res->interrupted;
    if (!res->ok && strcmp(status, "error"))
        bad(&c, SUMMARY_COL_STATUS);
    copy(res->error, sizeof res->error, &c, SUMMARY_COL_ERROR);
    copy(res->params, sizeof res->params, &c, SUMMARY_COL_PARAMS);
    copy(res->autocast, sizeof res->autocast, &c, SUMMARY_COL_AUTOCAST);
    copy(res->input_dtype, sizeof res->input_dtype, &c, SUMMARY_COL_INPUT_DTYPE);
    copy(res->output_dtype, sizeof res->output_dtype, &c, SUMMARY_COL_OUTPUT_DTYPE);
    copy(res->loss_dtype, sizeof res->loss_dtype, &c, SUMMARY_COL_LOSS_DTYPE);
    copy(res->param_grad_dtypes, sizeof res->param_grad_dtypes, &c, SUMMARY_COL_PARAM_GRAD_DTYPES);
    copy(res->cast_grad_dtypes, sizeof res->cast_grad_dtypes, &c, SUMMARY_COL_CAST_GRAD_DTYPES);
    copy(res->activation_grad_dtypes, sizeof res->activation_grad_dtypes, &c,
         SUMMARY_COL_ACTIVATION_GRAD_DTYPES);
    res->grad_underflow = i64(&c, SUMMARY_COL_GRAD_UNDERFLOW);
    res->grad_numel = i64(&c, SUMMARY_COL_GRAD_NUMEL);
    res->final_loss = f64(&c, SUMMARY_COL_FINAL_LOSS);
    res->peak_bytes = i64(&c, SUMMARY_COL_PEAK_BYTES);
    res->step_ms = f64(&c, SUMMARY_COL_STEP_MS);
    res->expect_passed = (int)i64(&c, SUMMARY_COL_EXPECT_PASSED);
    res->expect_total = (int)i64(&c, SUMMARY_COL_EXPECT_TOTAL);
    res->passed = res->ok && res->expect_passed == res->expect_total;
    if (c.bad)
        return csv_fail(err, errlen, "%s: row %d: %s is not %s", t->path, r + 1, c.bad, c.bad_what);
    return 0;
}

int results_read(const char *out, const csv_table *t, int r, run_record *rec, char *err,
                 int errlen)
{
    case_result res;
    if (results_summary_row(t, r, &res, err, errlen))
        return -1;
    char dir[CSV_PATH_LEN];
    int n = snprintf(dir, sizeof dir, "%s/%s", out, res.name);
    if (n < 0 || n >= (int)sizeof dir)
        return csv_fail(err, errlen, "path too long: %s/%s", out, res.name);
    int rc = results_read_case(dir, rec, err, errlen);
    if (rc)
        return rc;
    rec->result = res;
    if (rec->has_expect)
        record_expect_result(rec);
    return 0;
}
