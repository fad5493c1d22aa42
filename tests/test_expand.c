/*
 * test_expand.c: the strided-copy kinds (harness/layers/permute.c and expand.c: permute,
 * expand, repeat_interleave), through their layers on a bare run (forward, then backward
 * from a chosen dL/dy).
 *  - each kind's backward against float64 finite differences of L = sum R * y, with y's
 *    values placed by an index rule written here from PyTorch's documentation (permute:
 *    y[i_0, ...] = x[i at dims[k] = i_k]; expand: a size-1 or new dim reads index 0;
 *    repeat_interleave: y[.., j, ..] = x[.., j / R, ..]);
 *  - expand's backward with float16 and bfloat16 gradients against PyTorch's values
 *    (tests/references/expand_backward.csv, tools/expand_references.py: at::sum_to with a
 *    float32 accumulator, rounded once);
 *  - the shape rules' refusals: a non-permutation, the batch dim moved, a size that cannot
 *    expand (tests/bad-cases/140-142 check the messages through the case parser).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/run.h"
#include "core/rng.h"
#include "helpers.h"
#include "layers/layer.h"

#define REFERENCE "tests/references/expand_backward.csv"
#define MAXN 1024

/* a float32 leaf holding v */
static tensor *leaf(run *r, dtype dt, int ndim, const int64_t *shape, const float *v)
{
    tensor *t = run_tensor(r, "x", dt, ndim, shape, MEM_PARAMS);
    t->requires_grad = t->is_leaf = true;
    tensor *f = run_tensor(r, "f", DTYPE_FLOAT32, ndim, shape, MEM_PARAMS);
    r->be->upload(r->be, f->data, v, (int64_t)sizeof(float) * f->numel);
    cr_assert_eq(r->be->cast(r->be, f, t, NULL), 0);
    tensor_release(&r->pool, f);
    return t;
}

/* the index in x of y's element i, by the kind's rule */
typedef enum rule_kind { RULE_PERMUTE, RULE_EXPAND, RULE_REPEAT_INTERLEAVE } rule_kind;
typedef struct index_rule {
    rule_kind kind;
    int xnd, ynd;
    int64_t xs[4], ys[4];
    int perm[4];          /* permute: dims, wrapped */
    int64_t dim, repeats; /* repeat_interleave */
} index_rule;

static int64_t source_of(const index_rule *q, int64_t i)
{
    int64_t yi[4], xi[4] = {0};
    for (int k = q->ynd - 1; k >= 0; k--)
        yi[k] = i % q->ys[k], i /= q->ys[k];
    int lead = q->ynd - q->xnd;
    for (int k = 0; k < q->xnd; k++)
        switch (q->kind) {
        case RULE_PERMUTE:
            xi[q->perm[k]] = yi[k];
            break;
        case RULE_EXPAND:
            xi[k] = q->xs[k] == 1 ? 0 : yi[k + lead];
            break;
        case RULE_REPEAT_INTERLEAVE:
            xi[k] = k == q->dim ? yi[k] / q->repeats : yi[k];
            break;
        }
    int64_t at = 0;
    for (int k = 0; k < q->xnd; k++)
        at = at * q->xs[k] + xi[k];
    return at;
}

static int64_t count(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int k = 0; k < nd; k++)
        n *= s[k];
    return n;
}

static double loss(const index_rule *q, const double *x, const float *rr)
{
    double L = 0;
    for (int64_t i = 0; i < count(q->ynd, q->ys); i++)
        L += rr[i] * x[source_of(q, i)];
    return L;
}

/* the layer l on x of shape q->xs (float32), y's shape q->ys, backward against finite
 * differences */
static void check_fd(const layer_spec *l, const index_rule *q, rng *g)
{
    int64_t nx = count(q->xnd, q->xs), ny = count(q->ynd, q->ys);
    cr_assert(nx <= MAXN && ny <= MAXN);
    float xv[MAXN], rr[MAXN];
    double xd[MAXN];
    for (int64_t i = 0; i < nx; i++)
        xd[i] = xv[i] = (float)rng_normal(g);
    for (int64_t i = 0; i < ny; i++)
        rr[i] = (float)rng_normal(g);
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tensor *x = leaf(r, DTYPE_FLOAT32, q->xnd, q->xs, xv);
    tensor *y = layer_def_of(l->kind)->forward(r, l, &x, NULL);
    cr_assert_eq(y->ndim, q->ynd);
    for (int k = 0; k < q->ynd; k++)
        cr_assert_eq(y->shape[k], q->ys[k], "%s: y dim %d", layer_def_of(l->kind)->name, k);
    for (int64_t i = 0; i < ny; i++)
        cr_expect_eq(tensor_at(y, i), xv[source_of(q, i)], "%s: y[%lld]",
                     layer_def_of(l->kind)->name, (long long)i);
    test_backward_from(r, y, rr);
    const double h = 1e-3;
    for (int64_t i = 0; i < nx; i++) {
        double keep = xd[i];
        xd[i] = keep + h;
        double up = loss(q, xd, rr);
        xd[i] = keep - h;
        double want = (up - loss(q, xd, rr)) / (2 * h);
        xd[i] = keep;
        double got = tensor_at(x->grad, i);
        cr_expect(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want),
                  "%s dx[%lld]: backward %.9g, finite differences %.9g",
                  layer_def_of(l->kind)->name, (long long)i, got, want);
    }
    test_run_close(r);
}

