/*
 * test_pointwise.c: every pointwise row (ops/pointwise.h), by looping over the list, so a new
 * row is tested without a new test:
 *  - float64 finite differences: the row's formulas built again in double (PW_REAL double,
 *    PW_EXACT: no rounding points), at several shapes and broadcast patterns and two
 *    parameter sets (positive operands for a row undefined at -1); central differences of
 *    the double forward of L = sum(R * y) against the double backward formulas summed
 *    over each operand element's broadcast (1e-6
 *    relative), the formulas reading only what the row saves (the others are NaN here);
 *  - the harness's float32 path against that double gradient: the row's layer forward and,
 *    through the tape, its backward with the broadcast reduction (float32 sums of at most
 *    24 terms: 2e-5 relative plus 1e-6 of the largest), and its forward (1e-6 relative
 *    plus 1e-6: gelu's 1 + erf cancels for negative inputs);
 *  - PyTorch's values: tests/references/pointwise.csv (tools/pointwise_references.py) holds
 *    each row's forward and backward from its ATen ops on fixed inputs, in float32 and, as
 *    CUDA computes them, in float16 and bfloat16; the row's layer forward and backward
 *    must match them (float32 within float32 noise, half bit for bit but for gelu's
 *    cancellation), and a row without a reference fails, named;
 *  - Python scalar operands (`add x 1e-6`), by hand: no promotion, the scalar as float32
 *    opmath, a scalar divisor's reciprocal, a scalar first operand.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/run.h"
#include "core/rng.h"
#include "helpers.h"
#include "layers/layer.h"
#include "ops/broadcast.h"
#include "ops/pointwise.h"

/* the formulas in float64 */
#define PW_REAL double
#define PW_FN(name) name##_f64
#define PW_EXACT
#include "ops/pointwise_math.h"

#define MAXN 256

static double forward64(pw_op op, double a, double b, double c, const op_params *p, int64_t i)
{
    switch (op) {
#define PW_F64(name, ...)                                                                          \
    case PW_OP_##name:                                                                             \
        return pw_##name##_forward_f64(a, b, c, p, i, DTYPE_FLOAT32);
        POINTWISE_OPS(PW_F64)
#undef PW_F64
    case PW_OP_COUNT:
        break;
    }
    cr_assert_fail("no row %d", (int)op);
    return 0;
}

static double backward64(pw_op op, int k, double g, const double *v, double y, const op_params *p,
                         int64_t i)
{
    switch (op) {
#define PW_B64_CASE(j, name)                                                                       \
    case j:                                                                                        \
        return pw_##name##_backward_##j##_f64(g, v[0], v[1], v[2], y, p, i, DTYPE_FLOAT32);
#define PW_B64(name, arity, ...)                                                                   \
    case PW_OP_##name:                                                                             \
        switch (k) {                                                                               \
            PW_EACH_OPERAND(arity, PW_B64_CASE, name)                                              \
        }                                                                                          \
        break;
        POINTWISE_OPS(PW_B64)
#undef PW_B64
#undef PW_B64_CASE
    case PW_OP_COUNT:
        break;
    }
    cr_assert_fail("no row %d operand %d", (int)op, k);
    return 0;
}

/* ---- one check: a row, its operands' shapes, its parameters ---- */

typedef struct fd_case {
    pw_op op;
    int nd[PW_MAX_ARITY];
    int64_t shape[PW_MAX_ARITY][TENSOR_MAX_DIMS];
    int set; /* parameter set 0 or 1 */
} fd_case;

typedef struct fd_state {
    const fd_case *fc;
    int n, ond;
    int64_t oshape[TENSOR_MAX_DIMS], onumel, numel[PW_MAX_ARITY];
    bcast_view v;
    double x[PW_MAX_ARITY][MAXN]; /* the operands (float32 values) */
    double r[MAXN];               /* dL/dy */
    op_params p;
} fd_state;

static double loss64(const fd_state *s)
{
    double L = 0;
    for (int64_t i = 0; i < s->onumel; i++) {
        double a[PW_MAX_ARITY] = {0, 0, 0};
        for (int k = 0; k < s->n; k++)
            a[k] = s->x[k][bcast_index(&s->v, k, i)];
        L += s->r[i] * forward64(s->fc->op, a[0], a[1], a[2], &s->p, i);
    }
    return L;
}

