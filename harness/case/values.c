/*
 * case/values.c: what the sections' keys are read with: words and names, the "did you
 * mean" hints, numbers, booleans, choices, dtypes and file paths, name=value options and
 * a kind's options (layers/layer.h). Each reports what it refuses on the entry.
 */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- words and names ---- */

bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f'; }

char *trim(char *s)
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
void squeeze_blanks(char *s)
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

int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* "a, b, c" (last_sep ", ") or "a, b or c" (last_sep " or "); the caller frees it. */
char *join_names(const char *const *names, int n, const char *last_sep)
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
const char *closest(const char *word, const char *const *names, int n)
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
char *hint(const char *word, const char *const *names, int n, const char *label)
{
    const char *near = closest(word, names, n);
    if (near)
        return xasprintf("did you mean '%s'?", near);
    char *list = join_names(names, n, ", ");
    char *h = xasprintf("%s: %s", label, list);
    free(list);
    return h;
}

bool valid_case_name(const char *s)
{
    size_t n = strspn(s, ALNUM "._-");
    return n > 0 && s[n] == '\0' && n < CASE_NAME_MAX && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

bool valid_layer_name(const char *s)
{
    size_t n = strspn(s, ALNUM "_");
    return n > 0 && s[n] == '\0' && n < LAYER_NAME_MAX && !isdigit((unsigned char)s[0]);
}

bool valid_tensor_name(const char *s)
{
    size_t n = strspn(s, ALNUM "_.@");
    return n > 0 && s[n] == '\0' && n < CASE_NAME_MAX;
}

/* false (after reporting on e) when the value has too many words; else free t->buf later. */
bool split_words(parse_ctx *c, entry *e, words *t)
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
bool parse_options(parse_ctx *c, entry *e, const words *t, int first, const char *owner,
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

/* ---- a kind's options ---- */

void kind_option_defaults(const kind_opt *opts, int n, void *base)
{
    for (int i = 0; i < n; i++) {
        char *field = (char *)base + opts[i].offset;
        switch (opts[i].type) {
        case KIND_OPT_INT:
            *(int64_t *)field = opts[i].def;
            break;
        case KIND_OPT_REAL:
            *(double *)field = opts[i].real_def;
            break;
        case KIND_OPT_BOOL:
            *(bool *)field = opts[i].def != 0;
            break;
        case KIND_OPT_CHOICE:
            *(int *)field = (int)opts[i].def;
            break;
        case KIND_OPT_DIMS:
            *(int64_t *)field = 0;
            break;
        case KIND_OPT_INTS:
            ((int_list *)field)->n = 0;
            break;
        case KIND_OPT_REFUSED:
            break;
        }
    }
}

bool kind_option_names(parse_ctx *c, entry *e, const words *t, int first, const char *owner,
                       const kind_opt *opts, int n, const char **vals)
{
    const char *names[LAYER_MAX_OPTS];
    for (int i = 0; i < n; i++)
        names[i] = opts[i].name;
    return parse_options(c, e, t, first, owner, names, n, vals);
}

static bool parse_dims(parse_ctx *c, entry *e, const char *s, const char *what, int64_t *out);
static bool parse_ints(parse_ctx *c, entry *e, const char *s, const char *what, int64_t min,
                       int_list *out);

bool kind_option_values(parse_ctx *c, entry *e, const char *owner, const kind_opt *opts, int n,
                        const char *const *vals, void *base)
{
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const kind_opt *o = &opts[i];
        char *field = (char *)base + o->offset;
        if (!vals[i]) {
            if (o->required) {
                err_at(c, e, "%s layer %s needs %s", owner, e->key, o->required);
                ok = false;
            }
            continue;
        }
        int k;
        switch (o->type) {
        case KIND_OPT_INT:
            ok = parse_int(c, e, vals[i], o->name, o->min, (int64_t *)field) && ok;
            break;
        case KIND_OPT_REAL:
            ok = parse_real(c, e, vals[i], o->name, o->range, (double *)field) && ok;
            break;
        case KIND_OPT_BOOL:
            ok = parse_bool(c, e, vals[i], o->name, (bool *)field) && ok;
            break;
        case KIND_OPT_CHOICE:
            k = parse_choice(c, e, vals[i], o->name, o->choices, o->n_choices);
            if (k >= 0)
                *(int *)field = k;
            ok = k >= 0 && ok;
            break;
        case KIND_OPT_DIMS:
            ok = parse_dims(c, e, vals[i], o->name, (int64_t *)field) && ok;
            break;
        case KIND_OPT_INTS:
            ok = parse_ints(c, e, vals[i], o->name, o->min, (int_list *)field) && ok;
            break;
        case KIND_OPT_REFUSED:
            err_at(c, e, "%s", o->refusal);
            ok = false;
            break;
        }
    }
    return ok;
}

/* `dim=-1`, `dim=1,2`: dims of the whole tensor into KIND_OPT_DIMS's mask; a dim given
 * twice is PyTorch's "dim 1 appears multiple times in the list of dims" */
static bool parse_dims(parse_ctx *c, entry *e, const char *s, const char *what, int64_t *out)
{
    int64_t mask = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long d = strtol(p, &end, 10);
        if (end == p || errno || d < -KIND_DIMS_MAX || d >= KIND_DIMS_MAX ||
            (*end && *end != ',')) {
            err_at(c, e,
                   "bad value '%s' for %s: expected a dim or dims D1,D2,... of the whole tensor "
                   "(0 the batch dim, negative dims count from the end)",
                   s, what);
            return false;
        }
        int64_t bit = (int64_t)1 << (d >= 0 ? d : KIND_DIMS_NEG - 1 - d);
        if (mask & bit) {
            err_at(c, e, "%s=%s: dim %ld appears multiple times in the list of dims", what, s, d);
            return false;
        }
        mask |= bit;
        if (!*end)
            break;
        p = end + 1;
    }
    *out = mask;
    return true;
}

