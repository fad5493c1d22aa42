/*
 * npy.c: the .npy reader and writer (see npy.h for what is accepted and written).
 *
 * File layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE for
 * 2.0 and 3.0), the header (a Python dict literal padded with spaces, ending in '\n'), then
 * the raw data. The header parser below accepts the subset of Python literal syntax that
 * such a dict needs (quoted strings without escapes, True/False, tuples of decimal ints,
 * whitespace between tokens, trailing commas) and checks every access against the end of
 * the header. float64 -> float32 is done with integer operations, like half.h, so it does
 * not depend on the floating-point environment.
 */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.c assumes a little-endian host");
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_ACCEPTED "accepted: '<f4', '<f2', '<f8', '<i8'"
#define NPY_MSG_MAX 512

/* The descrs read, by their part after the byte-order marker. */
static const struct {
    const char *code;
    dtype dt;         /* in memory */
    size_t file_size; /* per element in the file */
} npy_descrs[] = {
    {"f4", DTYPE_FLOAT32, 4},
    {"f2", DTYPE_FLOAT16, 2},
    {"f8", DTYPE_FLOAT32, 8},
    {"i8", DTYPE_INT64, 8},
};

typedef struct npy_header {
    int descr;               /* index into npy_descrs, -1 until seen */
    bool seen_fortran_order; /* it can only be False */
    int ndim;                /* -1 until seen */
    int64_t shape[NPY_MAX_DIMS];
} npy_header;

typedef struct npy_cursor {
    const char *start, *p, *end;
} npy_cursor;

__attribute__((format(printf, 3, 4))) static int npy_fail(char *err, int errlen, const char *fmt,
                                                          ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Copies s[0..n) into dst for a message: printable ASCII kept, anything else as '?',
 * cut to fit with "..." appended. */
static void npy_show(char *dst, size_t cap, const char *s, size_t n)
{
    size_t keep = n < cap - 1 ? n : cap - 4;
    for (size_t i = 0; i < keep; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (keep < n) {
        memcpy(dst + keep, "...", 3);
        keep += 3;
    }
    dst[keep] = '\0';
}

/* ---- header dict ---- */

static void npy_skip_ws(npy_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* "malformed header at byte 12: expected ':', found 'x'" */
static int npy_syntax(const npy_cursor *c, const char *expected, char *err, int errlen)
{
    char found[8];
    if (c->p == c->end)
        snprintf(found, sizeof found, "the end");
    else if (*c->p >= 0x20 && *c->p < 0x7f)
        snprintf(found, sizeof found, "'%c'", *c->p);
    else
        snprintf(found, sizeof found, "0x%02x", (unsigned)(unsigned char)*c->p);
    return npy_fail(err, errlen, "malformed header at byte %ld: expected %s, found %s",
                    (long)(c->p - c->start), expected, found);
}

/* Consumes ch after optional whitespace, or fails. */
static int npy_expect(npy_cursor *c, char ch, const char *expected, char *err, int errlen)
{
    npy_skip_ws(c);
    if (c->p == c->end || *c->p != ch)
        return npy_syntax(c, expected, err, errlen);
    c->p++;
    return 0;
}

/* A quoted string ('...' or "...", no escapes, on one line); sets *s, *n to its contents. */
static int npy_parse_string(npy_cursor *c, const char **s, size_t *n, char *err, int errlen)
{
    npy_skip_ws(c);
    if (c->p == c->end || (*c->p != '\'' && *c->p != '"'))
        return npy_syntax(c, "a quoted string", err, errlen);
    char q = *c->p++;
    const char *b = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || *c->p == '\n')
            return npy_syntax(c, "a plain string (no escapes or newlines)", err, errlen);
        c->p++;
    }
    if (c->p == c->end)
        return npy_syntax(c, "the closing quote", err, errlen);
    *s = b;
    *n = (size_t)(c->p - b);
    c->p++;
    return 0;
}

static bool npy_word_at(const npy_cursor *c, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    if ((size_t)(c->end - c->p) == n)
        return true;
    char next = c->p[n];
    return !(next == '_' || (next >= '0' && next <= '9') || (next >= 'a' && next <= 'z') ||
             (next >= 'A' && next <= 'Z'));
}

static int npy_parse_descr(npy_cursor *c, npy_header *h, char *err, int errlen)
{
    npy_skip_ws(c);
    if (c->p < c->end && *c->p == '[')
        return npy_fail(err, errlen,
                        "unsupported descr: a structured dtype (a list of fields); " NPY_ACCEPTED);
    const char *s;
    size_t n;
    if (npy_parse_string(c, &s, &n, err, errlen))
        return -1;
    if (n == 3 && (s[0] == '<' || s[0] == '=' || s[0] == '|')) {
        for (size_t i = 0; i < sizeof npy_descrs / sizeof npy_descrs[0]; i++) {
            if (memcmp(s + 1, npy_descrs[i].code, 2) == 0) {
                h->descr = (int)i;
                return 0;
            }
        }
    }
    char shown[24];
    npy_show(shown, sizeof shown, s, n);
    return npy_fail(err, errlen, "unsupported descr '%s'; " NPY_ACCEPTED, shown);
}

static int npy_parse_fortran_order(npy_cursor *c, npy_header *h, char *err, int errlen)
{
    npy_skip_ws(c);
    if (npy_word_at(c, "False")) {
        c->p += 5;
        h->seen_fortran_order = true;
        return 0;
    }
    if (npy_word_at(c, "True"))
        return npy_fail(err, errlen, "unsupported fortran_order True; accepted: False (C order)");
    return npy_syntax(c, "True or False", err, errlen);
}

/* One shape entry: decimal digits, at most INT64_MAX. */
static int npy_parse_dim(npy_cursor *c, int64_t *dim, char *err, int errlen)
{
    npy_skip_ws(c);
    if (c->p < c->end && *c->p == '-')
        return npy_fail(err, errlen, "negative shape entry at byte %ld", (long)(c->p - c->start));
    if (c->p == c->end || *c->p < '0' || *c->p > '9')
        return npy_syntax(c, "a shape entry (a non-negative integer)", err, errlen);
    const char *first = c->p;
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p - '0';
        if (v > (INT64_MAX - d) / 10)
            return npy_fail(err, errlen, "shape entry at byte %ld is larger than 2^63-1",
                            (long)(first - c->start));
        v = v * 10 + d;
        c->p++;
    }
    *dim = v;
    return 0;
}

