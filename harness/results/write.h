/*
 * write.h: a run's record written as its case folder's CSV files (columns.h): tensors.csv,
 * hist.csv, steps.csv, memory.csv, config.csv and expect.csv always; fp8.csv for a case
 * with [fp8]; allreduce.csv and ranks.csv for a data-parallel case's rank 0. Each file is
 * written whole and checked once, when it is closed.
 */
#ifndef AMPSCOPE_RESULTS_WRITE_H
#define AMPSCOPE_RESULTS_WRITE_H

#include <stdio.h>

#include "record/record.h"

/* Writes the record's files into dir; returns 0, or -1 with a message in err. */
int results_write_case(const char *dir, const run_record *rec, char *err, int errlen);
/* tensors.csv's and hist.csv's rows (without their headers) into two streams; returns 0, or
 * -1 when a write failed. The rows are built in a buffer, without printf's format parsing
 * (they are most of what a run writes), byte for byte what "%lld" and "%.9g" print. */
int results_write_tensor_rows(FILE *tensors, FILE *hist, const run_record *rec);

#endif