/* the double backward of operand k, summed over the outputs each of its elements feeds */
static void grad64(const fd_state *s, int k, double *out)
{
    const pw_row *row = &pw_rows[s->fc->op];
    for (int64_t j = 0; j < s->numel[k]; j++)
        out[j] = 0;
    for (int64_t i = 0; i < s->onumel; i++) {
        double a[PW_MAX_ARITY] = {0, 0, 0}, seen[PW_MAX_ARITY] = {NAN, NAN, NAN};
        for (int j = 0; j < s->n; j++) {
            a[j] = s->x[j][bcast_index(&s->v, j, i)];
            if (row->backward & PW_SAVES(j))
                seen[j] = a[j];
        }
        double y =
            row->backward & PW_SAVE_OUT ? forward64(s->fc->op, a[0], a[1], a[2], &s->p, i) : NAN;
        out[bcast_index(&s->v, k, i)] += backward64(s->fc->op, k, s->r[i], seen, y, &s->p, i);
    }
}

static const float *g_r; /* what the consumer hands y as its gradient */

static void consumer_backward(run *r, node *n)
{
    tensor *g = node_grad_tensor(r, n, 0);
    float v[MAXN];
    for (int64_t i = 0; i < g->numel; i++)
        v[i] = g_r[i];
    tensor *f = run_tensor_like(r, g, "dy", DTYPE_FLOAT32, MEM_GRADS);
    r->be->upload(r->be, f->data, v, (int64_t)sizeof(float) * g->numel);
    cr_assert_eq(r->be->cast(r->be, f, g, NULL), 0);
    tensor_release(&r->pool, f);
    node_give_grad(r, n, 0, g, NULL);
}

/* The row's layer on leaves of dtype dt holding x[k] (shapes nd[k], shape[k]; one leaf fewer
 * when l has a Python scalar operand), its forward into *y, then backward from dL/dy = dy
 * (rounded into y's dtype); the leaves' .grad hold the gradients. A bare run, closed by the
 * caller. */
static run *row_run(pw_op op, const layer_spec *l, dtype dt, const int *nd,
                    const int64_t (*shape)[TENSOR_MAX_DIMS], float *const *x, const float *dy,
                    tensor **in, tensor **y, op_params *p)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    int leaves = pw_rows[op].arity - (l->scalar_operands ? 1 : 0); /* less a Python scalar */
    for (int k = 0; k < leaves; k++) {
        char name[8] = {(char)('a' + k), 0};
        in[k] = run_tensor(r, name, dt, nd[k], shape[k], MEM_PARAMS);
        in[k]->requires_grad = in[k]->is_leaf = true;
        tensor *f = run_tensor(r, "f", DTYPE_FLOAT32, nd[k], shape[k], MEM_PARAMS);
        r->be->upload(r->be, f->data, x[k], (int64_t)sizeof(float) * f->numel);
        cr_assert_eq(r->be->cast(r->be, f, in[k], NULL), 0);
        tensor_release(&r->pool, f);
    }
    *y = pointwise_defs[op].forward(r, l, in, NULL);
    *p = r->nodes[(*y)->grad_fn].pw; /* its parameters, with the seed the layer drew */
    int64_t one = 1;
    tensor *root = run_tensor(r, "L", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    g_r = dy;
    tape_record(r, "R", consumer_backward, root, y, 1);
    tape_backward(r, root, 1.0f);
    return r;
}

