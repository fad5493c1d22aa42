/*
 * test_reduce.c: every reduction row (ops/reduce.h), by looping over the list:
 *  - float64 finite differences: the row's formulas built again in double (RD_REAL double,
 *    RD_EXACT), at several shapes and sets of reduced dims; central differences of
 *    L = sum(R * y) against the double backward formula (1e-6 relative; amax's inputs
 *    distinct, where its gradient exists), and the backend's float32 forward and backward
 *    against the double ones (float32 sums of at most a few thousand terms: 1e-5
 *    relative plus 1e-6 of the largest);
 *  - the order reduce.h fixes, by hand: a sum whose result depends on the order of its
 *    float32 additions (values of magnitudes 2^24, 1 and -2^24 placed so that each lane,
 *    accumulator and span meets them in a known order) gives the value that order gives;
 *  - PyTorch's values: tests/references/reduce.csv (tools/reduce_references.py), each row's
 *    forward and backward in float32 and, as CUDA computes them, float16 and bfloat16; half
 *    values bit for bit unless PyTorch's own float32 value before its rounding lies within
 *    float32 noise of a rounding boundary (its summation order is not the harness's); a row
 *    without a reference fails, named;
 *  - the rows' layer kinds (`mean dim=-1 keepdim=yes`): output dtype (sum's float32 under
 *    autocast), shape, values and gradient against PyTorch's
 *    (tests/references/reduce_kinds.csv).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/host_values.h"
#include "autograd/run.h"
#include "core/rng.h"
#include "helpers.h"
#include "layers/layer.h"
#include "ops/backend.h"

/* the formulas in float64 */
#define RD_REAL double
#define RD_FN(name) name##_f64
#define RD_EXACT
#include "ops/reduce_math.h"

#define MAXN 4096

static const op_params none = {.seed = 0};

/* the double forward of row op over the R values v of one output */
static double forward64(rd_op op, const double *v, int64_t R, int64_t n_out)
{
    switch (op) {
#define RD_F64(name, ...)                                                                          \
    case RD_OP_##name: {                                                                           \
        rd_##name##_acc_f64 a = rd_##name##_ident_f64(&none);                                      \
        for (int64_t j = 0; j < R; j++)                                                            \
            a = rd_##name##_reduce_f64(a, v[j], &none);                                            \
        return rd_##name##_project_f64(a, R, n_out, &none);                                        \
    }
        REDUCE_OPS(RD_F64)
#undef RD_F64
    case RD_OP_COUNT:
        break;
    }
    cr_assert_fail("no row %d", (int)op);
    return 0;
}

static double backward64(rd_op op, double g, double x, double y, int64_t count, double m,
                         int64_t R)
{
    switch (op) {
#define RD_B64(name, ...)                                                                          \
    case RD_OP_##name:                                                                             \
        return rd_##name##_backward_f64(g, x, y, count, m, R, &none, DTYPE_FLOAT32);
        REDUCE_OPS(RD_B64)
#undef RD_B64
    case RD_OP_COUNT:
        break;
    }
    cr_assert_fail("no row %d", (int)op);
    return 0;
}

static bool counts64(rd_op op, double x, double y)
{
    switch (op) {
#define RD_C64(name, ...)                                                                          \
    case RD_OP_##name:                                                                             \
        return rd_##name##_counts_f64(x, y);
        REDUCE_OPS(RD_C64)
#undef RD_C64
    case RD_OP_COUNT:
        break;
    }
    cr_assert_fail("no row %d", (int)op);
    return false;
}

/* y[o] of x in double; out[o] the outputs, the view gives each output's values */
static void forward_all(rd_op op, const rd_view *v, const double *x, double *y)
{
    double vals[MAXN];
    for (int64_t o = 0; o < v->n_out; o++) {
        for (int64_t j = 0; j < v->R; j++)
            vals[j] = x[rd_base(v, o) + rd_offset(v, j)];
        y[o] = forward64(op, vals, v->R, v->n_out);
    }
}

static double loss64(rd_op op, const rd_view *v, const double *x, const double *r)
{
    double y[MAXN], L = 0;
    forward_all(op, v, x, y);
    for (int64_t o = 0; o < v->n_out; o++)
        L += r[o] * y[o];
    return L;
}

