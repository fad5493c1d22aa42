/*
 * report/all.c: REPORT.md for a results folder (see report.h): one table row per
 * summary.csv row, sorted by case name, with each case's config.csv, steps.csv and
 * tensors.csv, then links to every case's report and plots and to the plots across cases;
 * a case with fp8.csv gets its float8 line there (report/fp8.h).
 */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "fp8.h"
#include "text.h"

typedef struct case_entry {
    char **sum; /* its summary.csv row's fields, by column id (columns.h) */
    int64_t grad_underflow, grad_numel, peak;
    bool have_files; /* tensors.csv, steps.csv, memory.csv were read */
    bool hist_plot;
    int n_steps;
    int64_t lost_updates;
    bool have_config;
    char scaler[8], baseline[CASE_NAME_MAX], description[CASE_TEXT_MAX];
    char fp8_line[512]; /* "" without fp8.csv */
    bool fp8_hist_plot; /* plot.py draws fp8_hist.png (report/fp8.h's rule) */
} case_entry;

typedef struct all_report {
    case_entry *cases;
    int n;
} all_report;

static int cmp_entry(const void *a, const void *b)
{
    const case_entry *x = a, *y = b;
    return strcmp(x->sum[SUMMARY_COL_CASE], y->sum[SUMMARY_COL_CASE]);
}

/* Reads what REPORT.md needs from the case's folder; a folder without files is noted. */
static int read_entry(const char *results_dir, case_entry *e, char *err, int errlen)
{
    char dir[REPORT_PATH_LEN];
    if (report_path_join(dir, results_dir, e->sum[SUMMARY_COL_CASE], err, errlen))
        return -1;
    case_files c;
    int rc = case_files_read(&c, dir, true, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        e->have_files = true;
        e->hist_plot = case_files_has_hist_plot(&c);
        e->n_steps = c.n_steps;
        for (int i = 0; i < c.n_steps; i++)
            e->lost_updates += c.steps[i].lost_updates;
        fp8_summary fp8;
        rc = fp8_summary_read(&fp8, dir, &c, err, errlen);
        if (rc == 0) {
            fp8_summary_line(&fp8, e->fp8_line, sizeof e->fp8_line);
            e->fp8_hist_plot = fp8_summary_has_hist(&fp8);
            fp8_summary_free(&fp8);
        }
        case_files_free(&c);
        if (rc < 0)
            return -1;
    }
    csv_table cfg;
    rc = csv_table_read_in(&cfg, dir, csv_config.file, true, NULL, NULL, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        static const int want[] = {CONFIG_COL_SCALER, CONFIG_COL_BASELINE, CONFIG_COL_DESCRIPTION};
        int k[CONFIG_N_COLS];
        if (csv_table_find(&cfg, &csv_config, want, 3, k, err, errlen) || cfg.n_rows != 1) {
            if (cfg.n_rows != 1)
                report_fail(err, errlen, "%s: expected one row", cfg.path);
            csv_table_free(&cfg);
            return -1;
        }
        char **row = cfg.rows[0];
        e->have_config = true;
        snprintf(e->scaler, sizeof e->scaler, "%s", row[k[CONFIG_COL_SCALER]]);
        snprintf(e->baseline, sizeof e->baseline, "%s", row[k[CONFIG_COL_BASELINE]]);
        snprintf(e->description, sizeof e->description, "%s", row[k[CONFIG_COL_DESCRIPTION]]);
        csv_table_free(&cfg);
    }
    return 0;
}

