/*
 * case.c: reads, checks and normalizes a case file (case.h).
 *
 * case_load works in three passes over one parse_ctx:
 *  1. read: the file is read whole, checked to be UTF-8 text without control bytes, and cut
 *     into lines; each line is a [section] header or an entry (section, key, value, line).
 *     --set overrides then replace or add entries; an entry from an override keeps the
 *     override's text, which its error messages show instead of file:line.
 *  2. sections: each section's entries are parsed into cfg, on top of the defaults.
 *  3. cross checks: the shape walk over the layers (filling each out_shape and the memory
 *     limits), loss against target, master weights against params, observe against steps.
 * Errors are kept with their line and appended to errs at the end, sorted by line (those of
 * overrides last). An entry whose value was refused is marked failed, so that the cross
 * checks skip it rather than report the same mistake twice.
 *
 * Choices the format leaves open: loss_in_autocast = no with autocast = off is accepted (it
 * changes nothing); without a loss key the loss is cross_entropy, without an optimizer key
 * the optimizer is sgd with PyTorch's defaults (lr=1e-3); a [scaler] section without
 * `enabled` means enabled; a 2-d data shape is accepted (flatten, relu take it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf, stpcpy */
#endif
#include "case.h"

#include "npy.h"
#include "optimizers.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define LINE_MAX_BYTES (64 * 1024)
#define FILE_MAX_BYTES (16 * 1024 * 1024)
#define MAX_ENTRIES 1024                /* keys in one case, overrides included */
#define MAX_WORDS 32                    /* words in one value */
#define MEMORY_LIMIT ((int64_t)1 << 40) /* elements: all parameters, or one activation */
#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

enum {
    SEC_CASE,
    SEC_MODEL,
    SEC_DATA,
    SEC_PRECISION,
    SEC_SCALER,
    SEC_TRAIN,
    SEC_INIT,
    SEC_EXPECT,
    SEC_COUNT
};
enum { SEC_NONE = -1, SEC_SKIP = -2 }; /* before any header; inside an unknown or repeated one */

static const char *const section_names[SEC_COUNT] = {"case",   "model", "data", "precision",
                                                     "scaler", "train", "init", "expect"};
static const char *const layer_kinds[] = {"linear", "relu", "conv2d", "flatten"}; /* layer_kind */
static const char *const loss_names[] = {"cross_entropy", "mse"};                 /* loss_kind */
static const char *const schedule_names[] = {"constant", "cosine"}; /* schedule_kind */
static const char *const input_names[] = {"randn", "file"};         /* input_source */
static const char *const target_names[] = {"classes", "randn", "randn_like", "file"};

typedef struct entry {
    int sec;
    char *key, *value; /* trimmed; inner blanks of the key squeezed to one space */
    int line;          /* 0 for an override */
    const char *set;   /* the override as given; NULL for a file line */
    bool failed;       /* an error was reported about it */
} entry;

typedef struct pending {
    int line, set, seq; /* sort keys: overrides come after the file, in their order */
    char *msg;
} pending;

typedef struct parse_ctx {
    case_config *cfg;
    const char *path;
    const char *const *sets;
    int n_sets;
    char *text;        /* the file, cut in place into keys and values */
    char **set_copies; /* overrides, cut likewise */
    int n_set_copies, cap_set_copies;
    entry *entries;
    int n_entries, cap_entries;
    bool full_reported;        /* "too many keys" is said once */
    int sec_line[SEC_COUNT];   /* line of the [section] header; 0: not in the file */
    bool sec_given[SEC_COUNT]; /* in the file or added by an override */
    entry *layer_entry[CASE_MAX_LAYERS];
    bool model_ok;  /* every [model] entry became a layer */
    bool shapes_ok; /* every layer's out_shape is known */
    pending *errs;
    int n_errs, cap_errs;
} parse_ctx;

/* ---- memory and messages ---- */

static void out_of_memory(void)
{
    (void)fputs("ampscope: out of memory\n", stderr);
    abort();
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        out_of_memory();
    return q;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        out_of_memory();
    return d;
}

static char *xvasprintf(const char *fmt, va_list ap)
{
    char *s;
    if (vasprintf(&s, fmt, ap) < 0)
        out_of_memory();
    return s;
}

static PRINTF_LIKE(1, 2) char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

/* Returns p with room for `need` elements of `size` bytes; *cap is its capacity. */
static void *grow(void *p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return p;
    int cap2 = *cap > 0 ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    *cap = cap2;
    return xrealloc(p, (size_t)cap2 * size);
}

static void err_list_push(err_list *e, char *msg)
{
    e->msgs = grow(e->msgs, &e->cap, e->n + 1, sizeof *e->msgs);
    e->msgs[e->n++] = msg;
}

void err_list_add(err_list *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    err_list_push(e, msg);
}

void err_list_free(err_list *e)
{
    for (int i = 0; i < e->n; i++)
        free(e->msgs[i]);
    free(e->msgs);
    e->msgs = NULL;
    e->n = e->cap = 0;
}

static void vreport(parse_ctx *c, int line, const char *set, const char *fmt, va_list ap)
{
    char *msg = xvasprintf(fmt, ap);
    pending p = {.line = set ? INT_MAX : line, .seq = c->n_errs};
    while (set && p.set < c->n_sets && c->sets[p.set] != set)
        p.set++;
    p.msg = set ? xasprintf("--set %s: %s", set, msg) : xasprintf("%s:%d: %s", c->path, line, msg);
    free(msg);
    c->errs = grow(c->errs, &c->cap_errs, c->n_errs + 1, sizeof *c->errs);
    c->errs[c->n_errs++] = p;
}

/* An error at a line of the file (0: none applies), or about an override when set != NULL. */
static PRINTF_LIKE(4, 5) void report(parse_ctx *c, int line, const char *set, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(c, line, set, fmt, ap);
    va_end(ap);
}

/* An error about entry e, which is marked failed. */
static PRINTF_LIKE(3, 4) void err_at(parse_ctx *c, entry *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    e->failed = true;
    vreport(c, e->line, e->set, fmt, ap);
    va_end(ap);
}

static int cmp_pending(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->set != y->set)
        return x->set < y->set ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* ---- words and names ---- */

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    s[n] = '\0';
    return s;
}

/* Squeezes each run of blanks in s into one space: "dtype   x" and "dtype x" are one key. */
static void squeeze_blanks(char *s)
{
    char *o = s;
    for (const char *p = s; *p; p++) {
        if (!is_blank(*p))
            *o++ = *p;
        else if (o == s || o[-1] != ' ')
            *o++ = ' ';
    }
    *o = '\0';
}

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* "a, b, c" (last_sep ", ") or "a, b or c" (last_sep " or "); the caller frees it. */
static char *join_names(const char *const *names, int n, const char *last_sep)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + strlen(last_sep) + 2;
    char *s = xrealloc(NULL, len), *o = s;
    *o = '\0';
    for (int i = 0; i < n; i++)
        o = stpcpy(stpcpy(o, i == 0 ? "" : i == n - 1 ? last_sep : ", "), names[i]);
    return s;
}

/* Optimal string alignment distance, ignoring case; 3 stands for "more than 2". */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64 || (n > m ? n - m : m - n) > 2)
        return 3;
    int d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ai != bj);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == bj && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

/* The name closest to word (edit distance <= 2, else one a prefix of the other), or NULL. */
static const char *closest(const char *word, const char *const *names, int n)
{
    const char *best = NULL;
    int best_d = 3;
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    size_t wl = strlen(word);
    for (int i = 0; i < n && !best; i++) {
        size_t nl = strlen(names[i]), shorter = wl < nl ? wl : nl;
        if (shorter >= 2 && strncasecmp(word, names[i], shorter) == 0)
            best = names[i];
    }
    return best;
}

/* "did you mean 'x'?" when a name is close to word, else "<label>: a, b, c"; caller frees. */
static char *hint(const char *word, const char *const *names, int n, const char *label)
{
    const char *near = closest(word, names, n);
    if (near)
        return xasprintf("did you mean '%s'?", near);
    char *list = join_names(names, n, ", ");
    char *h = xasprintf("%s: %s", label, list);
    free(list);
    return h;
}

