/*
 * case/read.c: a case file read whole, checked to be text and cut into entries (section,
 * key, value, line); section headers; --set overrides, which replace or add entries.
 */
#include "parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const section_names[SEC_COUNT] = {"case",   "model", "data", "precision",
                                              "scaler", "train", "init", "expect",
                                              "distributed", "fp8"};

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

entry *find_entry(parse_ctx *c, int sec, const char *key)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == sec && strcmp(c->entries[i].key, key) == 0)
            return &c->entries[i];
    return NULL;
}

bool has_entries(parse_ctx *c, int sec)
{
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].sec == sec)
            return true;
    return false;
}

bool entry_failed(parse_ctx *c, int sec, const char *key)
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
bool read_lines(parse_ctx *c)
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
void apply_set(parse_ctx *c, const char *set)
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
