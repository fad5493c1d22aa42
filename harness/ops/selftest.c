/*
 * selftest.c: every op of the backend table on a reference backend and a backend under
 * test, with identical inputs, outputs and counts compared (see selftest.h for the rules).
 * Each side has its own tensor pool and memory account; inputs are generated once on the
 * host, rounded into their dtype and uploaded to both sides.
 */
#include "selftest.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "broadcast.h"

#define REL_TOL 1e-5 /* relative tolerance of summation-order ops */
#define ABS_TOL 1e-6 /* times the largest finite |ref| of the tensor */

typedef enum cmp_mode { EXACT, CLOSE } cmp_mode;

typedef struct side {
    backend *be;
    tensor_pool pool;
    mem_account account;
    mem_account *saved_account;
} side;

typedef struct selftest {
    side s[2]; /* 0: reference, 1: under test */
    rng g;
    FILE *out;
    int passed, failed;
    char err[512];    /* why the current check could not run */
    char detail[512]; /* what the current check found different */
} selftest;

typedef struct pair {
    tensor *t[2];
} pair;

static const dtype float_dtypes[3] = {DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16};

static const char *side_name(int i) { return i ? "dut" : "ref"; }

/* first difference found in a check, kept for its report line */
static void differ(selftest *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void differ(selftest *c, const char *fmt, ...)
{
    if (c->detail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

static void setup_failed(selftest *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void setup_failed(selftest *c, const char *fmt, ...)
{
    if (c->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

/* Prints the check's line and frees its tensors. */
static void report(selftest *c, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(selftest *c, const char *op, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    for (int i = 0; i < 2; i++) { /* an op frees its scratch before it returns */
        mem_account *a = &c->s[i].account;
        if (a->current[MEM_WORKSPACE])
            differ(c, "%s: %lld bytes of workspace still counted after the op", side_name(i),
                   (long long)a->current[MEM_WORKSPACE]);
        a->current[MEM_WORKSPACE] = 0;
    }
    const char *why = c->err[0] ? c->err : c->detail;
    if (why[0]) {
        fprintf(c->out, "FAIL %s %s (%s)\n", op, what, why);
        c->failed++;
    } else {
        fprintf(c->out, "PASS %s %s\n", op, what);
        c->passed++;
    }
    fflush(c->out);
    c->err[0] = c->detail[0] = '\0';
    for (int i = 0; i < 2; i++)
        tensor_pool_clear(&c->s[i].pool);
}

/* ---- inputs ---- */
typedef enum gen_kind {
    GEN_NORMAL, /* normal * scale */
    GEN_WIDE,   /* magnitudes 2^-30..2^20, and specials: zeros, infs, NaN, range edges */
} gen_kind;

static float *gen(selftest *c, int64_t n, gen_kind kind, float scale)
{
    static const float specials[] = {
        0.0f,
        -0.0f,
        INFINITY,
        -INFINITY,
        NAN,
        FORMAT_FLOAT16_LARGEST,
        65520.0f, /* float16's largest plus half an ulp: the first value that overflows */
        -65536.0f,
        1e-8f,
        FORMAT_FLOAT16_SMALLEST_SUBNORMAL,
        FORMAT_FLOAT16_SMALLEST_SUBNORMAL / 2, /* a tie to zero */
        FORMAT_FLOAT16_SMALLEST_NORMAL,
        1e-40f,
        FORMAT_FLOAT32_LARGEST,
        3.3961775292304957e38f, /* bfloat16's largest plus half an ulp: overflows */
        1.0f,
    };
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!v) {
        setup_failed(c, "out of host memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (kind == GEN_NORMAL) {
            v[i] = (float)rng_normal(&c->g) * scale;
        } else if (rng_uniform(&c->g) < 0.1) {
            v[i] = specials[rng_below(&c->g, (int64_t)(sizeof specials / sizeof specials[0]))];
        } else {
            int e = (int)rng_below(&c->g, 51) - 30;
            v[i] = (float)ldexp(rng_normal(&c->g), e);
        }
    }
    return v;
}

/* rounds v into both tensors' dtype and uploads it */
static void upload_pair(selftest *c, pair p, const float *v)
{
    if (c->err[0] || !v)
        return;
    const tensor *t = p.t[0];
    size_t bytes = (size_t)tensor_bytes(t);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) {
        setup_failed(c, "out of host memory");
        return;
    }
    for (int64_t i = 0; i < t->numel; i++)
        store_from_float(host, t->dtype, i, v[i]);
    for (int i = 0; i < 2; i++)
        if (bytes)
            c->s[i].be->upload(c->s[i].be, p.t[i]->data, host, (int64_t)bytes);
    free(host);
}

/* a tensor on both sides; holds v (rounded into dt) when v is not NULL */
static pair make(selftest *c, const char *name, dtype dt, int ndim, const int64_t *shape,
                 const float *v)
{
    pair p = {{NULL, NULL}};
    if (c->err[0])
        return p;
    for (int i = 0; i < 2; i++) {
        char err[512];
        p.t[i] = tensor_new(&c->s[i].pool, name, dt, ndim, shape, MEM_ACTIVATIONS, err, sizeof err);
        if (!p.t[i]) {
            setup_failed(c, "%s: %s", side_name(i), err);
            p.t[0] = p.t[1] = NULL;
            return p;
        }
    }
    if (v)
        upload_pair(c, p, v);
    return p;
}

/* a tensor of random values of the given kind */
static pair make_random(selftest *c, const char *name, dtype dt, int ndim, const int64_t *shape,
                        gen_kind kind, float scale)
{
    float *v = gen(c, shape_numel(ndim, shape), kind, scale);
    pair p = make(c, name, dt, ndim, shape, v);
    free(v);
    return p;
}

/* int64 class labels in [0, classes) */
static pair make_target(selftest *c, int64_t rows, int64_t classes)
{
    pair p = make(c, "target", DTYPE_INT64, 1, &rows, NULL);
    int64_t *labels = malloc(sizeof(int64_t) * (size_t)rows);
    if (!labels)
        setup_failed(c, "out of host memory");
    if (c->err[0]) {
        free(labels);
        return p;
    }
    for (int64_t r = 0; r < rows; r++)
        labels[r] = rng_below(&c->g, classes);
    for (int i = 0; i < 2; i++)
        c->s[i].be->upload(c->s[i].be, p.t[i]->data, labels, (int64_t)sizeof(int64_t) * rows);
    free(labels);
    return p;
}

/* ---- comparison ---- */
/* the stored bits of element i (the formats of format.h's table are 32, 16 or 8 bits wide, or
 * 4 stored a byte a value) */
static uint32_t elem_bits(const void *buf, dtype dt, int64_t i)
{
    int bits = format_of(dt)->bits;
    if (bits == 32)
        return ((const uint32_t *)buf)[i];
    if (bits <= 8)
        return ((const uint8_t *)buf)[i];
    return ((const uint16_t *)buf)[i];
}

/* NaN: the magnitude's pattern above +inf's (the IEEE formats of the table), or the one NaN
 * pattern of a format without infinities (float8_e4m3fn's S.1111.111); none in float4_e2m1fn */
static bool is_nan_bits(uint32_t b, dtype dt)
{
    const format_info *f = format_of(dt);
    if (f->nan == FORMAT_NAN_NONE)
        return false;
    if (!f->has_inf)
        return (b & f->magnitude_mask) == f->nan_pattern;
    return (b & f->magnitude_mask) > f->inf_pattern;
}

/* position of a non-NaN value on the line of representable values of dt */
static int64_t ordinal(uint32_t b, dtype dt)
{
    uint32_t mask = format_of(dt)->magnitude_mask;
    int64_t mag = (int64_t)(b & mask);
    return (b & ~mask) ? -mag : mag;
}

/* the element rule of selftest.h for one pair of stored values */
static bool values_agree(uint32_t a, uint32_t b, dtype dt, cmp_mode mode, double atol)
{
    bool na = is_nan_bits(a, dt), nb = is_nan_bits(b, dt);
    if (a == b || (na && nb))
        return true;
    if (mode == EXACT || na || nb)
        return false;
    if (llabs(ordinal(a, dt) - ordinal(b, dt)) <= 1)
        return true;
    double fa = float_from_pattern(a, dt), fb = float_from_pattern(b, dt);
    if (!isfinite(fa) || !isfinite(fb))
        return false;
    return fabs(fa - fb) <= REL_TOL * fmax(fabs(fa), fabs(fb)) + atol;
}

/* the bits of v, a value representable in dt, as a tensor of dt stores it */
static uint32_t dtype_bits(float v, dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return float_bits(v);
    case DTYPE_FLOAT16:
        return half_from_float(v);
    case DTYPE_BFLOAT16:
        return bf16_from_float(v);
    case DTYPE_FLOAT8_E4M3FN:
        return e4m3fn_from_float(v);
    case DTYPE_FLOAT8_E5M2:
        return e5m2_from_float(v);
    case DTYPE_FLOAT4_E2M1FN:
        return e2m1_from_float(v);
    case DTYPE_FLOAT8_E8M0FNU:
        return e8m0_from_float(v);
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    not_a_format("selftest dtype_bits", dt);
    return 0;
}

static void *download(selftest *c, int i, const tensor *t)
{
    size_t bytes = (size_t)tensor_bytes(t);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) {
        setup_failed(c, "out of host memory");
        return NULL;
    }
    if (bytes)
        c->s[i].be->download(c->s[i].be, host, t->data, (int64_t)bytes);
    return host;
}

static void compare_stats(selftest *c, const char *what, const round_stats *r, const round_stats *d,
                          dtype dt, cmp_mode mode, int64_t ndiff, double atol)
{
    if (r->numel != d->numel) {
        differ(c, "%s: counted %lld elements vs %lld", what, (long long)r->numel,
               (long long)d->numel);
        return;
    }
    int64_t slack = mode == EXACT ? 0 : ndiff + r->numel / 100 + 1;
    const char *names[5] = {"zeros", "underflow", "subnormal", "overflow", "nan"};
    int64_t rv[5] = {r->counts.zeros, r->counts.underflow, r->counts.subnormal, r->counts.overflow,
                     r->counts.nan};
    int64_t dv[5] = {d->counts.zeros, d->counts.underflow, d->counts.subnormal, d->counts.overflow,
                     d->counts.nan};
    for (int k = 0; k < 5; k++)
        if (llabs(rv[k] - dv[k]) > slack)
            differ(c, "%s: %s %lld vs %lld", what, names[k], (long long)rv[k], (long long)dv[k]);
    /* amax and amin_nonzero are stored values of dt (amin_nonzero +inf when none) */
    if (!values_agree(dtype_bits(r->counts.amax, dt), dtype_bits(d->counts.amax, dt), dt, mode,
                      atol))
        differ(c, "%s: amax %.9g vs %.9g", what, r->counts.amax, d->counts.amax);
    if (!values_agree(dtype_bits(r->counts.amin_nonzero, dt),
                      dtype_bits(d->counts.amin_nonzero, dt), dt, mode, atol))
        differ(c, "%s: amin_nonzero %.9g vs %.9g", what, r->counts.amin_nonzero,
               d->counts.amin_nonzero);
    int64_t l1 = 0;
    int first = -1;
    for (int b = 0; b < HIST_BINS; b++) {
        l1 += llabs(r->hist[b] - d->hist[b]);
        if (first < 0 && r->hist[b] != d->hist[b])
            first = b;
    }
    if (l1 > 2 * slack) {
        char bin[16];
        hist_bin_name(first, bin, sizeof bin);
        differ(c, "%s: histogram differs by %lld (bin %s: %lld vs %lld)", what, (long long)l1, bin,
               (long long)r->hist[first], (long long)d->hist[first]);
    }
}

/* Compares the two sides' values of p and, when st is not NULL, their counts st[0], st[1]. */
static void compare(selftest *c, const char *what, pair p, const round_stats *st, cmp_mode mode)
{
    if (c->err[0])
        return;
    void *r = download(c, 0, p.t[0]);
    void *d = download(c, 1, p.t[1]);
    if (!r || !d) {
        free(r);
        free(d);
        return;
    }
    dtype dt = p.t[0]->dtype;
    int64_t n = p.t[0]->numel;
    double amax = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs((double)load_as_float(r, dt, i));
        if (isfinite(v) && v > amax)
            amax = v;
    }
    double atol = ABS_TOL * amax;
    int64_t ndiff = 0, nbad = 0, first_bad = -1;
    for (int64_t i = 0; i < n; i++) {
        uint32_t a = elem_bits(r, dt, i), b = elem_bits(d, dt, i);
        if (a != b && !(is_nan_bits(a, dt) && is_nan_bits(b, dt)))
            ndiff++;
        if (!values_agree(a, b, dt, mode, atol) && nbad++ == 0)
            first_bad = i;
    }
    if (nbad)
        differ(c, "%s: %lld of %lld elements differ, first [%lld]: ref %.9g (0x%x) dut %.9g (0x%x)",
               what, (long long)nbad, (long long)n, (long long)first_bad,
               load_as_float(r, dt, first_bad), elem_bits(r, dt, first_bad),
               load_as_float(d, dt, first_bad), elem_bits(d, dt, first_bad));
    if (st)
        compare_stats(c, what, &st[0], &st[1], dt, mode, ndiff, atol);
    free(r);
    free(d);
}

/* fresh stats for both sides */
static void stats_init2(round_stats st[2])
{
    round_stats_init(&st[0]);
    round_stats_init(&st[1]);
}

static bool ready(const selftest *c) { return c->err[0] == '\0'; }

/* records a failed int-returning op */
static void op_rc(selftest *c, int i, int rc)
{
    if (rc)
        setup_failed(c, "%s: %s", side_name(i), c->s[i].be->err);
}

/* ---- the checks ---- */
static void check_rounding_ops(selftest *c, round_stats *st)
{
    const int64_t shape[1] = {1000};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            dtype sd = float_dtypes[a], dd = float_dtypes[b];
            pair src = make_random(c, "src", sd, 1, shape, GEN_WIDE, 1.0f);
            pair dst = make(c, "dst", dd, 1, shape, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->cast(c->s[i].be, src.t[i], dst.t[i], &st[i]));
            compare(c, "dst", dst, st, EXACT);
            report(c, "cast", "%s->%s", dtype_name(sd), dtype_name(dd));

            static const float scalars[3] = {65536.0f, 0x1p-10f, 3.0f};
            float s = scalars[(a + b) % 3];
            src = make_random(c, "src", sd, 1, shape, GEN_WIDE, 1.0f);
            dst = make(c, "dst", dd, 1, shape, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->mul_scalar(c->s[i].be, src.t[i], s, dst.t[i], &st[i]));
            compare(c, "dst", dst, st, EXACT);
            report(c, "mul_scalar", "%s->%s by %g", dtype_name(sd), dtype_name(dd), s);
        }
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        pair t = make_random(c, "t", dt, 1, shape, GEN_WIDE, 1.0f);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->mul_scalar(c->s[i].be, t.t[i], 65536.0f, t.t[i], &st[i]));
        compare(c, "t", t, st, EXACT);
        report(c, "mul_scalar", "%s in place by 65536", dtype_name(dt));

        static const float values[4] = {0.0f, 0.1f, 70000.0f, -1e-30f};
        for (int k = 0; k < 4; k++) {
            t = make(c, "t", dt, 1, shape, NULL);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->fill(c->s[i].be, t.t[i], values[k]));
            compare(c, "t", t, NULL, EXACT);
            report(c, "fill", "%s with %g", dtype_name(dt), values[k]);
        }

        t = make_random(c, "t", dt, 1, shape, GEN_WIDE, 1.0f);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->observe(c->s[i].be, t.t[i], &st[i]));
        compare(c, "t", t, st, EXACT);
        report(c, "observe", "%s", dtype_name(dt));
    }
}