static bool valid_case_name(const char *s)
{
    size_t n = strspn(s, ALNUM "._-");
    return n > 0 && s[n] == '\0' && n < CASE_NAME_MAX && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

static bool valid_layer_name(const char *s)
{
    size_t n = strspn(s, ALNUM "_");
    return n > 0 && s[n] == '\0' && n < LAYER_NAME_MAX && !isdigit((unsigned char)s[0]);
}

static bool valid_tensor_name(const char *s)
{
    size_t n = strspn(s, ALNUM "_.@");
    return n > 0 && s[n] == '\0' && n < CASE_NAME_MAX;
}

/* A value split into words; "->" and "=" are words of their own and blanks around ',' are
 * dropped, so "linear 3->4 bias = no" and "betas=0.9, 0.999" read as meant. */
typedef struct words {
    char *buf;
    char *w[MAX_WORDS];
    int n;
} words;

/* false (after reporting on e) when the value has too many words; else free t->buf later. */
static bool split_words(parse_ctx *c, entry *e, words *t)
{
    const char *s = e->value;
    size_t n = strlen(s);
    char *o = t->buf = xrealloc(NULL, 3 * n + 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '-' && s[i + 1] == '>') {
            o = stpcpy(o, " -> ");
            i++;
        } else if (s[i] == '=') {
            o = stpcpy(o, " = ");
        } else if (is_blank(s[i])) {
            size_t j = i;
            while (j < n && is_blank(s[j]))
                j++;
            if (s[j] != ',' && (o == t->buf || o[-1] != ','))
                *o++ = ' ';
            i = j - 1;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    t->n = 0;
    for (char *p = t->buf;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            return true;
        if (t->n == MAX_WORDS) {
            err_at(c, e, "too many words in '%s' (at most %d)", s, MAX_WORDS);
            free(t->buf);
            return false;
        }
        t->w[t->n++] = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
    }
}

/* Reads "name = value" triples from t->w[first..] into vals (indexed like names, NULL when
 * absent); owner names the thing they belong to in messages. */
static bool parse_options(parse_ctx *c, entry *e, const words *t, int first, const char *owner,
                          const char *const *names, int n, const char **vals)
{
    bool ok = true;
    for (int i = 0; i < n; i++)
        vals[i] = NULL;
    for (int i = first; i < t->n; i += 3) {
        const char *name = t->w[i];
        if (n == 0) {
            err_at(c, e, "%s takes no options, got '%s'", owner, name);
            return false;
        }
        if (i + 2 >= t->n || strcmp(t->w[i + 1], "=") != 0 || strcmp(name, "=") == 0 ||
            strcmp(t->w[i + 2], "=") == 0) {
            err_at(c, e, "expected name=value options after %s, got '%s'", owner, name);
            return false;
        }
        int k = find_name(names, n, name);
        if (k < 0) {
            char *h = hint(name, names, n, "options");
            err_at(c, e, "unknown option '%s' for %s; %s", name, owner, h);
            free(h);
            ok = false;
        } else if (vals[k]) {
            err_at(c, e, "option '%s' given twice", name);
            ok = false;
        } else {
            vals[k] = t->w[i + 2];
        }
    }
    return ok;
}

/* ---- numbers and values ---- */

/* 0, EINVAL (not a whole decimal integer) or ERANGE (beyond int64). */
static int scan_i64(const char *s, int64_t *out)
{
    if (!isdigit((unsigned char)s[0]) &&
        !((s[0] == '-' || s[0] == '+') && isdigit((unsigned char)s[1])))
        return EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end)
        return EINVAL;
    if (errno == ERANGE)
        return ERANGE;
    *out = v;
    return 0;
}

/* 0, EINVAL (not a number) or ERANGE (nan, inf, or beyond double). */
static int scan_f64(const char *s, double *out)
{
    if (!*s || is_blank(*s))
        return EINVAL;
    char *end;
    double v = strtod(s, &end);
    if (*end)
        return EINVAL;
    if (!isfinite(v))
        return ERANGE;
    *out = v;
    return 0;
}

/* Parses an integer >= min (0 or 1) into *out. */
static bool parse_int(parse_ctx *c, entry *e, const char *s, const char *what, int64_t min,
                      int64_t *out)
{
    int64_t v = 0;
    int r = scan_i64(s, &v);
    if (r == 0 && v >= min) {
        *out = v;
        return true;
    }
    err_at(c, e, "bad number '%s' for %s: %s", s, what,
           r == EINVAL   ? "expected an integer"
           : r == ERANGE ? "out of range"
           : min > 0     ? "must be > 0"
                         : "must be >= 0");
    return false;
}

typedef enum real_range { ANY, NONNEG, POSITIVE, ABOVE_ONE, UNIT_OPEN, UNIT_HALF } real_range;

static bool in_range(double v, real_range r)
{
    switch (r) {
    case ANY:
        return true;
    case NONNEG:
        return v >= 0;
    case POSITIVE:
        return v > 0;
    case ABOVE_ONE:
        return v > 1;
    case UNIT_OPEN:
        return v > 0 && v < 1;
    case UNIT_HALF:
        return v >= 0 && v < 1;
    }
    return false;
}

static bool parse_real(parse_ctx *c, entry *e, const char *s, const char *what, real_range r,
                       double *out)
{
    static const char *const range_text[] = {[ANY] = "",
                                             [NONNEG] = "must be >= 0",
                                             [POSITIVE] = "must be > 0",
                                             [ABOVE_ONE] = "must be > 1",
                                             [UNIT_OPEN] = "must be in (0, 1)",
                                             [UNIT_HALF] = "must be in [0, 1)"};
    double v = 0;
    int rc = scan_f64(s, &v);
    if (rc == 0 && in_range(v, r)) {
        *out = v;
        return true;
    }
    err_at(c, e, "bad number '%s' for %s: %s", s, what,
           rc == EINVAL   ? "expected a number"
           : rc == ERANGE ? "must be a finite number"
                          : range_text[r]);
    return false;
}

static bool parse_bool(parse_ctx *c, entry *e, const char *s, const char *what, bool *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1"};
    static const char *const no[] = {"no", "false", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *out = strcasecmp(s, yes[i]) == 0;
            return true;
        }
    }
    err_at(c, e, "bad value '%s' for %s: expected yes or no (or true/false, on/off, 1/0)", s, what);
    return false;
}

/* Index of s in names, or -1 after "bad value 's' for what: expected a, b or c". */
static int parse_choice(parse_ctx *c, entry *e, const char *s, const char *what,
                        const char *const *names, int n)
{
    int k = find_name(names, n, s);
    if (k < 0) {
        char *list = join_names(names, n, " or ");
        err_at(c, e, "bad value '%s' for %s: expected %s", s, what, list);
        free(list);
    }
    return k;
}

static bool parse_dtype(parse_ctx *c, entry *e, const char *what, bool allow_int64, dtype *out)
{
    if (dtype_parse(e->value, out))
        return true;
    if (allow_int64 && strcmp(e->value, "int64") == 0) {
        *out = DTYPE_INT64;
        return true;
    }
    err_at(c, e, "bad value '%s' for %s: expected float32, float16 or bfloat16%s", e->value, what,
           allow_int64 ? " (or int64)" : "");
    return false;
}

/* Resolves rel against the case file's folder into out and checks that it is a file. */
static bool resolve_file(parse_ctx *c, entry *e, const char *rel, char *out)
{
    const char *dir = c->cfg->dir;
    const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
    int n = rel[0] == '/' ? snprintf(out, CASE_PATH_MAX, "%s", rel)
                          : snprintf(out, CASE_PATH_MAX, "%s%s%s", dir, sep, rel);
    if (n < 0 || n >= CASE_PATH_MAX) {
        out[0] = '\0';
        err_at(c, e, "path too long: '%s' (at most %d bytes once resolved)", rel,
               CASE_PATH_MAX - 1);
        return false;
    }
    struct stat st;
    if (stat(out, &st) != 0) {
        int err = errno;
        if (err == ENOENT || err == ENOTDIR)
            err_at(c, e, "no such file: %s", out);
        else
            err_at(c, e, "cannot access %s: %s", out, strerror(err));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        err_at(c, e, "%s is not a regular file", out);
        return false;
    }
    return true;
}

/* 1: e's value is "file PATH" and PATH (resolved into path) is a file; 0: not "file ...";
 * -1: an error was reported. */
static int parse_file_value(parse_ctx *c, entry *e, char *path)
{
    const char *v = e->value;
    if (strncmp(v, "file", 4) != 0 || (v[4] != '\0' && !is_blank(v[4])))
        return 0;
    const char *rel = v + 4;
    while (is_blank(*rel))
        rel++;
    if (!*rel) {
        err_at(c, e, "missing path after 'file' for %s", e->key);
        return -1;
    }
    return resolve_file(c, e, rel, path) ? 1 : -1;
}

/* names[0..n-2] are words, names[n-1] is "file" (then PATH follows); -1 after an error. */
static int parse_source(parse_ctx *c, entry *e, const char *const *names, int n, char *path)
{
    int r = parse_file_value(c, e, path);
    if (r != 0)
        return r > 0 ? n - 1 : -1;
    int k = find_name(names, n - 1, e->value);
    if (k < 0) {
        char *list = join_names(names, n - 1, ", ");
        err_at(c, e, "bad value '%s' for %s: expected %s or file PATH", e->value, e->key, list);
        free(list);
    }
    return k;
}

