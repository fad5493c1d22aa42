/* matrix.c: the precision matrix (see matrix.h). */
#include "matrix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "case/load.h"
#include "core/interrupt.h"
#include "report/report.h"
#include "results/results.h"

enum { CFG_FP32 = 0, CFG_BF16_SCALER = 3, CFG_BF16 = 4 };

const char *const matrix_config_names[MATRIX_CONFIGS] = {
    "fp32",          "autocast-fp16-scaler", "autocast-fp16", "autocast-bf16-scaler",
    "autocast-bf16", "half",                 "bf16-params",   "half-master-weights"};

/* each configuration's overrides, applied after the user's */
static const char *const config_sets[MATRIX_CONFIGS][5] = {
    {"precision.params=float32", "precision.autocast=off", "precision.master_weights=no",
     "scaler.enabled=no", "data.input_dtype=float32"},
    {"precision.params=float32", "precision.autocast=float16", "precision.master_weights=no",
     "scaler.enabled=yes", "data.input_dtype=float32"},
    {"precision.params=float32", "precision.autocast=float16", "precision.master_weights=no",
     "scaler.enabled=no", "data.input_dtype=float32"},
    {"precision.params=float32", "precision.autocast=bfloat16", "precision.master_weights=no",
     "scaler.enabled=yes", "data.input_dtype=float32"},
    {"precision.params=float32", "precision.autocast=bfloat16", "precision.master_weights=no",
     "scaler.enabled=no", "data.input_dtype=float32"},
    {"precision.params=float16", "precision.autocast=off", "precision.master_weights=no",
     "scaler.enabled=no", "data.input_dtype=float16"},
    {"precision.params=bfloat16", "precision.autocast=off", "precision.master_weights=no",
     "scaler.enabled=no", "data.input_dtype=bfloat16"},
    {"precision.params=float16", "precision.autocast=float16", "precision.master_weights=yes",
     "scaler.enabled=yes", "data.input_dtype=float32"},
};

/* memory.csv's categories in the table (memory.h's names), then the total */
static const char *const mem_cols[] = {"params", "grads",       "master_params", "optimizer_state",
                                       "activations", "autocast_cache", "total"};
#define N_MEM (int)(sizeof mem_cols / sizeof mem_cols[0])

typedef struct matrix_entry {
    char name[CASE_NAME_MAX];
    case_result res;
    train_capture cap;
    int64_t lost_updates, skipped;
    int64_t peak[N_MEM];
    /* step 0's gradient rows (backward and optimizer passes, every grad_* role) */
    int64_t grad_subnormal, grad_underflow, grad_overflow, grad_nan;
} matrix_entry;

void matrix_error(const float *x, const float *r, int64_t n, double *max_rel, double *sqnr_db)
{
    double sig = 0.0, noise = 0.0, worst = NAN;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)x[i] - (double)r[i];
        sig += (double)r[i] * (double)r[i];
        noise += d * d;
        if (r[i] != 0.0f) {
            double rel = fabs(d) / fabs((double)r[i]);
            if (isnan(worst) || rel > worst || isnan(rel))
                worst = rel;
        }
    }
    *max_rel = worst;
    *sqnr_db = noise == 0.0 ? INFINITY : 10.0 * log10(sig / noise);
}

static int fail(char *err, int errlen, const char *what, const char *path)
{
    snprintf(err, (size_t)errlen, "%s %.900s: %s", what, path, strerror(errno));
    return -1;
}

/* what the variant's record says: lost updates and skipped steps, peaks by category, step
 * 0's gradient counts */
static void read_entry(const run_record *rec, matrix_entry *e)
{
    for (int64_t i = 0; i < rec->n_steps; i++) {
        e->lost_updates += rec->steps[i].lost_updates;
        e->skipped += rec->steps[i].skipped;
    }
    for (int64_t i = 0; i < rec->n_memory; i++)
        for (int k = 0; k < N_MEM; k++)
            if (strcmp(rec->memory[i].category, mem_cols[k]) == 0)
                e->peak[k] = rec->memory[i].peak;
    for (int64_t i = 0; i < rec->n_tensors; i++) {
        const record_tensor *t = &rec->tensors[i];
        if (t->step != 0 || !tensor_role_is_grad(t->role) || !t->counted)
            continue;
        e->grad_subnormal += t->subnormal;
        e->grad_nan += t->nan;
        if (!t->unseen) { /* --gpu-math native: not seen */
            e->grad_underflow += t->underflow;
            e->grad_overflow += t->overflow;
        }
    }
}

/* the capture of e holding a gradient called name, or -1 */
static int find_grad(const train_capture *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->names[i], name) == 0)
            return i;
    return -1;
}