/* ---- the pointwise rows (pointwise.h) ---- */

/* a row's forward on the host, as both backends compute it (the formulas are shared) */
static float host_forward(pw_op op, float a, float b, float c, const op_params *p, int64_t i,
                          dtype dt)
{
    switch (op) {
#define PW_HOST(name, ...)                                                                         \
    case PW_OP_##name:                                                                             \
        return pw_##name##_forward(a, b, c, p, i, dt);
        POINTWISE_OPS(PW_HOST)
#undef PW_HOST
    case PW_OP_COUNT:
        break;
    }
    fprintf(stderr, "ampscope: selftest: no pointwise row %d\n", (int)op);
    abort();
}

/* the operands' shapes of a check (a row of arity n uses the first n); the output is their
 * broadcast */
static const struct pw_pattern {
    const char *what;
    int nd[PW_MAX_ARITY];
    int64_t shape[PW_MAX_ARITY][TENSOR_MAX_DIMS];
} pw_patterns[] = {
    {"one shape [17, 61]", {2, 2, 2}, {{17, 61}, {17, 61}, {17, 61}}},
    {"[17, 61] with [61]", {2, 1, 2}, {{17, 61}, {61}, {17, 61}}},
    {"[3, 5, 4, 4] with [5, 1, 1]", {4, 3, 4}, {{3, 5, 4, 4}, {5, 1, 1}, {3, 1, 4, 4}}},
    {"[4, 1, 6] with [5, 1]", {3, 2, 1}, {{4, 1, 6}, {5, 1}, {6}}},
    {"[7, 9] with a scalar", {2, 0, 2}, {{7, 9}, {0}, {7, 9}}},
    {"[2, 3, 4, 2, 5] with [4, 1, 5] and [5]", {5, 3, 1}, {{2, 3, 4, 2, 5}, {4, 1, 5}, {5}}},
    {"[2, 1, 3, 2, 2, 5] with [3, 3, 1, 2, 1]",
     {6, 5, 6},
     {{2, 1, 3, 2, 2, 5}, {3, 3, 1, 2, 1}, {1, 3, 1, 1, 2, 5}}},
};
/* the operands' dtypes (a row of arity 1 uses the first three) */
static const dtype pw_dtypes[][PW_MAX_ARITY] = {
    {DTYPE_FLOAT32, DTYPE_FLOAT32, DTYPE_FLOAT32},
    {DTYPE_FLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT16},
    {DTYPE_BFLOAT16, DTYPE_BFLOAT16, DTYPE_BFLOAT16},
    {DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16},
    {DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT16},
};

/* One row at one pattern, dtypes and parameters: the forward, then each operand's backward
 * (dy and the operands random, the saved result the host's forward of them), compared
 * exactly: both backends run the same formulas in float32. */
static void check_pointwise_case(selftest *c, round_stats *st, pw_op op,
                                 const struct pw_pattern *pat, const dtype *dts, const op_params *p,
                                 const char *what)
{
    const pw_row *row = &pw_rows[op];
    int n = row->arity, nd = pat->nd[0];
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, pat->shape[0], sizeof shape);
    dtype odt = dts[0];
    for (int k = 1; k < n; k++) {
        shape_broadcast(nd, shape, pat->nd[k], pat->shape[k], &nd, shape);
        odt = promote_types(odt, dts[k]);
    }
    pair x[PW_MAX_ARITY];
    for (int k = 0; k < n; k++)
        x[k] = make_random(c, k ? "b" : "a", dts[k], pat->nd[k], pat->shape[k], GEN_WIDE, 1.0f);
    pair y = make(c, "y", odt, nd, shape, NULL);
    stats_init2(st);
    for (int i = 0; ready(c) && i < 2; i++) {
        const tensor *xs[PW_MAX_ARITY] = {x[0].t[i], n > 1 ? x[1].t[i] : NULL,
                                          n > 2 ? x[2].t[i] : NULL};
        op_rc(c, i, c->s[i].be->pointwise_forward(c->s[i].be, op, p, xs, y.t[i], &st[i]));
    }
    compare(c, "y", y, st, EXACT);
    report(c, "pointwise_forward", "%s %s", row->name, what);

    for (int k = 0; k < n; k++) {
        /* operands and their forward on the host, for the saved result */
        float *v[PW_MAX_ARITY] = {NULL, NULL, NULL};
        for (int j = 0; j < n; j++)
            v[j] = gen(c, shape_numel(pat->nd[j], pat->shape[j]), GEN_NORMAL, 2.0f);
        for (int j = 0; j < n; j++)
            x[j] = make(c, j ? "b" : "a", dts[j], pat->nd[j], pat->shape[j], v[j]);
        int64_t numel = shape_numel(nd, shape);
        float *yv = ready(c) ? malloc(sizeof(float) * (size_t)numel) : NULL;
        if (ready(c) && !yv)
            setup_failed(c, "out of host memory");
        const tensor *ref[PW_MAX_ARITY] = {x[0].t[0], n > 1 ? x[1].t[0] : NULL,
                                           n > 2 ? x[2].t[0] : NULL};
        for (int64_t i = 0; yv && i < numel; i++) {
            float a[PW_MAX_ARITY] = {0, 0, 0};
            tensor out = {.dtype = odt, .ndim = nd, .numel = numel};
            memcpy(out.shape, shape, sizeof shape);
            bcast_view bv = bcast_view_of(&out, ref, n);
            for (int j = 0; j < n; j++)
                a[j] = round_to(v[j][bcast_index(&bv, j, i)], dts[j]);
            yv[i] = round_to(host_forward(op, a[0], a[1], a[2], p, i, odt), odt);
        }
        pair saved_y = make(c, "y", odt, nd, shape, yv);
        free(yv);
        for (int j = 0; j < n; j++)
            free(v[j]);
        pair dy = make_random(c, "dy", odt, nd, shape, GEN_WIDE, 1.0f);
        pair dx = make(c, "dx", odt, nd, shape, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++) {
            const tensor *xs[PW_MAX_ARITY] = {NULL, NULL, NULL};
            for (int j = 0; j < n; j++)
                xs[j] = row->backward & PW_SAVES(j) ? x[j].t[i] : NULL;
            const tensor *ys = row->backward & PW_SAVE_OUT ? saved_y.t[i] : NULL;
            op_rc(c, i,
                  c->s[i].be->pointwise_backward(c->s[i].be, op, p, k, dy.t[i], xs, ys, dx.t[i],
                                                 &st[i]));
        }
        compare(c, "dx", dx, st, EXACT);
        report(c, "pointwise_backward", "%s, operand %d, %s", row->name, k, what);
    }
}

/* every row, in every dtype (a row of several operands also in mixed ones) at every pattern
 * (a row of one operand at the first), at two parameter sets: every real parameter 0.125 and
 * every choice its first, then 0.5 and the second (a choice has two at least) */
static void check_pointwise(selftest *c, round_stats *st)
{
    for (int op = 0; op < PW_OP_COUNT; op++) {
        int n = pw_rows[op].arity;
        int n_pat = n == 1 ? 1 : (int)(sizeof pw_patterns / sizeof pw_patterns[0]);
        int n_dt = n == 1 ? 3 : (int)(sizeof pw_dtypes / sizeof pw_dtypes[0]);
        for (int q = 0; q < n_pat; q++)
            for (int d = 0; d < n_dt; d++)
                for (int set = 0; set < 2; set++) {
                    op_params p = {.seed = 1000 + (uint64_t)(q * 100 + d * 10 + set)};
                    for (int s = 0; s < OP_MAX_PARAMS; s++) {
                        p.real[s] = set ? 0.5 : 0.125;
                        p.choice[s] = set;
                    }
                    char what[160];
                    snprintf(what, sizeof what, "%s%s%s%s%s, %s, parameters %d",
                             dtype_name(pw_dtypes[d][0]), n > 1 ? " and " : "",
                             n > 1 ? dtype_name(pw_dtypes[d][1]) : "", n > 2 ? " and " : "",
                             n > 2 ? dtype_name(pw_dtypes[d][2]) : "", pw_patterns[q].what, set);
                    check_pointwise_case(c, st, (pw_op)op, &pw_patterns[q], pw_dtypes[d], &p, what);
                }
    }
}

/* softmax over the last dim: same dtype in and out, and float16 into float32 (half_to_float,
 * whose backward reads float32 dy and y and writes a float16 dx) */
static void check_softmax(selftest *c, round_stats *st)
{
    static const int64_t shapes[2][2] = {{6, 10}, {5, 300}};
    static const dtype dts[4][2] = {{DTYPE_FLOAT32, DTYPE_FLOAT32},
                                    {DTYPE_FLOAT16, DTYPE_FLOAT16},
                                    {DTYPE_BFLOAT16, DTYPE_BFLOAT16},
                                    {DTYPE_FLOAT16, DTYPE_FLOAT32}};
    for (int a = 0; a < 4; a++)
        for (int k = 0; k < 2; k++) {
            dtype xd = dts[a][0], yd = dts[a][1];
            const int64_t *s = shapes[k];
            pair x = make_random(c, "x", xd, 2, s, GEN_NORMAL, 4.0f);
            pair y = make(c, "y", yd, 2, s, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->softmax_forward(c->s[i].be, x.t[i], y.t[i], &st[i]));
            compare(c, "y", y, st, CLOSE);
            report(c, "softmax_forward", "%s->%s [%lld, %lld]", dtype_name(xd), dtype_name(yd),
                   (long long)s[0], (long long)s[1]);

            /* backward: y a probability, dy in y's dtype, dx in the input's */
            pair dy = make_random(c, "dy", yd, 2, s, GEN_NORMAL, 0.1f);
            float *yv = gen(c, s[0] * s[1], GEN_NORMAL, 0.3f);
            for (int64_t i = 0; yv && i < s[0] * s[1]; i++)
                yv[i] = fminf(fabsf(yv[i]), 1.0f);
            y = make(c, "y", yd, 2, s, yv);
            free(yv);
            pair dx = make(c, "dx", xd, 2, s, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->softmax_backward(c->s[i].be, dy.t[i], y.t[i], dx.t[i], &st[i]));
            compare(c, "dx", dx, st, CLOSE);
            report(c, "softmax_backward", "dy %s, y %s, dx %s [%lld, %lld]", dtype_name(yd),
                   dtype_name(yd), dtype_name(xd), (long long)s[0], (long long)s[1]);
        }
}

/* the causal mask's fill: -inf (the forward) and 0 (the backward) above the diagonal of the
 * last two dims, square and not */
static void check_causal_fill(selftest *c, round_stats *st)
{
    static const int64_t shapes[2][3] = {{3, 5, 5}, {2, 4, 7}};
    static const float values[2] = {-INFINITY, 0.0f};
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 2; k++) {
            dtype dt = float_dtypes[a];
            const int64_t *s = shapes[k];
            pair x = make_random(c, "x", dt, 3, s, GEN_WIDE, 1.0f);
            pair y = make(c, "y", dt, 3, s, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->causal_fill(c->s[i].be, x.t[i], values[k], y.t[i], &st[i]));
            compare(c, "y", y, st, EXACT);
            report(c, "causal_fill", "%s [%lld, %lld, %lld] with %g", dtype_name(dt),
                   (long long)s[0], (long long)s[1], (long long)s[2], values[k]);
        }
}

/* graph models: the embedding lookup and its weight gradient (float32 sums in another order on
 * a GPU: CLOSE), attention's batched products and split_heads' dim swap */
