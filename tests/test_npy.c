/*
 * test_npy.c: Criterion tests of harness/core/npy.c, the .npy reader and writer.
 *
 * - npy_write -> npy_read round trips for float32, float16 and int64 in 0-d, 1-d, 4-d and
 *   empty shapes, each file compared byte for byte with what np.save wrote for the same
 *   array (tests/fixtures/npy/rt_*.npy), so numpy reads npy_write's files as its own.
 * - Fixtures written by numpy (tests/fixtures/npy/make_fixtures.py): '<f4', '<f2', '<f8'
 *   (rounding, overflow, underflow, with the float32 results and counts worked out below),
 *   '<i8', 2.0 and 3.0 headers, and files that must be refused, with their messages.
 * - npy_parse on headers built here (syntax variants, bad shapes, keys, versions), the
 *   float64 -> float32 conversion against the CPU's own on 65536 random doubles, and every
 *   truncation and many one-byte corruptions of every fixture (nothing may crash or read
 *   out of bounds: run under -fsanitize=address to check the latter).
 * Run from the repository root (fixture paths are relative to it); Python is not needed.
 */
#define _POSIX_C_SOURCE 200809L

#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/npy.h"

#define FIXTURES "tests/fixtures/npy/"
#define ERRLEN 512

/* ---- helpers ---- */

/* The whole file, malloc'd with exactly its length (so ASan sees any over-read). */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
    uint8_t *buf = malloc(n ? (size_t)n : 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
    cr_assert_eq(fclose(f), 0);
    *len = (size_t)n;
    return buf;
}

/* A fresh empty file under $TMPDIR (or /tmp); the caller removes it. */
static void tmp_path(char *path, size_t n)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/test_npy_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    cr_assert_neq(fd, -1, "mkstemp(%s): %s", path, strerror(errno));
    cr_assert_eq(close(fd), 0);
}

/* npy_parse on a malloc'd copy of buf[0..len) of exactly that size. */
static int parse_exact(const uint8_t *buf, size_t len, npy_array *a, round_counts *c, char *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    cr_assert_not_null(copy);
    if (len)
        memcpy(copy, buf, len);
    int rc = npy_parse(copy, len, a, c, err, ERRLEN);
    free(copy);
    return rc;
}

/* Builds a version-1.0 file from a header dict and data, and parses it. */
static int parse_v1(const char *dict, const void *data, size_t ndata, npy_array *a, char *err)
{
    size_t hlen = strlen(dict);
    size_t len = 10 + hlen + ndata;
    uint8_t *buf = malloc(len);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, dict, hlen);
    if (ndata)
        memcpy(buf + 10 + hlen, data, ndata);
    int rc = parse_exact(buf, len, a, NULL, err);
    free(buf);
    return rc;
}

static void assert_shape(const npy_array *a, int ndim, const int64_t *shape)
{
    cr_assert_eq(a->ndim, ndim, "ndim %d, expected %d", a->ndim, ndim);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        cr_assert_eq(a->shape[i], shape[i], "shape[%d] = %lld, expected %lld", i,
                     (long long)a->shape[i], (long long)shape[i]);
        numel *= shape[i];
    }
    cr_assert_eq(a->numel, numel);
    cr_assert_not_null(a->data);
}

static void assert_err_has(const char *err, const char *want)
{
    cr_assert_not_null(strstr(err, want), "message \"%s\" lacks \"%s\"", err, want);
}

/* ---- round trips, byte-identical to np.save ---- */

static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
} rt_shapes[] = {
    {"0d", 0, {0}},
    {"1d", 1, {3}},
    {"4d", 4, {2, 3, 1, 4}},
    {"empty", 3, {2, 0, 3}},
};

/* Element k of the round-trip arrays (make_fixtures.py's rt_array): k*0.5 - 3 for floats
 * (exact in float16), k*1000000007 - 5000000000 for int64. */
static void rt_fill(dtype dt, void *data, int64_t numel)
{
    for (int64_t k = 0; k < numel; k++) {
        if (dt == DTYPE_INT64)
            ((int64_t *)data)[k] = k * 1000000007 - 5000000000;
        else
            store_from_float(data, dt, k, (float)k * 0.5f - 3.0f);
    }
}

