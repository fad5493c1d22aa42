/*
 * read.h: a results folder's CSV files read back into run records, the one place where
 * that happens: `ampscope report DIR` re-reports a folder from its files alone, REPORT.md
 * takes the cases an earlier run left from their folders, and the mpirun launcher takes
 * rank 0's case from the folder it wrote (another process).
 *
 * Columns are found by their names (columns.h). The columns and files appended since the
 * first results (results/README.md) may be missing from an older folder; the record then
 * holds what they default to: no dtype reason, no saved bytes by dtype, accumulate 1, no
 * clipping, one process, and for a folder without expect.csv no failures' text (passed:
 * every expectation held and the run had no error).
 */
#ifndef AMPSCOPE_RESULTS_READ_H
#define AMPSCOPE_RESULTS_READ_H

#include "csv_table.h"
#include "record/record.h"

/* The case folder's files into rec (emptied first): tensors.csv, steps.csv, memory.csv,
 * and hist.csv, config.csv, expect.csv, fp8.csv, allreduce.csv and ranks.csv where they
 * are. Returns 0; 1 when the folder has no tensors.csv (rec is then empty); -1 with a
 * message in err. */
int results_read_case(const char *case_dir, run_record *rec, char *err, int errlen);
/* OUT/summary.csv read whole into t; 0, or -1 with a message in err. */
int results_read_summary(const char *out, csv_table *t, char *err, int errlen);
/* Row r of summary.csv (read by results_read_summary) into res; 0, or -1 with a message. */
int results_summary_row(const csv_table *t, int r, case_result *res, char *err, int errlen);
/* A case of a results folder: its folder's files and its summary.csv row r (t) into rec,
 * with the expectations' outcome (record_expect_result) where expect.csv has them.
 * Returns as results_read_case. */
int results_read(const char *out, const csv_table *t, int r, run_record *rec, char *err,
                 int errlen);

#endif
