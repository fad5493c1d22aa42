/*
 * report.h: the written reports, in Markdown, made from the CSV files a run wrote.
 *
 * report_case() runs after train_case() has written a case's CSV files into its folder
 * (OUT/<case>, or the temporary folder before results_commit moves it there). It writes:
 *   report.md   the configuration in one line; the answer in words (which dtype each kind
 *               of gradient had, where it was computed, what underflowed; the GradScaler's
 *               scale and skipped steps; the error and what PyTorch does, when the run
 *               ended in one); a table of every tensor of the first and last observed
 *               steps; the steps (loss, loss scale, lost updates); the memory by category
 *               and what is saved for backward by dtype; for a case with fp8.csv, the
 *               float8 section (report/fp8.h: per GEMM operand what saturated,
 *               underflowed or went subnormal, and the scales);
 *               links to the plots plot/plot.py draws.
 *   config.csv  one row: the configuration keys REPORT.md needs and summary.csv lacks
 *               (description, baseline, scaler, ...); its columns are in columns.h.
 *
 * report_all() runs after results_write_summary() and writes OUT/REPORT.md: one table row
 * per summary.csv row (sorted by case name), using each case's config.csv, steps.csv and
 * tensors.csv, then links to every case's report and plots and to the plots across cases.
 *
 * Every number in the reports is copied from the CSV files (amax, loss, loss_scale, step_ms:
 * the same text) or computed from their integer columns; report.md says how percentages are
 * rounded. The plots are linked by the names plot.py writes and under the rules it draws
 * them by: hist_grads.png when the case has backward-pass gradient rows with counts,
 * loss_scale.png when steps.csv has two steps or more, memory.png always.
 *
 * Both return 0, or -1 with a message in err when a file could not be read or written.
 *
 * The code: report/case.c (report.md), report/config.c (config.csv and the configuration
 * lines), report/all.c (REPORT.md), report/fp8.c (the float8 section and line),
 * report/files.c (a case folder's CSV files as the reports read them), report/text.c
 * (percentages, Markdown, atomic writes); every CSV file through csv_table.h, its columns by
 * name from columns.h.
 */
#ifndef AMPSCOPE_REPORT_H
#define AMPSCOPE_REPORT_H

#include "config/case.h"
#include "train/train.h"

int report_case(const case_config *cfg, const case_result *res, const char *case_dir, char *err,
                int errlen);
int report_all(const char *results_dir, char *err, int errlen);

#endif
