/*
 * report/config.h: a case's configuration as the reports give it: config.csv's one row
 * (columns.h's CONFIG_CSV_COLUMNS: the keys REPORT.md needs and summary.csv lacks) and
 * report.md's "Configuration" and "Model" lines.
 */
#ifndef AMPSCOPE_REPORT_CONFIG_H
#define AMPSCOPE_REPORT_CONFIG_H

#include <stdio.h>

#include "config/case.h"

/* config.csv: the header and the case's row; ctx is the case_config. Returns 0. */
int config_csv_write(FILE *f, const void *ctx, char *err, int errlen);
/* "**Configuration:** ...\n\n**Model:** ...\n\n" */
void put_config_line(FILE *f, const case_config *cfg);

#endif