static void check_fd(rd_op op, int nd, const int64_t *shape, unsigned dims, rng *g)
{
    rd_view v = rd_view_of(nd, shape, dims);
    int64_t n = shape_numel(nd, shape);
    cr_assert(n <= MAXN);
    double x[MAXN] = {0}, r[MAXN] = {0}, y[MAXN], want[MAXN];
    float xf[MAXN], rf[MAXN];
    for (int64_t i = 0; i < n; i++)
        x[i] = xf[i] = (float)(2 * rng_normal(g)); /* distinct: amax has a gradient */
    for (int64_t o = 0; o < v.n_out; o++)
        r[o] = rf[o] = (float)rng_normal(g);
    forward_all(op, &v, x, y);
    double mean[MAXN]; /* RD_MEAN's per output */
    forward_all(RD_OP_mean, &v, x, mean);
    /* the double backward, and the finite differences */
    int64_t count[MAXN] = {0};
    for (int64_t i = 0; i < n; i++)
        count[rd_output_of(&v, i)] += counts64(op, x[i], y[rd_output_of(&v, i)]);
    double top = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t o = rd_output_of(&v, i);
        want[i] = backward64(op, r[o], x[i], y[o], count[o], mean[o], v.R);
        top = fmax(top, fabs(want[i]));
    }
    char what[128];
    snprintf(what, sizeof what, "%s of %lld values over dims 0x%x, %lld outputs", rd_rows[op].name,
             (long long)n, dims, (long long)v.n_out);
    for (int64_t i = 0; i < n; i++) {
        double keep = x[i], h = 1e-6 * (1 + fabs(keep));
        x[i] = keep + h;
        double up = loss64(op, &v, x, r);
        x[i] = keep - h;
        double down = loss64(op, &v, x, r);
        x[i] = keep;
        double fd = (up - down) / (2 * h);
        cr_expect(fabs(fd - want[i]) <= 1e-6 * fabs(want[i]) + 1e-7 * (1 + top),
                  "%s: x[%lld]: backward formula %.12g, finite differences %.12g", what,
                  (long long)i, want[i], fd);
    }
    /* the backend in float32 */
    test_env e;
    env_open(&e);
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, nd, shape, xf);
    tensor *ty = env_zeros(&e, "y", DTYPE_FLOAT32, 1, &v.n_out);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 1, &v.n_out, rf);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, nd, shape);
    cr_assert_eq(e.be->reduce_forward(e.be, op, &none, tx, dims, ty, NULL), 0);
    double ytop = 0;
    for (int64_t o = 0; o < v.n_out; o++)
        ytop = fmax(ytop, fabs(y[o]));
    for (int64_t o = 0; o < v.n_out; o++)
        cr_expect(fabs(tensor_at(ty, o) - y[o]) <= 1e-5 * fabs(y[o]) + 1e-6 * ytop,
                  "%s: y[%lld] %.9g, float64 %.9g", what, (long long)o, tensor_at(ty, o), y[o]);
    cr_assert_eq(e.be->reduce_backward(e.be, op, &none, dy, tx, ty, dims, dx, NULL), 0);
    for (int64_t i = 0; i < n; i++)
        cr_expect(fabs(tensor_at(dx, i) - want[i]) <= 1e-5 * fabs(want[i]) + 1e-6 * top,
                  "%s: dx[%lld] %.9g, float64 %.9g", what, (long long)i, tensor_at(dx, i), want[i]);
    env_close(&e);
}

Test(reduce, every_row_s_backward_matches_float64_finite_differences)
{
    rng g;
    rng_seed(&g, 41);
    static const struct {
        int nd;
        int64_t shape[TENSOR_MAX_DIMS];
        unsigned dims;
    } cases[] = {
        {1, {40}, 1u << 0},
        {3, {4, 5, 6}, 1u << 0 | 1u << 2},
        {2, {7, 11}, 1u << 0},
        {4, {2, 3, 4, 4}, 1u << 2 | 1u << 3},
        {4, {2, 3, 4, 5}, 1u << 1 | 1u << 3},
        {3, {3, 1, 4}, 1u << 1},
    };
    for (int op = 0; op < RD_OP_COUNT; op++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            check_fd((rd_op)op, cases[k].nd, cases[k].shape, cases[k].dims, &g);
}

/* ---- the order, by hand ---- */

/* One output of R values, all 0 but big = 2^24 at value a, 1 at value b and -2^24 at value c,
 * summed by the sum row in float32: 1 survives only where it meets -2^24's cancellation
 * before 2^24 absorbs it, so the result (0 or 1) tells the order's shape. */
static float ordered_sum(int64_t R, int64_t a, int64_t b, int64_t c)
{
    static float v[1 << 17];
    cr_assert(R <= (int64_t)(sizeof v / sizeof v[0]));
    memset(v, 0, sizeof(float) * (size_t)R);
    v[a] = 0x1p24f, v[b] = 1.0f, v[c] = -0x1p24f;
    test_env e;
    env_open(&e);
    tensor *x = env_tensor(&e, "x", DTYPE_FLOAT32, 1, &R, v);
    int64_t one = 1;
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 1, &one);
    cr_assert_eq(e.be->reduce_forward(e.be, RD_OP_sum, &none, x, 1u, y, NULL), 0);
    float s = tensor_at(y, 0);
    env_close(&e);
    return s;
}

