/*
 * compare.h: `ampscope compare CASE...`: reads the results of cases already run (OUT/<case>/
 * memory.csv and steps.csv, OUT/summary.csv) and prints, per case, peak memory by category,
 * the total's ratio to the case's baseline, lost updates and gradient underflow.
 */
#ifndef AMPSCOPE_COMPARE_H
#define AMPSCOPE_COMPARE_H

#include <stdio.h>

#include "config/case.h"

/* Returns 0, or 2 with a message on stderr when a case has no results yet. */
int compare_cases(const case_config *cfgs, int n, const char *out, FILE *f);

#endif