static void check_round_trips(dtype dt, const char *code)
{
    for (size_t s = 0; s < sizeof rt_shapes / sizeof rt_shapes[0]; s++) {
        int64_t numel = 1;
        for (int i = 0; i < rt_shapes[s].ndim; i++)
            numel *= rt_shapes[s].shape[i];
        size_t bytes = (size_t)numel * dtype_size(dt);
        void *data = malloc(bytes ? bytes : 1);
        cr_assert_not_null(data);
        rt_fill(dt, data, numel);

        char path[256], err[ERRLEN];
        tmp_path(path, sizeof path);
        cr_assert_eq(npy_write(path, dt, rt_shapes[s].ndim, rt_shapes[s].shape, data, err, ERRLEN),
                     0, "%s", err);
        npy_array a;
        cr_assert_eq(npy_read(path, &a, NULL, err, ERRLEN), 0, "%s", err);
        cr_assert_eq(a.dt, dt);
        assert_shape(&a, rt_shapes[s].ndim, rt_shapes[s].shape);
        cr_assert_eq(memcmp(a.data, data, bytes), 0, "%s %s: data differs", code,
                     rt_shapes[s].name);
        cr_assert_eq(a.f8_inexact, 0);
        npy_free(&a);

        size_t n_ours, n_numpy;
        uint8_t *ours = slurp(path, &n_ours);
        char fixture[256];
        snprintf(fixture, sizeof fixture, FIXTURES "rt_%s_%s.npy", code, rt_shapes[s].name);
        uint8_t *numpy = slurp(fixture, &n_numpy);
        cr_assert_eq((n_ours - bytes) % 64, 0, "data offset %zu", n_ours - bytes);
        cr_assert_eq(ours[n_ours - bytes - 1], '\n');
        cr_assert(n_ours == n_numpy && memcmp(ours, numpy, n_ours) == 0,
                  "%s differs from np.save's %s", path, fixture);
        free(ours);
        free(numpy);
        free(data);
        cr_assert_eq(remove(path), 0);
    }
}

Test(npy_write, float32_round_trips) { check_round_trips(DTYPE_FLOAT32, "f4"); }
Test(npy_write, float16_round_trips) { check_round_trips(DTYPE_FLOAT16, "f2"); }
Test(npy_write, int64_round_trips) { check_round_trips(DTYPE_INT64, "i8"); }

/* ---- fixtures numpy wrote ---- */

