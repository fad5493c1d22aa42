/*
 * report.h: the written reports, in Markdown, made from a run's record (record/record.h):
 * the run's own, or one read from a results folder's CSV files (results/read.h), which give
 * the same bytes.
 *
 * report_case() writes a case's report.md: the configuration in one line; the answer in
 * words (which dtype each kind of gradient had, where it was computed, what underflowed,
 * why each float32 activation is float32; the GradScaler's scale and skipped steps; the
 * error and what PyTorch does, when the run ended in one); a table of every tensor of the
 * first and last observed steps; the steps (loss, loss scale, lost updates); the memory by
 * category and what is saved for backward by dtype; for a case with float8 rows, the float8
 * section (report/fp8.h: per GEMM operand what saturated, underflowed or went subnormal,
 * and the scales); for a data-parallel case, what the all-reduce lost; links to the plots
 * plot/plot.py draws.
 *
 * report_all() writes OUT/REPORT.md: one table row per summary.csv row (sorted by case
 * name), then links to every case's report and plots and to the plots across cases. The
 * cases of this run come as entries made from their records (report_entry_of); the other
 * rows of summary.csv, from earlier runs, are read from their folders (results/read.h).
 *
 * Every number in the reports is a value of the record printed as its CSV file prints it
 * (amax, loss, loss_scale: %.9g) or computed from its integer counts; report.md says how
 * percentages are rounded. The plots are linked by the names plot.py writes and under the
 * rules it draws them by: hist_grads.png when the case has backward-pass gradient rows with
 * counts, loss_scale.png when it has two steps or more, memory.png always.
 *
 * Both return 0, or -1 with a message in err when a file could not be read or written.
 *
 * The code: report/case.c (report.md), report/config.c (the configuration lines),
 * report/reasons.c (why float32), report/all.c (REPORT.md), report/fp8.c (the float8
 * section and line), report/allreduce.c (the all-reduce section), report/rows.c (what the
 * record's rows say), report/text.c (percentages, Markdown, atomic writes).
 */
#ifndef AMPSCOPE_REPORT_H
#define AMPSCOPE_REPORT_H

#include "record/record.h"

int report_case(const run_record *rec, const char *case_dir, char *err, int errlen);

/* What REPORT.md tells of one case: its summary.csv row, config and files in short. */
typedef struct report_entry {
    case_result res;  /* its summary.csv row (the failures are not REPORT.md's) */
    bool have_config; /* config.csv was read (always, for a record of this run) */
    bool scaler;
    char baseline[CASE_NAME_MAX], description[CASE_TEXT_MAX];
    bool have_files; /* its tensors.csv, steps.csv and memory.csv were read */
    bool hist_plot;
    int64_t n_steps, lost_updates;
    char fp8_line[512]; /* "" without float8 rows */
    bool fp8_hist_plot; /* plot.py draws fp8_hist.png (report/fp8.h's rule) */
} report_entry;

/* The entry of a case from its record (its result and its files). */
void report_entry_of(const run_record *rec, report_entry *e);
/* REPORT.md of results_dir: the cases of fresh[0..n_fresh) (this run's, from their records)
 * and the other rows of summary.csv (earlier runs', read from their folders). */
int report_all(const char *results_dir, const report_entry *fresh, int n_fresh, char *err,
               int errlen);

#endif