Test(expand, permute_backward_matches_finite_differences)
{
    rng g;
    rng_seed(&g, 3);
    /* dims=0,2,3,1 of [2, 3, 4, 5], and dims=0,-1,1,-2 (0, 3, 1, 2) */
    layer_spec l = {.name = "p", .kind = LAYER_PERMUTE, .opt_list = {4, {0, 2, 3, 1}}};
    index_rule q = {RULE_PERMUTE, 4, 4, {2, 3, 4, 5}, {2, 4, 5, 3}, {0, 2, 3, 1}, 0, 0};
    check_fd(&l, &q, &g);
    layer_spec m = {.name = "p", .kind = LAYER_PERMUTE, .opt_list = {4, {0, -1, 1, -2}}};
    index_rule w = {RULE_PERMUTE, 4, 4, {2, 3, 4, 5}, {2, 5, 3, 4}, {0, 3, 1, 2}, 0, 0};
    check_fd(&m, &w, &g);
    /* an input without a batch dim permutes all its dims: [3, 4, 2] by dims=2,0,1 */
    layer_spec n = {.name = "p", .kind = LAYER_PERMUTE, .opt_list = {3, {2, 0, 1}},
                    .whole_inputs = 1};
    index_rule v = {RULE_PERMUTE, 3, 3, {3, 4, 2}, {2, 3, 4}, {2, 0, 1}, 0, 0};
    check_fd(&n, &v, &g);
}

Test(expand, expand_backward_matches_finite_differences)
{
    rng g;
    rng_seed(&g, 5);
    /* [2, 1, 3] to sizes=-1,4,-1; [3, 1] (no batch dim) to sizes=2,3,5: a new leading dim */
    layer_spec l = {.name = "e", .kind = LAYER_EXPAND, .opt_list = {3, {-1, 4, -1}}};
    index_rule q = {RULE_EXPAND, 3, 3, {2, 1, 3}, {2, 4, 3}, {0}, 0, 0};
    check_fd(&l, &q, &g);
    layer_spec m = {.name = "e", .kind = LAYER_EXPAND, .opt_list = {3, {2, 3, 5}},
                    .whole_inputs = 1};
    index_rule w = {RULE_EXPAND, 2, 3, {3, 1}, {2, 3, 5}, {0}, 0, 0};
    check_fd(&m, &w, &g);
}

Test(expand, repeat_interleave_backward_matches_finite_differences)
{
    rng g;
    rng_seed(&g, 7);
    /* [2, 3, 2] repeats=3 dim=1, and repeats=2 dim=-1 of [2, 2, 3, 2] */
    layer_spec l = {.name = "r", .kind = LAYER_REPEAT_INTERLEAVE, .opt_int = {3, 1}};
    index_rule q = {RULE_REPEAT_INTERLEAVE, 3, 3, {2, 3, 2}, {2, 9, 2}, {0}, 1, 3};
    check_fd(&l, &q, &g);
    layer_spec m = {.name = "r", .kind = LAYER_REPEAT_INTERLEAVE, .opt_int = {2, -1}};
    index_rule w = {RULE_REPEAT_INTERLEAVE, 4, 4, {2, 2, 3, 2}, {2, 2, 3, 4}, {0}, 3, 2};
    check_fd(&m, &w, &g);
}

/* the semicolon-separated numbers of s into v; how many */
static int values(const char *s, float *v, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end)
        v[n++] = strtof(s, &end);
    return n;
}

/* the space-separated integers of s into v; how many */
static int ints(const char *s, int64_t *v, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = end) {
        v[n++] = strtoll(s, &end, 10);
        if (end == s)
            return n - 1;
    }
    return n;
}

/* one row of the reference: x of dtype dt and shape xs (zeros) expanded to sizes, backward
 * from grad; x's gradient against want */
static void check_half_row(const char *dt, int xnd, const int64_t *xs, const int_list *sizes,
                           const float *grad, const float *want, const char *what)
{
    static const float zeros[MAXN];
    layer_spec l = {.name = "e", .kind = LAYER_EXPAND, .whole_inputs = 1, .opt_list = *sizes};
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tensor *x = leaf(r, dtype_named(dt), xnd, xs, zeros);
    tensor *y = layer_def_of(LAYER_EXPAND)->forward(r, &l, &x, NULL);
    test_backward_from(r, y, grad);
    cr_assert_eq(x->grad->dtype, x->dtype);
    for (int64_t i = 0; i < x->numel; i++)
        cr_expect_eq(tensor_at(x->grad, i), want[i], "%s: dx[%lld] %.9g, PyTorch %.9g", what,
                     (long long)i, tensor_at(x->grad, i), want[i]);
    test_run_close(r);
}