/* ---- reading the file ---- */

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 when invalid. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp, min;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2, cp = s[0] & 0x1fu, min = 0x80;
    } else if ((s[0] & 0xf0) == 0xe0) {
        len = 3, cp = s[0] & 0x0fu, min = 0x800;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4, cp = s[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* 0 when text is UTF-8 without control bytes other than tab, CR and LF; else the line of the
 * first offending byte, which goes to *bad. */
static int first_binary_line(const char *text, size_t len, unsigned char *bad)
{
    int line = 1;
    for (size_t i = 0; i < len;) {
        unsigned char b = (unsigned char)text[i];
        bool control = (b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7f;
        size_t k = control ? 0 : utf8_length((const unsigned char *)text + i, len - i);
        if (k == 0) {
            *bad = b;
            return line;
        }
        line += b == '\n';
        i += k;
    }
    return 0;
}

/* The whole file, NUL-terminated, or NULL after reporting why not. */
static char *read_whole(parse_ctx *c, size_t *len)
{
    FILE *f = fopen(c->path, "rb");
    if (!f) {
        report(c, 0, NULL, "cannot open the case file: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int read_errno = 0;
    for (;;) {
        if (cap - n < 65536 + 1) {
            cap = cap ? cap * 2 : 4 * 65536;
            buf = xrealloc(buf, cap);
        }
        size_t want = cap - n - 1;
        errno = 0;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want) {
            if (ferror(f))
                read_errno = errno ? errno : EIO;
            break;
        }
        if (n > FILE_MAX_BYTES)
            break;
    }
    if (fclose(f) != 0 && read_errno == 0)
        read_errno = errno;
    if (read_errno || n > FILE_MAX_BYTES) {
        if (read_errno)
            report(c, 0, NULL, "cannot read the case file: %s", strerror(read_errno));
        else
            report(c, 0, NULL, "the case file is larger than %d MiB", FILE_MAX_BYTES >> 20);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static entry *find_entry(parse_ctx *c, int sec, const char *key)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == sec && strcmp(c->entries[i].key, key) == 0)
            return &c->entries[i];
    return NULL;
}

static bool has_entries(parse_ctx *c, int sec)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == sec)
            return true;
    return false;
}

static bool entry_failed(parse_ctx *c, int sec, const char *key)
{
    entry *e = find_entry(c, sec, key);
    return e && e->failed;
}

/* Adds key = value to section sec; an override (set != NULL) replaces an existing key. */
static void add_entry(parse_ctx *c, int sec, char *key, char *value, int line, const char *set)
{
    bool full = c->n_entries == MAX_ENTRIES;
    squeeze_blanks(key);
    entry *old = full && !set ? NULL : find_entry(c, sec, key);
    if (old && set) {
        old->value = value;
        old->line = 0;
        old->set = set;
    } else if (old && sec == SEC_MODEL) {
        report(c, line, NULL, "duplicate layer name '%s' in [model] (first at line %d)", key,
               old->line);
    } else if (old) {
        report(c, line, NULL, "duplicate key '%s' in [%s] (first at line %d)", key,
               section_names[sec], old->line);
    } else if (full) {
        if (!c->full_reported)
            report(c, line, set, "too many keys (at most %d in a case)", MAX_ENTRIES);
        c->full_reported = true;
    } else {
        c->entries = grow(c->entries, &c->cap_entries, c->n_entries + 1, sizeof *c->entries);
        c->entries[c->n_entries++] = (entry){sec, key, value, line, set, false};
    }
}

static void section_header(parse_ctx *c, char *s, int line, int *sec)
{
    size_t n = strlen(s);
    *sec = SEC_SKIP;
    if (n < 2 || s[n - 1] != ']') {
        report(c, line, NULL, "bad section header '%s': expected [name]", s);
        return;
    }
    s[n - 1] = '\0';
    char *name = trim(s + 1);
    int id = find_name(section_names, SEC_COUNT, name);
    if (id < 0) {
        char *h = hint(name, section_names, SEC_COUNT, "sections");
        report(c, line, NULL, "unknown section [%s]; %s", name, h);
        free(h);
    } else if (c->sec_line[id]) {
        report(c, line, NULL, "duplicate section [%s] (first at line %d)", name, c->sec_line[id]);
    } else {
        c->sec_line[id] = line;
        c->sec_given[id] = true;
        *sec = id;
    }
}

/* One line of the file; true when it holds something besides comments and blanks. */
static bool parse_line(parse_ctx *c, char *s, int line, int *sec)
{
    size_t len = strlen(s);
    if (len > LINE_MAX_BYTES) {
        report(c, line, NULL, "line too long (%zu bytes; at most %d)", len, LINE_MAX_BYTES);
        return true;
    }
    char *hash = strchr(s, '#');
    if (hash)
        *hash = '\0';
    s = trim(s);
    if (!*s)
        return false;
    if (*s == '[') {
        section_header(c, s, line, sec);
        return true;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
        report(c, line, NULL, "not a section, key = value or comment: '%s'", s);
        return true;
    }
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    if (!*key)
        report(c, line, NULL, "missing key before '='");
    else if (*sec == SEC_NONE)
        report(c, line, NULL, "key '%s' outside any section", key);
    else if (*sec != SEC_SKIP)
        add_entry(c, *sec, key, value, line, NULL);
    return true;
}

/* Reads the file into entries; false when there is nothing to go on with. */
static bool read_lines(parse_ctx *c)
{
    size_t len;
    c->text = read_whole(c, &len);
    if (!c->text)
        return false;
    unsigned char bad;
    int bad_line = first_binary_line(c->text, len, &bad);
    if (bad_line) {
        report(c, bad_line, NULL, "not a text file (byte 0x%02x)", bad);
        return false;
    }
    char *p = c->text;
    if (strncmp(p, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 byte order mark */
        p += 3;
    int sec = SEC_NONE, line = 0;
    bool content = false;
    while (*p) {
        char *nl = strchr(p, '\n');
        char *next = nl ? nl + 1 : p + strlen(p);
        if (nl)
            *nl = '\0';
        content = parse_line(c, p, ++line, &sec) || content;
        p = next;
    }
    if (!content)
        report(c, 0, NULL, "empty file: no sections or keys");
    return content;
}

/* An override "section.key=value", validated later like a line at the end of its section. */
static void apply_set(parse_ctx *c, const char *set)
{
    char *s = xstrdup(set);
    c->set_copies =
        grow(c->set_copies, &c->cap_set_copies, c->n_set_copies + 1, sizeof *c->set_copies);
    c->set_copies[c->n_set_copies++] = s;
    char *dot = strchr(s, '.'), *eq = strchr(s, '=');
    if (!dot || !eq || dot > eq) {
        report(c, 0, set, "expected section.key=value");
        return;
    }
    *dot = '\0';
    *eq = '\0';
    char *name = trim(s), *key = trim(dot + 1), *value = trim(eq + 1);
    int sec = find_name(section_names, SEC_COUNT, name);
    if (sec < 0) {
        char *h = hint(name, section_names, SEC_COUNT, "sections");
        report(c, 0, set, "unknown section [%s]; %s", name, h);
        free(h);
    } else if (!*key) {
        report(c, 0, set, "missing key after '%s.'", name);
    } else {
        c->sec_given[sec] = true;
        add_entry(c, sec, key, value, 0, set);
    }
}

/* ---- sections ---- */

/* Only a description may be empty. */
static bool need_value(parse_ctx *c, entry *e)
{
    if (*e->value || (e->sec == SEC_CASE && strcmp(e->key, "description") == 0))
        return true;
    err_at(c, e, "missing value for %s", e->key);
    return false;
}

typedef void (*key_fn)(parse_ctx *c, entry *e);
typedef struct key_def {
    const char *key;
    key_fn fn;
} key_def;

/* Sections with a fixed set of keys: each entry goes to its key's function. */
static void parse_keyed(parse_ctx *c, int sec, const key_def *defs, int n)
{
    const char *names[8];
    for (int i = 0; i < n; i++)
        names[i] = defs[i].key;
    for (int i = 0; i < c->n_entries; i++) {
        entry *e = &c->entries[i];
        if (e->sec != sec)
            continue;
        int k = find_name(names, n, e->key);
        if (k < 0) {
            char *h = hint(e->key, names, n, "allowed keys");
            err_at(c, e, "unknown key '%s' in [%s]; %s", e->key, section_names[sec], h);
            free(h);
        } else if (need_value(c, e)) {
            defs[k].fn(c, e);
        }
    }
}

static void key_name(parse_ctx *c, entry *e)
{
    if (valid_case_name(e->value))
        strcpy(c->cfg->name, e->value);
    else
        err_at(c, e,
               "bad case name '%s': expected [A-Za-z0-9._-]+, at most %d characters, "
               "not . or ..",
               e->value, CASE_NAME_MAX - 1);
}

static void key_description(parse_ctx *c, entry *e)
{
    if (strlen(e->value) < CASE_TEXT_MAX)
        strcpy(c->cfg->description, e->value);
    else
        err_at(c, e, "description too long (at most %d bytes)", CASE_TEXT_MAX - 1);
}

static void key_baseline(parse_ctx *c, entry *e)
{
    if (valid_case_name(e->value))
        strcpy(c->cfg->baseline, e->value);
    else
        err_at(c, e, "bad value '%s' for baseline: expected a case name ([A-Za-z0-9._-]+)",
               e->value);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* observe = 0,1,2,100: sorted, repeats dropped. */
static void parse_step_list(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    char *s = xstrdup(e->value), *next;
    int n = 0;
    bool ok = true;
    for (char *p = s; ok && p; p = next) {
        char *comma = strchr(p, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        int64_t step;
        if (n == CASE_MAX_OBSERVE) {
            err_at(c, e, "too many observe steps (at most %d)", CASE_MAX_OBSERVE);
            ok = false;
        } else if (scan_i64(trim(p), &step) != 0 || step < 0) {
            err_at(c, e,
                   "bad value '%s' for observe: expected all, every N, or step indices "
                   "like 0,1,100",
                   e->value);
            ok = false;
        } else {
            cfg->observe_steps[n++] = step;
        }
    }
    free(s);
    if (!ok)
        return;
    qsort(cfg->observe_steps, (size_t)n, sizeof cfg->observe_steps[0], cmp_i64);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || cfg->observe_steps[m - 1] != cfg->observe_steps[i])
            cfg->observe_steps[m++] = cfg->observe_steps[i];
    cfg->n_observe_steps = m;
}

static void key_observe(parse_ctx *c, entry *e)
{
    const char *v = e->value;
    if (strcmp(v, "all") == 0) {
        c->cfg->observe_every = 1;
    } else if (strncmp(v, "every", 5) == 0 && is_blank(v[5])) {
        for (v += 5; is_blank(*v);)
            v++;
        parse_int(c, e, v, "observe every", 1, &c->cfg->observe_every);
    } else {
        parse_step_list(c, e);
    }
}

static void parse_case_section(parse_ctx *c)
{
    static const key_def defs[] = {{"name", key_name},
                                   {"description", key_description},
                                   {"baseline", key_baseline},
                                   {"observe", key_observe}};
    parse_keyed(c, SEC_CASE, defs, 4);
}

static bool parse_layer_words(parse_ctx *c, entry *e, const words *t, layer_spec *l)
{
    static const char *const opts[] = {"bias", "kernel", "stride", "padding", "dilation", "groups"};
    const char *v[6];
    int k = parse_choice(c, e, t->w[0], "layer kind", layer_kinds, 4);
    if (k < 0)
        return false;
    l->kind = (layer_kind)k;
    if (k == LAYER_RELU || k == LAYER_FLATTEN)
        return parse_options(c, e, t, 1, layer_kinds[k], opts, 0, v);
    if (t->n < 4 || strcmp(t->w[2], "->") != 0) {
        err_at(c, e, "bad value '%s' for layer %s: expected %s IN -> OUT, then options", e->value,
               e->key, layer_kinds[k]);
        return false;
    }
    bool linear = k == LAYER_LINEAR;
    bool ok = parse_int(c, e, t->w[1], linear ? "in_features" : "in_channels", 1, &l->in);
    ok = parse_int(c, e, t->w[3], linear ? "out_features" : "out_channels", 1, &l->out) && ok;
    if (!parse_options(c, e, t, 4, layer_kinds[k], opts, linear ? 1 : 6, v))
        return false;
    if (v[0])
        ok = parse_bool(c, e, v[0], "bias", &l->bias) && ok;
    if (linear)
        return ok;
    if (!v[1]) {
        err_at(c, e, "conv2d layer %s needs kernel=K", e->key);
        ok = false;
    } else {
        ok = parse_int(c, e, v[1], "kernel", 1, &l->kernel) && ok;
    }
    if (v[2])
        ok = parse_int(c, e, v[2], "stride", 1, &l->stride) && ok;
    if (v[3])
        ok = parse_int(c, e, v[3], "padding", 0, &l->padding) && ok;
    if (v[4])
        ok = parse_int(c, e, v[4], "dilation", 1, &l->dilation) && ok;
    if (v[5]) {
        err_at(c, e, "groups is not supported (conv2d layers have groups=1)");
        ok = false;
    }
    return ok;
}

static void parse_model_section(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    c->model_ok = true;
    for (int i = 0; i < c->n_entries; i++) {
        entry *e = &c->entries[i];
        if (e->sec != SEC_MODEL)
            continue;
        if (!need_value(c, e)) {
            c->model_ok = false;
            continue;
        }
        if (!valid_layer_name(e->key)) {
            err_at(c, e,
                   "bad layer name '%s': expected [A-Za-z_][A-Za-z0-9_]*, at most %d "
                   "characters",
                   e->key, LAYER_NAME_MAX - 1);
            c->model_ok = false;
            continue;
        }
        if (cfg->n_layers == CASE_MAX_LAYERS) {
            err_at(c, e, "too many layers (at most %d)", CASE_MAX_LAYERS);
            c->model_ok = false;
            continue;
        }
        layer_spec *l = &cfg->layers[cfg->n_layers];
        c->layer_entry[cfg->n_layers++] = e;
        *l = (layer_spec){.line = e->line, .bias = true, .stride = 1, .dilation = 1};
        strcpy(l->name, e->key);
        words t;
        if (!split_words(c, e, &t)) {
            c->model_ok = false;
            continue;
        }
        c->model_ok = parse_layer_words(c, e, &t, l) && c->model_ok;
        free(t.buf);
    }
}

static void key_batch(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "batch", 1, &c->cfg->batch);
}

static void key_shape(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    int n = 0;
    for (const char *p = e->value;;) {
        const char *x = strchr(p, 'x');
        size_t len = x ? (size_t)(x - p) : strlen(p);
        char part[64];
        if (n == 3 || len == 0 || len >= sizeof part) {
            err_at(c, e, "bad value '%s' for shape: expected 1 to 3 sizes like 1024 or 3x32x32",
                   e->value);
            return;
        }
        memcpy(part, p, len);
        part[len] = '\0';
        if (!parse_int(c, e, trim(part), "shape", 1, &cfg->sample_shape[n++]))
            return;
        if (!x)
            break;
        p = x + 1;
    }
    cfg->sample_ndim = n;
}

static void key_input(parse_ctx *c, entry *e)
{
    int k = parse_source(c, e, input_names, 2, c->cfg->input_path);
    if (k >= 0)
        c->cfg->input = (input_source)k;
}

static void key_input_dtype(parse_ctx *c, entry *e)
{
    parse_dtype(c, e, "input_dtype", false, &c->cfg->input_dtype);
}

static void key_target(parse_ctx *c, entry *e)
{
    int k = parse_source(c, e, target_names, 4, c->cfg->target_path);
    if (k >= 0)
        c->cfg->target = (target_kind)k;
}

static void parse_data_section(parse_ctx *c)
{
    static const key_def defs[] = {{"batch", key_batch},
                                   {"shape", key_shape},
                                   {"input", key_input},
                                   {"input_dtype", key_input_dtype},
                                   {"target", key_target}};
    parse_keyed(c, SEC_DATA, defs, 5);
}

static void key_params(parse_ctx *c, entry *e)
{
    parse_dtype(c, e, "params", false, &c->cfg->params);
}

static void key_autocast(parse_ctx *c, entry *e)
{
    dtype dt;
    if (strcmp(e->value, "off") == 0) {
        c->cfg->autocast = false;
    } else if (dtype_parse(e->value, &dt) && dtype_is_half(dt)) {
        c->cfg->autocast = true;
        c->cfg->autocast_dtype = dt;
    } else {
        err_at(c, e, "bad value '%s' for autocast: expected off, float16 or bfloat16", e->value);
    }
}

static void key_loss_in_autocast(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "loss_in_autocast", &c->cfg->loss_in_autocast);
}

static void key_master_weights(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "master_weights", &c->cfg->master_weights);
}

static void parse_precision_section(parse_ctx *c)
{
    static const key_def defs[] = {{"params", key_params},
                                   {"autocast", key_autocast},
                                   {"loss_in_autocast", key_loss_in_autocast},
                                   {"master_weights", key_master_weights}};
    parse_keyed(c, SEC_PRECISION, defs, 4);
}

static void key_enabled(parse_ctx *c, entry *e)
{
    parse_bool(c, e, e->value, "enabled", &c->cfg->scaler);
}

static void key_init_scale(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "init_scale", POSITIVE, &c->cfg->init_scale);
}

static void key_growth_factor(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "growth_factor", ABOVE_ONE, &c->cfg->growth_factor);
}