static void check_case(const fd_case *fc, rng *g)
{
    const pw_row *row = &pw_rows[fc->op];
    fd_state s = {.fc = fc, .n = row->arity};
    s.ond = fc->nd[0];
    memcpy(s.oshape, fc->shape[0], sizeof s.oshape);
    for (int k = 1; k < s.n; k++)
        cr_assert(shape_broadcast(s.ond, s.oshape, fc->nd[k], fc->shape[k], &s.ond, s.oshape));
    s.onumel = shape_numel(s.ond, s.oshape);
    cr_assert(s.onumel <= MAXN);
    /* a row whose domain is the positive numbers (log, sqrt, rsqrt, pow of a fractional
     * exponent: NaN at -1) takes positive operands */
    op_params at = {.seed = 0};
    for (int j = 0; j < OP_MAX_PARAMS; j++)
        at.real[j] = fc->set ? 0.5 : 0.125;
    bool positive = isnan(forward64(fc->op, -1, -1, -1, &at, 0));
    for (int k = 0; k < s.n; k++) {
        s.numel[k] = shape_numel(fc->nd[k], fc->shape[k]);
        for (int64_t j = 0; j < s.numel[k]; j++) {
            float v = (float)(2 * rng_normal(g)); /* away from relu's kink at 0 */
            v = fabsf(v) < 0.05f ? 0.5f : v;
            s.x[k][j] = positive ? fabsf(v) : v;
        }
    }
    for (int64_t i = 0; i < s.onumel; i++)
        s.r[i] = (float)rng_normal(g);

    /* the harness: the row's layer forward on float32 leaves, then backward with dL/dy = R */
    layer_spec l = {.name = "y", .kind = LAYER_POINTWISE + fc->op};
    for (int j = 0; j < OP_MAX_PARAMS; j++) {
        l.opt_real[j] = fc->set ? 0.5 : 0.125;
        l.opt_choice[j] = fc->set;
    }
    float xf[PW_MAX_ARITY][MAXN], rf[MAXN];
    float *xs[PW_MAX_ARITY] = {xf[0], xf[1], xf[2]};
    for (int k = 0; k < s.n; k++)
        for (int64_t j = 0; j < s.numel[k]; j++)
            xf[k][j] = (float)s.x[k][j];
    for (int64_t i = 0; i < s.onumel; i++)
        rf[i] = (float)s.r[i];
    tensor *in[PW_MAX_ARITY] = {NULL, NULL, NULL}, *y;
    run *r = row_run(fc->op, &l, DTYPE_FLOAT32, fc->nd, fc->shape, xs, rf, in, &y, &s.p);
    s.v = bcast_view_of(y, (const tensor *const *)in, s.n);
    char what[160];
    snprintf(what, sizeof what, "%s (parameters %d) of %lld elements", row->name, fc->set,
             (long long)s.onumel);
    for (int64_t i = 0; i < s.onumel; i++) {
        double a[PW_MAX_ARITY] = {0, 0, 0};
        for (int k = 0; k < s.n; k++)
            a[k] = s.x[k][bcast_index(&s.v, k, i)];
        double want = forward64(fc->op, a[0], a[1], a[2], &s.p, i), got = tensor_at(y, i);
        cr_expect(fabs(got - want) <= 1e-6 * fabs(want) + 1e-6 || (isnan(got) && isnan(want)),
                  "%s: y[%lld] %.9g, float64 %.9g", what, (long long)i, got, want);
    }

    for (int k = 0; k < s.n; k++) {
        double analytic[MAXN], fd[MAXN], top = 0;
        grad64(&s, k, analytic);
        for (int64_t j = 0; j < s.numel[k]; j++) {
            double keep = s.x[k][j], h = 1e-5 * (1 + fabs(keep));
            s.x[k][j] = keep + h;
            double up = loss64(&s);
            s.x[k][j] = keep - h;
            double down = loss64(&s);
            s.x[k][j] = keep;
            fd[j] = (up - down) / (2 * h);
            top = fmax(top, fabs(analytic[j]));
        }
        cr_assert_not_null(in[k]->grad, "%s: operand %d has no gradient", what, k);
        for (int64_t j = 0; j < s.numel[k]; j++) {
            cr_expect(fabs(fd[j] - analytic[j]) <= 1e-6 * fabs(analytic[j]) + 1e-7 * (1 + top),
                      "%s: operand %d [%lld]: backward formula %.12g, finite differences %.12g",
                      what, k, (long long)j, analytic[j], fd[j]);
            double got = tensor_at(in[k]->grad, j);
            cr_expect(fabs(got - analytic[j]) <= 2e-5 * fabs(analytic[j]) + 1e-6 * top,
                      "%s: operand %d [%lld]: the harness's float32 gradient %.9g, float64 %.9g",
                      what, k, (long long)j, got, analytic[j]);
        }
    }
    test_run_close(r);
}