/* A tuple: "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is an int in Python, not a tuple. */
static int npy_parse_shape(npy_cursor *c, npy_header *h, char *err, int errlen)
{
    if (npy_expect(c, '(', "'(' opening the shape tuple", err, errlen))
        return -1;
    int n = 0;
    npy_skip_ws(c);
    while (c->p == c->end || *c->p != ')') {
        if (n == NPY_MAX_DIMS)
            return npy_fail(err, errlen, "shape has more than %d dimensions", NPY_MAX_DIMS);
        if (npy_parse_dim(c, &h->shape[n], err, errlen))
            return -1;
        n++;
        npy_skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            npy_skip_ws(c);
        } else if (n == 1 || c->p == c->end || *c->p != ')') {
            return npy_syntax(c, n == 1 ? "',' (a 1-d shape is written (n,))" : "',' or ')'", err,
                              errlen);
        }
    }
    c->p++;
    h->ndim = n;
    return 0;
}

static int npy_parse_dict(npy_cursor *c, npy_header *h, char *err, int errlen)
{
    if (npy_expect(c, '{', "'{' opening the header dict", err, errlen))
        return -1;
    for (;;) {
        npy_skip_ws(c);
        if (c->p < c->end && *c->p == '}')
            break;
        const char *key;
        size_t n;
        if (npy_parse_string(c, &key, &n, err, errlen))
            return -1;
        if (npy_expect(c, ':', "':' after a key", err, errlen))
            return -1;
        bool seen;
        int rc;
        if (n == 5 && memcmp(key, "descr", 5) == 0) {
            seen = h->descr >= 0;
            rc = seen ? 0 : npy_parse_descr(c, h, err, errlen);
        } else if (n == 13 && memcmp(key, "fortran_order", 13) == 0) {
            seen = h->seen_fortran_order;
            rc = seen ? 0 : npy_parse_fortran_order(c, h, err, errlen);
        } else if (n == 5 && memcmp(key, "shape", 5) == 0) {
            seen = h->ndim >= 0;
            rc = seen ? 0 : npy_parse_shape(c, h, err, errlen);
        } else {
            char shown[24];
            npy_show(shown, sizeof shown, key, n);
            return npy_fail(err, errlen,
                            "unexpected key '%s' in header; the keys are 'descr', "
                            "'fortran_order', 'shape'",
                            shown);
        }
        if (seen) {
            char shown[24];
            npy_show(shown, sizeof shown, key, n);
            return npy_fail(err, errlen, "duplicate key '%s' in header", shown);
        }
        if (rc)
            return -1;
        npy_skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p == c->end || *c->p != '}')
            return npy_syntax(c, "',' or '}'", err, errlen);
    }
    c->p++;
    npy_skip_ws(c);
    if (c->p != c->end)
        return npy_syntax(c, "only padding after the header dict", err, errlen);
    const char *missing = h->descr < 0             ? "descr"
                          : !h->seen_fortran_order ? "fortran_order"
                          : h->ndim < 0            ? "shape"
                                                   : NULL;
    if (missing)
        return npy_fail(err, errlen, "header lacks key '%s'", missing);
    return 0;
}