static const case_entry *find_entry(const all_report *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->cases[i].sum[SUMMARY_COL_CASE], name))
            return &a->cases[i];
    return NULL;
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
        put_link(f, s[SUMMARY_COL_CASE], s[SUMMARY_COL_CASE], "report.md");
        fprintf(f, " | %s | %s | %s | %s | %s | %s | ", s[SUMMARY_COL_STATUS],
                s[SUMMARY_COL_PARAMS], s[SUMMARY_COL_AUTOCAST], e->have_config ? e->scaler : "?",
                s[SUMMARY_COL_OUTPUT_DTYPE][0] ? s[SUMMARY_COL_OUTPUT_DTYPE] : "–",
                s[SUMMARY_COL_LOSS_DTYPE][0] ? s[SUMMARY_COL_LOSS_DTYPE] : "–");
        put_md(f, s[SUMMARY_COL_PARAM_GRAD_DTYPES][0] ? s[SUMMARY_COL_PARAM_GRAD_DTYPES] : "–");
        fprintf(f, " | %s | %s | %.2f | ", under, lost, mib_of(e->peak));
        put_md(f, ratio);
        fprintf(f, " | %s | %s/%s |\n",
                strcmp(s[SUMMARY_COL_STEP_MS], "nan") ? s[SUMMARY_COL_STEP_MS] : "–",
                s[SUMMARY_COL_EXPECT_PASSED], s[SUMMARY_COL_EXPECT_TOTAL]);
    }
    fputs("\n## Cases\n\n", f);
    for (int i = 0; i < a->n; i++) {
        const case_entry *e = &a->cases[i];
        const char *name = e->sum[SUMMARY_COL_CASE];
        fputs("- **", f);
        put_md(f, name);
        fputs("**", f);
        if (e->description[0]) {
            fputs(": ", f);
            put_md(f, e->description);
        }
        if (!strcmp(e->sum[SUMMARY_COL_STATUS], "error")) {
            fputs(". Ended in an error (", f);
            put_code(f, e->sum[SUMMARY_COL_ERROR]);
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

int report_all(const char *results_dir, char *err, int errlen)
{
    err[0] = '\0';
    csv_table sum;
    if (csv_table_read_in(&sum, results_dir, csv_summary.file, false, NULL, NULL, err, errlen))
        return -1;
    all_report a = {.n = sum.n_rows};
    static const int want[] = {SUMMARY_COL_CASE,           SUMMARY_COL_STATUS,
                               SUMMARY_COL_ERROR,          SUMMARY_COL_PARAMS,
                               SUMMARY_COL_AUTOCAST,       SUMMARY_COL_OUTPUT_DTYPE,
                               SUMMARY_COL_LOSS_DTYPE,     SUMMARY_COL_PARAM_GRAD_DTYPES,
                               SUMMARY_COL_GRAD_UNDERFLOW, SUMMARY_COL_GRAD_NUMEL,
                               SUMMARY_COL_PEAK_BYTES,     SUMMARY_COL_STEP_MS,
                               SUMMARY_COL_EXPECT_PASSED,  SUMMARY_COL_EXPECT_TOTAL};
    int k[SUMMARY_N_COLS];
    int rc =
        csv_table_find(&sum, &csv_summary, want, (int)(sizeof want / sizeof *want), k, err, errlen);
    if (rc == 0 && !(a.cases = calloc((size_t)sum.n_rows + 1, sizeof *a.cases)))
        rc = report_fail(err, errlen, "out of memory reading %s", sum.path);
    /* each entry's sum[] holds its row's fields by column id (NULL for those not wanted) */
    char **fields =
        rc == 0 ? calloc((size_t)sum.n_rows * SUMMARY_N_COLS + 1, sizeof *fields) : NULL;
    if (rc == 0 && !fields)
        rc = report_fail(err, errlen, "out of memory reading %s", sum.path);
    for (int i = 0; rc == 0 && i < sum.n_rows; i++) {
        case_entry *e = &a.cases[i];
        e->sum = fields + (size_t)i * SUMMARY_N_COLS;
        for (int j = 0; j < SUMMARY_N_COLS; j++)
            e->sum[j] = k[j] >= 0 ? sum.rows[i][k[j]] : NULL;
        if (!csv_parse_i64(e->sum[SUMMARY_COL_GRAD_UNDERFLOW], &e->grad_underflow) ||
            !csv_parse_i64(e->sum[SUMMARY_COL_GRAD_NUMEL], &e->grad_numel) ||
            !csv_parse_i64(e->sum[SUMMARY_COL_PEAK_BYTES], &e->peak))
            rc = report_fail(err, errlen,
                             "%s: row %d: grad_underflow, grad_numel or peak_bytes is not a number",
                             sum.path, i + 1);
    }
    if (rc == 0)
        qsort(a.cases, (size_t)a.n, sizeof *a.cases, cmp_entry);
    for (int i = 0; rc == 0 && i < a.n; i++)
        rc = read_entry(results_dir, &a.cases[i], err, errlen);
    if (rc == 0)
        rc = write_atomically(results_dir, "REPORT.md", write_all_md, &a, err, errlen);
    free(fields);
    free(a.cases);
    csv_table_free(&sum);
    return rc;
}
