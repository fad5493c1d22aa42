/*
 * results.h: the results folder. A case is run into its record and the record written as
 * the case's files (results_run_case); each case's files are written into a temporary
 * folder (OUT/.tmp-<case>-XXXXXX) and swapped into OUT/<case> in one rename, and
 * summary.csv is rewritten through a temporary file and a rename, so an interrupted run
 * leaves either the complete old or the complete new results. Running some cases replaces
 * their summary rows and keeps the others'.
 */
#ifndef AMPSCOPE_RESULTS_H
#define AMPSCOPE_RESULTS_H

#include <stdio.h>

#include "record/record.h"
#include "train/train.h"

/* Runs cfg on be into rec (emptied first): the training (train_case), its configuration
 * (results_record_config), its [expect] (expect_check), then its files written into dir
 * (write.h). Returns non-zero when the record could not be kept or written (the message in
 * rec->result.error); rec->result.ok says whether the case itself ran without an error. */
int results_run_case(const case_config *cfg, backend *be, const train_options *opt,
                     const char *dir, run_record *rec);
/* The case's configuration as its record holds it (config.csv's row), from cfg. */
void results_record_config(run_record *rec, const case_config *cfg);

/* Creates OUT (if needed) and a temporary folder for one case; returns 0 and its path. */
int results_begin(const char *out, const char *name, char *tmp, int tmplen, char *err, int errlen);
/* Moves tmp into OUT/<name>, replacing what was there. */
int results_commit(const char *out, const char *name, const char *tmp, char *err, int errlen);
/* Removes a temporary folder. */
void results_discard(const char *tmp);
/* summary.csv's status of a result: ok, interrupted (the steps before the signal, kept) or
 * error */
const char *results_status(const case_result *r);
/* Replaces or adds the rows of these cases in OUT/summary.csv. */
int results_write_summary(const char *out, const case_result *res, int n, char *err, int errlen);
/* A CSV field: quoted when it holds a comma, quote or newline (newlines become spaces). */
void csv_write_field(FILE *f, const char *s);
/* Case names with --set overrides: "<case>+<key>=<value>", characters outside
 * [A-Za-z0-9._=+-] replaced by '_'. */
void results_variant_name(const char *name, const char *const *sets, int n_sets, char *buf,
                          int len);

#endif
