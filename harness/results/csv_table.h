/*
 * csv_table.h: a CSV file read whole: its header and its rows, each row an array of fields.
 *
 * The files are the ones a run writes (columns.h) and the references tests read: fields
 * separated by commas, a field quoted when it holds a comma or a quote ("" is a quote inside
 * it; csv_write_field in results.h writes them so), no newline inside a field. Lines end in
 * \n or \r\n; empty lines are skipped. The first line is the header; every row must have as
 * many fields as the header. Errors name the file, and the line or row, in err.
 *
 * Columns are found by name, never by position: csv_table_find() with a file's column ids
 * from columns.h, or csv_table_col() for one name.
 */
#ifndef AMPSCOPE_CSV_TABLE_H
#define AMPSCOPE_CSV_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "columns.h"

#define CSV_PATH_LEN 4096

typedef struct csv_table {
    char path[CSV_PATH_LEN];
    int n_cols, n_rows, cap;
    char **header;
    char ***rows; /* rows[r][k]: field k of row r (one allocation per row, with its text) */
} csv_table;

/* Keeps a row (true) or drops it while the file is read; t's header is set. */
typedef bool (*csv_row_filter)(const csv_table *t, char **fields, void *ctx);

/* Reads the file at path, keeping the rows keep (when not NULL) keeps. Returns 0; 1 when
 * the file does not exist and `optional` (t is then empty); -1 with a message in err. */
int csv_table_read(csv_table *t, const char *path, bool optional, csv_row_filter keep, void *ctx,
                   char *err, int errlen);
/* The same for DIR/NAME. */
int csv_table_read_in(csv_table *t, const char *dir, const char *name, bool optional,
                      csv_row_filter keep, void *ctx, char *err, int errlen);
void csv_table_free(csv_table *t);

/* The index of the column called name; -1 when the header has none. */
int csv_table_col(const csv_table *t, const char *name);
/* For each of the n column ids in want (of the file cols describes), idx[want[i]] = its
 * column in t; the other entries of idx (cols->n of them) are -1. Returns 0, or -1 with
 * "<path> has no column <name>" in err for the first one missing. */
int csv_table_find(const csv_table *t, const csv_columns *cols, const int *want, int n, int *idx,
                   char *err, int errlen);

/* Formats a message into err (truncated when long); returns -1. */
int csv_fail(char *err, int errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A field's text as a decimal integer or a number: false when it is empty or has anything
 * after the number. */
bool csv_parse_i64(const char *s, int64_t *v);
bool csv_parse_f64(const char *s, double *v);

#endif