/* The element count of a shape (entries >= 0), or -1 when its size in bytes at item_size
 * each exceeds INT64_MAX; zero entries are left out of that check, as numpy does. */
static int64_t npy_numel(int ndim, const int64_t *shape, int64_t item_size)
{
    int64_t bytes = item_size;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) {
            empty = true;
            continue;
        }
        if (bytes > INT64_MAX / shape[i])
            return -1;
        bytes *= shape[i];
    }
    return empty ? 0 : bytes / item_size;
}

/* ---- float64 -> float32 ---- */

/* The float32 bits nearest (ties to even) to the float64 with bits x; sets *inexact when the
 * value changed (NaN never counts). NaN stays NaN: quiet bit set, payload's top bits kept,
 * as x86 cvtsd2ss does. */
static uint32_t npy_f32_from_f64(uint64_t x, bool *inexact)
{
    uint32_t sign = (uint32_t)(x >> 32) & 0x80000000u;
    uint64_t ax = x & 0x7fffffffffffffffu;
    *inexact = false;
    if (ax > 0x7ff0000000000000u)
        return sign | 0x7fc00000u | (uint32_t)((ax >> 29) & 0x3fffffu);
    int e = (int)(ax >> 52); /* biased float64 exponent */
    uint64_t m = ax & 0xfffffffffffffu;
    if (e >= 1023 + 128) { /* >= 2^128, or inf */
        *inexact = ax != 0x7ff0000000000000u;
        return sign | 0x7f800000u;
    }
    if (e >= 1023 - 126) { /* float32 normal range: keep 23 mantissa bits, round at bit 29 */
        uint32_t r = ((uint32_t)(e - 1023 + 127) << 23) | (uint32_t)(m >> 29);
        uint32_t rem = (uint32_t)(m & 0x1fffffffu);
        *inexact = rem != 0;
        if (rem > 0x10000000u || (rem == 0x10000000u && (r & 1u)))
            r++; /* a carry out of the mantissa bumps the exponent, up to inf: right */
        return sign | r;
    }
    if (e < 1023 - 151) { /* < 2^-151 (zeros and float64 subnormals too): rounds to 0 */
        *inexact = ax != 0;
        return sign;
    }
    /* float32 subnormal: value = M * 2^(e-1075), in units of 2^-149 that is M >> (926 - e) */
    uint64_t mm = m | (1ull << 52);
    int shift = 926 - e; /* 30..54 */
    uint64_t q = mm >> shift;
    uint64_t rem = mm & ((1ull << shift) - 1u);
    uint64_t halfway = 1ull << (shift - 1);
    *inexact = rem != 0;
    if (rem > halfway || (rem == halfway && (q & 1u)))
        q++;
    return sign | (uint32_t)q;
}

/* round_tally for a float64 pre: the same classes, with float32's min normal. */
static void npy_tally_f8(round_counts *c, uint64_t pre, uint32_t post)
{
    uint64_t apre = pre & 0x7fffffffffffffffu;
    uint32_t apost = post & 0x7fffffffu;
    if (apost > 0x7f800000u) {
        c->nan++;
        return;
    }
    if (apost == 0) {
        c->zeros++;
        if (apre != 0) /* only a finite pre can round to 0 */
            c->underflow++;
        return;
    }
    float a = bits_float(apost);
    if (apost == 0x7f800000u && apre < 0x7ff0000000000000u)
        c->overflow++;
    if (a < dtype_min_normal(DTYPE_FLOAT32))
        c->subnormal++;
    if (a > c->amax)
        c->amax = a;
    if (a < c->amin_nonzero)
        c->amin_nonzero = a;
}