static void check_graph_ops(selftest *c, round_stats *st)
{
    const int64_t wshape[2] = {37, 24}, yshape[2] = {101, 24};
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        pair w = make_random(c, "w", dt, 2, wshape, GEN_WIDE, 1.0f);
        pair idx = make_target(c, yshape[0], wshape[0]); /* ids in [0, V) */
        pair y = make(c, "y", dt, 2, yshape, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->embedding_forward(c->s[i].be, idx.t[i], w.t[i], y.t[i], &st[i]));
        compare(c, "y", y, st, EXACT);
        report(c, "embedding_forward", "%s", dtype_name(dt));

        idx = make_target(c, yshape[0], wshape[0]); /* report() freed the first */
        pair dy = make_random(c, "dy", dt, 2, yshape, GEN_WIDE, 1.0f);
        pair dw = make(c, "dw", dt, 2, wshape, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(
                c, i,
                c->s[i].be->embedding_backward(c->s[i].be, dy.t[i], idx.t[i], 3, dw.t[i], &st[i]));
        compare(c, "dw", dw, st, CLOSE);
        report(c, "embedding_backward", "%s, padding_idx 3", dtype_name(dt));
    }
    /* attention's batched products [B*H, T, D] x [B*H, D, T] and their backward's transposed
     * forms, and the dim swap of split_heads */
    const int64_t qs[3] = {6, 13, 16}, ks[3] = {6, 16, 13}, ss[3] = {6, 13, 13};
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        for (int form = 0; form < 3; form++) {
            bool ta = form == 2, tb = form == 1;
            pair x = make_random(c, "a", dt, 3, ta ? ks : qs, GEN_WIDE, 1.0f);
            pair w = make_random(c, "b", dt, 3, tb ? qs : ks, GEN_WIDE, 1.0f);
            pair y = make(c, "y", dt, 3, ss, NULL); /* [13, 13] in every form */
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->matmul(c->s[i].be, x.t[i], w.t[i], ta, tb, y.t[i], &st[i]));
            compare(c, "y", y, st, CLOSE);
            report(c, "matmul", "%s%s%s", dtype_name(dt), ta ? ", a^T" : "", tb ? ", b^T" : "");
        }
        const int64_t xs[4] = {2, 13, 3, 16}, ys[4] = {2, 3, 13, 16};
        pair x = make_random(c, "x", dt, 4, xs, GEN_WIDE, 1.0f);
        pair y = make(c, "y", dt, 4, ys, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->transpose(c->s[i].be, x.t[i], 1, 2, y.t[i], &st[i]));
        compare(c, "y", y, st, EXACT);
        report(c, "transpose", "%s, dims 1 and 2", dtype_name(dt));
    }
}

/* the strided copy g of x [xnd, xs] into y [ynd, ys], in each dtype */
static void check_strided_copy(selftest *c, round_stats *st, int xnd, const int64_t *xs, int ynd,
                               const int64_t *ys, const strided_geom *g, const char *what)
{
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        pair x = make_random(c, "x", dt, xnd, xs, GEN_WIDE, 1.0f);
        pair e = make(c, "y", dt, ynd, ys, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->strided_copy(c->s[i].be, x.t[i], g, e.t[i], &st[i]));
        compare(c, "y", e, st, EXACT);
        report(c, "strided_copy", "%s, %s", dtype_name(dt), what);
    }
}

/* the shape ops: a strided slice of the last dim, its placement back among zeros (a slice's
 * gradient) and a pad with a fill value along a middle dim, a cat of three inputs of three
 * dtypes into float32 (cat's type promotion), a strided copy (permute and expand);
 * report() frees the tensors, so each check makes its own */
static void check_shape_ops(selftest *c, round_stats *st)
{
    const int64_t xs[3] = {3, 5, 17}, ys[3] = {3, 5, 6}, ps[3] = {3, 9, 17};
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        pair x = make_random(c, "x", dt, 3, xs, GEN_WIDE, 1.0f);
        pair y = make(c, "y", dt, 3, ys, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->narrow_copy(c->s[i].be, x.t[i], 2, 1, 3, y.t[i], &st[i]));
        compare(c, "y", y, st, EXACT);
        report(c, "narrow_copy", "%s, [1:17:3] of the last dim", dtype_name(dt));
        y = make_random(c, "y", dt, 3, ys, GEN_WIDE, 1.0f);
        pair back = make(c, "back", dt, 3, xs, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->narrow_place(c->s[i].be, y.t[i], 2, 1, 3, 0.0f, back.t[i], &st[i]));
        compare(c, "back", back, st, EXACT);
        report(c, "narrow_place", "%s, back into [1:17:3] among zeros", dtype_name(dt));
        x = make_random(c, "x", dt, 3, xs, GEN_WIDE, 1.0f);
        pair pad = make(c, "pad", dt, 3, ps, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->narrow_place(c->s[i].be, x.t[i], 1, 3, 1, -2.5f, pad.t[i], &st[i]));
        compare(c, "pad", pad, st, EXACT);
        report(c, "narrow_place", "%s, dim 1 padded (3, 1) with -2.5", dtype_name(dt));
    }
    const int64_t s0[3] = {2, 4, 3}, s1[3] = {2, 4, 5}, s2[3] = {2, 4, 1}, sy[3] = {2, 4, 9};
    pair p0 = make_random(c, "a", DTYPE_FLOAT16, 3, s0, GEN_WIDE, 1.0f);
    pair p1 = make_random(c, "b", DTYPE_BFLOAT16, 3, s1, GEN_WIDE, 1.0f);
    pair p2 = make_random(c, "c", DTYPE_FLOAT32, 3, s2, GEN_WIDE, 1.0f);
    pair y = make(c, "y", DTYPE_FLOAT32, 3, sy, NULL);
    stats_init2(st);
    for (int i = 0; ready(c) && i < 2; i++) {
        const tensor *in[3] = {p0.t[i], p1.t[i], p2.t[i]};
        op_rc(c, i, c->s[i].be->cat(c->s[i].be, in, 3, 2, y.t[i], &st[i]));
    }
    compare(c, "y", y, st, EXACT);
    report(c, "cat", "float16, bfloat16 and float32 along the last dim into float32");
    /* a strided copy: x [3, 1, 5] permuted to [5, 3] and expanded along a new middle dim of
     * 4 (stride 0) */
    const int64_t gx[3] = {3, 1, 5}, gy[3] = {5, 4, 3};
    const strided_geom g = {3, {5, 4, 3}, {1, 0, 5}};
    check_strided_copy(c, st, 3, gx, 3, gy, &g, "permuted and expanded");
    /* STRIDED_MAX_DIMS dims: x [2, 3, 1, 4, 5, 2] read as x.permute(2, 0, 3, 1, 5, 4)
     * [1, 2, 4, 3, 2, 5] with a dim of 3 expanded from the size-1 one and a new dim of 2
     * inserted before the last (stride 0) */
    const int64_t hx[6] = {2, 3, 1, 4, 5, 2}, hy[6] = {3, 2, 4, 3, 2, 10};
    const strided_geom h = {7, {3, 2, 4, 3, 2, 2, 5}, {0, 120, 10, 40, 1, 0, 2}};
    check_strided_copy(c, st, 6, hx, 6, hy, &h, "7 strided dims of a 6-d x");
}

typedef struct linear_case {
    dtype x, w, y; /* the bias has w's dtype; dy has y's */
    float scale;   /* of the inputs: large scales overflow half outputs */
} linear_case;

static void check_linear(selftest *c, round_stats *st)
{
    static const linear_case cases[] = {
        {DTYPE_FLOAT32, DTYPE_FLOAT32, DTYPE_FLOAT32, 1.0f},
        {DTYPE_FLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT16, 1.0f},
        {DTYPE_BFLOAT16, DTYPE_BFLOAT16, DTYPE_BFLOAT16, 1.0f},
        {DTYPE_FLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT16, 120.0f},
        {DTYPE_FLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT32, 1.0f},
        {DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_FLOAT32, 1.0f},
        {DTYPE_BFLOAT16, DTYPE_FLOAT32, DTYPE_BFLOAT16, 1.0f},
    };
    const int64_t B = 7, I = 19, O = 11;
    const int64_t xs[2] = {B, I}, ws[2] = {O, I}, ys[2] = {B, O};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const linear_case *lc = &cases[k];
        char what[96];
        snprintf(what, sizeof what, "x %s, w %s, out %s, scale %g", dtype_name(lc->x),
                 dtype_name(lc->w), dtype_name(lc->y), lc->scale);
        for (int with_bias = 1; with_bias >= 0; with_bias--) {
            pair x = make_random(c, "x", lc->x, 2, xs, GEN_NORMAL, lc->scale);
            pair w = make_random(c, "w", lc->w, 2, ws, GEN_NORMAL, lc->scale);
            pair b = {{NULL, NULL}};
            if (with_bias)
                b = make_random(c, "b", lc->w, 1, &O, GEN_NORMAL, lc->scale);
            pair y = make(c, "y", lc->y, 2, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(
                    c, i,
                    c->s[i].be->linear_forward(c->s[i].be, x.t[i], w.t[i], b.t[i], y.t[i], &st[i]));
            compare(c, "y", y, st, CLOSE);
            report(c, "linear_forward", "%s%s", what, with_bias ? ", bias" : "");
        }
        pair dy = make_random(c, "dy", lc->y, 2, ys, GEN_NORMAL, lc->scale);
        pair w = make_random(c, "w", lc->w, 2, ws, GEN_NORMAL, lc->scale);
        pair dx = make(c, "dx", lc->x, 2, xs, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->linear_backward_input(c->s[i].be, dy.t[i], w.t[i], dx.t[i], &st[i]));
        compare(c, "dx", dx, st, CLOSE);
        report(c, "linear_backward_input", "%s", what);

        dy = make_random(c, "dy", lc->y, 2, ys, GEN_NORMAL, lc->scale);
        pair x = make_random(c, "x", lc->x, 2, xs, GEN_NORMAL, lc->scale);
        pair dw = make(c, "dw", lc->w, 2, ws, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->linear_backward_weight(c->s[i].be, dy.t[i], x.t[i], dw.t[i], &st[i]));
        compare(c, "dw", dw, st, CLOSE);
        report(c, "linear_backward_weight", "%s", what);
    }
}

/* ---- the reduction rows (reduce.h) ---- */

/* x's shapes and reduced dims: each group pattern of reduce.h's view, one span and many */
static const struct rd_pattern {
    int nd;
    int64_t shape[TENSOR_MAX_DIMS];
    unsigned dims;
    const char *what;
} rd_patterns[] = {
    {3, {4, 5, 6}, 1u << 0 | 1u << 2, "[4, 5, 6] over dims 0, 2 (a convolution's bias)"},
    {2, {7, 11}, 1u << 0, "[7, 11] over dim 0 (a linear's bias)"},
    {4, {3, 5, 7, 7}, 1u << 2 | 1u << 3, "[3, 5, 7, 7] over dims 2, 3 (a global pool)"},
    {1, {70001}, 1u << 0, "[70001], every value (nine spans)"},
    {3, {2, 3, 20000}, 1u << 0 | 1u << 2, "[2, 3, 20000] over dims 0, 2 (five spans)"},
    {2, {20000, 33}, 1u << 0, "[20000, 33] over dim 0 (three spans, a tile's edge)"},
    {4, {2, 3, 4, 5}, 1u << 1 | 1u << 3, "[2, 3, 4, 5] over dims 1, 3"},
    {3, {5, 1, 3}, 1u << 1, "[5, 1, 3] over dim 1, of size 1"},
    {5, {2, 3, 4, 5, 6}, 1u << 2, "[2, 3, 4, 5, 6] over dim 2, a middle one"},
    {6,
     {2, 3, 4, 5, 2, 3},
     1u << 1 | 1u << 3 | 1u << 5,
     "[2, 3, 4, 5, 2, 3] over dims 1, 3, 5 (three kept and three reduced groups)"},
};

/* every row in every dtype at every pattern, exactly: both backends add in reduce.h's order */
static void check_reduce(selftest *c, round_stats *st)
{
    const op_params none = {.seed = 0};
    for (int op = 0; op < RD_OP_COUNT; op++)
        for (size_t q = 0; q < sizeof rd_patterns / sizeof rd_patterns[0]; q++)
            for (int a = 0; a < 3; a++) {
                const struct rd_pattern *pat = &rd_patterns[q];
                dtype dt = float_dtypes[a];
                rd_view v = rd_view_of(pat->nd, pat->shape, pat->dims);
                int64_t n_out = v.n_out, numel = shape_numel(pat->nd, pat->shape);
                pair x = make_random(c, "x", dt, pat->nd, pat->shape, GEN_NORMAL, 3.0f);
                pair y = make(c, "y", dt, 1, &n_out, NULL);
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i,
                          c->s[i].be->reduce_forward(c->s[i].be, (rd_op)op, &none, x.t[i],
                                                     pat->dims, y.t[i], &st[i]));
                compare(c, "y", y, st, EXACT);
                report(c, "reduce_forward", "%s %s, %s", rd_rows[op].name, dtype_name(dt),
                       pat->what);

                /* backward: x of small integers (amax's ties), y the reference's result */
                float *xv = gen(c, numel, GEN_NORMAL, 1.0f);
                for (int64_t i = 0; xv && i < numel; i++)
                    xv[i] = (float)(int)rng_below(&c->g, 4);
                x = make(c, "x", dt, pat->nd, pat->shape, xv);
                free(xv);
                y = make(c, "y", dt, 1, &n_out, NULL);
                op_rc(c, 0,
                      ready(c) ? c->s[0].be->reduce_forward(c->s[0].be, (rd_op)op, &none, x.t[0],
                                                            pat->dims, y.t[0], NULL)
                               : 0);
                float *yv = ready(c) ? malloc(sizeof(float) * (size_t)n_out) : NULL;
                void *yr = ready(c) ? download(c, 0, y.t[0]) : NULL;
                for (int64_t i = 0; yv && yr && i < n_out; i++)
                    yv[i] = load_as_float(yr, dt, i);
                if (ready(c) && !yv)
                    setup_failed(c, "out of host memory");
                upload_pair(c, y, yv);
                free(yv);
                free(yr);
                pair dy = make_random(c, "dy", dt, 1, &n_out, GEN_WIDE, 1.0f);
                pair dx = make(c, "dx", dt, pat->nd, pat->shape, NULL);
                unsigned bw = rd_rows[op].backward;
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i,
                          c->s[i].be->reduce_backward(
                              c->s[i].be, (rd_op)op, &none, dy.t[i], bw & RD_SAVE_X ? x.t[i] : NULL,
                              bw & RD_SAVE_OUT ? y.t[i] : NULL, pat->dims, dx.t[i], &st[i]));
                compare(c, "dx", dx, st, EXACT);
                report(c, "reduce_backward", "%s %s, %s", rd_rows[op].name, dtype_name(dt),
                       pat->what);
            }
}

