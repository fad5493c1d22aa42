/*
 * csv_table.c: reading a CSV file into a csv_table (see csv_table.h). Each row is one
 * malloc'd block: the field pointers, then the line's text split in place.
 */
#include "csv_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int csv_fail(char *err, int errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Splits s in place into fields (quoted as results.c writes them: "" is a quote inside).
 * Returns the number of fields, or -1 for more than max fields or a malformed quote. */
static int split_csv(char *s, char **fields, int max)
{
    int n = 0;
    for (;;) {
        if (n == max)
            return -1;
        char *out = s;
        fields[n++] = out;
        if (*s == '"') {
            for (s++;; s++) {
                if (*s == '\0')
                    return -1;
                if (*s == '"' && s[1] != '"')
                    break;
                if (*s == '"')
                    s++;
                *out++ = *s;
            }
            s++;
            if (*s != ',' && *s != '\0')
                return -1;
        } else {
            while (*s && *s != ',')
                *out++ = *s++;
        }
        char sep = *s;
        *out = '\0';
        if (sep == '\0')
            return n;
        s++;
    }
}

/* One line as a field array followed by the fields' text, in one malloc'd block. Returns 0,
 * -1 when out of memory, -2 when the line is malformed. */
static int split_line(const char *line, char ***fields, int *n)
{
    size_t len = strlen(line), max = 1;
    for (const char *p = line; *p; p++)
        max += *p == ',';
    char **f = malloc(max * sizeof *f + len + 1);
    if (!f)
        return -1;
    char *text = (char *)(f + max);
    memcpy(text, line, len + 1);
    *n = split_csv(text, f, (int)max);
    if (*n < 0) {
        free(f);
        return -2;
    }
    *fields = f;
    return 0;
}

void csv_table_free(csv_table *t)
{
    for (int r = 0; r < t->n_rows; r++)
        free(t->rows[r]);
    free(t->rows);
    free(t->header);
    t->rows = NULL;
    t->header = NULL;
    t->n_rows = t->cap = t->n_cols = 0;
}

static int table_add(csv_table *t, char **fields)
{
    if (t->n_rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        char ***rows = realloc(t->rows, sizeof *rows * (size_t)cap);
        if (!rows)
            return -1;
        t->rows = rows;
        t->cap = cap;
    }
    t->rows[t->n_rows++] = fields;
    return 0;
}

int csv_table_read(csv_table *t, const char *path, bool optional, csv_row_filter keep, void *ctx,
                   char *err, int errlen)
{
    memset(t, 0, sizeof *t);
    int len = snprintf(t->path, sizeof t->path, "%s", path);
    if (len < 0 || len >= (int)sizeof t->path)
        return csv_fail(err, errlen, "path too long: %s", path);
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (optional && errno == ENOENT)
            return 1;
        return csv_fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    int rc = 0, line_no = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        line_no++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        char **fields;
        int n, split = split_line(line, &fields, &n);
        if (split) {
            rc = csv_fail(err, errlen,
                      split == -1 ? "out of memory reading %s"
                                  : "%s:%d: malformed "
                                    "CSV line",
                      t->path, line_no);
        } else if (!t->header) {
            t->header = fields;
            t->n_cols = n;
        } else if (n != t->n_cols) {
            free(fields);
            rc = csv_fail(err, errlen, "%s:%d: %d fields, the header has %d", t->path, line_no, n,
                      t->n_cols);
        } else if (keep && !keep(t, fields, ctx)) {
            free(fields);
        } else if (table_add(t, fields)) {
            free(fields);
            rc = csv_fail(err, errlen, "out of memory reading %s", t->path);
        }
    }
    if (rc == 0 && ferror(f))
        rc = csv_fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    free(line);
    if (fclose(f) && rc == 0)
        rc = csv_fail(err, errlen, "cannot read %s: %s", t->path, strerror(errno));
    if (rc == 0 && !t->header)
        rc = csv_fail(err, errlen, "%s is empty", t->path);
    if (rc)
        csv_table_free(t);
    return rc;
}

int csv_table_read_in(csv_table *t, const char *dir, const char *name, bool optional,
                      csv_row_filter keep, void *ctx, char *err, int errlen)
{
    char path[CSV_PATH_LEN];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || n >= (int)sizeof path) {
        memset(t, 0, sizeof *t);
        return csv_fail(err, errlen, "path too long: %s/%s", dir, name);
    }
    return csv_table_read(t, path, optional, keep, ctx, err, errlen);
}

int csv_table_col(const csv_table *t, const char *name)
{
    for (int k = 0; k < t->n_cols; k++)
        if (strcmp(t->header[k], name) == 0)
            return k;
    return -1;
}

int csv_table_find(const csv_table *t, const csv_columns *cols, const int *want, int n, int *idx,
                   char *err, int errlen)
{
    for (int i = 0; i < cols->n; i++)
        idx[i] = -1;
    for (int i = 0; i < n; i++)
        if ((idx[want[i]] = csv_table_col(t, cols->names[want[i]])) < 0)
            return csv_fail(err, errlen, "%s has no column %s", t->path, cols->names[want[i]]);
    return 0;
}

bool csv_parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return false;
    *v = (int64_t)x;
    return true;
}

bool csv_parse_f64(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return *s && !*end && errno == 0;
}