static void key_backoff_factor(parse_ctx *c, entry *e)
{
    parse_real(c, e, e->value, "backoff_factor", UNIT_OPEN, &c->cfg->backoff_factor);
}

static void key_growth_interval(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "growth_interval", 1, &c->cfg->growth_interval);
}

static void parse_scaler_section(parse_ctx *c)
{
    static const key_def defs[] = {{"enabled", key_enabled},
                                   {"init_scale", key_init_scale},
                                   {"growth_factor", key_growth_factor},
                                   {"backoff_factor", key_backoff_factor},
                                   {"growth_interval", key_growth_interval}};
    c->cfg->scaler = c->sec_given[SEC_SCALER];
    parse_keyed(c, SEC_SCALER, defs, 5);
}

static void key_loss(parse_ctx *c, entry *e)
{
    static const char *const opts[] = {"reduction"};
    static const char *const reductions[] = {"mean", "none"};
    const char *v[1];
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "loss", loss_names, 2);
    if (k >= 0 && parse_options(c, e, &t, 1, loss_names[k], opts, k == LOSS_MSE ? 1 : 0, v)) {
        c->cfg->loss = (loss_kind)k;
        if (v[0] && k == LOSS_MSE)
            c->cfg->loss_reduction_none = parse_choice(c, e, v[0], "reduction", reductions, 2) == 1;
    }
    free(t.buf);
}

