/*
 * report/text.h: what report.md and REPORT.md share: error messages, paths, the rounding of
 * percentages and MiB, Markdown escaping, and writing a file through a temporary name.
 *
 * A percentage is 100 * count / total, printed with printf's %.2f (round to nearest); a
 * count of 0 prints as 0, and a non-zero count that %.2f would print as 0.00 (or a count
 * short of the total that it would print as 100.00) prints as <0.01% (>99.99%), so that no
 * loss reads as none. MiB are bytes / 2^20.
 *
 * A file is written to DIR/.NAME.tmp and renamed, and a write is checked once, by ferror()
 * and fclose(), at its end. Error messages are formatted best-effort (truncated when long).
 */
#ifndef AMPSCOPE_REPORT_TEXT_H
#define AMPSCOPE_REPORT_TEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "results/csv_table.h"

#define REPORT_PATH_LEN CSV_PATH_LEN

/* Formats the message into err; returns -1. */
int report_fail(char *err, int errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* DIR/NAME into buf (REPORT_PATH_LEN); -1 with a message when too long. */
int report_path_join(char *buf, const char *dir, const char *name, char *err, int errlen);

/* A percentage as above; "–" when total is 0. */
void format_pct(int64_t count, int64_t total, char *buf, size_t len);
/* "12.34% (56 of 789)" or "0 of 789" */
void format_share(int64_t count, int64_t total, char *buf, size_t len);
/* a table cell: a count with its percentage of total, or "–" without counts */
void format_count_cell(bool counted, int64_t count, int64_t total, char *buf, size_t len);
double mib_of(int64_t bytes);

/* Markdown text: the characters Markdown would read (\ ` * _ |) escaped, newlines as spaces */
void put_md(FILE *f, const char *s);
/* Markdown code span: `s`, its backticks as quotes, newlines as spaces */
void put_code(FILE *f, const char *s);

typedef int (*report_write_fn)(FILE *f, const void *ctx, char *err, int errlen);
/* Writes DIR/NAME through fn into a temporary file, then renames it into place. */
int write_atomically(const char *dir, const char *name, report_write_fn fn, const void *ctx,
                     char *err, int errlen);

#endif