Test(pointwise, every_row_s_backward_matches_float64_finite_differences)
{
    rng g;
    rng_seed(&g, 31);
    /* a row of arity n reads the first n shapes of each pattern */
    static const struct {
        int nd[PW_MAX_ARITY];
        int64_t shape[PW_MAX_ARITY][TENSOR_MAX_DIMS];
    } patterns[] = {
        {{1, 1, 1}, {{40}, {40}, {40}}},
        {{3, 3, 3}, {{2, 3, 7}, {2, 3, 7}, {2, 3, 7}}},
        {{3, 2, 1}, {{2, 3, 4}, {3, 1}, {4}}},
        {{3, 1, 3}, {{2, 3, 4}, {4}, {2, 1, 4}}},
        {{1, 0, 1}, {{5}, {0}, {5}}},
        {{2, 2, 2}, {{3, 1}, {1, 4}, {3, 4}}},
        {{4, 4, 1}, {{2, 3, 2, 2}, {1, 3, 1, 1}, {2}}},
    };
    for (int op = 0; op < PW_OP_COUNT; op++)
        for (size_t q = 0; q < sizeof patterns / sizeof patterns[0]; q++) {
            if (pw_rows[op].arity == 1 && q > 1) /* one operand: nothing broadcasts */
                continue;
            for (int set = 0; set < 2; set++) {
                fd_case fc = {.op = (pw_op)op, .set = set};
                memcpy(fc.nd, patterns[q].nd, sizeof fc.nd);
                memcpy(fc.shape, patterns[q].shape, sizeof fc.shape);
                check_case(&fc, &g);
            }
        }
}

/* ---- PyTorch's values ---- */

#define REFERENCE "tests/references/pointwise.csv"

/* "3x7/7" into shapes */
static int parse_shapes(const char *text, int *nd, int64_t (*shape)[TENSOR_MAX_DIMS])
{
    int n = 0;
    for (const char *p = text; *p && n < PW_MAX_ARITY; n++) {
        nd[n] = 0;
        while (*p && *p != '/') {
            shape[n][nd[n]++] = strtoll(p, (char **)&p, 10);
            if (*p == 'x')
                p++;
        }
        if (*p == '/')
            p++;
    }
    return n;
}

/* "real0=0.125;choice0=1" into the layer's slots */
static void parse_params(const char *text, layer_spec *l)
{
    for (const char *p = text; *p;) {
        int slot;
        double v;
        if (sscanf(p, "real%d=%lf", &slot, &v) == 2)
            l->opt_real[slot] = v;
        else if (sscanf(p, "choice%d=%lf", &slot, &v) == 2)
            l->opt_choice[slot] = (int)v;
        p += strcspn(p, ";");
        p += *p == ';';
    }
}

/* reference_agrees (helpers.h) with float32 noise for PyTorch's CPU erf, exp and tanh
 * against the correctly rounded ones: in float32 2e-6 relative; in a half dtype 8 units of
 * float32's at pre, plus 2^-20 of the operands' largest magnitude (the absolute error a
 * cancelling expression and its derivative carry: gelu's 1 + erf or 1 + tanh for x < -2,
 * where the last bit of erf or tanh is all that is left) */
static bool agrees(float got, float want, float pre, dtype dt, float amax)
{
    return reference_agrees(got, want, pre, dt, 2e-6f,
                            8 * ldexpf(fabsf(pre), -23) + ldexpf(amax, -20));
}

static void expect_tensor(const char *what, const tensor *t, const float *want, const float *pre,
                          int64_t n, float amax)
{
    cr_assert_eq(t->numel, n, "%s: %lld values, the reference %lld", what, (long long)t->numel,
                 (long long)n);
    for (int64_t i = 0; i < n; i++)
        cr_expect(agrees(tensor_at(t, i), want[i], pre ? pre[i] : want[i], t->dtype, amax),
                  "%s[%lld]: the harness %.9g, PyTorch %.9g (%.9g before its rounding)", what,
                  (long long)i, tensor_at(t, i), want[i], pre ? pre[i] : want[i]);
}

/* a tensor of a reference group: the operands a, b, c, dy, y, the gradients da, db, dc, and
 * the values before the last rounding y.f32, da.f32, db.f32, dc.f32 */