/* whether a's and b's captured gradients are the same values (bit for bit, as float32
 * holds them: -0 and 0 differ, NaN payloads aside) */
static bool identical(const train_capture *a, const train_capture *b)
{
    if (!a->done || !b->done || a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        int j = find_grad(b, a->names[i]);
        if (j < 0 || b->numel[j] != a->numel[i])
            return false;
        if (memcmp(a->values[i], b->values[j], sizeof(float) * (size_t)a->numel[i]) != 0)
            return false;
    }
    return true;
}

static bool is_pow2(float s)
{
    int e;
    return s > 0 && frexpf(s, &e) == 0.5f;
}

static void put_num(FILE *f, double x)
{
    if (isnan(x))
        fputs("nan", f);
    else if (isinf(x))
        fputs(x > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.6g", x);
}

static int write_tables(const char *dir, const char *base, const matrix_entry *e, char *err,
                        int errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/matrix.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return fail(err, errlen, "cannot write", path);
    fputs("case,config,variant,status,output_dtype,loss_dtype,param_grad_dtypes,grad_underflow,"
          "grad_numel,lost_updates,steps_skipped,step_ms",
          f);
    for (int k = 0; k < N_MEM; k++)
        fprintf(f, ",peak_%s", mem_cols[k]);
    fputc('\n', f);
    for (int c = 0; c < MATRIX_CONFIGS; c++) {
        const case_result *r = &e[c].res;
        fprintf(f, "%s,%s,%s,%s,%s,%s,", base, matrix_config_names[c], e[c].name,
                r->ok ? "ran" : "error", r->output_dtype, r->loss_dtype);
        csv_write_field(f, r->param_grad_dtypes);
        fprintf(f, ",%lld,%lld,%lld,%lld,%.3f", (long long)r->grad_underflow,
                (long long)r->grad_numel, (long long)e[c].lost_updates, (long long)e[c].skipped,
                r->step_ms);
        for (int k = 0; k < N_MEM; k++)
            fprintf(f, ",%lld", (long long)e[c].peak[k]);
        fputc('\n', f);
    }
    if (fclose(f))
        return fail(err, errlen, "cannot write", path);
    snprintf(path, sizeof path, "%s/errors.csv", dir);
    f = fopen(path, "w");
    if (!f)
        return fail(err, errlen, "cannot write", path);
    fputs("case,config,tensor,dtype,numel,max_rel_error,sqnr_db,identical_to_fp32\n", f);
    const train_capture *ref = &e[CFG_FP32].cap;
    for (int c = 0; c < MATRIX_CONFIGS; c++) {
        const train_capture *x = &e[c].cap;
        if (!x->done || !ref->done)
            continue;
        double rel, sq;
        matrix_error(&x->loss, &ref->loss, 1, &rel, &sq);
        fprintf(f, "%s,%s,loss,%s,1,", base, matrix_config_names[c], e[c].res.loss_dtype);
        put_num(f, rel);
        fputc(',', f);
        put_num(f, sq);
        fprintf(f, ",%d\n", x->loss == ref->loss);
        for (int i = 0; i < ref->n; i++) {
            int j = find_grad(x, ref->names[i]);
            if (j < 0 || x->numel[j] != ref->numel[i])
                continue;
            matrix_error(x->values[j], ref->values[i], ref->numel[i], &rel, &sq);
            fprintf(f, "%s,%s,%s,%s,%lld,", base, matrix_config_names[c], ref->names[i],
                    dtype_name(x->dtypes[j]), (long long)ref->numel[i]);
            put_num(f, rel);
            fputc(',', f);
            put_num(f, sq);
            fprintf(f, ",%d\n", !memcmp(x->values[j], ref->values[i],
                                        sizeof(float) * (size_t)ref->numel[i]));
        }
    }
    if (fclose(f))
        return fail(err, errlen, "cannot write", path);
    return 0;
}

static void put_bf16_condition(FILE *f, const matrix_entry *e)
{
    const matrix_entry *s = &e[CFG_BF16_SCALER], *p = &e[CFG_BF16];
    float scale = s->cap.scale;
    int64_t sub = s->grad_subnormal + p->grad_subnormal;
    int64_t under = s->grad_underflow + p->grad_underflow;
    int64_t over = s->grad_overflow + p->grad_overflow + s->grad_nan + p->grad_nan;
    bool holds = is_pow2(scale) && sub == 0 && under == 0 && over == 0 && s->skipped == 0;
    bool same = identical(&s->cap, &p->cap);
    fprintf(f,
            "**bfloat16 autocast with and without a GradScaler:** the scaler multiplies the "
            "loss by %g%s. Exactness condition (every scaled and unscaled gradient value of "
            "step 0 normal: tensors.csv's rows of both runs with a grad_* role): %lld "
            "subnormal, %lld underflowed, %lld overflowed or NaN: the condition %s. The "
            "gradients the optimizer received are %s.",
            (double)scale, is_pow2(scale) ? " (a power of two)" : " (not a power of two)",
            (long long)sub, (long long)under, (long long)over, holds ? "holds" : "is broken",
            same ? "bit-identical" : "not bit-identical");
    if (holds && same)
        fputs(" As it must be: scaling by a power of two changes exponents only, so every "
              "rounding is the same; here the GradScaler does nothing under bfloat16.",
              f);
    else if (!holds && !same)
        fputs(" Where values are subnormal, a power of two moves them into or out of the "
              "subnormal range, whose rounding is coarser, so the two runs round differently.",
              f);
    else if (holds)
        fputs(" **Unexpected**: the condition holds and yet they differ.", f);
    else
        fputs(" The condition is broken, but no broken value changed a gradient the optimizer "
              "received.",
              f);
    fputs("\n\n", f);
}

static int write_report(const char *dir, const char *base, const matrix_entry *e, char *err,
                        int errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return fail(err, errlen, "cannot write", path);
    const double mib = 1048576.0;
    fprintf(f,
            "# Precision matrix of %s\n\nThe case in %d configurations from the same seed (the "
            "same initial parameters and data, rounded into each one's dtypes); each has its "
            "own results folder (`%s.matrix-<config>`). matrix.csv and errors.csv hold the "
            "tables below.\n\n",
            base, MATRIX_CONFIGS, base);
    fputs("| config | output | loss | .grad | grad underflow | lost updates | skipped | peak MiB "
          "(params / grads / master / optimizer / activations / autocast cache; total) | "
          "step ms |\n|---|---|---|---|---:|---:|---:|---|---:|\n",
          f);
    for (int c = 0; c < MATRIX_CONFIGS; c++) {
        const case_result *r = &e[c].res;
        fprintf(f, "| %s | %s | %s | %s | %lld of %lld | %lld | %lld | ", matrix_config_names[c],
                r->output_dtype, r->loss_dtype, r->param_grad_dtypes, (long long)r->grad_underflow,
                (long long)r->grad_numel, (long long)e[c].lost_updates, (long long)e[c].skipped);
        for (int k = 0; k < N_MEM; k++)
            fprintf(f, "%s%.3g", k == 0 ? "" : k == N_MEM - 1 ? "; " : " / ",
                    (double)e[c].peak[k] / mib);
        fprintf(f, " | %.3f |\n", r->step_ms);
    }
    const train_capture *ref = &e[CFG_FP32].cap;
    fputs("\nError of step 0's values against the fp32 run's (max relative error over the "
          "elements whose fp32 value is not 0 / SQNR in dB; `=`: bit-identical), for the loss "
          "and each parameter gradient the optimizer received (after unscale_):\n\n| config | "
          "loss",
          f);
    for (int i = 0; i < ref->n; i++)
        fprintf(f, " | %s", ref->names[i]);
    fputs(" |\n|---|---:", f);
    for (int i = 0; i < ref->n; i++)
        fputs("|---:", f);
    fputs("|\n", f);
    for (int c = 1; c < MATRIX_CONFIGS; c++) {
        const train_capture *x = &e[c].cap;
        fprintf(f, "| %s", matrix_config_names[c]);
        for (int i = -1; i < ref->n; i++) {
            int j = i < 0 ? 0 : find_grad(x, ref->names[i]);
            if (!x->done || j < 0) {
                fputs(" | –", f);
                continue;
            }
            const float *xv = i < 0 ? &x->loss : x->values[j];
            const float *rv = i < 0 ? &ref->loss : ref->values[i];
            int64_t n = i < 0 ? 1 : ref->numel[i];
            double rel, sq;
            matrix_error(xv, rv, n, &rel, &sq);
            fputs(" | ", f);
            if (isinf(sq) && sq > 0) {
                fputs("=", f);
                continue;
            }
            put_num(f, rel);
            fputs(" / ", f);
            put_num(f, sq);
        }
        fputs(" |\n", f);
    }
    fputs("\n", f);
    int pairs = 0;
    for (int a = 0; a < MATRIX_CONFIGS; a++)
        for (int b = a + 1; b < MATRIX_CONFIGS; b++)
            if (identical(&e[a].cap, &e[b].cap))
                fprintf(f, "%s%s and %s", pairs++ ? "; " : "Bit-identical step-0 gradients: ",
                        matrix_config_names[a], matrix_config_names[b]);
    fputs(pairs ? ".\n\n" : "No two configurations gave bit-identical step-0 gradients.\n\n", f);
    put_bf16_condition(f, e);
    if (fclose(f))
        return fail(err, errlen, "cannot write", path);
    return 0;
}

int matrix_run(const char *path, const char *const *sets, int n_sets, backend *be,
               const train_options *opt, const char *out, FILE *log)
{
    matrix_entry *e = calloc(MATRIX_CONFIGS, sizeof *e);
    case_config *cfg = calloc(1, sizeof *cfg);
    const char **all = calloc((size_t)n_sets + 5, sizeof *all);
    report_entry *entries = calloc(MATRIX_CONFIGS, sizeof *entries);
    run_record *rec = record_new();
    if (!e || !cfg || !all || !entries || !rec) {
        free(e), free(cfg), free(all), free(entries), record_free(rec);
        fprintf(stderr, "ampscope: out of memory\n");
        return 2;
    }
    memcpy(all, sets, sizeof(char *) * (size_t)n_sets);
    int status = 0, done = 0;
    char base[CASE_NAME_MAX] = "", err[1024];
    for (int c = 0; c < MATRIX_CONFIGS && !status; c++) {
        for (int k = 0; k < 5; k++)
            all[n_sets + k] = config_sets[c][k];
        err_list errs = {0};
        if (case_load(path, all, n_sets + 5, cfg, &errs)) {
            for (int k = 0; k < errs.n; k++)
                fprintf(stderr, "%s\n", errs.msgs[k]);
            status = 2;
        }
        err_list_free(&errs);
        if (status)
            break;
        if (c == 0)
            snprintf(base, sizeof base, "%.100s", cfg->name);
        snprintf(cfg->name, sizeof cfg->name, "%s.matrix-%s", base, matrix_config_names[c]);
        snprintf(e[c].name, sizeof e[c].name, "%s", cfg->name);
        train_options o = *opt;
        o.capture = &e[c].cap;
        err[0] = '\0';
        char tmp[4096];
        if (results_begin(out, cfg->name, tmp, sizeof tmp, err, sizeof err) ||
            results_run_case(cfg, be, &o, tmp, rec)) {
            fprintf(stderr, "ampscope: %s: %s\n", cfg->name, err[0] ? err : rec->result.error);
            results_discard(tmp);
            status = 2;
            break;
        }
        if (rec->result.interrupted && !rec->result.ok) { /* a second signal: nothing kept */
            results_discard(tmp);
            fprintf(stderr, "ampscope: %s: %s\n", cfg->name, rec->result.error);
            status = 128 + interrupt_signal();
            break;
        }
        if (report_case(rec, tmp, err, sizeof err) ||
            results_commit(out, cfg->name, tmp, err, sizeof err)) {
            fprintf(stderr, "ampscope: %s: %s\n", cfg->name, err[0] ? err : rec->result.error);
            results_discard(tmp);
            status = 2;
            break;
        }
        done++;
        e[c].res = rec->result;
        read_entry(rec, &e[c]);
        report_entry_of(rec, &entries[c]);
        fprintf(log, "matrix %s: %s %s\n", base, matrix_config_names[c],
                e[c].res.ok && !e[c].res.interrupted ? "ran" : e[c].res.error);
        fflush(log);
        if (interrupt_signal()) { /* the configurations run are kept; no table of a part */
            fprintf(stderr, "ampscope: matrix of %s stopped by %s after %s; its table is not "
                            "written\n", base, interrupt_name(interrupt_signal()),
                    matrix_config_names[c]);
            status = 128 + interrupt_signal();
        }
    }
    case_result *res = calloc(MATRIX_CONFIGS, sizeof *res);
    for (int c = 0; res && c < done; c++)
        res[c] = e[c].res;
    if (done && res && (results_write_summary(out, res, done, err, sizeof err) ||
                        report_all(out, entries, done, err, sizeof err))) {
        fprintf(stderr, "ampscope: %s\n", err);
        status = 2;
    }
    free(res);
    if (!status) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s.matrix", out, base);
        if ((mkdir(dir, 0777) && errno != EEXIST && fail(err, sizeof err, "cannot create", dir)) ||
            write_tables(dir, base, e, err, sizeof err) ||
            write_report(dir, base, e, err, sizeof err)) {
            fprintf(stderr, "ampscope: %s\n", err);
            status = 2;
        } else {
            fprintf(log, "matrix of %s: the table in %s/\n", base, dir);
        }
    }
    for (int c = 0; c < MATRIX_CONFIGS; c++)
        train_capture_free(&e[c].cap);
    free(e), free(cfg), free(all), free(entries);
    record_free(rec);
    return status;
}
