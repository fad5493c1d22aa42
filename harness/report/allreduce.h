/*
 * report/allreduce.h: report.md's section on a data-parallel case's all-reduce: the
 * communication policy in words (where each gradient is cast and divided), and per
 * parameter what the all-reduce lost at the last observed step (allreduce.csv's rows of it).
 */
#ifndef AMPSCOPE_REPORT_ALLREDUCE_H
#define AMPSCOPE_REPORT_ALLREDUCE_H

#include <stdio.h>

#include "record/record.h"

/* "## All-reduce ..." for a record with all-reduce rows (allreduce.csv); nothing otherwise */
void report_put_allreduce(FILE *f, const run_record *rec);

#endif
