/* report/text.c: the formatting and file helpers of the reports (see report/text.h). */
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

int report_fail(char *err, int errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int report_path_join(char *buf, const char *dir, const char *name, char *err, int errlen)
{
    int n = snprintf(buf, REPORT_PATH_LEN, "%s/%s", dir, name);
    if (n < 0 || n >= REPORT_PATH_LEN)
        return report_fail(err, errlen, "path too long: %s/%s", dir, name);
    return 0;
}

void format_pct(int64_t count, int64_t total, char *buf, size_t len)
{
    if (total <= 0) {
        snprintf(buf, len, "–");
        return;
    }
    if (count == 0) {
        snprintf(buf, len, "0");
        return;
    }
    snprintf(buf, len, "%.2f%%", 100.0 * (double)count / (double)total);
    if (!strcmp(buf, "0.00%"))
        snprintf(buf, len, "<0.01%%");
    else if (count < total && !strcmp(buf, "100.00%"))
        snprintf(buf, len, ">99.99%%");
}

/* "12.34% (56 of 789)" or "0 of 789" */
void format_share(int64_t count, int64_t total, char *buf, size_t len)
{
    char pct[32];
    format_pct(count, total, pct, sizeof pct);
    if (count == 0)
        snprintf(buf, len, "0 of %lld", (long long)total);
    else
        snprintf(buf, len, "%s (%lld of %lld)", pct, (long long)count, (long long)total);
}

/* a table cell: a count with its percentage of total, or "–" without counts */
void format_count_cell(bool counted, int64_t count, int64_t total, char *buf, size_t len)
{
    char pct[32];
    format_pct(count, total, pct, sizeof pct);
    if (!counted)
        snprintf(buf, len, "–");
    else if (count == 0)
        snprintf(buf, len, "0");
    else
        snprintf(buf, len, "%s (%lld)", pct, (long long)count);
}

double mib_of(int64_t bytes) { return (double)bytes / 1048576.0; }

/* Markdown text: the characters Markdown would read (\ ` * _ |) escaped, newlines as spaces */
void put_md(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|' || *s == '`' || *s == '*' || *s == '_' || *s == '\\')
            fputc('\\', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
}

/* Markdown code span: `s`, its backticks as quotes, newlines as spaces */
void put_code(FILE *f, const char *s)
{
    fputc('`', f);
    for (; *s; s++)
        fputc(*s == '`' ? '\'' : *s == '\n' || *s == '\r' ? ' ' : *s, f);
    fputc('`', f);
}

/* Writes DIR/NAME through fn into a temporary file, then renames it into place. */
int write_atomically(const char *dir, const char *name, report_write_fn fn, const void *ctx,
                     char *err, int errlen)
{
    char path[REPORT_PATH_LEN], tmp[REPORT_PATH_LEN + 16];
    if (report_path_join(path, dir, name, err, errlen))
        return -1;
    int n = snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    if (n < 0 || n >= (int)sizeof tmp)
        return report_fail(err, errlen, "path too long: %s", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return report_fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    int rc = fn(f, ctx, err, errlen);
    if (rc == 0 && ferror(f))
        rc = report_fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (fclose(f) && rc == 0)
        rc = report_fail(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path))
        rc = report_fail(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc && unlink(tmp) && errno != ENOENT) {
        size_t len = strlen(err);
        snprintf(err + len, (size_t)errlen - len, " (and %s could not be removed: %s)", tmp,
                 strerror(errno));
    }
    return rc;
}