static conv2d_geom conv_geom(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                             int64_t k, int64_t stride, int64_t padding, int64_t dilation,
                             int64_t groups)
{
    conv2d_geom g = {.n = n,
                     .c_in = c_in,
                     .h_in = h,
                     .w_in = w,
                     .c_out = c_out,
                     .kh = k,
                     .kw = k,
                     .stride = stride,
                     .padding = padding,
                     .dilation = dilation,
                     .groups = groups};
    g.h_out = (h + 2 * padding - dilation * (k - 1) - 1) / stride + 1;
    g.w_out = (w + 2 * padding - dilation * (k - 1) - 1) / stride + 1;
    return g;
}

static void check_conv2d(selftest *c, round_stats *st)
{
    const conv2d_geom geoms[5] = {
        conv_geom(2, 3, 8, 8, 4, 3, 1, 1, 1, 1),
        conv_geom(2, 2, 9, 7, 3, 3, 2, 0, 1, 1),
        conv_geom(1, 3, 10, 10, 2, 3, 1, 2, 2, 1),
        conv_geom(2, 4, 7, 7, 6, 3, 1, 1, 1, 2),  /* 2 groups */
        conv_geom(2, 5, 8, 6, 5, 3, 2, 1, 1, 5), /* depthwise */
    };
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 5; k++) {
            dtype dt = float_dtypes[a];
            const conv2d_geom *g = &geoms[k];
            const int64_t xs[4] = {g->n, g->c_in, g->h_in, g->w_in};
            const int64_t ws[4] = {g->c_out, g->c_in / g->groups, g->kh, g->kw};
            const int64_t ys[4] = {g->n, g->c_out, g->h_out, g->w_out};
            char what[128];
            snprintf(what, sizeof what,
                     "%s x [%lld,%lld,%lld,%lld] k %lld stride %lld pad %lld dil %lld",
                     dtype_name(dt), (long long)g->n, (long long)g->c_in, (long long)g->h_in,
                     (long long)g->w_in, (long long)g->kh, (long long)g->stride,
                     (long long)g->padding, (long long)g->dilation);
            bool with_bias = k != 1;
            pair x = make_random(c, "x", dt, 4, xs, GEN_NORMAL, 1.0f);
            pair w = make_random(c, "w", dt, 4, ws, GEN_NORMAL, 1.0f);
            pair b = {{NULL, NULL}};
            if (with_bias)
                b = make_random(c, "b", dt, 1, &g->c_out, GEN_NORMAL, 1.0f);
            pair y = make(c, "y", dt, 4, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_forward(c->s[i].be, g, x.t[i], w.t[i], b.t[i], y.t[i],
                                                 &st[i]));
            compare(c, "y", y, st, CLOSE);
            report(c, "conv2d_forward", "%s%s", what, with_bias ? ", bias" : "");

            pair dy = make_random(c, "dy", dt, 4, ys, GEN_NORMAL, 1.0f);
            w = make_random(c, "w", dt, 4, ws, GEN_NORMAL, 1.0f);
            pair dx = make(c, "dx", dt, 4, xs, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_backward_input(c->s[i].be, g, dy.t[i], w.t[i], dx.t[i],
                                                        &st[i]));
            compare(c, "dx", dx, st, CLOSE);
            report(c, "conv2d_backward_input", "%s", what);

            dy = make_random(c, "dy", dt, 4, ys, GEN_NORMAL, 1.0f);
            x = make_random(c, "x", dt, 4, xs, GEN_NORMAL, 1.0f);
            pair dw = make(c, "dw", dt, 4, ws, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_backward_weight(c->s[i].be, g, dy.t[i], x.t[i], dw.t[i],
                                                         &st[i]));
            compare(c, "dw", dw, st, CLOSE);
            report(c, "conv2d_backward_weight", "%s", what);
        }
}

/* ---- normalization and pooling ---- */

/* the layer_norm, rms_norm and group_norm layouts of norm_forward and its backward, in each
 * dtype (statistics float32 for layer_norm and rms_norm, in the input's dtype for group_norm;
 * rms_norm without mean and bias) */