/* The optimizer's betas: "b1,b2", each in [0, 1). */
static bool parse_betas(parse_ctx *c, entry *e, const char *v, optim_config *o)
{
    char *s = xstrdup(v), *comma = strchr(s, ',');
    bool ok = false;
    if (!comma || strchr(comma + 1, ',')) {
        err_at(c, e, "bad value '%s' for betas: expected two numbers like 0.9,0.999", v);
    } else {
        *comma = '\0';
        ok = parse_real(c, e, s, "beta1", UNIT_HALF, &o->beta1);
        ok = parse_real(c, e, comma + 1, "beta2", UNIT_HALF, &o->beta2) && ok;
    }
    free(s);
    return ok;
}

/* One optimizer option into its optim_config field (optimizers.h says how it is read). */
static bool parse_opt_value(parse_ctx *c, entry *e, const optim_opt *d, const char *v,
                            optim_config *o)
{
    char *field = (char *)o + d->offset;
    bool yes;
    switch (d->type) {
    case OPTIM_OPT_NONNEG:
        return parse_real(c, e, v, d->name, NONNEG, (double *)field);
    case OPTIM_OPT_ANY:
        return parse_real(c, e, v, d->name, ANY, (double *)field);
    case OPTIM_OPT_BOOL:
        return parse_bool(c, e, v, d->name, (bool *)field);
    case OPTIM_OPT_BETAS:
        return parse_betas(c, e, v, o);
    case OPTIM_OPT_NO_ONLY:
        if (!parse_bool(c, e, v, d->name, &yes))
            return false;
        if (yes)
            err_at(c, e, "%s=yes is not supported", d->name);
        return !yes;
    }
    return false;
}

static void parse_optimizer(parse_ctx *c, entry *e, const words *t, optim_kind kind)
{
    const optim_def *d = optim_def_of(kind);
    const char *names[OPTIM_MAX_OPTS] = {0}, *vals[OPTIM_MAX_OPTS];
    for (int i = 0; i < d->n_opts; i++)
        names[i] = d->opts[i].name;
    if (!parse_options(c, e, t, 1, d->name, names, d->n_opts, vals))
        return;
    optim_config o = optim_default(kind);
    bool ok = true;
    for (int i = 0; i < d->n_opts; i++)
        if (vals[i])
            ok = parse_opt_value(c, e, &d->opts[i], vals[i], &o) && ok;
    const char *why = ok && d->check ? d->check(&o) : NULL;
    if (why) {
        err_at(c, e, "%s", why);
        ok = false;
    }
    if (ok)
        c->cfg->optim = o;
}

static void key_optimizer(parse_ctx *c, entry *e)
{
    const char *names[OPTIM_KIND_COUNT];
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        names[k] = optim_name((optim_kind)k);
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "optimizer", names, OPTIM_KIND_COUNT);
    if (k >= 0)
        parse_optimizer(c, e, &t, (optim_kind)k);
    free(t.buf);
}

static void key_schedule(parse_ctx *c, entry *e)
{
    static const char *const opts[] = {"T_max", "eta_min"};
    case_config *cfg = c->cfg;
    const char *v[2];
    words t;
    if (!split_words(c, e, &t))
        return;
    int k = parse_choice(c, e, t.w[0], "schedule", schedule_names, 2);
    bool cosine = k == SCHEDULE_COSINE;
    if (k >= 0 && parse_options(c, e, &t, 1, schedule_names[k], opts, cosine ? 2 : 0, v)) {
        cfg->schedule = (schedule_kind)k;
        if (cosine && !v[0])
            err_at(c, e, "cosine needs T_max=N");
        else if (cosine)
            parse_int(c, e, v[0], "T_max", 1, &cfg->t_max);
        if (cosine && v[1])
            parse_real(c, e, v[1], "eta_min", ANY, &cfg->eta_min);
    }
    free(t.buf);
}

static void key_steps(parse_ctx *c, entry *e)
{
    parse_int(c, e, e->value, "steps", 1, &c->cfg->steps);
}

static void key_seed(parse_ctx *c, entry *e)
{
    const char *s = e->value;
    char *end;
    errno = 0;
    if (isdigit((unsigned char)s[0])) {
        unsigned long long v = strtoull(s, &end, 10);
        if (!*end && errno != ERANGE) {
            c->cfg->seed = v;
            return;
        }
    }
    err_at(c, e, "bad number '%s' for seed: expected an integer from 0 to 2^64-1", s);
}

static void parse_train_section(parse_ctx *c)
{
    static const key_def defs[] = {{"loss", key_loss},
                                   {"optimizer", key_optimizer},
                                   {"schedule", key_schedule},
                                   {"steps", key_steps},
                                   {"seed", key_seed}};
    parse_keyed(c, SEC_TRAIN, defs, 5);
}

/* Whether layer `name` exists and has parameter `param` ("weight" or "bias"). */
static bool check_init_layer(parse_ctx *c, entry *e, const char *name, const char *param)
{
    const case_config *cfg = c->cfg;
    const char *names[CASE_MAX_LAYERS];
    for (int i = 0; i < cfg->n_layers; i++) {
        const layer_spec *l = &cfg->layers[i];
        names[i] = l->name;
        if (strcmp(l->name, name) != 0)
            continue;
        if (l->kind == LAYER_RELU || l->kind == LAYER_FLATTEN) {
            err_at(c, e, "layer %s is a %s: it has no parameters", name, layer_kinds[l->kind]);
            return false;
        }
        if (strcmp(param, "bias") == 0 && !l->bias) {
            err_at(c, e, "layer %s has bias=no: there is no %s.bias", name, name);
            return false;
        }
        return true;
    }
    char *h = hint(name, names, cfg->n_layers, "layers");
    err_at(c, e, "unknown layer '%s' in [init] key '%s.%s'; %s", name, name, param, h);
    free(h);
    return false;
}

/* Checks an [init] key's form, LAYER.weight or LAYER.bias; on success the layer name goes to
 * layer and its parameter to *param. */
static bool parse_init_key(parse_ctx *c, entry *e, char *layer, const char **param)
{
    static const char *const params[] = {"weight", "bias"};
    const char *dot = strrchr(e->key, '.');
    size_t len = dot ? (size_t)(dot - e->key) : 0;
    if (!dot || find_name(params, 2, dot + 1) < 0) {
        const char *near = dot ? closest(dot + 1, params, 2) : NULL;
        if (near)
            err_at(c, e, "bad key '%s' in [init]; did you mean '%.*s.%s'?", e->key, (int)len,
                   e->key, near);
        else
            err_at(c, e, "bad key '%s' in [init]: expected LAYER.weight or LAYER.bias", e->key);
        return false;
    }
    if (len >= LAYER_NAME_MAX) {
        err_at(c, e, "bad layer name in [init] key '%s'", e->key);
        return false;
    }
    memcpy(layer, e->key, len);
    layer[len] = '\0';
    *param = dot + 1;
    if (!valid_layer_name(layer)) {
        err_at(c, e, "bad layer name '%s' in [init] key", layer);
        return false;
    }
    return true;
}