Test(reduce, the_sum_adds_in_the_order_reduce_h_writes_down)
{
    /* one accumulator (lane 0, accumulator 0) in value order: 2^24 + 1 = 2^24, then - 2^24: 0;
     * -2^24 first: -2^24 + 1 is exact, + 2^24 gives 1 */
    cr_expect_eq(ordered_sum(1000, 0, 128, 256), 0.0f);
    cr_expect_eq(ordered_sum(1000, 256, 128, 0), 1.0f);
    /* two accumulators of lane 0 (values 0 and 32): ((a0 + a1) + a2) + a3 with a0 = 2^24,
     * a1 = -2^24: 0, then 1 from accumulator 2 (value 64): 1 */
    cr_expect_eq(ordered_sum(1000, 0, 64, 32), 1.0f);
    /* lanes pairwise: lanes 0 (2^24) and 1 (-2^24) meet first (0), then lane 2's 1: 1; with
     * 1 in lane 1, 2^24 + 1 = 2^24 first, then lane 2's -2^24: 0 */
    cr_expect_eq(ordered_sum(1000, 0, 2, 1), 1.0f);
    cr_expect_eq(ordered_sum(1000, 0, 1, 2), 0.0f);
    /* spans (R = 3 * 8192: three spans of 8192): spans 0 and 1 pair first, span 2 after */
    cr_expect_eq(ordered_sum(3 * 8192, 0, 2 * 8192, 8192), 1.0f);
    cr_expect_eq(ordered_sum(3 * 8192, 0, 8192, 2 * 8192), 0.0f);
}

/* ---- PyTorch's values ---- */

#define REFERENCE "tests/references/reduce.csv"

static int parse_dims(const char *text, int64_t *out)
{
    int n = 0;
    for (const char *p = text; *p && n < TENSOR_MAX_DIMS;) {
        out[n++] = strtoll(p, (char **)&p, 10);
        if (*p == 'x')
            p++;
    }
    return n;
}

/* reference_agrees (helpers.h): PyTorch's sums run in another order than the harness's, so
 * float32 noise of 2^-20 relative at pre (1e-5 relative in float32) */
static bool agrees(float got, float want, float pre, dtype dt)
{
    return reference_agrees(got, want, pre, dt, 1e-5f, ldexpf(fabsf(pre), -20));
}