static void check_norm(selftest *c, round_stats *st)
{
    static const norm_geom geoms[] = {
        {7, 1, 33, 1, 1e-5f, NORM_CENTERED},  /* layer_norm: 7 rows of 33 */
        {2, 1, 700, 1, 1e-5f, NORM_CENTERED}, /* rows longer than a block */
        {3, 4, 2, 10, 1e-5f, NORM_FUSED},     /* group_norm [3, 8, 10] in 4 groups */
        {2, 2, 3, 300, 1e-3f, NORM_FUSED},    /* group_norm [2, 6, 300] in 2 groups */
        {7, 1, 33, 1, 1e-6f, NORM_RMS},       /* rms_norm: 7 rows of 33 */
        {2, 1, 700, 1, 0x1p-23f, NORM_RMS},   /* rows longer than a block, eps None */
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (int a = 0; a < 3; a++) {
            const norm_geom *g = &geoms[k];
            dtype dt = float_dtypes[a];
            dtype sdt = g->form == NORM_FUSED ? dt : DTYPE_FLOAT32;
            bool rms = g->form == NORM_RMS;
            int64_t n = g->n * g->groups * g->cpg * g->inner, ch = g->groups * g->cpg,
                    rows = g->n * g->groups;
            char what[96];
            snprintf(what, sizeof what, "%s [%lld, %lld, %lld, %lld]", dtype_name(dt),
                     (long long)g->n, (long long)g->groups, (long long)g->cpg, (long long)g->inner);
            pair x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            pair w = make_random(c, "w", dt, 1, &ch, GEN_NORMAL, 1.0f);
            pair b = make_random(c, "b", dt, 1, &ch, GEN_NORMAL, 1.0f);
            pair y = make(c, "y", dt, 1, &n, NULL);
            pair mean = rms ? (pair){{NULL, NULL}} : make(c, "mean", sdt, 1, &rows, NULL);
            pair rstd = make(c, "rstd", sdt, 1, &rows, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->norm_forward(c->s[i].be, g, x.t[i], w.t[i],
                                               rms ? NULL : b.t[i], y.t[i], mean.t[i],
                                               rstd.t[i], &st[i]));
            compare(c, "y", y, st, CLOSE);
            if (!rms)
                compare(c, "mean", mean, NULL, CLOSE);
            compare(c, "rstd", rstd, NULL, CLOSE);
            report(c, "norm_forward", "%s", what);

            /* the backward from the same statistics on both sides (rstd in [0.5, 2)); report()
             * freed the forward's tensors */
            float *sv = gen(c, rows, GEN_NORMAL, 1.0f);
            for (int64_t i = 0; sv && i < rows; i++)
                sv[i] = 0.5f + 1.5f * fabsf(sv[i]) / (1.0f + fabsf(sv[i]));
            mean = rms ? mean : make_random(c, "mean", sdt, 1, &rows, GEN_NORMAL, 1.0f);
            rstd = make(c, "rstd", sdt, 1, &rows, sv);
            free(sv);
            x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            w = make_random(c, "w", dt, 1, &ch, GEN_NORMAL, 1.0f);
            pair dy = make_random(c, "dy", dt, 1, &n, GEN_NORMAL, 1.0f);
            pair dx = make(c, "dx", dt, 1, &n, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->norm_backward_input(c->s[i].be, g, dy.t[i], x.t[i], mean.t[i],
                                                      rstd.t[i], w.t[i], dx.t[i], &st[i]));
            compare(c, "dx", dx, st, CLOSE);
            report(c, "norm_backward_input", "%s", what);

            /* the same values again, for dw */
            mean = rms ? mean : make_random(c, "mean", sdt, 1, &rows, GEN_NORMAL, 1.0f);
            rstd = make_random(c, "rstd", sdt, 1, &rows, GEN_NORMAL, 1.0f);
            x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            dy = make_random(c, "dy", dt, 1, &n, GEN_NORMAL, 1.0f);
            pair dw = make(c, "dw", dt, 1, &ch, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->norm_backward_weight(c->s[i].be, g, dy.t[i], x.t[i], mean.t[i],
                                                       rstd.t[i], dw.t[i], &st[i]));
            compare(c, "dw", dw, st, CLOSE);
            report(c, "norm_backward_weight", "%s", what);
        }
}

/* running_mean normal, running_var in [0.5, inf) [ch], in dtype pt */
static void make_running_stats(selftest *c, dtype pt, int64_t ch, pair *rm, pair *rv)
{
    float *v = gen(c, ch, GEN_NORMAL, 1.0f);
    for (int64_t i = 0; v && i < ch; i++)
        v[i] = 0.5f + fabsf(v[i]);
    *rm = make_random(c, "running_mean", pt, 1, &ch, GEN_NORMAL, 1.0f);
    *rv = make(c, "running_var", pt, 1, &ch, v);
    free(v);
}

/* batch_norm's ops over [N, C, HW], with the input, parameter and running-stat dtypes of
 * each path _select_batch_norm_backend takes (one dtype, or a half input with float32) */
static void check_batch_norm(selftest *c, round_stats *st)
{
    static const norm_geom geoms[] = {
        {4, 3, 1, 25, 1e-5f, NORM_CENTERED},
        {2, 16, 1, 700, 1e-5f, NORM_CENTERED}, /* channels longer than a block */
    };
    static const dtype pairs[][2] = {
        {DTYPE_FLOAT32, DTYPE_FLOAT32},   {DTYPE_FLOAT16, DTYPE_FLOAT16},
        {DTYPE_BFLOAT16, DTYPE_BFLOAT16}, {DTYPE_FLOAT16, DTYPE_FLOAT32},
        {DTYPE_BFLOAT16, DTYPE_FLOAT32},
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (size_t a = 0; a < sizeof pairs / sizeof pairs[0]; a++) {
            const norm_geom *g = &geoms[k];
            dtype dt = pairs[a][0], pt = pairs[a][1];
            int64_t n = g->n * g->groups * g->inner, ch = g->groups;
            char what[96];
            snprintf(what, sizeof what, "x %s, w %s [%lld, %lld, %lld]", dtype_name(dt),
                     dtype_name(pt), (long long)g->n, (long long)g->groups, (long long)g->inner);
            pair x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            pair rm, rv;
            make_running_stats(c, pt, ch, &rm, &rv);
            pair mean = make(c, "mean", DTYPE_FLOAT32, 1, &ch, NULL);
            pair invstd = make(c, "invstd", DTYPE_FLOAT32, 1, &ch, NULL);
            round_stats sv[2];
            stats_init2(st);
            stats_init2(sv);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_stats(c->s[i].be, g, x.t[i], 0.1f, mean.t[i],
                                                   invstd.t[i], rm.t[i], rv.t[i], &st[i], &sv[i]));
            compare(c, "mean", mean, NULL, CLOSE);
            compare(c, "invstd", invstd, NULL, CLOSE);
            compare(c, "running_mean", rm, st, CLOSE);
            compare(c, "running_var", rv, sv, CLOSE);
            report(c, "batch_norm_stats", "%s", what);

            x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            mean = make_random(c, "mean", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            invstd = make_random(c, "invstd", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            pair w = make_random(c, "w", pt, 1, &ch, GEN_NORMAL, 1.0f);
            pair b = make_random(c, "b", pt, 1, &ch, GEN_NORMAL, 1.0f);
            pair y = make(c, "y", dt, 1, &n, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_forward(c->s[i].be, g, x.t[i], mean.t[i], invstd.t[i],
                                                     w.t[i], b.t[i], y.t[i], &st[i]));
            compare(c, "y", y, st, EXACT);
            report(c, "batch_norm_forward", "%s", what);

            x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            mean = make_random(c, "mean", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            invstd = make_random(c, "invstd", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            w = make_random(c, "w", pt, 1, &ch, GEN_NORMAL, 1.0f);
            pair dy = make_random(c, "dy", dt, 1, &n, GEN_NORMAL, 1.0f);
            pair dx = make(c, "dx", dt, 1, &n, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_backward_input(c->s[i].be, g, dy.t[i], x.t[i],
                                                            mean.t[i], invstd.t[i], w.t[i], dx.t[i],
                                                            &st[i]));
            compare(c, "dx", dx, st, CLOSE);
            report(c, "batch_norm_backward_input", "%s", what);

            x = make_random(c, "x", dt, 1, &n, GEN_NORMAL, 3.0f);
            mean = make_random(c, "mean", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            invstd = make_random(c, "invstd", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            dy = make_random(c, "dy", dt, 1, &n, GEN_NORMAL, 1.0f);
            pair dw = make(c, "dw", pt, 1, &ch, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_backward_weight(
                          c->s[i].be, g, dy.t[i], x.t[i], mean.t[i], invstd.t[i], dw.t[i], &st[i]));
            compare(c, "dw", dw, st, CLOSE);
            report(c, "batch_norm_backward_weight", "%s", what);

            make_running_stats(c, pt, ch, &rm, &rv);
            mean = make(c, "mean", DTYPE_FLOAT32, 1, &ch, NULL);
            invstd = make(c, "invstd", DTYPE_FLOAT32, 1, &ch, NULL);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_eval_stats(c->s[i].be, g, rm.t[i], rv.t[i],
                                                        mean.t[i], invstd.t[i]));
            compare(c, "mean", mean, NULL, EXACT);
            compare(c, "invstd", invstd, NULL, EXACT);
            report(c, "batch_norm_eval_stats", "%s", what);

            invstd = make_random(c, "invstd", DTYPE_FLOAT32, 1, &ch, GEN_NORMAL, 1.0f);
            w = make_random(c, "w", pt, 1, &ch, GEN_NORMAL, 1.0f);
            dy = make_random(c, "dy", dt, 1, &n, GEN_NORMAL, 1.0f);
            dx = make(c, "dx", dt, 1, &n, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->batch_norm_backward_eval_input(c->s[i].be, g, dy.t[i],
                                                                 invstd.t[i], w.t[i], dx.t[i],
                                                                 &st[i]));
            compare(c, "dx", dx, st, EXACT);
            report(c, "batch_norm_backward_eval_input", "%s", what);
        }
}

/* int64 tensors (max_pool2d's indices), element by element */
static void compare_int64(selftest *c, const char *what, pair p)
{
    if (c->err[0])
        return;
    int64_t *r = download(c, 0, p.t[0]), *d = download(c, 1, p.t[1]);
    for (int64_t i = 0; r && d && i < p.t[0]->numel; i++)
        if (r[i] != d[i]) {
            differ(c, "%s: [%lld]: ref %lld dut %lld", what, (long long)i, (long long)r[i],
                   (long long)d[i]);
            break;
        }
    free(r);
    free(d);
}

/* the pools' ops over windows that tile, overlap and pad, in each dtype */
static void check_pools(selftest *c, round_stats *st)
{
    static const int64_t shapes[][7] = {
        /* n, c, h, w, kernel, stride, padding */
        {2, 3, 8, 8, 2, 2, 0},
        {1, 4, 9, 7, 3, 2, 1},
        {2, 2, 6, 6, 3, 1, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int a = 0; a < 3; a++) {
            const int64_t *s = shapes[k];
            dtype dt = float_dtypes[a];
            conv2d_geom g = conv_geom(s[0], s[1], s[2], s[3], s[1], s[4], s[5], s[6], 1, 1);
            const int64_t xs[4] = {g.n, g.c_in, g.h_in, g.w_in},
                          ys[4] = {g.n, g.c_out, g.h_out, g.w_out};
            char what[96];
            snprintf(what, sizeof what, "%s %lldx%lld kernel %lld stride %lld padding %lld",
                     dtype_name(dt), (long long)s[2], (long long)s[3], (long long)s[4],
                     (long long)s[5], (long long)s[6]);
            pair x = make_random(c, "x", dt, 4, xs, GEN_WIDE, 1.0f);
            pair y = make(c, "y", dt, 4, ys, NULL);
            pair idx = make(c, "indices", DTYPE_INT64, 4, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->max_pool2d_forward(c->s[i].be, &g, x.t[i], y.t[i], idx.t[i],
                                                     &st[i]));
            compare(c, "y", y, st, EXACT);
            compare_int64(c, "indices", idx);
            report(c, "max_pool2d_forward", "%s", what);

            /* the indices of a forward on the reference side, the same on both */
            x = make_random(c, "x", dt, 4, xs, GEN_NORMAL, 1.0f);
            y = make(c, "y", dt, 4, ys, NULL);
            idx = make(c, "indices", DTYPE_INT64, 4, ys, NULL);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(
                    c, i,
                    c->s[i].be->max_pool2d_forward(c->s[i].be, &g, x.t[i], y.t[i], idx.t[i], NULL));
            compare_int64(c, "indices", idx);
            pair dy = make_random(c, "dy", dt, 4, ys, GEN_NORMAL, 1.0f);
            pair dx = make(c, "dx", dt, 4, xs, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->max_pool2d_backward(c->s[i].be, &g, dy.t[i], idx.t[i], dx.t[i],
                                                      &st[i]));
            compare(c, "dx", dx, st, EXACT);
            report(c, "max_pool2d_backward", "%s", what);

            for (int cip = 1; cip >= 0; cip--) {
                x = make_random(c, "x", dt, 4, xs, GEN_NORMAL, 1.0f);
                y = make(c, "y", dt, 4, ys, NULL);
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i,
                          c->s[i].be->avg_pool2d_forward(c->s[i].be, &g, cip, x.t[i], y.t[i],
                                                         &st[i]));
                compare(c, "y", y, st, EXACT);
                report(c, "avg_pool2d_forward", "%s%s", what, cip ? "" : ", padding not counted");

                dy = make_random(c, "dy", dt, 4, ys, GEN_NORMAL, 1.0f);
                dx = make(c, "dx", dt, 4, xs, NULL);
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i,
                          c->s[i].be->avg_pool2d_backward(c->s[i].be, &g, cip, dy.t[i], dx.t[i],
                                                          &st[i]));
                compare(c, "dx", dx, st, EXACT);
                report(c, "avg_pool2d_backward", "%s%s", what, cip ? "" : ", padding not counted");
            }
        }
}

/* upsample_nearest2d, scale factors 1 to 3, in each float dtype */
static void check_upsample(selftest *c, round_stats *st)
{
    static const int64_t shapes[][5] = {
        /* n, c, h, w, scale factor */
        {2, 3, 4, 5, 2},
        {1, 2, 3, 3, 3},
        {1, 1, 5, 2, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int a = 0; a < 3; a++) {
            const int64_t *s = shapes[k];
            dtype dt = float_dtypes[a];
            conv2d_geom g = {.n = s[0], .c_in = s[1], .c_out = s[1], .h_in = s[2],
                             .w_in = s[3], .h_out = s[2] * s[4], .w_out = s[3] * s[4],
                             .stride = s[4]};
            const int64_t xs[4] = {g.n, g.c_in, g.h_in, g.w_in},
                          ys[4] = {g.n, g.c_out, g.h_out, g.w_out};
            char what[96];
            snprintf(what, sizeof what, "%s %lldx%lld scale_factor %lld", dtype_name(dt),
                     (long long)s[2], (long long)s[3], (long long)s[4]);
            pair x = make_random(c, "x", dt, 4, xs, GEN_WIDE, 1.0f);
            pair y = make(c, "y", dt, 4, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->upsample_nearest2d_forward(c->s[i].be, &g, x.t[i], y.t[i],
                                                             &st[i]));
            compare(c, "y", y, st, EXACT);
            report(c, "upsample_nearest2d_forward", "%s", what);

            pair dy = make_random(c, "dy", dt, 4, ys, GEN_NORMAL, 1.0f);
            pair dx = make(c, "dx", dt, 4, xs, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->upsample_nearest2d_backward(c->s[i].be, &g, dy.t[i], dx.t[i],
                                                              &st[i]));
            compare(c, "dx", dx, st, EXACT);
            report(c, "upsample_nearest2d_backward", "%s", what);
        }
}

static void check_losses(selftest *c, round_stats *st)
{
    static const int64_t ls_shapes[2][2] = {{6, 10}, {5, 300}};
    const int64_t scalar_shape[1] = {1};
    /* log_softmax: same dtype in and out, and float16 logits into float32 */
    static const dtype ls_dt[4][2] = {{DTYPE_FLOAT32, DTYPE_FLOAT32},
                                      {DTYPE_FLOAT16, DTYPE_FLOAT16},
                                      {DTYPE_BFLOAT16, DTYPE_BFLOAT16},
                                      {DTYPE_FLOAT16, DTYPE_FLOAT32}};
    for (int a = 0; a < 4; a++)
        for (int k = 0; k < 2; k++) {
            dtype xd = ls_dt[a][0], yd = ls_dt[a][1];
            const int64_t *s = ls_shapes[k];
            pair x = make_random(c, "x", xd, 2, s, GEN_NORMAL, 4.0f);
            pair y = make(c, "y", yd, 2, s, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i, c->s[i].be->log_softmax_forward(c->s[i].be, x.t[i], y.t[i], &st[i]));
            compare(c, "y", y, st, CLOSE);
            report(c, "log_softmax_forward", "%s->%s [%lld, %lld]", dtype_name(xd), dtype_name(yd),
                   (long long)s[0], (long long)s[1]);

            /* backward: y a log-probability (negative), dy and dx in the input's dtype */
            pair dy = make_random(c, "dy", xd, 2, s, GEN_NORMAL, 0.1f);
            float *yv = gen(c, s[0] * s[1], GEN_NORMAL, 2.0f);
            for (int64_t i = 0; yv && i < s[0] * s[1]; i++)
                yv[i] = -fabsf(yv[i]);
            y = make(c, "y", yd, 2, s, yv);
            free(yv);
            pair dx = make(c, "dx", xd, 2, s, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(
                    c, i,
                    c->s[i].be->log_softmax_backward(c->s[i].be, dy.t[i], y.t[i], dx.t[i], &st[i]));
            compare(c, "dx", dx, st, CLOSE);
            report(c, "log_softmax_backward", "dy %s, y %s [%lld, %lld]", dtype_name(xd),
                   dtype_name(yd), (long long)s[0], (long long)s[1]);
        }

    const int64_t ns[2] = {8, 10};
    for (int a = 0; a < 3; a++) {
        dtype dt = float_dtypes[a];
        pair logp = make_random(c, "logp", dt, 2, ns, GEN_NORMAL, 3.0f);
        pair target = make_target(c, ns[0], ns[1]);
        pair loss = make(c, "loss", dt, 0, scalar_shape, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->nll_loss_forward(c->s[i].be, logp.t[i], target.t[i], loss.t[i],
                                               &st[i]));
        compare(c, "loss", loss, st, CLOSE);
        report(c, "nll_loss_forward", "%s", dtype_name(dt));

        static const float seeds[2] = {1.0f, 65536.0f};
        for (int k = 0; k < 2; k++) {
            pair dloss = make(c, "dloss", dt, 0, scalar_shape, &seeds[k]);
            target = make_target(c, ns[0], ns[1]);
            pair dlogp = make(c, "dlogp", dt, 2, ns, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->nll_loss_backward(c->s[i].be, dloss.t[i], target.t[i], dlogp.t[i],
                                                    &st[i]));
            compare(c, "dlogp", dlogp, st, EXACT);
            report(c, "nll_loss_backward", "%s, dloss %g", dtype_name(dt), seeds[k]);
        }
    }

    /* mse: same dtypes, and a float16 prediction against a float32 target (promoted) */
    static const dtype mse_dt[4][3] = {{DTYPE_FLOAT32, DTYPE_FLOAT32, DTYPE_FLOAT32},
                                       {DTYPE_FLOAT16, DTYPE_FLOAT16, DTYPE_FLOAT16},
                                       {DTYPE_BFLOAT16, DTYPE_BFLOAT16, DTYPE_BFLOAT16},
                                       {DTYPE_FLOAT16, DTYPE_FLOAT32, DTYPE_FLOAT32}};
    const int64_t ms[2] = {5, 7};
    const int64_t mn = ms[0] * ms[1];
    for (int a = 0; a < 4; a++) {
        dtype ad = mse_dt[a][0], bd = mse_dt[a][1], yd = mse_dt[a][2];
        pair pa = make_random(c, "a", ad, 2, ms, GEN_WIDE, 1.0f);
        pair pb = make_random(c, "b", bd, 2, ms, GEN_WIDE, 1.0f);
        pair y = make(c, "y", yd, 2, ms, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->mse_forward(c->s[i].be, pa.t[i], pb.t[i], y.t[i], &st[i]));
        compare(c, "y", y, st, EXACT);
        report(c, "mse_forward", "a %s, b %s, out %s", dtype_name(ad), dtype_name(bd),
               dtype_name(yd));

        for (int full = 0; full < 2; full++) { /* reduction 'mean' (scalar dy) and 'none' */
            double alpha = full ? 2.0 : 2.0 / (double)mn;
            pair dy = full ? make_random(c, "dy", yd, 2, ms, GEN_NORMAL, 1.0f)
                           : make_random(c, "dy", yd, 0, scalar_shape, GEN_NORMAL, 1.0f);
            pa = make_random(c, "a", ad, 2, ms, GEN_NORMAL, 2.0f);
            pb = make_random(c, "b", bd, 2, ms, GEN_NORMAL, 2.0f);
            pair da = make(c, "da", yd, 2, ms, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->mse_backward(c->s[i].be, dy.t[i], pa.t[i], pb.t[i], alpha,
                                               da.t[i], &st[i]));
            compare(c, "da", da, st, EXACT);
            report(c, "mse_backward", "a %s, b %s, out %s, %s dy", dtype_name(ad), dtype_name(bd),
                   dtype_name(yd), full ? "elementwise" : "scalar");
        }
    }
}

/* losses bce_with_logits and l1: same dtypes, and a float16 input against a float32
 * target (bce's loss and l1's diff in float32; bce's gradient in the input's dtype) */
static void check_bce_l1(selftest *c, round_stats *st)
{
    static const dtype pairs[4][2] = {{DTYPE_FLOAT32, DTYPE_FLOAT32},
                                      {DTYPE_FLOAT16, DTYPE_FLOAT16},
                                      {DTYPE_BFLOAT16, DTYPE_BFLOAT16},
                                      {DTYPE_FLOAT16, DTYPE_FLOAT32}};
    const int64_t s[2] = {9, 13};
    for (int a = 0; a < 4; a++) {
        dtype xd = pairs[a][0], td = pairs[a][1], pd = xd == td ? xd : DTYPE_FLOAT32;
        pair x = make_random(c, "x", xd, 2, s, GEN_WIDE, 1.0f);
        pair t = make_random(c, "t", td, 2, s, GEN_NORMAL, 1.0f);
        pair y = make(c, "y", td, 2, s, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->bce_logits_forward(c->s[i].be, x.t[i], t.t[i], y.t[i], &st[i]));
        compare(c, "y", y, st, CLOSE); /* exp and log1p */
        report(c, "bce_logits_forward", "x %s, t %s", dtype_name(xd), dtype_name(td));

        pair dy = make_random(c, "dy", td, 0, NULL, GEN_NORMAL, 1.0f); /* the loss's */
        x = make_random(c, "x", xd, 2, s, GEN_NORMAL, 4.0f); /* report freed the tensors */
        t = make_random(c, "t", td, 2, s, GEN_NORMAL, 1.0f);
        pair dx = make(c, "dx", xd, 2, s, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->bce_logits_backward(c->s[i].be, dy.t[i], x.t[i], t.t[i], dx.t[i],
                                                  &st[i]));
        compare(c, "dx", dx, st, CLOSE);
        report(c, "bce_logits_backward", "x %s, t %s", dtype_name(xd), dtype_name(td));

        x = make_random(c, "x", xd, 2, s, GEN_WIDE, 1.0f);
        t = make_random(c, "t", td, 2, s, GEN_WIDE, 1.0f);
        pair diff = make(c, "diff", pd, 2, s, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->sub_forward(c->s[i].be, x.t[i], t.t[i], diff.t[i], &st[i]));
        compare(c, "diff", diff, st, EXACT);
        report(c, "sub_forward", "a %s, b %s, out %s", dtype_name(xd), dtype_name(td),
               dtype_name(pd));

        diff = make_random(c, "x", pd, 2, s, GEN_WIDE, 1.0f);
        pair ab = make(c, "abs", pd, 2, s, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i, c->s[i].be->abs_forward(c->s[i].be, diff.t[i], ab.t[i], &st[i]));
        compare(c, "abs", ab, st, EXACT);
        report(c, "abs_forward", "%s", dtype_name(pd));

        diff = make_random(c, "x", pd, 2, s, GEN_WIDE, 1.0f);
        pair g = make_random(c, "dy", pd, 2, s, GEN_WIDE, 1.0f);
        pair gx = make(c, "dx", pd, 2, s, NULL);
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->abs_backward(c->s[i].be, g.t[i], diff.t[i], gx.t[i], &st[i]));
        compare(c, "dx", gx, st, EXACT);
        report(c, "abs_backward", "%s", dtype_name(pd));
    }
}

/* scaled_dot_product_attention's ops (sdpa_math.h): float32 and half operands, causal or
 * not, more keys than queries, an additive mask [2, 1, 5, 9] broadcast over the heads and
 * the scores' gradient it takes */
static void check_sdpa(selftest *c, round_stats *st)
{
    static const sdpa_geom geoms[3] = {
        {.n = 6, .l = 7, .s = 7, .e = 8, .ev = 8, .causal = true, .heads = 3},
        {.n = 3, .l = 5, .s = 9, .e = 4, .ev = 6, .causal = false, .heads = 3},
        {.n = 4, .l = 5, .s = 9, .e = 4, .ev = 6, .heads = 2, .mask_stride = {45, 0, 9, 1}}};
    for (int gi = 0; gi < 3; gi++)
        for (int a = 0; a < 3; a++) {
            const sdpa_geom *g = &geoms[gi];
            dtype dt = float_dtypes[a];
            const int64_t sq[3] = {g->n, g->l, g->e}, sk[3] = {g->n, g->s, g->e},
                          sv[3] = {g->n, g->s, g->ev}, so[3] = {g->n, g->l, g->ev},
                          sp[3] = {g->n, g->l, g->s};
            pair q = make_random(c, "q", dt, 3, sq, GEN_NORMAL, 1.0f);
            pair k = make_random(c, "k", dt, 3, sk, GEN_NORMAL, 1.0f);
            const int64_t sm[4] = {2, 1, g->l, g->s};
            bool masked = g->mask_stride[0] != 0;
            pair m = masked ? make_random(c, "mask", dt, 4, sm, GEN_NORMAL, 2.0f) : (pair){0};
            pair p = make(c, "p", DTYPE_FLOAT32, 3, sp, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->sdpa_probs_forward(c->s[i].be, g, q.t[i], k.t[i],
                                                     masked ? m.t[i] : NULL, p.t[i], &st[i]));
            compare(c, "p", p, st, CLOSE); /* exp */
            report(c, "sdpa_probs_forward", "%s%s%s", dtype_name(dt), g->causal ? " causal" : "",
                   masked ? " masked" : "");

            p = make_random(c, "p", DTYPE_FLOAT32, 3, sp, GEN_NORMAL, 0.2f);
            pair v = make_random(c, "v", dt, 3, sv, GEN_NORMAL, 1.0f);
            pair o = make(c, "out", DTYPE_FLOAT32, 3, so, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->sdpa_value_forward(c->s[i].be, g, p.t[i], v.t[i], o.t[i],
                                                     &st[i]));
            compare(c, "out", o, st, EXACT);
            report(c, "sdpa_value_forward", "v %s", dtype_name(dt));

            p = make_random(c, "p", DTYPE_FLOAT32, 3, sp, GEN_NORMAL, 0.2f);
            v = make_random(c, "v", dt, 3, sv, GEN_NORMAL, 1.0f);
            pair dout = make_random(c, "dout", DTYPE_FLOAT32, 3, so, GEN_NORMAL, 1.0f);
            pair dp = make(c, "dp", DTYPE_FLOAT32, 3, sp, NULL);
            pair dv = make(c, "dv", DTYPE_FLOAT32, 3, sv, NULL);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->sdpa_value_backward(c->s[i].be, g, dout.t[i], p.t[i], v.t[i],
                                                      dp.t[i], dv.t[i]));
            compare(c, "dp", dp, NULL, EXACT);
            compare(c, "dv", dv, NULL, EXACT);
            report(c, "sdpa_value_backward", "v %s", dtype_name(dt));

            q = make_random(c, "q", dt, 3, sq, GEN_NORMAL, 1.0f);
            k = make_random(c, "k", dt, 3, sk, GEN_NORMAL, 1.0f);
            p = make_random(c, "p", DTYPE_FLOAT32, 3, sp, GEN_NORMAL, 0.2f);
            dp = make_random(c, "dp", DTYPE_FLOAT32, 3, sp, GEN_NORMAL, 1.0f);
            pair dq = make(c, "dq", DTYPE_FLOAT32, 3, sq, NULL);
            pair dk = make(c, "dk", DTYPE_FLOAT32, 3, sk, NULL);
            pair ds = masked ? make(c, "dscores", DTYPE_FLOAT32, 3, sp, NULL) : (pair){0};
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->sdpa_probs_backward(c->s[i].be, g, dp.t[i], q.t[i], k.t[i],
                                                      p.t[i], dq.t[i], dk.t[i],
                                                      masked ? ds.t[i] : NULL));
            compare(c, "dq", dq, NULL, EXACT);
            compare(c, "dk", dk, NULL, EXACT);
            if (masked)
                compare(c, "dscores", ds, NULL, EXACT);
            report(c, "sdpa_probs_backward", "q, k %s", dtype_name(dt));
        }
}

static void check_unscale(selftest *c, round_stats *st)
{
    static const char *const variants[3] = {"finite", "with inf", "with NaN"};
    const int64_t n = 3001;
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 3; k++) {
            dtype dt = float_dtypes[a];
            /* a spread that stays finite in dt: 65536, or a 64th of its largest value */
            float *v = gen(c, n, GEN_NORMAL, fminf(65536.0f, format_of(dt)->largest / 64.0f));
            if (v && k)
                v[rng_below(&c->g, n)] = k == 1 ? -INFINITY : NAN;
            pair g = make(c, "g", dt, 1, &n, v);
            free(v);
            int found[2] = {0, 0};
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->unscale(c->s[i].be, g.t[i], 1.0f / 65536.0f, &found[i], &st[i]));
            compare(c, "g", g, st, EXACT);
            if (ready(c) && (found[0] != found[1] || found[0] != (k != 0)))
                differ(c, "found_inf: ref %d dut %d, expected %d", found[0], found[1], k != 0);
            report(c, "unscale", "%s %s", dtype_name(dt), variants[k]);
        }
}

/* The settings every optimizer kind of OPTIM_KINDS runs under, PyTorch's betas, eps and alpha
 * in each: a kind reads the fields it has (optim_math.h's optim_update) and ignores the
 * others, so each kind meets each of its options on and off, and a line may repeat an
 * earlier check of the same kind under a setting it does not read. */
#define TORCH_DEFAULTS .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .alpha = 0.99
static const struct {
    const char *what;
    optim_config cfg;
} optim_settings[] = {
    {"lr=1e-2", {.lr = 1e-2, TORCH_DEFAULTS}},
    {"lr=1e-3 momentum=0.9 dampening=0.1 weight_decay=1e-4",
     {.lr = 1e-3, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-4, TORCH_DEFAULTS}},
    {"lr=1e-2 momentum=0.9 nesterov weight_decay=1e-2",
     {.lr = 1e-2, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-2, TORCH_DEFAULTS}},
    {"lr=1e-3 centered", {.lr = 1e-3, .centered = true, TORCH_DEFAULTS}},
    {"lr=1e-3 centered momentum=0.9 weight_decay=1e-3",
     {.lr = 1e-3, .centered = true, .momentum = 0.9, .weight_decay = 1e-3, TORCH_DEFAULTS}},
    {"lr=0.1 weight_decay=0.1", {.lr = 0.1, .weight_decay = 0.1, TORCH_DEFAULTS}},
};
#undef TORCH_DEFAULTS
#define N_SETTINGS ((int)(sizeof optim_settings / sizeof optim_settings[0]))

static void check_optimizers(selftest *c)
{
    /* parameter dtype, and the dtype the model sees (a float32 master of a half parameter) */
    static const dtype kinds[5][2] = {{DTYPE_FLOAT32, DTYPE_FLOAT32},
                                      {DTYPE_FLOAT16, DTYPE_FLOAT16},
                                      {DTYPE_BFLOAT16, DTYPE_BFLOAT16},
                                      {DTYPE_FLOAT32, DTYPE_FLOAT16},
                                      {DTYPE_FLOAT32, DTYPE_BFLOAT16}};
    const int64_t n = 1031;
    for (int o = 0; o < OPTIM_KIND_COUNT * N_SETTINGS; o++) /* each kind in each setting */
        for (int k = 0; k < 5; k++) {
            optim_config setting = optim_settings[o % N_SETTINGS].cfg;
            setting.kind = (optim_kind)(o / N_SETTINGS);
            const optim_config *cfg = &setting;
            dtype dt = kinds[k][0], visible = kinds[k][1];
            int ns = optim_state_count(cfg);
            pair p = make_random(c, "param", dt, 1, &n, GEN_NORMAL, 1.0f);
            pair state[OPTIM_MAX_STATE];
            for (int s = 0; s < ns; s++) {
                char name[32];
                snprintf(name, sizeof name, "state%d", s);
                state[s] = make(c, name, dt, 1, &n, NULL);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i, c->s[i].be->fill(c->s[i].be, state[s].t[i], 0.0f));
            }
            for (int64_t step = 1; step <= 3 && ready(c) && !c->detail[0]; step++) {
                float *gv = gen(c, n, GEN_NORMAL, 1e-2f);
                for (int64_t i = 0; gv && i < n; i += 7)
                    gv[i] = 0.0f; /* some elements the step leaves alone */
                pair g = make(c, "grad", dt, 1, &n, gv);
                free(gv);
                optim_hyper h = optim_hyper_at(cfg, cfg->lr, step);
                optim_result res[2];
                for (int i = 0; ready(c) && i < 2; i++) {
                    optim_tensors t = {.param = p.t[i], .grad = g.t[i], .visible = visible};
                    for (int s = 0; s < ns; s++)
                        t.state[s] = state[s].t[i];
                    memset(&res[i], 0, sizeof res[i]);
                    res[i].counting = true;
                    round_stats_init(&res[i].param);
                    for (int s = 0; s < ns; s++)
                        round_stats_init(&res[i].state[s]);
                    op_rc(c, i, c->s[i].be->optimizer_step(c->s[i].be, cfg, &h, &t, &res[i]));
                }
                if (!ready(c))
                    break;
                char what[48];
                snprintf(what, sizeof what, "step %lld param", (long long)step);
                round_stats st[2] = {res[0].param, res[1].param};
                compare(c, what, p, st, EXACT);
                for (int s = 0; s < ns; s++) {
                    snprintf(what, sizeof what, "step %lld state %d", (long long)step, s);
                    round_stats sst[2] = {res[0].state[s], res[1].state[s]};
                    compare(c, what, state[s], sst, EXACT);
                }
                if (res[0].lost_updates != res[1].lost_updates)
                    differ(c, "step %lld: lost updates %lld vs %lld", (long long)step,
                           (long long)res[0].lost_updates, (long long)res[1].lost_updates);
            }
            report(c, "optimizer_step", "%s %s, %s%s%s, 3 steps", optim_kind_name(cfg->kind),
                   optim_settings[o % N_SETTINGS].what, dtype_name(dt),
                   visible != dt ? " master of " : "", visible != dt ? dtype_name(visible) : "");
        }
}

/* ---- exact counts: products and sums that are exact in float32 ----
 * Operands are 0 or +-m, with m a power of two (x's m times w's m = p), so every product is
 * 0 or +-p and every output k * p for a small integer k, exact in any summation order. The
 * outputs land where a flush to zero or an inexact algorithm (FFT, Winograd, an atomic
 * order) would change a count: in float32's subnormal range, and on float16's and
 * bfloat16's underflow boundary (p at or below half the smallest subnormal: an output of p
 * rounds to zero, one of a few p to a subnormal). The
 * two sides must agree exactly, values and counts, and the reference must count what the
 * case is built to reach (else the case tests nothing). */
typedef struct exact_case {
    dtype in, out;  /* both operands in `in`; the output (and dy) in `out` */
    float m;        /* each operand's magnitude */
    const char *at; /* where the outputs land, for the report line */
    bool subnormal; /* the reference must count subnormal outputs */
    bool underflow; /* ... and underflows */
} exact_case;

static const exact_case exact_cases[] = {
    {DTYPE_FLOAT32, DTYPE_FLOAT32, 0x1p-70f, "float32 subnormals (p = 2^-140)", true, false},
    {DTYPE_BFLOAT16, DTYPE_FLOAT32, 0x1p-70f, "float32 subnormals (p = 2^-140)", true, false},
    {DTYPE_BFLOAT16, DTYPE_BFLOAT16, 0x1p-67f, "bfloat16's underflow boundary (p = 2^-134)", true,
     true},
    {DTYPE_FLOAT16, DTYPE_FLOAT16, 0x1p-13f, "float16's underflow boundary (p = 2^-26)", true,
     true},
    {DTYPE_FLOAT32, DTYPE_FLOAT16, 0x1p-13f, "float16's underflow boundary (p = 2^-26)", true,
     true},
};

/* 0 or +-m, each half the time */
static pair make_pow2(selftest *c, const char *name, dtype dt, int ndim, const int64_t *shape,
                      float m)
{
    int64_t n = shape_numel(ndim, shape);
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!v) {
        setup_failed(c, "out of host memory");
        return (pair){{NULL, NULL}};
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = rng_uniform(&c->g) < 0.5 ? 0.0f : rng_uniform(&c->g) < 0.5 ? -m : m;
    pair p = make(c, name, dt, ndim, shape, v);
    free(v);
    return p;
}

/* the reference's counts reach what the case is built for */
static void expect_reached(selftest *c, const exact_case *ec, const round_stats *ref)
{
    if (!ready(c))
        return;
    if (ec->subnormal && ref->counts.subnormal == 0)
        differ(c, "the reference counts no subnormal output: the case does not reach %s", ec->at);
    if (ec->underflow && ref->counts.underflow == 0)
        differ(c, "the reference counts no underflow: the case does not reach %s", ec->at);
    if (ref->counts.zeros == 0)
        differ(c, "the reference counts no zero output");
}

/* --gpu-math native counts the stored tensor (round_stats.unseen): its zeros are the
 * reference's zeros and underflows; subnormals, NaNs, amax and amin_nonzero are the same */
static void compare_unseen(selftest *c, const char *what, const round_stats *r,
                           const round_stats *d, dtype dt)
{
    if (r->numel != d->numel)
        differ(c, "%s: counted %lld elements vs %lld", what, (long long)r->numel,
               (long long)d->numel);
    if (r->counts.zeros + r->counts.underflow != d->counts.zeros)
        differ(c, "%s: stored zeros %lld (zeros %lld + underflow %lld) vs %lld", what,
               (long long)(r->counts.zeros + r->counts.underflow), (long long)r->counts.zeros,
               (long long)r->counts.underflow, (long long)d->counts.zeros);
    if (r->counts.subnormal != d->counts.subnormal || r->counts.nan != d->counts.nan)
        differ(c, "%s: subnormal %lld vs %lld, nan %lld vs %lld", what,
               (long long)r->counts.subnormal, (long long)d->counts.subnormal,
               (long long)r->counts.nan, (long long)d->counts.nan);
    if (dtype_bits(r->counts.amax, dt) != dtype_bits(d->counts.amax, dt) ||
        dtype_bits(r->counts.amin_nonzero, dt) != dtype_bits(d->counts.amin_nonzero, dt))
        differ(c, "%s: amax %.9g vs %.9g, amin_nonzero %.9g vs %.9g", what, r->counts.amax,
               d->counts.amax, r->counts.amin_nonzero, d->counts.amin_nonzero);
}

/* values bit-equal; counts equal (or, for a native output, the stored tensor's) */
static void compare_exact(selftest *c, const char *what, pair p, const round_stats st[2],
                          const exact_case *ec)
{
    if (st[1].unseen) {
        compare(c, what, p, NULL, EXACT);
        if (ready(c))
            compare_unseen(c, what, &st[0], &st[1], p.t[0]->dtype);
    } else {
        compare(c, what, p, st, EXACT);
    }
    expect_reached(c, ec, &st[0]);
}

static void check_exact_linear(selftest *c, round_stats *st, const char *mode)
{
    static const int64_t dims[2][3] = {{7, 19, 11}, {64, 96, 80}}; /* B, I, O */
    for (size_t e = 0; e < sizeof exact_cases / sizeof exact_cases[0]; e++)
        for (int d = 0; d < 2; d++) {
            const exact_case *ec = &exact_cases[e];
            const int64_t B = dims[d][0], I = dims[d][1], O = dims[d][2];
            const int64_t xs[2] = {B, I}, ws[2] = {O, I}, ys[2] = {B, O};
            char what[160];
            snprintf(what, sizeof what, "%s%s -> %s [%lld, %lld, %lld] at %s", mode,
                     dtype_name(ec->in), dtype_name(ec->out), (long long)B, (long long)I,
                     (long long)O, ec->at);
            pair x = make_pow2(c, "x", ec->in, 2, xs, ec->m);
            pair w = make_pow2(c, "w", ec->in, 2, ws, ec->m);
            pair y = make(c, "y", ec->out, 2, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->linear_forward(c->s[i].be, x.t[i], w.t[i], NULL, y.t[i], &st[i]));
            compare_exact(c, "y", y, st, ec);
            report(c, "linear_forward", "exact %s", what);

            /* dx [B, I] = dy [B, O] w [O, I]: dy and w in the operands' dtype, dx (where the
             * rounding lands) in the output's; the same for dw */
            pair dy = make_pow2(c, "dy", ec->in, 2, ys, ec->m);
            w = make_pow2(c, "w", ec->in, 2, ws, ec->m);
            pair dx = make(c, "dx", ec->out, 2, xs, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->linear_backward_input(c->s[i].be, dy.t[i], w.t[i], dx.t[i],
                                                        &st[i]));
            compare_exact(c, "dx", dx, st, ec);
            report(c, "linear_backward_input", "exact %s", what);

            dy = make_pow2(c, "dy", ec->in, 2, ys, ec->m);
            x = make_pow2(c, "x", ec->in, 2, xs, ec->m);
            pair dw = make(c, "dw", ec->out, 2, ws, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->linear_backward_weight(c->s[i].be, dy.t[i], x.t[i], dw.t[i],
                                                         &st[i]));
            compare_exact(c, "dw", dw, st, ec);
            report(c, "linear_backward_weight", "exact %s", what);
        }
}

static void check_exact_conv2d(selftest *c, round_stats *st)
{
    const conv2d_geom geoms[2] = {
        conv_geom(2, 3, 8, 8, 4, 3, 1, 1, 1, 1),
        conv_geom(2, 4, 12, 11, 8, 3, 2, 1, 1, 1),
    };
    for (size_t e = 0; e < sizeof exact_cases / sizeof exact_cases[0]; e++)
        for (int k = 0; k < 2; k++) {
            const exact_case *ec = &exact_cases[e];
            const conv2d_geom *g = &geoms[k];
            const int64_t xs[4] = {g->n, g->c_in, g->h_in, g->w_in};
            const int64_t ws[4] = {g->c_out, g->c_in / g->groups, g->kh, g->kw};
            const int64_t ys[4] = {g->n, g->c_out, g->h_out, g->w_out};
            char what[192];
            snprintf(what, sizeof what, "%s -> %s x [%lld,%lld,%lld,%lld] k %lld stride %lld at %s",
                     dtype_name(ec->in), dtype_name(ec->out), (long long)g->n, (long long)g->c_in,
                     (long long)g->h_in, (long long)g->w_in, (long long)g->kh, (long long)g->stride,
                     ec->at);
            pair x = make_pow2(c, "x", ec->in, 4, xs, ec->m);
            pair w = make_pow2(c, "w", ec->in, 4, ws, ec->m);
            pair y = make(c, "y", ec->out, 4, ys, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_forward(c->s[i].be, g, x.t[i], w.t[i], NULL, y.t[i],
                                                 &st[i]));
            compare_exact(c, "y", y, st, ec);
            report(c, "conv2d_forward", "exact %s", what);

            pair dy = make_pow2(c, "dy", ec->in, 4, ys, ec->m);
            w = make_pow2(c, "w", ec->in, 4, ws, ec->m);
            pair dx = make(c, "dx", ec->out, 4, xs, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_backward_input(c->s[i].be, g, dy.t[i], w.t[i], dx.t[i],
                                                        &st[i]));
            compare_exact(c, "dx", dx, st, ec);
            report(c, "conv2d_backward_input", "exact %s", what);

            dy = make_pow2(c, "dy", ec->in, 4, ys, ec->m);
            x = make_pow2(c, "x", ec->in, 4, xs, ec->m);
            pair dw = make(c, "dw", ec->out, 4, ws, NULL);
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->conv2d_backward_weight(c->s[i].be, g, dy.t[i], x.t[i], dw.t[i],
                                                         &st[i]));
            compare_exact(c, "dw", dw, st, ec);
            report(c, "conv2d_backward_weight", "exact %s", what);
        }
}