Test(npy_read, f4_special_values)
{
    static const uint32_t want[9] = {
        0x00000000, 0x80000000, 0x3FC00000, /* 0, -0, 1.5 */
        0xC0000000, 0x7F800000, 0xFF800000, /* -2, inf, -inf */
        0x7FC00000, 0x00000001, 0x7F7FFFFF, /* nan, 2^-149, FLT_MAX */
    };
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(npy_read(FIXTURES "f4_special.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32);
    assert_shape(&a, 2, (const int64_t[]){3, 3});
    cr_assert_eq(memcmp(a.data, want, sizeof want), 0);
    npy_free(&a);
    cr_assert_null(a.data);
    npy_free(&a); /* a second free is harmless */
}

Test(npy_read, f2_special_values)
{
    /* 1, -2.5, 65504, 2^-24, inf, nan, -0 as float16 bit patterns */
    static const uint16_t want[7] = {0x3C00, 0xC100, 0x7BFF, 0x0001, 0x7C00, 0x7E00, 0x8000};
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(npy_read(FIXTURES "f2_special.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT16);
    assert_shape(&a, 1, (const int64_t[]){7});
    cr_assert_eq(memcmp(a.data, want, sizeof want), 0);
    npy_free(&a);
}

/*
 * f8_rounding.npy, float64 -> float32 by hand (ulp of float32 at [1,2) is 2^-23; FLT_MAX is
 * 2^128 - 2^104, so 2^128 - 2^103 is the tie between it and 2^128, which rounds to the even
 * side, 2^128 = inf; float32's smallest subnormal is 2^-149 ~ 1.4013e-45):
 *   0  0.1                 -> 0x3DCCCCCD  0.100000001490116119384765625 (nearest; 0.1 is not exact)
 *   1  1 + 2^-24           -> 0x3F800000  1.0: halfway between 1 and 1 + 2^-23, to even
 *   2  1 + 3*2^-24         -> 0x3F800002  1 + 2^-22: halfway, mantissa 1 is odd, so up to 2
 *   3  1e39                -> 0x7F800000  inf: above 2^128 - 2^103 (overflow)
 *   4  -1e39               -> 0xFF800000  -inf (overflow)
 *   5  2^128 - 2^104       -> 0x7F7FFFFF  FLT_MAX = 3.4028234663852886e38, exact
 *   6  2^128 - 2^103       -> 0x7F800000  inf: the tie, FLT_MAX's mantissa is odd (overflow)
 *   7  2^128-2^103-2^75    -> 0x7F7FFFFF  FLT_MAX: one float64 ulp below the tie
 *   8  1e-46               -> 0x00000000  below 2^-150 ~ 7.006e-46, half the least subnormal
 *                                         (underflow)
 *   9  2^-150              -> 0x00000000  tie between 0 and 2^-149, to even 0 (underflow)
 *  10  1.5 * 2^-150        -> 0x00000001  0.75 of 2^-149 rounds to 2^-149 (subnormal)
 *  11  1e-40               -> 0x000116C2  1e-40 / 2^-149 = 71362.38 -> 71362 * 2^-149
 *                                         = 9.99994610111476e-41 (subnormal)
 *  12  -0.0                -> 0x80000000  exact zero, sign kept
 *  13  0.0                 -> 0x00000000
 *  14  nan                 -> 0x7FC00000
 *  15  inf                 -> 0x7F800000  exact (not an overflow: pre is not finite)
 *  16  -3 * 2^-149         -> 0x80000003  exact subnormal
 *  17  65504               -> 0x477FE000  exact
 *  18  -1e-46              -> 0x80000000  -0 (underflow)
 * Counts: zeros 5 (8, 9, 12, 13, 18), underflow 3 (8, 9, 18), subnormal 3 (10, 11, 16),
 * overflow 3 (3, 4, 6), nan 1, amax inf, amin_nonzero 2^-149; values changed 12
 * (0-4, 6-11, 18). make_fixtures.py checks these bits against numpy's own cast.
 */
Test(npy_read, f8_rounding_and_counts)
{
    static const uint32_t want[19] = {
        0x3DCCCCCD, 0x3F800000, 0x3F800002, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F800000,
        0x7F7FFFFF, 0x00000000, 0x00000000, 0x00000001, 0x000116C2, 0x80000000, 0x00000000,
        0x7FC00000, 0x7F800000, 0x80000003, 0x477FE000, 0x80000000,
    };
    npy_array a;
    char err[ERRLEN];
    round_counts c;
    round_counts_init(&c);
    cr_assert_eq(npy_read(FIXTURES "f8_rounding.npy", &a, &c, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32);
    assert_shape(&a, 1, (const int64_t[]){19});
    for (int i = 0; i < 19; i++)
        cr_assert_eq(float_bits(((float *)a.data)[i]), want[i],
                     "value %d: 0x%08X, expected "
                     "0x%08X",
                     i, float_bits(((float *)a.data)[i]), want[i]);
    cr_assert_eq(c.zeros, 5);
    cr_assert_eq(c.underflow, 3);
    cr_assert_eq(c.subnormal, 3);
    cr_assert_eq(c.overflow, 3);
    cr_assert_eq(c.nan, 1);
    cr_assert(isinf(c.amax));
    cr_assert_eq(float_bits(c.amin_nonzero), 0x00000001u);
    cr_assert_eq(a.f8_inexact, 12);
    npy_free(&a);

    /* counts accumulate across reads; NULL counts are allowed */
    cr_assert_eq(npy_read(FIXTURES "f8_rounding.npy", &a, &c, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(c.zeros, 10);
    cr_assert_eq(c.overflow, 6);
    npy_free(&a);
    cr_assert_eq(npy_read(FIXTURES "f8_rounding.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.f8_inexact, 12);
    npy_free(&a);
}

Test(npy_read, other_dtypes_leave_counts_alone)
{
    npy_array a;
    char err[ERRLEN];
    round_counts c;
    round_counts_init(&c);
    cr_assert_eq(npy_read(FIXTURES "f4_special.npy", &a, &c, err, ERRLEN), 0, "%s", err);
    npy_free(&a);
    cr_assert_eq(c.zeros + c.underflow + c.subnormal + c.overflow + c.nan, 0);
}

Test(npy_read, i8_labels)
{
    static const int64_t want[5] = {0, 9, -1, INT64_MAX, INT64_MIN};
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(npy_read(FIXTURES "i8_labels.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_INT64);
    assert_shape(&a, 1, (const int64_t[]){5});
    cr_assert_eq(memcmp(a.data, want, sizeof want), 0);
    npy_free(&a);
}

Test(npy_read, version_2_and_3_headers)
{
    static const float want2[4] = {1, 2, 3, 4};
    static const uint16_t want3[3] = {0x3800, 0xB400, 0x4800}; /* 0.5, -0.25, 8 */
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(npy_read(FIXTURES "v2_f4.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32);
    assert_shape(&a, 2, (const int64_t[]){2, 2});
    cr_assert_eq(memcmp(a.data, want2, sizeof want2), 0);
    npy_free(&a);
    cr_assert_eq(npy_read(FIXTURES "v3_f2.npy", &a, NULL, err, ERRLEN), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT16);
    assert_shape(&a, 1, (const int64_t[]){3});
    cr_assert_eq(memcmp(a.data, want3, sizeof want3), 0);
    npy_free(&a);
}

/* ---- refused fixtures ---- */

static const struct {
    const char *file;
    const char *message; /* after "<path>: " */
} refused[] = {
    {"refused_be_f4.npy", "unsupported descr '>f4'; accepted: '<f4', '<f2', '<f8', '<i8'"},
    {"refused_i4.npy", "unsupported descr '<i4'; accepted: '<f4', '<f2', '<f8', '<i8'"},
    {"refused_object.npy", "unsupported descr '|O'; accepted: '<f4', '<f2', '<f8', '<i8'"},
    {"refused_struct.npy", "unsupported descr: a structured dtype (a list of fields); "
                           "accepted: '<f4', '<f2', '<f8', '<i8'"},
    {"refused_fortran.npy", "unsupported fortran_order True; accepted: False (C order)"},
    {"refused_truncated.npy", "truncated data: expected 4096 bytes, found 100"},
    {"refused_trailing.npy", "trailing bytes after the data: expected 16 bytes, found 20"},
    {"refused_magic.npy", "bad magic: not a .npy file (it does not start with \\x93NUMPY)"},
    {"refused_hdr_past_eof.npy", "header length 28672 runs past the end of the file (134 "
                                 "bytes follow the header length)"},
};

Test(npy_read, refused_fixtures)
{
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char path[256], want[ERRLEN], err[ERRLEN];
        snprintf(path, sizeof path, FIXTURES "%s", refused[i].file);
        snprintf(want, sizeof want, "%s: %s", path, refused[i].message);
        npy_array a = {.numel = 99};
        round_counts c;
        round_counts_init(&c);
        cr_assert_neq(npy_read(path, &a, &c, err, ERRLEN), 0, "%s was accepted", path);
        cr_assert_str_eq(err, want);
        cr_assert_null(a.data);
        cr_assert_eq(a.numel, 0);
        cr_assert_eq(c.zeros + c.nan, 0);
    }
}

Test(npy_read, missing_file_and_directory)
{
    char err[ERRLEN], want[ERRLEN];
    npy_array a;
    cr_assert_neq(npy_read(FIXTURES "no_such.npy", &a, NULL, err, ERRLEN), 0);
    snprintf(want, sizeof want, FIXTURES "no_such.npy: cannot open: %s", strerror(ENOENT));
    cr_assert_str_eq(err, want);
    cr_assert_neq(npy_read(FIXTURES, &a, NULL, err, ERRLEN), 0);
    snprintf(want, sizeof want, FIXTURES ": cannot read: %s", strerror(EISDIR));
    cr_assert_str_eq(err, want);
    cr_assert_neq(npy_read(FIXTURES "no_such.npy", &a, NULL, NULL, 0), 0); /* no message */
}

Test(npy_read, short_error_buffer_is_truncated_not_overrun)
{
    char err[16];
    memset(err, 'x', sizeof err);
    npy_array a;
    cr_assert_neq(npy_read(FIXTURES "refused_i4.npy", &a, NULL, err, 8), 0);
    cr_assert_str_eq(err, "tests/f");
    cr_assert_eq(err[8], 'x');
}

/* ---- headers built here ---- */

Test(npy_parse, accepted_header_variants)
{
    static const struct {
        const char *dict;
        dtype dt;
        size_t file_size;
        int ndim;
        int64_t shape[3];
    } ok[] = {
        {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
         DTYPE_FLOAT32,
         4,
         1,
         {2}},
        {"{'shape': (1, 2, ), 'fortran_order': False, 'descr': '=f4'}\n",
         DTYPE_FLOAT32,
         4,
         2,
         {1, 2}},
        {"  {'descr':'|i8','fortran_order':False,'shape':(1,)}\r\n", DTYPE_INT64, 8, 1, {1}},
        {"{'descr': '<f2',\n 'fortran_order':\tFalse, 'shape': (4,),}   \n",
         DTYPE_FLOAT16,
         2,
         1,
         {4}},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2305843009213693951), }",
         DTYPE_FLOAT32,
         4,
         2,
         {0, 2305843009213693951}}, /* (2^61 - 1) * 4 bytes fits */
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (), }", DTYPE_FLOAT32, 8, 0, {0}},
    };
    static const uint8_t data[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}; /* 1.0 as <f8 */
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        npy_array a;
        char err[ERRLEN];
        int64_t numel = 1;
        for (int d = 0; d < ok[i].ndim; d++)
            numel = ok[i].shape[d] ? numel * ok[i].shape[d] : 0;
        cr_assert_eq(parse_v1(ok[i].dict, data, (size_t)numel * ok[i].file_size, &a, err), 0,
                     "header %zu: %s", i, err);
        cr_assert_eq(a.dt, ok[i].dt, "header %zu", i);
        cr_assert_eq(a.ndim, ok[i].ndim, "header %zu", i);
        for (int d = 0; d < ok[i].ndim; d++)
            cr_assert_eq(a.shape[d], ok[i].shape[d], "header %zu", i);
        cr_assert_eq(a.numel, numel, "header %zu", i);
        cr_assert_not_null(a.data);
        npy_free(&a);
    }
}

Test(npy_parse, refused_headers)
{
#define H(descr, shape) "{'descr': '" descr "', 'fortran_order': False, 'shape': " shape ", }"
    static const struct {
        const char *dict;
        const char *message;
    } bad[] = {
        {H("<f4", "(3)"), "malformed header at byte 52: expected ',' (a 1-d shape is written "
                          "(n,)), found ')'"},
        {H("<f4", "(-1,)"), "negative shape entry at byte 51"},
        {H("<f4", "(9223372036854775808,)"), "shape entry at byte 51 is larger than 2^63-1"},
        {H("<f4", "(4294967296, 4294967296)"), "shape's size in bytes overflows int64"},
        {H("<f4", "(2305843009213693952,)"), "shape's size in bytes overflows int64"},
        {H("<f8", "(0, 1152921504606846976)"), "shape's size in bytes overflows int64"},
        {H("<f4", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), "shape has more than 8 dimensions"},
        {H("<f4", "(1,,)"), "malformed header at byte 53: expected a shape entry (a "
                            "non-negative integer), found ','"},
        {H("<f4", "(1 2)"), "malformed header at byte 53: expected ',' (a 1-d shape is "
                            "written (n,)), found '2'"},
        {H("<f4", "[1]"), "malformed header at byte 50: expected '(' opening the shape "
                          "tuple, found '['"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,",
         "malformed header at byte 53: expected a shape entry (a non-negative integer), found "
         "the end"},
        {H("f4", "(1,)"), "unsupported descr 'f4'; accepted: '<f4', '<f2', '<f8', '<i8'"},
        {H(">i8", "(1,)"), "unsupported descr '>i8'; accepted: '<f4', '<f2', '<f8', '<i8'"},
        {H("<f4\x01\x02", "(1,)"), "unsupported descr '<f4?\?'; accepted:"},
        {H("<f\\4", "(1,)"), "expected a plain string (no escapes or newlines)"},
        {"{'descr': '<f4', 'shape': (1,)}", "header lacks key 'fortran_order'"},
        {"{'fortran_order': False, 'shape': (1,)}", "header lacks key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False}", "header lacks key 'shape'"},
        {"{}", "header lacks key 'descr'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
         "duplicate key 'descr' in header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
         "unexpected key 'extra' in header; the keys are 'descr', 'fortran_order', 'shape'"},
        {"{'a_very_long_key_that_goes_on_and_on': 1}", "unexpected key 'a_very_long_key_that...'"},
        {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}",
         "expected True or False, found 'F'"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "expected True or False"},
        {"{'descr': '<f4",
         "malformed header at byte 14: expected the closing quote, found the end"},
        {"{'descr' '<f4'}", "expected ':' after a key, found '''"},
        {"{'descr': '<f4' 'shape': (1,)}", "expected ',' or '}', found '''"},
        {"{descr: '<f4'}", "malformed header at byte 1: expected a quoted string, found 'd'"},
        {H("<f4", "(1,)") " x", "expected only padding after the header dict, found 'x'"},
        {"['descr']", "malformed header at byte 0: expected '{' opening the header dict"},
        {"", "malformed header at byte 0: expected '{' opening the header dict, found the end"},
        {"{'descr': '<f4', ,}", "expected a quoted string, found ','"},
    };
#undef H
    static const uint8_t data[4] = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        npy_array a;
        char err[ERRLEN];
        cr_assert_neq(parse_v1(bad[i].dict, data, sizeof data, &a, err), 0, "header %zu accepted",
                      i);
        assert_err_has(err, bad[i].message);
        cr_assert_null(a.data);
    }
}

Test(npy_parse, refuses_nul_after_header_dict)
{
    static const char hdr[] = "\x93NUMPY\x01\x00\x3d\x00"
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\0"
                              "\0\0\x80\x3f";
    npy_array a;
    char err[ERRLEN];
    cr_assert_neq(parse_exact((const uint8_t *)hdr, sizeof hdr - 1, &a, NULL, err), 0);
    assert_err_has(err, "expected only padding after the header dict, found 0x00");
}

Test(npy_parse, preamble_errors)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *message;
    } bad[] = {
        {"", 0, "bad magic"},
        {"\x93NUMP", 5, "bad magic"},
        {"\x93NUMPY\x01", 7, "file ends inside the format version (7 bytes)"},
        {"\x93NUMPY\x01\x00\x00", 9, "file ends inside the header length (9 bytes)"},
        {"\x93NUMPY\x02\x00\x00\x00\x00", 11, "file ends inside the header length (11 bytes)"},
        {"\x93NUMPY\x04\x00\x00\x00", 10,
         "unsupported .npy format version 4.0; accepted: "
         "1.0, 2.0, 3.0"},
        {"\x93NUMPY\x01\x01\x00\x00", 10, "unsupported .npy format version 1.1"},
        {"\x93NUMPY\x00\x00\x00\x00", 10, "unsupported .npy format version 0.0"},
        {"\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14,
         "header length 4294967295 runs past the end of the file (2 bytes follow"},
        {"\x93NUMPY\x01\x00\x03\x00{}", 12,
         "header length 3 runs past the end of the file "
         "(2 bytes follow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        npy_array a;
        char err[ERRLEN];
        cr_assert_neq(parse_exact((const uint8_t *)bad[i].bytes, bad[i].len, &a, NULL, err), 0,
                      "case %zu accepted", i);
        assert_err_has(err, bad[i].message);
    }
}

/* ---- float64 -> float32 against the CPU's conversion (default rounding, no FTZ) ---- */

static uint64_t xorshift64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

Test(npy_parse, f8_conversion_matches_the_cpu)
{
    enum { n = 65536 };
    static const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (65536,), }";
    double *pre = malloc(n * sizeof *pre);
    cr_assert_not_null(pre);
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < n; i++) {
        uint64_t r = xorshift64(&s);
        uint64_t bits;
        if (i % 4 == 0) { /* any bit pattern */
            bits = r;
        } else { /* exponents around float32's range, some mantissas on or near ties */
            uint64_t e = 1023 - 160 + (r >> 55) % 300;
            uint64_t m = xorshift64(&s) & 0xfffffffffffffu;
            if (i % 4 == 2)
                m = (m & ~0x3fffffffull) | (r & 1 ? 0x10000000u : 0x0fffffffu);
            bits = (r & 0x8000000000000000u) | e << 52 | m;
        }
        memcpy(&pre[i], &bits, 8);
    }
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(parse_v1(dict, pre, n * sizeof *pre, &a, err), 0, "%s", err);
    int64_t inexact = 0;
    for (int i = 0; i < n; i++) {
        float post = (float)pre[i];
        cr_assert_eq(float_bits(((float *)a.data)[i]), float_bits(post), "%a -> 0x%08X, cpu 0x%08X",
                     pre[i], float_bits(((float *)a.data)[i]), float_bits(post));
        inexact += !isnan(pre[i]) && (double)post != pre[i];
    }
    cr_assert_eq(a.f8_inexact, inexact);
    npy_free(&a);
    free(pre);
}

Test(npy_parse, f8_counts_match_round_tally)
{
    enum { n = 4096 };
    static const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (4096,), }";
    double pre[n];
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        uint64_t r = xorshift64(&s);
        uint64_t bits = (r & 0x8000000000000000u) | (1023 - 200 + (r >> 52) % 420) << 52 |
                        (xorshift64(&s) & 0xfffffffffffffu);
        if (i % 97 == 0)
            bits = r | 0x7ff0000000000000u; /* inf or NaN */
        memcpy(&pre[i], &bits, 8);
    }
    round_counts got, want;
    round_counts_init(&got);
    round_counts_init(&want);
    for (int i = 0; i < n; i++) {
        float post = (float)pre[i];
        /* a float pre that round_tally classifies as the double: 0, finite non-zero, inf */
        float pre_class = pre[i] == 0     ? 0.0f
                          : isinf(pre[i]) ? INFINITY
                          : isnan(pre[i]) ? NAN
                                          : 1.0f;
        round_tally(&want, pre_class, post, dtype_min_normal(DTYPE_FLOAT32));
    }
    size_t hlen = strlen(dict);
    uint8_t *buf = malloc(10 + hlen + sizeof pre);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)hlen;
    buf[9] = 0;
    memcpy(buf + 10, dict, hlen);
    memcpy(buf + 10 + hlen, pre, sizeof pre);
    npy_array a;
    char err[ERRLEN];
    cr_assert_eq(npy_parse(buf, 10 + hlen + sizeof pre, &a, &got, err, ERRLEN), 0, "%s", err);
    free(buf);
    npy_free(&a);
    cr_assert_eq(got.zeros, want.zeros);
    cr_assert_eq(got.underflow, want.underflow);
    cr_assert_eq(got.subnormal, want.subnormal);
    cr_assert_eq(got.overflow, want.overflow);
    cr_assert_eq(got.nan, want.nan);
    cr_assert_eq(float_bits(got.amax), float_bits(want.amax));
    cr_assert_eq(float_bits(got.amin_nonzero), float_bits(want.amin_nonzero));
    cr_assert_gt(want.underflow, 0);
    cr_assert_gt(want.overflow, 0);
    cr_assert_gt(want.subnormal, 0);
    cr_assert_gt(want.nan, 0);
}