static void parse_init_entry(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    char layer[LAYER_NAME_MAX];
    const char *param;
    if (!parse_init_key(c, e, layer, &param))
        return;
    if (c->model_ok && cfg->n_layers > 0 && !check_init_layer(c, e, layer, param))
        return;
    if (cfg->n_inits == CASE_MAX_INITS) {
        err_at(c, e, "too many [init] keys (at most %d)", CASE_MAX_INITS);
        return;
    }
    init_spec *in = &cfg->inits[cfg->n_inits];
    int r = parse_file_value(c, e, in->path);
    if (r == 0)
        err_at(c, e, "bad value '%s' for %s: expected file PATH", e->value, e->key);
    if (r <= 0)
        return;
    strcpy(in->tensor, e->key);
    in->line = e->line;
    cfg->n_inits++;
}

static void parse_init_section(parse_ctx *c)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == SEC_INIT && need_value(c, &c->entries[i]))
            parse_init_entry(c, &c->entries[i]);
}

static void parse_expect_entry(parse_ctx *c, entry *e)
{
    case_config *cfg = c->cfg;
    expect_spec x = {.line = e->line};
    if (cfg->n_expects == CASE_MAX_EXPECTS) {
        err_at(c, e, "too many [expect] keys (at most %d)", CASE_MAX_EXPECTS);
        return;
    }
    if (strcmp(e->key, "error") == 0) {
        const char *text = strcmp(e->value, "none") == 0 ? "" : e->value;
        if (strlen(text) >= CASE_TEXT_MAX) {
            err_at(c, e, "expected error text too long (at most %d bytes)", CASE_TEXT_MAX - 1);
            return;
        }
        x.kind = EXPECT_ERROR;
        strcpy(x.text, text);
    } else if (strncmp(e->key, "dtype ", 6) == 0) {
        const char *tensor = e->key + 6;
        if (!valid_tensor_name(tensor)) {
            err_at(c, e,
                   "bad tensor name '%s' in [expect]: expected [A-Za-z0-9_.@]+, at most "
                   "%d characters",
                   tensor, CASE_NAME_MAX - 1);
            return;
        }
        if (!parse_dtype(c, e, e->key, true, &x.dt))
            return;
        x.kind = EXPECT_DTYPE;
        strcpy(x.tensor, tensor);
    } else {
        static const char *const error_key[] = {"error"};
        if (closest(e->key, error_key, 1))
            err_at(c, e, "unknown key '%s' in [expect]; did you mean 'error'?", e->key);
        else
            err_at(c, e, "unknown key '%s' in [expect]; expected 'dtype TENSOR' or 'error'",
                   e->key);
        return;
    }
    cfg->expects[cfg->n_expects++] = x;
}

static void parse_expect_section(parse_ctx *c)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == SEC_EXPECT && need_value(c, &c->entries[i]))
            parse_expect_entry(c, &c->entries[i]);
}

/* ---- cross checks ---- */

/* a * b and a + b of sizes >= 0, saturating at INT64_MAX instead of overflowing */
static int64_t cap_mul(int64_t a, int64_t b)
{
    return b != 0 && a > INT64_MAX / b ? INT64_MAX : a * b;
}

static int64_t cap_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

static int64_t numel(int64_t batch, int ndim, const int64_t *shape)
{
    int64_t n = batch;
    for (int i = 0; i < ndim; i++)
        n = cap_mul(n, shape[i]);
    return n;
}

static int64_t layer_params(const layer_spec *l)
{
    int64_t bias = l->bias ? l->out : 0;
    if (l->kind == LAYER_LINEAR)
        return cap_add(cap_mul(l->in, l->out), bias);
    if (l->kind == LAYER_CONV2D)
        return cap_add(cap_mul(cap_mul(l->in, l->out), cap_mul(l->kernel, l->kernel)), bias);
    return 0;
}

/* "3x32x32"; the caller frees it. */
static char *shape_text(int ndim, const int64_t *s)
{
    if (ndim == 3)
        return xasprintf("%" PRId64 "x%" PRId64 "x%" PRId64, s[0], s[1], s[2]);
    if (ndim == 2)
        return xasprintf("%" PRId64 "x%" PRId64, s[0], s[1]);
    return xasprintf("%" PRId64, s[0]);
}

/* A conv2d's output height or width over n: floor((n + 2p - d(k-1) - 1) / s) + 1, as PyTorch
 * computes it; false when a term overflows int64. */
static bool conv_out(int64_t n, const layer_spec *l, int64_t *out)
{
    int64_t span = cap_add(cap_mul(l->dilation, l->kernel - 1), 1);
    int64_t padded = cap_add(n, cap_mul(2, l->padding));
    if (span == INT64_MAX || padded == INT64_MAX)
        return false;
    int64_t num = padded - span;
    *out = (num >= 0 ? num / l->stride : -1 - (-num - 1) / l->stride) + 1;
    return true;
}

/* Turns the per-sample shape (ndim, shape) entering layer i into the one leaving it; false
 * when the walk cannot go on. Errors about the input are reported on `at`: the data shape
 * for the first layer when one is given, else the layer. */
static bool layer_output(parse_ctx *c, int i, entry *at, int *ndim, int64_t *shape)
{
    const layer_spec *l = &c->cfg->layers[i];
    entry *le = c->layer_entry[i];
    const char *pre = at == le ? "" : "[data] shape does not match the first layer: ";
    bool linear = l->kind == LAYER_LINEAR;
    if (l->kind == LAYER_RELU)
        return true;
    if (l->kind == LAYER_FLATTEN) {
        if (*ndim > 1)
            shape[0] = numel(1, *ndim, shape);
        *ndim = 1;
        return true;
    }
    if (*ndim != (linear ? 1 : 3)) {
        char *in = shape_text(*ndim, shape);
        err_at(c, at, "%s%s = %s: input has shape %s; %s", pre, le->key, le->value, in,
               linear ? "linear needs a 1-d input (add a flatten layer)"
                      : "conv2d needs a 3-d CxHxW input");
        free(in);
        return false;
    }
    if (shape[0] != l->in)
        err_at(c, at, "%s%s = %s: input has %" PRId64 " %s", pre, le->key, le->value, shape[0],
               linear ? "features" : "channels");
    shape[0] = l->out;
    if (linear)
        return true;
    int64_t h, w;
    if (!conv_out(shape[1], l, &h) || !conv_out(shape[2], l, &w)) {
        err_at(c, le, "%s = %s: sizes overflow int64", le->key, le->value);
        return false;
    }
    if (h < 1 || w < 1) {
        char *in = shape_text(*ndim, (const int64_t[]){l->in, shape[1], shape[2]});
        err_at(c, le,
               "%s = %s: output size %" PRId64 "x%" PRId64 "x%" PRId64 " is too small (input %s)",
               le->key, le->value, l->out, h, w, in);
        free(in);
        return false;
    }
    shape[1] = h;
    shape[2] = w;
    return true;
}

/* Walks the layers from the data shape, filling out_shape and checking the memory limits. */
static void walk_shapes(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    entry *shape_e = find_entry(c, SEC_DATA, "shape");
    if (!c->model_ok || cfg->n_layers == 0 || (shape_e && shape_e->failed))
        return;
    if (!shape_e && cfg->layers[0].kind != LAYER_LINEAR) {
        report(c, c->sec_line[SEC_DATA], NULL, "[data] shape is required: the first layer is %s",
               layer_kinds[cfg->layers[0].kind]);
        return;
    }
    if (cfg->batch <= 0) /* missing or refused */
        return;
    if (!shape_e) {
        cfg->sample_ndim = 1;
        cfg->sample_shape[0] = cfg->layers[0].in;
    }
    int ndim = cfg->sample_ndim;
    int64_t shape[3];
    memcpy(shape, cfg->sample_shape, sizeof shape);
    if (numel(cfg->batch, ndim, shape) > MEMORY_LIMIT) {
        char *s = shape_text(ndim, shape);
        entry *at = shape_e ? shape_e : find_entry(c, SEC_DATA, "batch");
        err_at(c, at,
               "the input batch %" PRId64 " x %s cannot fit in memory (more than 2^40 "
               "elements)",
               cfg->batch, s);
        free(s);
        return;
    }
    int64_t params = 0;
    for (int i = 0; i < cfg->n_layers; i++) {
        layer_spec *l = &cfg->layers[i];
        entry *le = c->layer_entry[i];
        if (!layer_output(c, i, i == 0 && shape_e ? shape_e : le, &ndim, shape))
            return;
        params = cap_add(params, layer_params(l));
        if (params > MEMORY_LIMIT) {
            err_at(c, le,
                   "%s = %s: the model's parameters cannot fit in memory (more than 2^40 "
                   "elements)",
                   le->key, le->value);
            return;
        }
        if (numel(cfg->batch, ndim, shape) > MEMORY_LIMIT) {
            char *s = shape_text(ndim, shape);
            err_at(c, le,
                   "%s = %s: its output batch %" PRId64 " x %s cannot fit in memory "
                   "(more than 2^40 elements)",
                   le->key, le->value, cfg->batch, s);
            free(s);
            return;
        }
        l->out_ndim = ndim;
        memcpy(l->out_shape, shape, sizeof shape);
    }
    c->shapes_ok = true;
}