/* the exact-count checks, then the GEMM ones again with the device under test in
 * --gpu-math native (half outputs straight from cuBLAS; a CPU backend ignores it) */
static void check_exact_counts(selftest *c, round_stats *st)
{
    check_exact_linear(c, st, "");
    check_exact_conv2d(c, st);
    backend *dut = c->s[1].be;
    bool saved = dut->native_math;
    dut->native_math = true;
    check_exact_linear(c, st, "native, ");
    dut->native_math = saved;
}

/* ---- float8 (te.Linear's ops): amax, fp8_quantize exact; fp8_gemm exact on operands
 * whose sums are exact in any order and precision, then measured: the largest relative
 * difference of the device's GEMM from the reference's float32 accumulation, with
 * cuBLASLt's FAST_ACCUM on and off (Hopper keeps fast-accumulated partial sums in fewer
 * bits); a measurement, never a failure. Skipped where the device has no float8 GEMMs. */
static void check_fp8_quantize(selftest *c)
{
    static const dtype formats[2] = {DTYPE_FLOAT8_E4M3FN, DTYPE_FLOAT8_E5M2};
    const int64_t xs[2] = {24, 40}, ts[2] = {40, 24};
    for (int f = 0; f < 2; f++)
        for (int sat = 1; sat >= 0; sat--)
            for (int a = 0; a < 3; a++) {
                dtype dt = formats[f];
                pair x = make_random(c, "x", float_dtypes[a], 2, xs, GEN_WIDE, 1.0f);
                pair q = make(c, "q", dt, 2, xs, NULL), qt = make(c, "qt", dt, 2, ts, NULL);
                float amax[2] = {-1, -1}, scale = 0x1p12f;
                int64_t n[2] = {-1, -1};
                round_stats st[2];
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++) {
                    backend *be = c->s[i].be;
                    op_rc(c, i, be->amax(be, x.t[i], &amax[i]));
                    op_rc(c, i, be->fp8_quantize(be, x.t[i], scale, sat, q.t[i], qt.t[i], &n[i],
                                                 &st[i]));
                }
                if (ready(c) && float_bits(amax[0]) != float_bits(amax[1]))
                    differ(c, "amax %.9g vs %.9g", amax[0], amax[1]);
                if (ready(c) && n[0] != n[1])
                    differ(c, "saturated %lld vs %lld", (long long)n[0], (long long)n[1]);
                compare(c, "q", q, st, EXACT);
                compare(c, "qt", qt, NULL, EXACT);
                report(c, "fp8_quantize", "x %s into %s, %s, scale 2^12", dtype_name(float_dtypes[a]),
                       dtype_name(dt), sat ? "saturating" : "plain");
            }
}