/* ---- truncations and corruptions of every fixture ---- */

static const char *const all_fixtures[] = {
    "f2_special.npy",       "f4_special.npy",      "f8_rounding.npy",
    "i8_labels.npy",        "v2_f4.npy",           "v3_f2.npy",
    "rt_f4_0d.npy",         "rt_f4_1d.npy",        "rt_f4_4d.npy",
    "rt_f4_empty.npy",      "rt_f2_0d.npy",        "rt_f2_1d.npy",
    "rt_f2_4d.npy",         "rt_f2_empty.npy",     "rt_i8_0d.npy",
    "rt_i8_1d.npy",         "rt_i8_4d.npy",        "rt_i8_empty.npy",
    "refused_be_f4.npy",    "refused_i4.npy",      "refused_object.npy",
    "refused_struct.npy",   "refused_fortran.npy", "refused_truncated.npy",
    "refused_trailing.npy", "refused_magic.npy",   "refused_hdr_past_eof.npy",
};

Test(npy_parse, survives_truncation_and_corruption)
{
    static const uint8_t values[] = {0x00, 0xff, 0x80, ' ', '\n', '(', ')', ',', '\'', '"',
                                     '{',  '}',  ':',  '0', '9',  '-', 'L', '[', '\\', '>'};
    for (size_t f = 0; f < sizeof all_fixtures / sizeof all_fixtures[0]; f++) {
        char path[256], err[ERRLEN];
        snprintf(path, sizeof path, FIXTURES "%s", all_fixtures[f]);
        size_t len;
        uint8_t *buf = slurp(path, &len);
        npy_array a;
        int whole = parse_exact(buf, len, &a, NULL, err);
        npy_free(&a);
        for (size_t cut = 0; cut < len; cut++) { /* a prefix of a valid file is not valid */
            int rc = parse_exact(buf, cut, &a, NULL, err);
            cr_assert(whole != 0 || rc != 0, "%s cut to %zu accepted", path, cut);
            npy_free(&a);
        }
        size_t hdr_end = len < 160 ? len : 160;
        for (size_t i = 0; i < hdr_end; i++) {
            uint8_t orig = buf[i];
            for (size_t v = 0; v < sizeof values; v++) {
                buf[i] = values[v];
                round_counts c;
                round_counts_init(&c);
                if (parse_exact(buf, len, &a, &c, err) == 0) {
                    cr_assert_leq((uint64_t)a.numel * dtype_size(a.dt), len);
                    npy_free(&a);
                } else {
                    cr_assert_null(a.data);
                    cr_assert_gt(strlen(err), 0);
                }
            }
            buf[i] = orig;
        }
        cr_assert_eq(parse_exact(buf, len, &a, NULL, err), whole, "%s", path);
        npy_free(&a);
        free(buf);
    }
}