/* ---- reading ---- */

int npy_parse(const uint8_t *buf, size_t len, npy_array *out, round_counts *f8_counts, char *err,
              int errlen)
{
    memset(out, 0, sizeof *out);
    if (len < NPY_MAGIC_LEN || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return npy_fail(err, errlen,
                        "bad magic: not a .npy file (it does not start with "
                        "\\x93NUMPY)");
    if (len < NPY_MAGIC_LEN + 2)
        return npy_fail(err, errlen, "file ends inside the format version (%zu bytes)", len);
    int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return npy_fail(err, errlen,
                        "unsupported .npy format version %d.%d; accepted: 1.0, "
                        "2.0, 3.0",
                        major, minor);
    size_t len_size = major == 1 ? 2 : 4;
    size_t hdr_start = 8 + len_size;
    if (len < hdr_start)
        return npy_fail(err, errlen, "file ends inside the header length (%zu bytes)", len);
    size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    if (len_size == 4)
        hlen |= (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    if (hlen > len - hdr_start)
        return npy_fail(err, errlen,
                        "header length %zu runs past the end of the file (%zu "
                        "bytes follow the header length)",
                        hlen, len - hdr_start);

    npy_header h = {.descr = -1, .seen_fortran_order = false, .ndim = -1};
    const char *hs = (const char *)buf + hdr_start;
    npy_cursor c = {hs, hs, hs + hlen};
    if (npy_parse_dict(&c, &h, err, errlen))
        return -1;

    size_t file_size = npy_descrs[h.descr].file_size;
    int64_t numel = npy_numel(h.ndim, h.shape, (int64_t)file_size);
    if (numel < 0)
        return npy_fail(err, errlen, "shape's size in bytes overflows int64");
    uint64_t expected = (uint64_t)numel * file_size;
    uint64_t found = len - hdr_start - hlen;
    if (found < expected)
        return npy_fail(err, errlen, "truncated data: expected %llu bytes, found %llu",
                        (unsigned long long)expected, (unsigned long long)found);
    if (found > expected)
        return npy_fail(err, errlen,
                        "trailing bytes after the data: expected %llu bytes, "
                        "found %llu",
                        (unsigned long long)expected, (unsigned long long)found);

    dtype dt = npy_descrs[h.descr].dt;
    size_t out_bytes = (size_t)numel * dtype_size(dt);
    void *data = malloc(out_bytes ? out_bytes : 1);
    if (!data)
        return npy_fail(err, errlen, "out of memory for %zu bytes of data", out_bytes);
    const uint8_t *src = buf + hdr_start + hlen;
    int64_t inexact = 0;
    if (file_size == 8 && dt == DTYPE_FLOAT32) {
        round_counts counts;
        round_counts_init(&counts);
        uint32_t *dst = data;
        for (int64_t i = 0; i < numel; i++) {
            uint64_t pre;
            bool changed;
            memcpy(&pre, src + 8 * i, 8);
            dst[i] = npy_f32_from_f64(pre, &changed);
            inexact += changed;
            npy_tally_f8(&counts, pre, dst[i]);
        }
        if (f8_counts)
            round_counts_merge(f8_counts, &counts);
    } else {
        memcpy(data, src, out_bytes);
    }
    out->dt = dt;
    out->ndim = h.ndim;
    memcpy(out->shape, h.shape, sizeof h.shape);
    out->numel = numel;
    out->data = data;
    out->f8_inexact = inexact;
    return 0;
}

/* Reads the whole stream into a malloc'd buffer; on failure returns an errno value. */
static int npy_slurp(FILE *f, uint8_t **buf, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    if (!b)
        return ENOMEM;
    for (;;) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
        if (!nb) {
            free(b);
            return ENOMEM;
        }
        b = nb;
        cap *= 2;
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        free(b);
        return e;
    }
    *buf = b;
    *len = n;
    return 0;
}

int npy_read(const char *path, npy_array *out, round_counts *f8_counts, char *err, int errlen)
{
    memset(out, 0, sizeof *out);
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return npy_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0;
    errno = 0;
    int rc = npy_slurp(f, &buf, &len);
    errno = 0;
    if (fclose(f) != 0 && rc == 0) {
        rc = errno ? errno : EIO;
        free(buf);
    }
    if (rc)
        return npy_fail(err, errlen, "%s: cannot read: %s", path, strerror(rc));
    char msg[NPY_MSG_MAX];
    rc = npy_parse(buf, len, out, f8_counts, msg, sizeof msg);
    free(buf);
    if (rc)
        return npy_fail(err, errlen, "%s: %s", path, msg);
    return 0;
}

void npy_free(npy_array *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- writing ---- */

/* Formats the 1.0 preamble and header as numpy.save does; returns its length. */
static size_t npy_format_header(char *hdr, size_t cap, const char *descr, int ndim,
                                const int64_t *shape)
{
    char tuple[NPY_MAX_DIMS * 22 + 4];
    size_t t = 0;
    tuple[t++] = '(';
    for (int i = 0; i < ndim; i++)
        t += (size_t)snprintf(tuple + t, sizeof tuple - t, i ? ", %lld" : "%lld",
                              (long long)shape[i]);
    if (ndim == 1)
        tuple[t++] = ',';
    tuple[t++] = ')';
    tuple[t] = '\0';
    size_t n = NPY_MAGIC_LEN + 4;
    n += (size_t)snprintf(hdr + n, cap - n,
                          "{'descr': '%s', 'fortran_order': False, "
                          "'shape': %s, }",
                          descr, tuple);
    /* numpy also adds up to 20 spaces of room to grow shape[0]; within NPY_MAX_DIMS dims
     * and int64 sizes the header is too short for them ever to change the padded length */
    size_t pad = NPY_ALIGN - (n + 1) % NPY_ALIGN; /* 1..64, as numpy pads */
    memset(hdr + n, ' ', pad);
    n += pad;
    hdr[n++] = '\n';
    size_t hlen = n - (NPY_MAGIC_LEN + 4);
    memcpy(hdr, NPY_MAGIC "\x01\x00", NPY_MAGIC_LEN + 2);
    hdr[8] = (char)(hlen & 0xff);
    hdr[9] = (char)(hlen >> 8);
    return n;
}

int npy_write(const char *path, dtype dt, int ndim, const int64_t *shape, const void *data,
              char *err, int errlen)
{
    const char *descr = dt == DTYPE_FLOAT32   ? "<f4"
                        : dt == DTYPE_FLOAT16 ? "<f2"
                        : dt == DTYPE_INT64   ? "<i8"
                                              : NULL;
    if (!descr)
        return npy_fail(err, errlen,
                        "%s: cannot write dtype %s; accepted: float32, float16, "
                        "int64 (convert bfloat16 to float32 first)",
                        path, dtype_name(dt));
    if (ndim < 0 || ndim > NPY_MAX_DIMS)
        return npy_fail(err, errlen, "%s: ndim %d out of range 0..%d", path, ndim, NPY_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return npy_fail(err, errlen, "%s: negative shape entry %lld", path,
                            (long long)shape[i]);
    }
    size_t elem = dtype_size(dt);
    int64_t numel = npy_numel(ndim, shape, (int64_t)elem);
    if (numel < 0)
        return npy_fail(err, errlen, "%s: shape's size in bytes overflows int64", path);
    if ((uint64_t)numel > SIZE_MAX / elem)
        return npy_fail(err, errlen, "%s: data size overflows size_t", path);
    size_t bytes = (size_t)numel * elem;
    if (bytes && !data)
        return npy_fail(err, errlen, "%s: data is NULL for %lld elements", path, (long long)numel);

    char hdr[512];
    size_t hn = npy_format_header(hdr, sizeof hdr, descr, ndim, shape);
    errno = 0;
    FILE *f = fopen(path, "wb");
    if (!f)
        return npy_fail(err, errlen, "%s: cannot open for writing: %s", path, strerror(errno));
    int e = 0;
    errno = 0;
    if (fwrite(hdr, 1, hn, f) != hn || (bytes && fwrite(data, 1, bytes, f) != bytes))
        e = errno ? errno : EIO;
    errno = 0;
    if (fclose(f) != 0 && !e) /* after a failed write the write's error is the one reported */
        e = errno ? errno : EIO;
    if (e)
        return npy_fail(err, errlen, "%s: cannot write: %s", path, strerror(e));
    return 0;
}