Test(reduce, every_row_matches_pytorch)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int c_row = csv_col(&ref, "row"), c_dt = csv_col(&ref, "dtype"), c_sh = csv_col(&ref, "shape");
    int c_dims = csv_col(&ref, "dims"), c_t = csv_col(&ref, "tensor"),
        c_v = csv_col(&ref, "values");
    static const char *const names[6] = {"x", "dy", "y", "dx", "y.f32", "dx.f32"};
    bool seen[RD_OP_COUNT] = {false};
    static float vals[6][MAXN];
    for (int r0 = 0; r0 < ref.n_rows;) {
        char **f = ref.rows[r0];
        int op = 0;
        while (op < RD_OP_COUNT && strcmp(rd_rows[op].name, f[c_row]) != 0)
            op++;
        cr_assert_lt(op, RD_OP_COUNT, "%s names no row: %s", REFERENCE, f[c_row]);
        seen[op] = true;
        bool has[6] = {false};
        int r1 = r0;
        for (; r1 < ref.n_rows; r1++) {
            char **g = ref.rows[r1];
            if (strcmp(g[c_row], f[c_row]) || strcmp(g[c_dt], f[c_dt]) ||
                strcmp(g[c_sh], f[c_sh]) || strcmp(g[c_dims], f[c_dims]))
                break;
            int t = 0;
            while (t < 6 && strcmp(names[t], g[c_t]) != 0)
                t++;
            cr_assert_lt(t, 6, "%s: no tensor %s", REFERENCE, g[c_t]);
            parse_floats(g[c_v], vals[t], MAXN);
            has[t] = true;
        }
        int64_t shape[TENSOR_MAX_DIMS], dl[TENSOR_MAX_DIMS];
        int nd = parse_dims(f[c_sh], shape), nr = parse_dims(f[c_dims], dl);
        unsigned dims = 0;
        for (int k = 0; k < nr; k++)
            dims |= 1u << dl[k];
        dtype dt = dtype_named(f[c_dt]);
        rd_view v = rd_view_of(nd, shape, dims);
        test_env e;
        env_open(&e);
        tensor *x = env_tensor(&e, "x", dt, nd, shape, vals[0]);
        tensor *y = env_zeros(&e, "y", dt, 1, &v.n_out);
        tensor *dy = env_tensor(&e, "dy", dt, 1, &v.n_out, vals[1]);
        tensor *dx = env_zeros(&e, "dx", dt, nd, shape);
        cr_assert_eq(e.be->reduce_forward(e.be, (rd_op)op, &none, x, dims, y, NULL), 0);
        cr_assert_eq(e.be->reduce_backward(e.be, (rd_op)op, &none, dy, x, y, dims, dx, NULL), 0);
        for (int64_t o = 0; o < v.n_out; o++)
            cr_expect(agrees(tensor_at(y, o), vals[2][o], has[4] ? vals[4][o] : vals[2][o], dt),
                      "%s %s %s over %s: y[%lld] the harness %.9g, PyTorch %.9g", f[c_row], f[c_dt],
                      f[c_sh], f[c_dims], (long long)o, tensor_at(y, o), vals[2][o]);
        for (int64_t i = 0; i < x->numel; i++)
            cr_expect(agrees(tensor_at(dx, i), vals[3][i], has[5] ? vals[5][i] : vals[3][i], dt),
                      "%s %s %s over %s: dx[%lld] the harness %.9g, PyTorch %.9g", f[c_row],
                      f[c_dt], f[c_sh], f[c_dims], (long long)i, tensor_at(dx, i), vals[3][i]);
        env_close(&e);
        r0 = r1;
    }
    for (int op = 0; op < RD_OP_COUNT; op++)
        cr_expect(seen[op],
                  "row %s has no reference in " REFERENCE
                  " (bin/ampscope ops --json | tools/reduce_references.py)",
                  rd_rows[op].name);
    csv_free(&ref);
}

/* ---- the rows' layer kinds (layers/reduce.c) ---- */

#define KINDS_REFERENCE "tests/references/reduce_kinds.csv"

static const float *g_dy; /* what the consumer hands y as its gradient */

static void dy_backward(run *r, node *n)
{
    tensor *g = node_grad_tensor(r, n, 0);
    host_values_put(r, g, g_dy, NULL);
    node_give_grad(r, n, 0, g, NULL);
}

/* The kind l on a leaf x of dtype dt holding xv, under autocast float16 or not: its forward
 * into *y, then backward from dL/dy = dy into x's .grad. A bare run, closed by the caller. */
static run *kind_run(const layer_spec *l, dtype dt, bool autocast, int nd, const int64_t *shape,
                     const float *xv, const float *dy, tensor **x, tensor **y)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    r->autocast = autocast;
    r->autocast_dtype = DTYPE_FLOAT16;
    *x = run_tensor(r, "x", dt, nd, shape, MEM_PARAMS);
    (*x)->requires_grad = (*x)->is_leaf = true;
    host_values_put(r, *x, xv, NULL);
    *y = reduce_defs[l->kind - LAYER_REDUCE].forward(r, l, x, NULL);
    int64_t one = 1;
    tensor *root = run_tensor(r, "L", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    g_dy = dy;
    tape_record(r, "R", dy_backward, root, y, 1);
    tape_backward(r, root, 1.0f);
    return r;
}

/* `sum dim=-1 keepdim=yes` and the others through their layer, with and without autocast
 * float16, against tests/references/reduce_kinds.csv (tools/reduce_references.py --kinds):
 * the output's dtype (sum's fp32_set_opt_dtype: float32 from a half input under autocast)
 * and shape, its values and x's gradient; each group is six lines, x, dy, y, dx, y.f32,
 * dx.f32 */