/* MXFP8's block quantization (row-wise and column-wise, its E8M0 scales and saturated
 * count) and block GEMM, exact: "SKIP" where the device under test runs no MXFP8 */
static void check_fp8_block(selftest *c, round_stats *st)
{
    if (!backend_supports(c->s[1].be, BACKEND_OP_fp8_block_quantize, DTYPE_FLOAT8_E4M3FN) ||
        !backend_supports(c->s[1].be, BACKEND_OP_fp8_block_gemm, DTYPE_FLOAT8_E4M3FN)) {
        fprintf(c->out, "SKIP fp8_block_quantize, fp8_block_gemm (the %s backend runs no MXFP8)\n",
                c->s[1].be->name);
        return;
    }
    const int64_t M = 32, N = 16, K = 64, as[2] = {M, K}, bs[2] = {N, K}, ys[2] = {M, N};
    for (int a = 0; a < 3; a++)
        for (int colwise = 0; colwise < 2; colwise++) {
            const int64_t qs[2] = {colwise ? K : M, colwise ? M : K};
            pair x = make_random(c, "x", float_dtypes[a], 2, as, GEN_NORMAL, 8.0f);
            pair q = make(c, "q", DTYPE_FLOAT8_E4M3FN, 2, qs, NULL);
            uint8_t e8m0[2][M * K / 32];
            int64_t n[2] = {-1, -1};
            stats_init2(st);
            for (int i = 0; ready(c) && i < 2; i++)
                op_rc(c, i,
                      c->s[i].be->fp8_block_quantize(c->s[i].be, x.t[i], colwise, q.t[i], e8m0[i],
                                                     &n[i], &st[i]));
            if (ready(c) && memcmp(e8m0[0], e8m0[1], sizeof e8m0[0]) != 0)
                differ(c, "the blocks' E8M0 scales differ");
            if (ready(c) && n[0] != n[1])
                differ(c, "saturated %lld vs %lld", (long long)n[0], (long long)n[1]);
            compare(c, "q", q, st, EXACT);
            report(c, "fp8_block_quantize", "x %s, %s", dtype_name(float_dtypes[a]),
                   colwise ? "column-wise" : "row-wise");
        }
    for (int o = 0; o < 3; o++) {
        pair x = make_random(c, "x", DTYPE_FLOAT32, 2, as, GEN_NORMAL, 1.0f);
        pair w = make_random(c, "w", DTYPE_FLOAT32, 2, bs, GEN_NORMAL, 1.0f);
        pair xq = make(c, "xq", DTYPE_FLOAT8_E4M3FN, 2, as, NULL);
        pair wq = make(c, "wq", DTYPE_FLOAT8_E4M3FN, 2, bs, NULL);
        pair bias = make_random(c, "bias", float_dtypes[o], 1, &N, GEN_NORMAL, 1.0f);
        pair y = make(c, "y", float_dtypes[o], 2, ys, NULL);
        uint8_t xe[M * K / 32], we[N * K / 32];
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++) {
            backend *be = c->s[i].be;
            int64_t n;
            op_rc(c, i, be->fp8_block_quantize(be, x.t[i], false, xq.t[i], xe, &n, NULL));
            op_rc(c, i, be->fp8_block_quantize(be, w.t[i], false, wq.t[i], we, &n, NULL));
            op_rc(c, i,
                  be->fp8_block_gemm(be, xq.t[i], xe, wq.t[i], we, bias.t[i], y.t[i], &st[i]));
        }
        compare(c, "y", y, st, EXACT);
        report(c, "fp8_block_gemm", "-> %s, bias", dtype_name(float_dtypes[o]));
    }
}