/* ---- npy_write errors ---- */

Test(npy_write, refuses_bad_arguments)
{
    static const float one = 1.0f;
    char err[ERRLEN];
    const int64_t two = 2, neg = -1, big[2] = {4294967296, 4294967296};
    const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    cr_assert_neq(npy_write("x.npy", DTYPE_BFLOAT16, 1, &two, &one, err, ERRLEN), 0);
    cr_assert_str_eq(err, "x.npy: cannot write dtype bfloat16; accepted: float32, float16, "
                          "int64 (convert bfloat16 to float32 first)");
    cr_assert_neq(npy_write("x.npy", DTYPE_FLOAT32, 9, nine, &one, err, ERRLEN), 0);
    cr_assert_str_eq(err, "x.npy: ndim 9 out of range 0..8");
    cr_assert_neq(npy_write("x.npy", DTYPE_FLOAT32, -1, NULL, &one, err, ERRLEN), 0);
    cr_assert_neq(npy_write("x.npy", DTYPE_FLOAT32, 1, &neg, &one, err, ERRLEN), 0);
    cr_assert_str_eq(err, "x.npy: negative shape entry -1");
    cr_assert_neq(npy_write("x.npy", DTYPE_FLOAT32, 2, big, &one, err, ERRLEN), 0);
    cr_assert_str_eq(err, "x.npy: shape's size in bytes overflows int64");
    cr_assert_neq(npy_write("x.npy", DTYPE_FLOAT32, 1, &two, NULL, err, ERRLEN), 0);
    cr_assert_str_eq(err, "x.npy: data is NULL for 2 elements");
    cr_assert_eq(access("x.npy", F_OK), -1, "a refused write created x.npy");
}

Test(npy_write, reports_libc_errors)
{
    static const float data[2] = {1, 2};
    const int64_t two = 2;
    char err[ERRLEN], want[ERRLEN];
    cr_assert_neq(
        npy_write("/nonexistent_dir_for_test_npy/x.npy", DTYPE_FLOAT32, 1, &two, data, err, ERRLEN),
        0);
    snprintf(want, sizeof want, "/nonexistent_dir_for_test_npy/x.npy: cannot open for writing: %s",
             strerror(ENOENT));
    cr_assert_str_eq(err, want);
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no writable /dev/full");
    cr_assert_neq(npy_write("/dev/full", DTYPE_FLOAT32, 1, &two, data, err, ERRLEN), 0);
    snprintf(want, sizeof want, "/dev/full: cannot write: %s", strerror(ENOSPC));
    cr_assert_str_eq(err, want);
}