enum {
    T_A = 0,
    T_DY = PW_MAX_ARITY,
    T_Y,
    T_DA,
    T_YPRE = T_DA + PW_MAX_ARITY,
    T_DAPRE,
    T_COUNT = T_DAPRE + PW_MAX_ARITY
};

static int tensor_slot(const char *name)
{
    static const char *const names[T_COUNT] = {"a",  "b",  "c",     "dy",     "y",      "da",
                                               "db", "dc", "y.f32", "da.f32", "db.f32", "dc.f32"};
    for (int t = 0; t < T_COUNT; t++)
        if (strcmp(names[t], name) == 0)
            return t;
    cr_assert_fail("%s: no tensor %s", REFERENCE, name);
    return 0;
}

Test(pointwise, every_row_matches_pytorch)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int c_row = csv_col(&ref, "row"), c_par = csv_col(&ref, "params");
    int c_dt = csv_col(&ref, "dtype"), c_sh = csv_col(&ref, "shapes");
    int c_t = csv_col(&ref, "tensor"), c_v = csv_col(&ref, "values");
    bool seen[PW_OP_COUNT] = {false};
    for (int r0 = 0; r0 < ref.n_rows;) {
        char **f = ref.rows[r0];
        int op = 0;
        while (op < PW_OP_COUNT && strcmp(pw_rows[op].name, f[c_row]) != 0)
            op++;
        cr_assert_lt(op, PW_OP_COUNT, "%s names no row: %s", REFERENCE, f[c_row]);
        seen[op] = true;
        int n = pw_rows[op].arity, nd[PW_MAX_ARITY];
        int64_t shape[PW_MAX_ARITY][TENSOR_MAX_DIMS];
        cr_assert_eq(parse_shapes(f[c_sh], nd, shape), n);
        /* a group: its lines of one row, parameters, dtype and shapes */
        static float vals[T_COUNT][MAXN];
        int64_t count[T_COUNT] = {0};
        bool has[T_COUNT] = {false};
        int r1 = r0;
        for (; r1 < ref.n_rows; r1++) {
            char **g = ref.rows[r1];
            if (strcmp(g[c_row], f[c_row]) || strcmp(g[c_par], f[c_par]) ||
                strcmp(g[c_dt], f[c_dt]) || strcmp(g[c_sh], f[c_sh]))
                break;
            int t = tensor_slot(g[c_t]);
            count[t] = parse_floats(g[c_v], vals[t], MAXN);
            has[t] = true;
        }
        cr_assert(has[T_DY] && has[T_Y], "%s line %d: a group without dy or y", REFERENCE, r0 + 2);
        float amax = 0;
        for (int k = 0; k < n; k++)
            for (int64_t i = 0; i < count[T_A + k]; i++)
                amax = fmaxf(amax, fabsf(vals[T_A + k][i]));
        layer_spec l = {.name = "y", .kind = LAYER_POINTWISE + op};
        parse_params(f[c_par], &l);
        dtype dt = dtype_named(f[c_dt]);
        float *xs[PW_MAX_ARITY] = {vals[T_A], vals[T_A + 1], vals[T_A + 2]};
        tensor *in[PW_MAX_ARITY] = {NULL, NULL, NULL}, *y;
        op_params p;
        run *r = row_run((pw_op)op, &l, dt, nd, shape, xs, vals[T_DY], in, &y, &p);
        char what[256];
        snprintf(what, sizeof what, "%s (%s) %s %s: y", f[c_row], f[c_par], f[c_dt], f[c_sh]);
        expect_tensor(what, y, vals[T_Y], has[T_YPRE] ? vals[T_YPRE] : NULL, count[T_Y], amax);
        for (int k = 0; k < n; k++) {
            snprintf(what, sizeof what, "%s (%s) %s %s: d%c", f[c_row], f[c_par], f[c_dt], f[c_sh],
                     'a' + k);
            cr_assert(has[T_DA + k] && in[k]->grad, "%s: no gradient", what);
            expect_tensor(what, in[k]->grad, vals[T_DA + k],
                          has[T_DAPRE + k] ? vals[T_DAPRE + k] : NULL, count[T_DA + k], amax);
        }
        test_run_close(r);
        r0 = r1;
    }
    for (int op = 0; op < PW_OP_COUNT; op++)
        cr_expect(seen[op],
                  "row %s has no reference in " REFERENCE
                  " (bin/ampscope ops --json | tools/pointwise_references.py)",
                  pw_rows[op].name);
    csv_free(&ref);
}