static void check_target(parse_ctx *c)
{
    const case_config *cfg = c->cfg;
    entry *te = find_entry(c, SEC_DATA, "target"), *le = find_entry(c, SEC_TRAIN, "loss");
    entry *at = te ? te : le;
    int line = at ? at->line : c->sec_line[SEC_DATA];
    const char *set = at ? at->set : NULL;
    if ((te && te->failed) || (le && le->failed))
        return;
    if (cfg->loss == LOSS_MSE && cfg->target == TARGET_CLASSES) {
        report(c, line, set,
               "loss = mse needs target = randn, randn_like or file (target = "
               "classes is for cross_entropy)");
    } else if (cfg->loss == LOSS_CROSS_ENTROPY &&
               (cfg->target == TARGET_RANDN || cfg->target == TARGET_RANDN_LIKE)) {
        report(c, line, set, "loss = cross_entropy needs target = classes or file");
    } else if (cfg->target == TARGET_CLASSES && c->shapes_ok &&
               cfg->layers[cfg->n_layers - 1].out_ndim != 1) {
        const layer_spec *last = &cfg->layers[cfg->n_layers - 1];
        char *s = shape_text(last->out_ndim, last->out_shape);
        report(c, line, set,
               "target = classes needs a 1-d model output, not %s (end the model "
               "with flatten and linear)",
               s);
        free(s);
    }
}

static void check_observe(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    entry *e = find_entry(c, SEC_CASE, "observe");
    if (e && !e->failed && !entry_failed(c, SEC_TRAIN, "steps")) {
        for (int i = 0; i < cfg->n_observe_steps; i++) {
            if (cfg->observe_steps[i] >= cfg->steps) {
                err_at(c, e,
                       "observe step %" PRId64 " is past the last step, %" PRId64
                       " (steps = %" PRId64 ")",
                       cfg->observe_steps[i], cfg->steps - 1, cfg->steps);
                break;
            }
        }
    } else if (!e && cfg->steps <= 10) {
        for (int64_t s = 0; s < cfg->steps; s++)
            cfg->observe_steps[s] = s;
        cfg->n_observe_steps = (int)cfg->steps;
    } else if (!e) {
        cfg->observe_every = cfg->steps / 10 + (cfg->steps % 10 != 0);
    }
}

/* "3x4" for a shape; "scalar" for none */
static void shape_str(int ndim, const int64_t *shape, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? "x%" PRId64 : "%" PRId64, shape[i]);
    if (ndim == 0)
        snprintf(buf, len, "scalar");
}

/* Reads an .npy file a key names and checks it holds what the key needs: float data of the
 * given shape, or (labels) int64 class indices in [0, classes). */
static void check_npy(parse_ctx *c, entry *e, const char *path, int ndim, const int64_t *shape,
                      int64_t classes)
{
    npy_array a;
    char err[600], got[128], want[128];
    if (npy_read(path, &a, NULL, err, sizeof err)) {
        err_at(c, e, "%s", err);
        return;
    }
    bool same = a.ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = a.shape[i] == shape[i];
    shape_str(a.ndim, a.shape, got, sizeof got);
    shape_str(ndim, shape, want, sizeof want);
    if (!same) {
        err_at(c, e, "%s: shape %s, expected %s", path, got, want);
    } else if (classes > 0 && a.dt != DTYPE_INT64) {
        err_at(c, e, "%s: %s values, expected int64 class labels ('<i8')", path, dtype_name(a.dt));
    } else if (classes == 0 && a.dt == DTYPE_INT64) {
        err_at(c, e, "%s: int64 values, expected floats ('<f4', '<f2' or '<f8')", path);
    } else {
        for (int64_t i = 0; classes > 0 && i < a.numel; i++) {
            int64_t v = ((const int64_t *)a.data)[i];
            if (v < 0 || v >= classes) {
                err_at(c, e,
                       "%s: label %" PRId64 " at index %" PRId64 " is out of bounds for "
                       "%" PRId64 " classes",
                       path, v, i, classes);
                break;
            }
        }
    }
    npy_free(&a);
}

/* The .npy files of [init], input and target, against the shapes the model needs. */
static void check_files(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    if (!c->shapes_ok)
        return;
    for (int k = 0; k < cfg->n_inits; k++) {
        const init_spec *in = &cfg->inits[k];
        entry *e = find_entry(c, SEC_INIT, in->tensor);
        const char *dot = strrchr(in->tensor, '.');
        for (int i = 0; e && dot && i < cfg->n_layers; i++) {
            const layer_spec *l = &cfg->layers[i];
            if (strncmp(in->tensor, l->name, (size_t)(dot - in->tensor)) ||
                l->name[dot - in->tensor] != '\0')
                continue;
            int64_t w[4] = {l->out, l->in, l->kernel, l->kernel};
            if (strcmp(dot, ".bias") == 0)
                check_npy(c, e, in->path, 1, &l->out, 0);
            else
                check_npy(c, e, in->path, l->kind == LAYER_CONV2D ? 4 : 2, w, 0);
        }
    }
    int64_t shape[4] = {cfg->batch};
    entry *ie = find_entry(c, SEC_DATA, "input");
    if (cfg->input == INPUT_FILE && ie && !ie->failed) {
        memcpy(shape + 1, cfg->sample_shape, sizeof(int64_t) * (size_t)cfg->sample_ndim);
        check_npy(c, ie, cfg->input_path, cfg->sample_ndim + 1, shape, 0);
    }
    entry *te = find_entry(c, SEC_DATA, "target");
    const layer_spec *last = &cfg->layers[cfg->n_layers - 1];
    if (cfg->target == TARGET_FILE && te && !te->failed) {
        if (cfg->loss == LOSS_CROSS_ENTROPY) {
            check_npy(c, te, cfg->target_path, 1, &cfg->batch, last->out_shape[0]);
        } else {
            memcpy(shape + 1, last->out_shape, sizeof(int64_t) * (size_t)last->out_ndim);
            check_npy(c, te, cfg->target_path, last->out_ndim + 1, shape, 0);
        }
    }
}

/* The case's name when [case] has none: the file name without ".case". */
static void default_name(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    const char *base = strrchr(c->path, '/');
    base = base ? base + 1 : c->path;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".case") == 0)
        n -= 5;
    if (n < CASE_NAME_MAX) {
        memcpy(cfg->name, base, n);
        cfg->name[n] = '\0';
    }
    if (n >= CASE_NAME_MAX || !valid_case_name(cfg->name))
        report(c, 0, NULL,
               "the file name '%s' is not a case name ([A-Za-z0-9._-]+): set name "
               "in [case]",
               base);
}

static void cross_checks(parse_ctx *c)
{
    case_config *cfg = c->cfg;
    if (!c->sec_given[SEC_MODEL])
        report(c, 0, NULL, "missing [model] section");
    else if (!has_entries(c, SEC_MODEL))
        report(c, c->sec_line[SEC_MODEL], NULL, "[model] has no layers");
    if (!find_entry(c, SEC_DATA, "batch"))
        report(c, c->sec_line[SEC_DATA], NULL, "[data] batch is required");
    if (!find_entry(c, SEC_CASE, "name"))
        default_name(c);
    entry *be = find_entry(c, SEC_CASE, "baseline");
    if (be && !be->failed && strcmp(cfg->baseline, cfg->name) == 0)
        err_at(c, be, "baseline names this case itself");
    entry *mw = find_entry(c, SEC_PRECISION, "master_weights");
    if (cfg->master_weights && !dtype_is_half(cfg->params) &&
        !entry_failed(c, SEC_PRECISION, "params"))
        err_at(c, mw, "master_weights = yes needs params = float16 or bfloat16");
    walk_shapes(c);
    check_target(c);
    check_observe(c);
    check_files(c);
}

/* ---- entry points ---- */

static void set_defaults(case_config *cfg, const char *path, int n_sets)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->n_sets = n_sets;
    cfg->loss_in_autocast = true;
    cfg->init_scale = 65536.0;
    cfg->growth_factor = 2.0;
    cfg->backoff_factor = 0.5;
    cfg->growth_interval = 2000;
    cfg->optim = optim_default(OPTIM_SGD);
    cfg->steps = 1;
    if (strlen(path) >= CASE_PATH_MAX)
        return;
    strcpy(cfg->path, path);
    const char *slash = strrchr(path, '/');
    if (!slash)
        strcpy(cfg->dir, ".");
    else if (slash == path)
        strcpy(cfg->dir, "/");
    else
        memcpy(cfg->dir, path, (size_t)(slash - path));
}