/* NVFP4's and MXFP4's block quantization (row-wise, column-wise with the RHT, 2D tiles,
 * stochastic rounding) and its scales, and the block GEMM, exact: "SKIP" where the device
 * under test runs no FP4 */
static void check_fp4_block(selftest *c, round_stats *st)
{
    if (!backend_supports(c->s[1].be, BACKEND_OP_fp4_block_quantize, DTYPE_FLOAT4_E2M1FN)) {
        fprintf(c->out, "SKIP fp4_block_quantize, fp4_block_gemm (the %s backend runs no FP4)\n",
                c->s[1].be->name);
        return;
    }
    const int64_t M = 32, K = 64, as[2] = {M, K};
    const fp4_quant_opts opts[4] = {{.recipe = FP4_NVFP4},
                                    {.recipe = FP4_NVFP4, .colwise = true, .rht = true},
                                    {.recipe = FP4_NVFP4, .block_2d = true, .stochastic = true,
                                     .seed = 7},
                                    {.recipe = FP4_MXFP4, .colwise = true}};
    for (int k = 0; k < 4; k++) {
        const int64_t qs[2] = {opts[k].colwise ? K : M, opts[k].colwise ? M : K};
        pair x = make_random(c, "x", DTYPE_BFLOAT16, 2, as, GEN_NORMAL, 8.0f);
        pair q = make(c, "q", DTYPE_FLOAT4_E2M1FN, 2, qs, NULL);
        uint8_t sc[2][M * K / 16];
        fp4_quant_stats out[2];
        stats_init2(st);
        for (int i = 0; ready(c) && i < 2; i++)
            op_rc(c, i,
                  c->s[i].be->fp4_block_quantize(c->s[i].be, x.t[i], &opts[k], q.t[i], sc[i],
                                                 &out[i], &st[i]));
        if (ready(c) && (memcmp(sc[0], sc[1], (size_t)out[0].blocks) != 0 ||
                         out[0].blocks != out[1].blocks))
            differ(c, "the blocks' scales differ");
        if (ready(c) && out[0].saturated != out[1].saturated)
            differ(c, "saturated %lld vs %lld", (long long)out[0].saturated,
                   (long long)out[1].saturated);
        compare(c, "q", q, st, EXACT);
        report(c, "fp4_block_quantize", "%s%s%s%s%s", opts[k].recipe == FP4_NVFP4 ? "NVFP4" : "MXFP4",
               opts[k].colwise ? ", column-wise" : "", opts[k].rht ? ", RHT" : "",
               opts[k].block_2d ? ", 16x16" : "", opts[k].stochastic ? ", stochastic" : "");
    }
    const int64_t N = 16, bs[2] = {N, K}, ys[2] = {M, N};
    const fp4_quant_opts wo = {.recipe = FP4_NVFP4, .block_2d = true};
    pair x = make_random(c, "x", DTYPE_BFLOAT16, 2, as, GEN_NORMAL, 1.0f);
    pair w = make_random(c, "w", DTYPE_FLOAT32, 2, bs, GEN_NORMAL, 1.0f);
    pair xq = make(c, "xq", DTYPE_FLOAT4_E2M1FN, 2, as, NULL);
    pair wq = make(c, "wq", DTYPE_FLOAT4_E2M1FN, 2, bs, NULL);
    pair y = make(c, "y", DTYPE_BFLOAT16, 2, ys, NULL);
    uint8_t xs[M * K / 16], ws[N * K / 16];
    stats_init2(st);
    for (int i = 0; ready(c) && i < 2; i++) {
        backend *be = c->s[i].be;
        fp4_quant_stats xo, wso;
        op_rc(c, i, be->fp4_block_quantize(be, x.t[i], &opts[0], xq.t[i], xs, &xo, NULL));
        op_rc(c, i, be->fp4_block_quantize(be, w.t[i], &wo, wq.t[i], ws, &wso, NULL));
        op_rc(c, i,
              be->fp4_block_gemm(be, xq.t[i], xs, &opts[0], xo.s_enc, wq.t[i], ws, &wo,
                                 wso.s_enc, NULL, y.t[i], &st[i]));
    }
    compare(c, "y", y, st, EXACT);
    report(c, "fp4_block_gemm", "NVFP4 x 16x16 NVFP4 -> bfloat16");
}

/* max |dut - ref| / max |ref| over y's elements (float32 outputs) */
static double largest_relative(selftest *c, pair y)
{
    float *r = (float *)download(c, 0, y.t[0]), *d = (float *)download(c, 1, y.t[1]);
    double diff = 0.0, ref = 0.0;
    for (int64_t i = 0; r && d && i < y.t[0]->numel; i++) {
        diff = fmax(diff, fabs((double)d[i] - r[i]));
        ref = fmax(ref, fabs((double)r[i]));
    }
    free(r);
    free(d);
    return ref > 0 ? diff / ref : diff;
}

static void check_fp8_gemm(selftest *c, round_stats *st)
{
    if (!backend_supports(c->s[1].be, BACKEND_OP_fp8_gemm, DTYPE_FLOAT8_E4M3FN)) {
        fprintf(c->out, "SKIP fp8_gemm (the %s backend has no float8 GEMMs: compute capability "
                        "below 8.9)\n", c->s[1].be->name);
        return;
    }
    static const dtype pairs[3][2] = {{DTYPE_FLOAT8_E4M3FN, DTYPE_FLOAT8_E4M3FN},
                                      {DTYPE_FLOAT8_E5M2, DTYPE_FLOAT8_E4M3FN},
                                      {DTYPE_FLOAT8_E4M3FN, DTYPE_FLOAT8_E5M2}};
    const int64_t M = 32, N = 16, K = 48, as[2] = {M, K}, bs[2] = {N, K}, ys[2] = {M, N};
    for (int p = 0; p < 3; p++)
        for (int o = 0; o < 3; o++)
            for (int fast = 0; fast < 2; fast++) {
                /* operands in {0, +-0.5, +-1, +-2}: every partial sum is a multiple of 1/4
                 * below 2^8, exact in float32 and in fewer bits, in any order */
                float *v = malloc(sizeof(float) * (size_t)(M * K + N * K));
                if (!v) {
                    setup_failed(c, "out of host memory");
                    return;
                }
                for (int64_t i = 0; i < M * K + N * K; i++)
                    v[i] = ldexpf((float)((int)rng_below(&c->g, 3) - 1), (int)rng_below(&c->g, 3) - 1);
                pair a = make(c, "a", pairs[p][0], 2, as, v);
                pair b = make(c, "b", pairs[p][1], 2, bs, v + M * K);
                free(v);
                pair bias = make_random(c, "bias", float_dtypes[o], 1, &N, GEN_NORMAL, 1.0f);
                pair y = make(c, "y", float_dtypes[o], 2, ys, NULL);
                stats_init2(st);
                for (int i = 0; ready(c) && i < 2; i++)
                    op_rc(c, i, c->s[i].be->fp8_gemm(c->s[i].be, a.t[i], b.t[i], 0.5f, 4.0f,
                                                     bias.t[i], fast, y.t[i], &st[i]));
                compare(c, "y", y, st, EXACT);
                report(c, "fp8_gemm", "%s x %s -> %s, bias, exact sums%s",
                       dtype_name(pairs[p][0]), dtype_name(pairs[p][1]), dtype_name(float_dtypes[o]),
                       fast ? ", fast_accum" : "");
            }
    /* the accumulation measured: normal operands quantized with scales near TE's */
    const int64_t Kl = 4096, al[2] = {M, Kl}, bl[2] = {N, Kl};
    for (int fast = 0; fast < 2; fast++) {
        pair x = make_random(c, "x", DTYPE_FLOAT32, 2, al, GEN_NORMAL, 1.0f);
        pair w = make_random(c, "w", DTYPE_FLOAT32, 2, bl, GEN_NORMAL, 1.0f);
        pair xq = make(c, "xq", DTYPE_FLOAT8_E4M3FN, 2, al, NULL);
        pair wq = make(c, "wq", DTYPE_FLOAT8_E4M3FN, 2, bl, NULL);
        pair y = make(c, "y", DTYPE_FLOAT32, 2, ys, NULL);
        for (int i = 0; ready(c) && i < 2; i++) {
            backend *be = c->s[i].be;
            int64_t n;
            op_rc(c, i, be->fp8_quantize(be, x.t[i], 64.0f, true, xq.t[i], NULL, &n, NULL));
            op_rc(c, i, be->fp8_quantize(be, w.t[i], 64.0f, true, wq.t[i], NULL, &n, NULL));
            op_rc(c, i, be->fp8_gemm(be, xq.t[i], wq.t[i], 1.0f / 64, 1.0f / 64, NULL, fast,
                                     y.t[i], NULL));
        }
        if (ready(c))
            fprintf(c->out,
                    "MEASURE fp8_gemm e4m3 x e4m3, K %lld, fast_accum %s: largest difference "
                    "from float32 accumulation %.3g of the largest |y|\n",
                    (long long)Kl, fast ? "on" : "off", largest_relative(c, y));
        else
            fprintf(c->out, "FAIL fp8_gemm measurement (%s)\n", c->err);
        c->failed += !ready(c);
        c->err[0] = c->detail[0] = '\0';
        for (int i = 0; i < 2; i++) {
            tensor_pool_clear(&c->s[i].pool);
            c->s[i].account.current[MEM_WORKSPACE] = 0;
        }
    }
}

int selftest_run(backend *ref, backend *dut, FILE *out)
{
    selftest *c = calloc(1, sizeof *c);
    round_stats *st = calloc(2, sizeof *st);
    if (!c || !st) {
        fprintf(out, "FAIL selftest (out of host memory)\nselftest: 0 passed, 1 failed\n");
        free(c);
        free(st);
        return 1;
    }
    c->out = out;
    rng_seed(&c->g, 20240611);
    backend *bes[2] = {ref, dut};
    for (int i = 0; i < 2; i++) {
        side *s = &c->s[i];
        s->be = bes[i];
        s->saved_account = bes[i]->account;
        s->pool = (tensor_pool){.be = bes[i], .account = &s->account};
    }
    for (int i = 0; i < 2; i++)
        bes[i]->account = &c->s[i].account;
    check_rounding_ops(c, st);
    check_pointwise(c, st);
    check_linear(c, st);
    check_reduce(c, st);
    check_conv2d(c, st);
    check_losses(c, st);
    check_bce_l1(c, st); /* losses bce_with_logits and l1 */
    check_sdpa(c, st);   /* scaled_dot_product_attention */
    check_unscale(c, st);
    check_optimizers(c);
    check_exact_counts(c, st);
    /* activations */
    check_softmax(c, st);
    check_causal_fill(c, st);
    /* normalization and pooling */
    check_norm(c, st);
    check_batch_norm(c, st);
    check_upsample(c, st);
    check_pools(c, st);
    /* graph models */
    check_graph_ops(c, st);
    check_shape_ops(c, st);
    /* float8 */
    check_fp8_quantize(c);
    check_fp8_gemm(c, st);
    check_fp8_block(c, st);
    check_fp4_block(c, st);
    for (int i = 1; i >= 0; i--)
        bes[i]->account = c->s[i].saved_account;
    fprintf(out, "selftest: %d passed, %d failed\n", c->passed, c->failed);
    int failed = c->failed;
    free(st);
    free(c);
    return failed;
}