/* ---- Python scalar operands (layer_spec.scalar_operands) ---- */

/* y = the row with the Python scalar s as operand k and a leaf of dtype dt holding x (n
 * values) as the other, then backward from dL/dy = 1 into the leaf's .grad */
static run *scalar_run(pw_op op, int k, double s, dtype dt, const float *x, int64_t n,
                       tensor **leaf, tensor **y)
{
    static const float ones[MAXN] = {[0 ... MAXN - 1] = 1.0f};
    layer_spec l = {.name = "y",
                    .kind = LAYER_POINTWISE + op,
                    .n_inputs = 1,
                    .scalar_operands = 1u << k,
                    .scalar = s};
    int nd[PW_MAX_ARITY] = {1};
    int64_t shape[PW_MAX_ARITY][TENSOR_MAX_DIMS] = {{n}};
    float *xs[PW_MAX_ARITY] = {(float *)x};
    tensor *in[PW_MAX_ARITY];
    op_params p;
    run *r = row_run(op, &l, dt, nd, shape, xs, ones, in, y, &p);
    *leaf = in[0];
    return r;
}

/* float16 x + s: the output stays float16 (a wrapped number takes no part in promotion) and
 * s enters as float32, not first rounded to float16 (on CUDA, TensorIterator casts no CPU
 * scalar to the common dtype): by hand, 2^-14 + (2^-25 + 2^-40) is 2^-14 + 2^-25 in
 * float32, a tie float16 rounds to even, 2^-14; float16(s) would be 2^-24 and the sum
 * 2^-14 + 2^-24. x's gradient is dy, the scalar's none. */
Test(pointwise, scalar_operand_float16_add_stays_float16_by_hand)
{
    float x[2] = {ldexpf(1, -14), 0};
    tensor *leaf, *y;
    run *r =
        scalar_run(PW_OP_add, 1, ldexp(1, -25) + ldexp(1, -40), DTYPE_FLOAT16, x, 2, &leaf, &y);
    cr_assert_eq(y->dtype, DTYPE_FLOAT16);
    cr_expect_eq(tensor_at(y, 0), ldexpf(1, -14), "y[0] %.9g", tensor_at(y, 0));
    cr_expect_eq(tensor_at(y, 1), ldexpf(1, -24), "y[1] %.9g", tensor_at(y, 1));
    cr_expect_eq(tensor_at(leaf->grad, 0), 1.0f);
    test_run_close(r);
}

/* x / 3.0 multiplies by float32(1 / 3) (BinaryDivTrueKernel.cu), by hand: 0.3f * 0.333333343f
 * is 0.100000009, where 0.3f / 3 is 0.100000001; the gradient is dy * float32(1 / 3) */
Test(pointwise, scalar_divisor_multiplies_by_its_reciprocal_by_hand)
{
    float x[1] = {0.3f};
    tensor *leaf, *y;
    run *r = scalar_run(PW_OP_div, 1, 3.0, DTYPE_FLOAT32, x, 1, &leaf, &y);
    cr_expect_eq(tensor_at(y, 0), 0.10000000894069672f, "y %.9g", tensor_at(y, 0));
    cr_expect_eq(tensor_at(leaf->grad, 0), 1.0f / 3.0f);
    test_run_close(r);
}

/* 1.0 - x (the scalar first) in bfloat16: by hand 0.75, and -dy for x */
Test(pointwise, scalar_first_operand_sub_by_hand)
{
    float x[1] = {0.25f};
    tensor *leaf, *y;
    run *r = scalar_run(PW_OP_sub, 0, 1.0, DTYPE_BFLOAT16, x, 1, &leaf, &y);
    cr_assert_eq(y->dtype, DTYPE_BFLOAT16);
    cr_expect_eq(tensor_at(y, 0), 0.75f);
    cr_expect_eq(tensor_at(leaf->grad, 0), -1.0f);
    test_run_close(r);
}
