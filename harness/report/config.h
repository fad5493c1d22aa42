/*
 * report/config.h: report.md's "Configuration" and "Model" lines, from the record's
 * configuration (config.csv's row).
 */
#ifndef AMPSCOPE_REPORT_CONFIG_H
#define AMPSCOPE_REPORT_CONFIG_H

#include <stdio.h>

#include "record/record.h"

/* "**Configuration:** ...\n\n**Model:** ...\n\n" */
void put_config_line(FILE *f, const record_config *cfg);

#endif