/* `dims=0,2,1,3`, `sizes=-1,4,-1`: integers >= min into a list, in order, one per dim of
 * the whole tensor */
static bool parse_ints(parse_ctx *c, entry *e, const char *s, const char *what, int64_t min,
                       int_list *out)
{
    int_list l = {0, {0}};
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < min || (*end && *end != ',') ||
            l.n == LAYER_MAX_RANK + 1) {
            err_at(c, e,
                   "bad value '%s' for %s: expected integers V1,V2,... (at least %lld), one "
                   "per dim of the whole tensor (at most %d)",
                   s, what, (long long)min, LAYER_MAX_RANK + 1);
            return false;
        }
        l.v[l.n++] = v;
        if (!*end)
            break;
        p = end + 1;
    }
    *out = l;
    return true;
}

/* ---- numbers and values ---- */

/* 0, EINVAL (not a whole decimal integer) or ERANGE (beyond int64). */
int scan_i64(const char *s, int64_t *out)
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
bool parse_int(parse_ctx *c, entry *e, const char *s, const char *what, int64_t min, int64_t *out)
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

bool parse_real(parse_ctx *c, entry *e, const char *s, const char *what, real_range r, double *out)
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

bool parse_bool(parse_ctx *c, entry *e, const char *s, const char *what, bool *out)
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
int parse_choice(parse_ctx *c, entry *e, const char *s, const char *what, const char *const *names,
                 int n)
{
    int k = find_name(names, n, s);
    if (k < 0) {
        char *list = join_names(names, n, " or ");
        const char *near = closest(s, names, n);
        if (near)
            err_at(c, e, "bad value '%s' for %s: expected %s; did you mean '%s'?", s, what, list,
                   near);
        else
            err_at(c, e, "bad value '%s' for %s: expected %s", s, what, list);
        free(list);
    }
    return k;
}

/* float32, float16 or bfloat16 (a compute dtype); with `observed`, any dtype an observed
 * tensor has: int64 (token ids, labels) and the float8 quantized copies of [fp8] too */
bool parse_dtype(parse_ctx *c, entry *e, const char *what, bool observed, dtype *out)
{
    dtype dt;
    bool known = dtype_parse(e->value, &dt);
    if (!known && strcmp(e->value, "int64") == 0) {
        dt = DTYPE_INT64;
        known = true;
    }
    if (known && (observed || (dt != DTYPE_INT64 && !dtype_is_float8(dt)))) {
        *out = dt;
        return true;
    }
    if (known && dtype_is_float8(dt))
        err_at(c, e,
               "bad value '%s' for %s: expected float32, float16 or bfloat16 (%s is only "
               "the dtype of the quantized GEMM operands of [fp8]'s te.Linear layers: "
               "enable [fp8] for them)",
               e->value, what, dtype_name(dt));
    else
        err_at(c, e, "bad value '%s' for %s: expected float32, float16 or bfloat16%s", e->value,
               what, observed ? " (or int64, float8_e4m3fn or float8_e5m2)" : "");
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

bool parse_path(parse_ctx *c, entry *e, char *path) { return resolve_file(c, e, e->value, path); }

bool parse_path_word(parse_ctx *c, entry *e, const char *word, char *path)
{
    return resolve_file(c, e, word, path);
}

/* 1: e's value is "file PATH" and PATH (resolved into path) is a file; 0: not "file ...";
 * -1: an error was reported. */
int parse_file_value(parse_ctx *c, entry *e, char *path)
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
int parse_source(parse_ctx *c, entry *e, const char *const *names, int n, char *path)
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
