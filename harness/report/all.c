/*
 * report/all.c: REPORT.md for a results folder (see report.h): one table row per
 * summary.csv row, sorted by case name, then links to every case's report and plots and to
 * the plots across cases; a case with float8 rows gets its float8 line there
 * (report/fp8.h). The cases of this run come as entries made from their records; the other
 * rows, from earlier runs, are read from their folders (results/read.h).
 */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "results/read.h"
#include "results/results.h"
#include "rows.h"
#include "text.h"

typedef struct all_report {
    report_entry *cases;
    int n;
} all_report;

void report_entry_of(const run_record *rec, report_entry *e)
{
    memset(e, 0, sizeof *e);
    e->res = rec->result;
    e->have_config = rec->has_config;
    e->scaler = rec->config.scaler;
    snprintf(e->baseline, sizeof e->baseline, "%s", rec->config.baseline);
    snprintf(e->description, sizeof e->description, "%s", rec->config.description);
    e->have_files = true;
    e->hist_plot = report_has_hist_plot(rec);
    e->n_steps = rec->n_steps;
    for (int64_t i = 0; i < rec->n_steps; i++)
        e->lost_updates += rec->steps[i].lost_updates;
    fp8_summary fp8;
    char err[256];
    if (fp8_summary_of(&fp8, rec, err, sizeof err) == 0) {
        fp8_summary_line(&fp8, e->fp8_line, sizeof e->fp8_line);
        e->fp8_hist_plot = fp8_summary_has_hist(&fp8);
        fp8_summary_free(&fp8);
    }
}

static int cmp_entry(const void *a, const void *b)
{
    const report_entry *x = a, *y = b;
    return strcmp(x->res.name, y->res.name);
}

static const report_entry *find_entry(const all_report *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->cases[i].res.name, name))
            return &a->cases[i];
    return NULL;
}

/* The entry of summary.csv's row r, a case of an earlier run: the row, and its folder's
 * files when it has them (a folder without tensors.csv is noted). */
static int read_entry(const char *results_dir, const csv_table *sum, int r, report_entry *e,
                      run_record *rec, char *err, int errlen)
{
    int rc = results_read(results_dir, sum, r, rec, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        report_entry_of(rec, e);
        return 0;
    }
    memset(e, 0, sizeof *e);
    return results_summary_row(sum, r, &e->res, err, errlen);
}

/* "[name](name/file)" with the case name escaped */
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
            "decimals). Step: the median step time, ms.",
            a->n, a->n == 1 ? "" : "s");
    bool fp8 = false;
    for (int i = 0; i < a->n; i++)
        fp8 |= a->cases[i].fp8_line[0] != '\0';
    if (fp8) /* the quantized output gradients are gradients cast: grad_underflow counts them */
        fputs(" In a float8 case the gradient values include the float8 copies te.Linear "
              "quantizes the output gradients into (`L.out.grad@float8_e5m2`, or "
              "`@float8_e4m3fn` under format = e4m3: multiplied by their scale, then cast), "
              "whose dtype summary.csv's `cast_grad_dtypes` lists.",
              f);
    fputs("\n\n", f);
    fputs("| case | status | params | autocast | scaler | output | loss | param grads | "
          "grad underflow | lost updates | peak MiB | vs baseline | step ms | expectations |\n"
          "|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n",
          f);
    for (int i = 0; i < a->n; i++) {
        const report_entry *e = &a->cases[i];
        const case_result *s = &e->res;
        char under[96], lost[32], ratio[CASE_NAME_MAX + 64] = "–", step_ms[32] = "–";
        format_share(s->grad_underflow, s->grad_numel, under, sizeof under);
        if (s->grad_numel == 0)
            snprintf(under, sizeof under, "–");
        snprintf(lost, sizeof lost, e->n_steps ? "%lld" : "–", (long long)e->lost_updates);
        const report_entry *base = e->baseline[0] ? find_entry(a, e->baseline) : NULL;
        if (base && base->res.peak_bytes > 0)
            snprintf(ratio, sizeof ratio, "%.2f× %s",
                     (double)s->peak_bytes / (double)base->res.peak_bytes, e->baseline);
        else if (e->baseline[0])
            snprintf(ratio, sizeof ratio, "(%s not in summary.csv)", e->baseline);
        if (!isnan(s->step_ms))
            snprintf(step_ms, sizeof step_ms, "%.3f", s->step_ms);
        fputs("| ", f);
        put_link(f, s->name, s->name, "report.md");
        fprintf(f, " | %s | %s | %s | %s | %s | %s | ", results_status(s), s->params,
                s->autocast, e->have_config ? e->scaler ? "yes" : "no" : "?",
                s->output_dtype[0] ? s->output_dtype : "–", s->loss_dtype[0] ? s->loss_dtype : "–");
        put_md(f, s->param_grad_dtypes[0] ? s->param_grad_dtypes : "–");
        fprintf(f, " | %s | %s | %.2f | ", under, lost, mib_of(s->peak_bytes));
        put_md(f, ratio);
        fprintf(f, " | %s | %d/%d |\n", step_ms, s->expect_passed, s->expect_total);
    }
    fputs("\n## Cases\n\n", f);
    for (int i = 0; i < a->n; i++) {
        const report_entry *e = &a->cases[i];
        const char *name = e->res.name;
        fputs("- **", f);
        put_md(f, name);
        fputs("**", f);
        if (e->description[0]) {
            fputs(": ", f);
            put_md(f, e->description);
        }
        if (e->res.interrupted) {
            fputs(". Stopped: ", f);
            put_md(f, e->res.error);
        } else if (!e->res.ok) {
            fputs(". Ended in an error (", f);
            put_code(f, e->res.error);
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
        if (e->fp8_line[0]) {
            fputs(", ", f);
            if (e->fp8_hist_plot) {
                put_link(f, "float8 copies", name, "fp8_hist.png");
                fputs(", ", f);
            }
            put_link(f, "float8 scales", name, "fp8_scale.png");
            fprintf(f, ". %s", e->fp8_line);
        }
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

int report_all(const char *results_dir, const report_entry *fresh, int n_fresh, char *err,
               int errlen)
{
    err[0] = '\0';
    csv_table sum;
    if (results_read_summary(results_dir, &sum, err, errlen))
        return -1;
    all_report a = {.n = 0};
    run_record *rec = record_new();
    int rc = 0;
    if (!rec || !(a.cases = calloc((size_t)(sum.n_rows + n_fresh) + 1, sizeof *a.cases)))
        rc = report_fail(err, errlen, "out of memory reading %s", sum.path);
    /* this run's cases from their records, the others' rows from the earlier runs' files */
    for (int j = 0; rc == 0 && j < n_fresh; j++)
        a.cases[a.n++] = fresh[j];
    int k = csv_table_col(&sum, csv_summary.names[SUMMARY_COL_CASE]);
    for (int i = 0; rc == 0 && i < sum.n_rows; i++) {
        bool ran = false;
        for (int j = 0; j < n_fresh && !ran; j++)
            ran = !strcmp(fresh[j].res.name, sum.rows[i][k]);
        if (!ran)
            rc = read_entry(results_dir, &sum, i, &a.cases[a.n++], rec, err, errlen);
    }
    if (rc == 0) {
        qsort(a.cases, (size_t)a.n, sizeof *a.cases, cmp_entry);
        rc = write_atomically(results_dir, "REPORT.md", write_all_md, &a, err, errlen);
    }
    record_free(rec);
    free(a.cases);
    csv_table_free(&sum);
    return rc;
}
