/*
 * results.h: the results folder. Each case's files are written into a temporary folder
 * (OUT/.tmp-<case>-XXXXXX) and swapped into OUT/<case> in one rename, and summary.csv is
 * rewritten through a temporary file and a rename, so an interrupted run leaves either the
 * complete old or the complete new results. Running some cases replaces their summary rows
 * and keeps the others'.
 */
#ifndef AMPSCOPE_RESULTS_H
#define AMPSCOPE_RESULTS_H

#include <stdio.h>

#include "train/train.h"

/* Creates OUT (if needed) and a temporary folder for one case; returns 0 and its path. */
int results_begin(const char *out, const char *name, char *tmp, int tmplen, char *err, int errlen);
/* Moves tmp into OUT/<name>, replacing what was there. */
int results_commit(const char *out, const char *name, const char *tmp, char *err, int errlen);
/* Removes a temporary folder. */
void results_discard(const char *tmp);
/* Replaces or adds the rows of these cases in OUT/summary.csv. */
int results_write_summary(const char *out, const case_result *res, int n, char *err, int errlen);
/* A CSV field: quoted when it holds a comma, quote or newline (newlines become spaces). */
void csv_write_field(FILE *f, const char *s);
/* Case names with --set overrides: "<case>+<key>=<value>", characters outside
 * [A-Za-z0-9._=+-] replaced by '_'. */
void results_variant_name(const char *name, const char *const *sets, int n_sets, char *buf,
                          int len);

#endif