Test(expand, expand_backward_with_half_gradients_is_pytorchs)
{
    csv c;
    cr_assert(csv_read(REFERENCE, &c), "cannot read %s", REFERENCE);
    int c_dt = csv_col(&c, "dtype"), c_xs = csv_col(&c, "x_shape"), c_sz = csv_col(&c, "sizes"),
        c_g = csv_col(&c, "grad"), c_dx = csv_col(&c, "dx");
    cr_assert_gt(c.n_rows, 0);
    static float grad[4096], want[MAXN];
    for (int row = 0; row < c.n_rows; row++) {
        char **f = c.rows[row];
        int64_t xs[4];
        int_list sizes;
        int xnd = ints(f[c_xs], xs, 4);
        sizes.n = ints(f[c_sz], sizes.v, 4);
        cr_assert_eq(values(f[c_g], grad, 4096), count(sizes.n, sizes.v));
        cr_assert_eq(values(f[c_dx], want, MAXN), count(xnd, xs));
        char what[128];
        snprintf(what, sizeof what, "%s [%s] to [%s]", f[c_dt], f[c_xs], f[c_sz]);
        check_half_row(f[c_dt], xnd, xs, &sizes, grad, want, what);
    }
    csv_free(&c);
}

typedef struct sink {
    shape_check sc;
    char msg[256];
} sink;

static void sink_fail(shape_check *sc, shape_blame who, const char *msg)
{
    (void)who;
    snprintf(((sink *)sc)->msg, sizeof((sink *)sc)->msg, "%s", msg);
}

Test(expand, shape_rules_refuse_what_pytorch_refuses_and_the_batch_dim)
{
    sink s = {{sink_fail}, ""};
    layer_shape in = {2, {3, 4}}, out;
    layer_spec p = {.name = "p", .kind = LAYER_PERMUTE, .opt_list = {3, {0, 1, 1}}};
    cr_expect_not(layer_def_of(LAYER_PERMUTE)->shape(&p, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "duplicate dims"), "%s", s.msg);
    p.opt_list = (int_list){3, {1, 0, 2}};
    cr_expect_not(layer_def_of(LAYER_PERMUTE)->shape(&p, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "batch dim"), "%s", s.msg);
    p.opt_list = (int_list){2, {0, 1}};
    cr_expect_not(layer_def_of(LAYER_PERMUTE)->shape(&p, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "input.dim() = 3 is not equal to len(dims) = 2"), "%s", s.msg);
    p.opt_list = (int_list){3, {0, -1, 1}};
    cr_assert(layer_def_of(LAYER_PERMUTE)->shape(&p, &in, &out, &s.sc), "%s", s.msg);
    cr_expect(out.ndim == 2 && out.dim[0] == 4 && out.dim[1] == 3);

    layer_shape one = {2, {1, 4}};
    layer_spec e = {.name = "e", .kind = LAYER_EXPAND, .opt_list = {3, {-1, 5, 3}}};
    cr_expect_not(layer_def_of(LAYER_EXPAND)->shape(&e, &one, &out, &s.sc));
    cr_expect(strstr(s.msg, "must match the existing size (4) at non-singleton dimension 2"),
              "%s", s.msg);
    e.opt_list = (int_list){4, {2, -1, 5, 4}};
    cr_expect_not(layer_def_of(LAYER_EXPAND)->shape(&e, &one, &out, &s.sc));
    cr_expect(strstr(s.msg, "batch dim"), "%s", s.msg);
    e.opt_list = (int_list){3, {-1, 5, -1}};
    cr_assert(layer_def_of(LAYER_EXPAND)->shape(&e, &one, &out, &s.sc), "%s", s.msg);
    cr_expect(out.ndim == 2 && out.dim[0] == 5 && out.dim[1] == 4);
    e.whole_inputs = 1; /* [1, 4] without a batch dim: new leading dims, not -1 */
    e.opt_list = (int_list){3, {-1, 5, -1}};
    cr_expect_not(layer_def_of(LAYER_EXPAND)->shape(&e, &one, &out, &s.sc));
    cr_expect(strstr(s.msg, "isn't allowed in a leading, non-existing dimension 0"), "%s", s.msg);
    e.opt_list = (int_list){3, {2, 5, -1}};
    cr_assert(layer_def_of(LAYER_EXPAND)->shape(&e, &one, &out, &s.sc), "%s", s.msg);
    cr_expect(out.ndim == 3 && out.dim[0] == 2 && out.dim[1] == 5 && out.dim[2] == 4);

    layer_spec ri = {.name = "r", .kind = LAYER_REPEAT_INTERLEAVE, .opt_int = {4, 0}};
    cr_expect_not(layer_def_of(LAYER_REPEAT_INTERLEAVE)->shape(&ri, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "batch dim"), "%s", s.msg);
    ri.opt_int[1] = -2;
    cr_assert(layer_def_of(LAYER_REPEAT_INTERLEAVE)->shape(&ri, &in, &out, &s.sc), "%s", s.msg);
    cr_expect(out.dim[0] == 12 && out.dim[1] == 4);
}