Test(reduce, every_kind_s_dims_keepdim_and_dtype_match_pytorch)
{
    csv ref;
    cr_assert(csv_read(KINDS_REFERENCE, &ref), "cannot read %s", KINDS_REFERENCE);
    int c_kind = csv_col(&ref, "kind"), c_par = csv_col(&ref, "params");
    int c_dt = csv_col(&ref, "dtype");
    int c_ac = csv_col(&ref, "autocast"), c_sh = csv_col(&ref, "shape");
    int c_dim = csv_col(&ref, "dim"), c_keep = csv_col(&ref, "keepdim");
    int c_ydt = csv_col(&ref, "ydtype"), c_t = csv_col(&ref, "tensor");
    int c_v = csv_col(&ref, "values");
    static const char *const names[6] = {"x", "dy", "y", "dx", "y.f32", "dx.f32"};
    bool seen[RD_OP_COUNT] = {false};
    static float vals[6][MAXN];
    int64_t count[6];
    cr_assert_eq(ref.n_rows % 6, 0);
    for (int r0 = 0; r0 < ref.n_rows; r0 += 6) {
        char **f = ref.rows[r0];
        for (int t = 0; t < 6; t++) {
            cr_assert_str_eq(ref.rows[r0 + t][c_t], names[t], "%s line %d", KINDS_REFERENCE,
                             r0 + t + 2);
            count[t] = parse_floats(ref.rows[r0 + t][c_v], vals[t], MAXN);
        }
        layer_kind kind = layer_kind_of_name(f[c_kind]);
        cr_assert(kind >= LAYER_REDUCE && kind < LAYER_KIND_COUNT, "%s", f[c_kind]);
        seen[kind - LAYER_REDUCE] = true;
        layer_spec l = {.name = "y", .kind = kind, .n_inputs = 1};
        sscanf(f[c_par], "real0=%lf", &l.opt_real[0]); /* var's correction */
        l.opt_bool[0] = strcmp(f[c_keep], "yes") == 0;
        for (const char *p = f[c_dim]; *p;) { /* "1;2", "-1" into KIND_OPT_DIMS's mask */
            long d = strtol(p, (char **)&p, 10);
            l.opt_int[0] |= (int64_t)1 << (d >= 0 ? d : KIND_DIMS_NEG - 1 - d);
            p += *p == ';';
        }
        int64_t shape[TENSOR_MAX_DIMS];
        int nd = parse_dims(f[c_sh], shape);
        dtype dt = dtype_named(f[c_dt]);
        tensor *x, *y;
        run *r = kind_run(&l, dt, strcmp(f[c_ac], "no") != 0, nd, shape, vals[0], vals[1], &x, &y);
        char what[160];
        snprintf(what, sizeof what, "%s dim=%s keepdim=%s of %s %s, autocast %s", f[c_kind],
                 f[c_dim], f[c_keep], f[c_dt], f[c_sh], f[c_ac]);
        cr_expect_str_eq(dtype_name(y->dtype), f[c_ydt], "%s: y's dtype", what);
        cr_assert_eq(y->numel, count[2], "%s: y has %lld values", what, (long long)y->numel);
        cr_expect_eq(y->ndim, l.opt_bool[0] ? nd : nd - __builtin_popcountll(l.opt_int[0]),
                     "%s: y has %d dims", what, y->ndim);
        for (int64_t o = 0; o < y->numel; o++)
            cr_expect(agrees(tensor_at(y, o), vals[2][o], vals[4][o], y->dtype),
                      "%s: y[%lld] the harness %.9g, PyTorch %.9g", what, (long long)o,
                      tensor_at(y, o), vals[2][o]);
        cr_assert_eq(x->grad->dtype, dt);
        for (int64_t i = 0; i < x->numel; i++)
            cr_expect(agrees(tensor_at(x->grad, i), vals[3][i], vals[5][i], dt),
                      "%s: dx[%lld] the harness %.9g, PyTorch %.9g", what, (long long)i,
                      tensor_at(x->grad, i), vals[3][i]);
        test_run_close(r);
    }
    for (int op = 0; op < RD_OP_COUNT; op++)
        cr_expect(seen[op], "kind %s has no reference in " KINDS_REFERENCE, rd_rows[op].name);
    csv_free(&ref);
}