int case_load(const char *path, const char *const *sets, int n_sets, case_config *cfg,
              err_list *errs)
{
    parse_ctx c = {.cfg = cfg, .path = path, .sets = sets, .n_sets = n_sets};
    set_defaults(cfg, path, n_sets);
    if (!cfg->path[0])
        report(&c, 0, NULL, "case file path too long (at most %d bytes)", CASE_PATH_MAX - 1);
    else if (read_lines(&c)) {
        for (int i = 0; i < n_sets; i++)
            apply_set(&c, sets[i]);
        parse_case_section(&c);
        parse_model_section(&c);
        parse_data_section(&c);
        parse_precision_section(&c);
        parse_scaler_section(&c);
        parse_train_section(&c);
        parse_init_section(&c);
        parse_expect_section(&c);
        cross_checks(&c);
    }
    if (c.n_errs > 0)
        qsort(c.errs, (size_t)c.n_errs, sizeof *c.errs, cmp_pending);
    for (int i = 0; i < c.n_errs; i++)
        err_list_push(errs, c.errs[i].msg);
    for (int i = 0; i < c.n_set_copies; i++)
        free(c.set_copies[i]);
    free(c.set_copies);
    free(c.entries);
    free(c.errs);
    free(c.text);
    return c.n_errs;
}

bool case_observes_step(const case_config *cfg, int64_t s)
{
    if (s < 0 || s >= cfg->steps)
        return false;
    if (s == cfg->steps - 1)
        return true;
    if (cfg->observe_every > 0)
        return s % cfg->observe_every == 0;
    for (int i = 0; i < cfg->n_observe_steps; i++)
        if (cfg->observe_steps[i] == s)
            return true;
    return false;
}

/* ---- JSON ---- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A string, or null when it is empty. */
static void json_text(FILE *f, const char *s)
{
    if (*s)
        json_string(f, s);
    else
        fputs("null", f);
}

/* The shortest form that reads back as v, with ".0" when it would look like an integer. */
static void json_real(FILE *f, double v)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
    if (!strpbrk(buf, ".e"))
        fputs(".0", f);
}

static void json_bool(FILE *f, bool b) { fputs(b ? "true" : "false", f); }

static void json_shape(FILE *f, int ndim, const int64_t *shape)
{
    fputc('[', f);
    for (int i = 0; i < ndim; i++)
        fprintf(f, "%s%" PRId64, i ? ", " : "", shape[i]);
    fputc(']', f);
}

static void json_layer(FILE *f, const layer_spec *l)
{
    fputs("    {\"name\": ", f);
    json_string(f, l->name);
    fprintf(f, ", \"kind\": \"%s\", \"line\": %d", layer_kinds[l->kind], l->line);
    if (l->kind == LAYER_LINEAR || l->kind == LAYER_CONV2D) {
        fprintf(f, ", \"in\": %" PRId64 ", \"out\": %" PRId64 ", \"bias\": ", l->in, l->out);
        json_bool(f, l->bias);
    }
    if (l->kind == LAYER_CONV2D)
        fprintf(f,
                ", \"kernel\": %" PRId64 ", \"stride\": %" PRId64 ", \"padding\": %" PRId64
                ", \"dilation\": %" PRId64,
                l->kernel, l->stride, l->padding, l->dilation);
    fputs(", \"out_shape\": ", f);
    json_shape(f, l->out_ndim, l->out_shape);
    fputc('}', f);
}

static void json_data(FILE *f, const case_config *cfg)
{
    const layer_spec *last = cfg->n_layers ? &cfg->layers[cfg->n_layers - 1] : NULL;
    fprintf(f, "  \"data\": {\"batch\": %" PRId64 ", \"shape\": ", cfg->batch);
    json_shape(f, cfg->sample_ndim, cfg->sample_shape);
    fprintf(f, ", \"input\": \"%s\", \"input_path\": ", input_names[cfg->input]);
    json_text(f, cfg->input == INPUT_FILE ? cfg->input_path : "");
    fprintf(f, ", \"input_dtype\": \"%s\", \"target\": \"%s\", \"target_path\": ",
            dtype_name(cfg->input_dtype), target_names[cfg->target]);
    json_text(f, cfg->target == TARGET_FILE ? cfg->target_path : "");
    if (cfg->target == TARGET_CLASSES && last && last->out_ndim == 1)
        fprintf(f, ", \"classes\": %" PRId64 "},\n", last->out_shape[0]);
    else
        fputs(", \"classes\": null},\n", f);
}

static void json_train(FILE *f, const case_config *cfg)
{
    fprintf(f, "  \"train\": {\"loss\": \"%s\", \"reduction\": \"%s\", \"optimizer\": ",
            loss_names[cfg->loss], cfg->loss_reduction_none ? "none" : "mean");
    optim_write_json(f, &cfg->optim, json_real);
    fprintf(f, ", \"schedule\": {\"kind\": \"%s\"", schedule_names[cfg->schedule]);
    if (cfg->schedule == SCHEDULE_COSINE) {
        fprintf(f, ", \"T_max\": %" PRId64 ", \"eta_min\": ", cfg->t_max);
        json_real(f, cfg->eta_min);
    }
    fprintf(f, "}, \"steps\": %" PRId64 ", \"seed\": %" PRIu64 "},\n", cfg->steps, cfg->seed);
}

static void json_init_expect(FILE *f, const case_config *cfg)
{
    fputs("  \"init\": [", f);
    for (int i = 0; i < cfg->n_inits; i++) {
        fputs(i ? ",\n    {\"tensor\": " : "\n    {\"tensor\": ", f);
        json_string(f, cfg->inits[i].tensor);
        fputs(", \"path\": ", f);
        json_string(f, cfg->inits[i].path);
        fprintf(f, ", \"line\": %d}", cfg->inits[i].line);
    }
    fputs("],\n  \"expect\": [", f);
    for (int i = 0; i < cfg->n_expects; i++) {
        const expect_spec *x = &cfg->expects[i];
        fputs(i ? ",\n    " : "\n    ", f);
        if (x->kind == EXPECT_DTYPE) {
            fputs("{\"kind\": \"dtype\", \"tensor\": ", f);
            json_string(f, x->tensor);
            fprintf(f, ", \"dtype\": \"%s\"", dtype_name(x->dt));
        } else {
            fputs("{\"kind\": \"error\", \"text\": ", f); /* null: `error = none` */
            json_text(f, x->text);
        }
        fprintf(f, ", \"line\": %d}", x->line);
    }
    fputs("],\n", f);
}

/* Write errors are not checked call by call: the stream's error flag, tested at the end,
 * records any of them. */
int case_write_json(const case_config *cfg, FILE *f)
{
    fputs("{\n  \"path\": ", f);
    json_string(f, cfg->path);
    fputs(",\n  \"dir\": ", f);
    json_string(f, cfg->dir);
    fputs(",\n  \"name\": ", f);
    json_string(f, cfg->name);
    fputs(",\n  \"description\": ", f);
    json_string(f, cfg->description);
    fputs(",\n  \"baseline\": ", f);
    json_text(f, cfg->baseline);
    fprintf(f, ",\n  \"observe\": {\"every\": %" PRId64 ", \"steps\": [", cfg->observe_every);
    for (int i = 0; i < cfg->n_observe_steps; i++)
        fprintf(f, "%s%" PRId64, i ? ", " : "", cfg->observe_steps[i]);
    fputs("]},\n  \"model\": [", f);
    for (int i = 0; i < cfg->n_layers; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_layer(f, &cfg->layers[i]);
    }
    fputs("],\n", f);
    json_data(f, cfg);
    fprintf(f,
            "  \"precision\": {\"params\": \"%s\", \"autocast\": \"%s\", "
            "\"loss_in_autocast\": ",
            dtype_name(cfg->params), cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off");
    json_bool(f, cfg->loss_in_autocast);
    fputs(", \"master_weights\": ", f);
    json_bool(f, cfg->master_weights);
    fputs("},\n  \"scaler\": {\"enabled\": ", f);
    json_bool(f, cfg->scaler);
    fputs(", \"init_scale\": ", f);
    json_real(f, cfg->init_scale);
    fputs(", \"growth_factor\": ", f);
    json_real(f, cfg->growth_factor);
    fputs(", \"backoff_factor\": ", f);
    json_real(f, cfg->backoff_factor);
    fprintf(f, ", \"growth_interval\": %" PRId64 "},\n", cfg->growth_interval);
    json_train(f, cfg);
    json_init_expect(f, cfg);
    fprintf(f, "  \"n_sets\": %d\n}\n", cfg->n_sets);
    return ferror(f) ? -1 : 0;
}
