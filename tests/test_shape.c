/*
 * test_shape.c: the shape ops of harness/layers/shape.c and flatten.c, through their layers
 * on a bare run (forward, then backward from a chosen dL/dy).
 *  - PyTorch's answers (tests/references/shape.csv, tools/shape_references.py): the positions
 *    x[..., start:end:step] keeps (aten's clamping), the dtype of a cat of two dtypes under
 *    CUDA autocast float16 (the dispatcher, on fake CUDA tensors), and the shapes flatten,
 *    squeeze and unsqueeze give.
 *  - slice's backward by hand (slice_backward: the gradient at the kept positions, zeros
 *    elsewhere); cat's against float64 finite differences, and each input's gradient in its
 *    own dtype.
 *  - the views (unsqueeze, squeeze, flatten) share their input's storage.
 *  - tests/cases/small-graph-rotate-half-autocast.case (Llama's rotate_half, a cat of three
 *    inputs of two dtypes) reads its three-input cat and holds its dtype expectations.
 *  - pad by hand: F.pad(x, (L, R), value=V) puts V rounded into x's dtype around x's last
 *    dim, and its backward (constant_pad_nd_backward) keeps the gradient's middle part.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/run.h"
#include "case/load.h"
#include "core/rng.h"
#include "helpers.h"
#include "layers/layer.h"

#define REFERENCE "tests/references/shape.csv"
#define MAXN 256

/* a leaf of dtype dt holding v */
static tensor *leaf(run *r, const char *name, dtype dt, int ndim, const int64_t *shape,
                    const float *v)
{
    tensor *t = run_tensor(r, name, dt, ndim, shape, MEM_PARAMS);
    t->requires_grad = t->is_leaf = true;
    tensor *f = run_tensor(r, "f", DTYPE_FLOAT32, ndim, shape, MEM_PARAMS);
    r->be->upload(r->be, f->data, v, (int64_t)sizeof(float) * f->numel);
    cr_assert_eq(r->be->cast(r->be, f, t, NULL), 0);
    tensor_release(&r->pool, f);
    return t;
}

/* the layer's forward on in[], then backward from dL/dy = dy */
static tensor *forward_backward(run *r, const layer_spec *l, tensor **in, const float *dy)
{
    tensor *y = layer_def_of(l->kind)->forward(r, l, in, NULL);
    test_backward_from(r, y, dy);
    return y;
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

/* the numbers of text into v; how many */
static int numbers(const char *text, int64_t *v, int max)
{
    int n = 0;
    char *end;
    for (const char *p = text; *p && n < max; p = end) {
        v[n++] = strtoll(p, &end, 10);
        if (end == p)
            return n - 1;
    }
    return n;
}

/* ---- slice ---- */

/* x[b, p] = 100 b + p of [2, size], sliced along dim 1 (written 1 and -1) */
static void check_slice(int64_t size, int64_t start, int64_t end, int64_t step, const int64_t *keep,
                        int n_keep, int64_t dim)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    layer_spec l = {.name = "s", .kind = LAYER_SLICE, .opt_int = {dim, start, end, step}};
    layer_shape in = {1, {size}}, out;
    sink s = {{sink_fail}, ""};
    cr_assert(layer_def_of(LAYER_SLICE)->shape(&l, &in, &out, &s.sc), "%s", s.msg);
    cr_assert_eq(out.dim[0], n_keep, "size %lld [%lld:%lld:%lld]: %lld positions, PyTorch %d",
                 (long long)size, (long long)start, (long long)end, (long long)step,
                 (long long)out.dim[0], n_keep);
    float xv[2 * 16], dy[2 * 16];
    for (int b = 0; b < 2; b++)
        for (int p = 0; p < size; p++)
            xv[b * size + p] = (float)(100 * b + p);
    for (int i = 0; i < 2 * n_keep; i++)
        dy[i] = (float)(i + 1);
    int64_t shape[2] = {2, size};
    tensor *x = leaf(r, "x", DTYPE_FLOAT16, 2, shape, xv);
    tensor *y = forward_backward(r, &l, &x, dy);
    cr_assert_eq(y->shape[1], n_keep);
    for (int b = 0; b < 2; b++) {
        float want_dx[16] = {0}; /* slice_backward by hand */
        for (int j = 0; j < n_keep; j++) {
            cr_expect_eq(tensor_at(y, b * n_keep + j), (float)(100 * b + keep[j]));
            want_dx[keep[j]] = dy[b * n_keep + j];
        }
        for (int p = 0; p < size; p++)
            cr_expect_eq(tensor_at(x->grad, b * size + p), want_dx[p], "dx[%d, %d]", b, p);
    }
    cr_expect_eq(x->grad->dtype, DTYPE_FLOAT16);
    test_run_close(r);
}

Test(shape, slice_keeps_the_positions_pytorch_keeps_and_places_the_gradient_back)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int kind = csv_col(&ref, "kind"), args = csv_col(&ref, "args"), res = csv_col(&ref, "result");
    int rows = 0;
    for (int i = 0; i < ref.n_rows; i++) {
        if (strcmp(ref.rows[i][kind], "slice") != 0)
            continue;
        int64_t a[4], keep[16];
        char text[64];
        snprintf(text, sizeof text, "%s", ref.rows[i][args]);
        char *none = strstr(text, "none");
        if (none)
            memcpy(none, "0   ", 4);
        cr_assert_eq(numbers(text, a, 4), 4, "%s", ref.rows[i][args]);
        if (none)
            a[2] = INT64_MAX; /* end=None: the kind's default */
        int n = numbers(ref.rows[i][res], keep, 16);
        check_slice(a[0], a[1], a[2], a[3], keep, n, 1);
        check_slice(a[0], a[1], a[2], a[3], keep, n, -1);
        rows++;
    }
    cr_expect_gt(rows, 100);
    csv_free(&ref);
}

Test(shape, slice_refuses_the_batch_dim_an_out_of_range_dim_and_an_empty_result)
{
    layer_shape in = {2, {3, 8}}, out;
    sink s = {{sink_fail}, ""};
    layer_spec l = {.name = "s", .kind = LAYER_SLICE, .opt_int = {0, 0, 2, 1}};
    cr_expect_not(layer_def_of(LAYER_SLICE)->shape(&l, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "batch dim"), "%s", s.msg);
    l.opt_int[0] = 3;
    cr_expect_not(layer_def_of(LAYER_SLICE)->shape(&l, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "range of [-3, 2], but got 3"), "%s", s.msg);
    l.opt_int[0] = -1, l.opt_int[1] = 8; /* x[..., 8:2] */
    cr_expect_not(layer_def_of(LAYER_SLICE)->shape(&l, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "is empty"), "%s", s.msg);
}

/* check(the args' two words, the result) for each row of shape.csv of kind `kind_name`;
 * how many rows */
static int reference_rows(const char *kind_name,
                          void (*check)(const char *a, const char *b, const char *result))
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int kind = csv_col(&ref, "kind"), args = csv_col(&ref, "args"), res = csv_col(&ref, "result");
    int rows = 0;
    for (int i = 0; i < ref.n_rows; i++) {
        if (strcmp(ref.rows[i][kind], kind_name) != 0)
            continue;
        char a[16], b[16];
        cr_assert_eq(sscanf(ref.rows[i][args], "%15s %15s", a, b), 2);
        check(a, b, ref.rows[i][res]);
        rows++;
    }
    csv_free(&ref);
    return rows;
}

/* ---- cat ---- */

static void check_cat_row(const char *a, const char *b, const char *want)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    r->autocast = true, r->autocast_dtype = DTYPE_FLOAT16;
    /* small integers: exact in every dtype */
    float av[2 * 3], bv[2 * 5], dy[2 * 8];
    for (int k = 0; k < 6; k++)
        av[k] = (float)k;
    for (int k = 0; k < 10; k++)
        bv[k] = (float)(10 + k);
    for (int k = 0; k < 16; k++)
        dy[k] = (float)(k - 7);
    int64_t sa[2] = {2, 3}, sb[2] = {2, 5};
    tensor *in[2] = {leaf(r, "a", dtype_named(a), 2, sa, av),
                     leaf(r, "b", dtype_named(b), 2, sb, bv)};
    layer_spec l = {.name = "c", .kind = LAYER_CAT, .opt_int = {-1}, .n_inputs = 2};
    tensor *y = forward_backward(r, &l, in, dy);
    cr_expect_eq(y->dtype, dtype_named(want), "cat of %s and %s: %s, PyTorch %s", a, b,
                 dtype_name(y->dtype), want);
    for (int row = 0; row < 2; row++)
        for (int j = 0; j < 8; j++) {
            int64_t at = j < 3 ? row * 3 + j : row * 5 + j - 3;
            cr_expect_eq(tensor_at(y, row * 8 + j), j < 3 ? av[at] : bv[at]);
            const tensor *dx = j < 3 ? in[0]->grad : in[1]->grad;
            cr_expect_eq(tensor_at(dx, at), dy[row * 8 + j], "d%s[%lld]", j < 3 ? "a" : "b",
                         (long long)at);
        }
    cr_expect_eq(in[0]->grad->dtype, in[0]->dtype); /* each gradient in its input's dtype */
    cr_expect_eq(in[1]->grad->dtype, in[1]->dtype);
    test_run_close(r);
}

Test(shape, cat_output_dtype_is_the_dispatchers_under_autocast)
{
    cr_expect_eq(reference_rows("cat", check_cat_row), 9);
}

/* L = sum R * cat((a, b), 2) of a [2, 3, 4] and b [2, 3, 5] along dim 2, then dim 1 of
 * [2, 3, 4] and [2, 2, 4], in float64 */
typedef struct cat_fd {
    int64_t sa[3], sb[3];
    int dim;
} cat_fd;

static double cat_loss(const cat_fd *c, const double *a, const double *b, const float *rr)
{
    int64_t sy[3] = {c->sa[0], c->sa[1], c->sa[2]};
    sy[c->dim] += c->sb[c->dim];
    double L = 0;
    int64_t i = 0;
    for (int64_t p = 0; p < sy[0]; p++)
        for (int64_t q = 0; q < sy[1]; q++)
            for (int64_t s = 0; s < sy[2]; s++, i++) {
                int64_t at[3] = {p, q, s};
                bool in_a = at[c->dim] < c->sa[c->dim];
                if (!in_a)
                    at[c->dim] -= c->sa[c->dim];
                const int64_t *sh = in_a ? c->sa : c->sb;
                L += rr[i] * (in_a ? a : b)[(at[0] * sh[1] + at[1]) * sh[2] + at[2]];
            }
    return L;
}

static void check_cat_fd(const cat_fd *c, rng *g)
{
    int64_t na = c->sa[0] * c->sa[1] * c->sa[2], nb = c->sb[0] * c->sb[1] * c->sb[2];
    float av[MAXN], bv[MAXN], rr[MAXN];
    double ad[MAXN], bd[MAXN];
    for (int64_t i = 0; i < na; i++)
        ad[i] = av[i] = (float)rng_normal(g);
    for (int64_t i = 0; i < nb; i++)
        bd[i] = bv[i] = (float)rng_normal(g);
    for (int64_t i = 0; i < na + nb; i++)
        rr[i] = (float)rng_normal(g);
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tensor *in[2] = {leaf(r, "a", DTYPE_FLOAT32, 3, c->sa, av),
                     leaf(r, "b", DTYPE_FLOAT32, 3, c->sb, bv)};
    layer_spec l = {.name = "c", .kind = LAYER_CAT, .opt_int = {c->dim}, .n_inputs = 2};
    forward_backward(r, &l, in, rr);
    const double h = 1e-3;
    for (int side = 0; side < 2; side++) {
        double *v = side ? bd : ad;
        for (int64_t i = 0; i < (side ? nb : na); i++) {
            double keep = v[i];
            v[i] = keep + h;
            double up = cat_loss(c, ad, bd, rr);
            v[i] = keep - h;
            double want = (up - cat_loss(c, ad, bd, rr)) / (2 * h);
            v[i] = keep;
            double got = tensor_at(in[side]->grad, i);
            cr_expect(fabs(got - want) <= 1e-6 + 1e-6 * fabs(want),
                      "dim %d d%c[%lld]: backward %.9g, finite differences %.9g", c->dim,
                      side ? 'b' : 'a', (long long)i, got, want);
        }
    }
    test_run_close(r);
}

Test(shape, cat_backward_matches_finite_differences)
{
    const cat_fd cases[] = {{{2, 3, 4}, {2, 3, 5}, 2}, {{2, 3, 4}, {2, 2, 4}, 1}};
    rng g;
    rng_seed(&g, 11);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_cat_fd(&cases[k], &g);
}

Test(shape, cat_refuses_shapes_that_differ_outside_its_dim)
{
    layer_shape in[2] = {{2, {3, 4}}, {2, {2, 5}}}, out;
    sink s = {{sink_fail}, ""};
    layer_spec l = {.name = "c", .kind = LAYER_CAT, .opt_int = {-1}, .n_inputs = 2};
    cr_expect_not(layer_def_of(LAYER_CAT)->shape(&l, in, &out, &s.sc));
    cr_expect(strstr(s.msg, "Sizes of tensors must match except in dimension 2"), "%s", s.msg);
    in[1].dim[0] = 3;
    cr_expect(layer_def_of(LAYER_CAT)->shape(&l, in, &out, &s.sc), "%s", s.msg);
    cr_expect_eq(out.dim[1], 9);
}

/* three inputs of three dtypes along a middle dim, by hand: torch.cat((a, b, c), 1) of
 * [2, 1, 2] float16, [2, 2, 2] bfloat16 and [2, 1, 2] float32 is [2, 4, 2] float32 */
Test(shape, cat_of_three_inputs_places_each_and_hands_each_its_gradient)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    const float av[4] = {1, 2, 3, 4}, bv[8] = {5, 6, 7, 8, 9, 10, 11, 12}, cv[4] = {13, 14, 15, 16};
    const int64_t sa[3] = {2, 1, 2}, sb[3] = {2, 2, 2};
    tensor *in[3] = {leaf(r, "a", DTYPE_FLOAT16, 3, sa, av),
                     leaf(r, "b", DTYPE_BFLOAT16, 3, sb, bv),
                     leaf(r, "c", DTYPE_FLOAT32, 3, sa, cv)};
    float dy[16];
    for (int i = 0; i < 16; i++)
        dy[i] = (float)(-i);
    layer_spec l = {.name = "cat3", .kind = LAYER_CAT, .opt_int = {1}, .n_inputs = 3};
    tensor *y = forward_backward(r, &l, in, dy);
    cr_assert_eq(y->dtype, DTYPE_FLOAT32);
    /* y[n] rows: a[n, 0], b[n, 0], b[n, 1], c[n, 0], each of 2 values */
    const float want[16] = {1, 2, 5, 6, 7, 8, 13, 14, 3, 4, 9, 10, 11, 12, 15, 16};
    for (int i = 0; i < 16; i++)
        cr_expect_eq(tensor_at(y, i), want[i], "y[%d]", i);
    const int a_at[4] = {0, 1, 8, 9}, b_at[8] = {2, 3, 4, 5, 10, 11, 12, 13},
              c_at[4] = {6, 7, 14, 15};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(tensor_at(in[0]->grad, i), dy[a_at[i]]);
        cr_expect_eq(tensor_at(in[2]->grad, i), dy[c_at[i]]);
    }
    for (int i = 0; i < 8; i++)
        cr_expect_eq(tensor_at(in[1]->grad, i), dy[b_at[i]]);
    cr_expect(in[0]->grad->dtype == DTYPE_FLOAT16 && in[1]->grad->dtype == DTYPE_BFLOAT16 &&
              in[2]->grad->dtype == DTYPE_FLOAT32);
    test_run_close(r);
}

/* ---- views ---- */

static void view_run(const int64_t *in_dims, int in_nd, const layer_spec *l, int nw);

/* the shape the kind's rule gives for the reference row's arguments, against PyTorch's;
 * then the forward: a view of x's storage, and the gradient viewed back into x's shape */
static void check_view(layer_kind k, const int64_t *in_dims, int in_nd, layer_spec *l,
                       const char *want_text)
{
    int64_t want[4];
    int nw = numbers(want_text, want, 4);
    layer_shape in = {in_nd, {0}}, out;
    for (int d = 0; d < in_nd; d++)
        in.dim[d] = in_dims[d];
    sink s = {{sink_fail}, ""};
    bool ok = layer_def_of(k)->shape(l, &in, &out, &s.sc);
    if (!ok && nw >= LAYER_MAX_RANK + 1)
        return; /* beyond the harness's rank */
    cr_assert(ok, "%s: %s", layer_def_of(k)->name, s.msg);
    cr_expect_eq(out.ndim, nw, "%s of dim %lld: %d dims, PyTorch %d", layer_def_of(k)->name,
                 (long long)l->opt_int[0], out.ndim, nw);
    for (int d = 0; d < nw && d < out.ndim; d++)
        cr_expect_eq(out.dim[d], want[d], "%s %lld %lld: dim %d", layer_def_of(k)->name,
                     (long long)l->opt_int[0], (long long)l->opt_int[1], d);
    view_run(in_dims, in_nd, l, nw);
}

/* the view layer's forward on a bfloat16 [2, in_dims] leaf, and its backward */
static void view_run(const int64_t *in_dims, int in_nd, const layer_spec *l, int nw)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    int64_t shape[TENSOR_MAX_DIMS] = {2};
    float v[MAXN], dy[MAXN];
    int64_t n = 2;
    for (int d = 0; d < in_nd; d++)
        n *= shape[d + 1] = in_dims[d];
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i, dy[i] = (float)(n - i);
    tensor *x = leaf(r, "x", DTYPE_BFLOAT16, in_nd + 1, shape, v);
    tensor *y = forward_backward(r, l, &x, dy);
    cr_expect_eq(y->data, x->data, "a view shares its input's storage");
    cr_expect_eq(y->ndim, nw + 1);
    cr_expect_eq(x->grad->ndim, in_nd + 1);
    for (int64_t i = 0; i < n; i++)
        cr_expect_eq(tensor_at(x->grad, i), dy[i]);
    test_run_close(r);
}

Test(shape, flatten_squeeze_unsqueeze_give_pytorchs_shapes_as_views)
{
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int kind = csv_col(&ref, "kind"), args = csv_col(&ref, "args"), res = csv_col(&ref, "result");
    int rows = 0;
    for (int i = 0; i < ref.n_rows; i++) {
        const char *kname = ref.rows[i][kind];
        int64_t a[5];
        int na = numbers(ref.rows[i][args], a, 5);
        layer_spec l = {.name = "v"};
        if (strcmp(kname, "flatten") == 0) {
            cr_assert_eq(na, 5);
            l.kind = LAYER_FLATTEN, l.opt_int[0] = a[3], l.opt_int[1] = a[4];
            check_view(LAYER_FLATTEN, a, 3, &l, ref.rows[i][res]);
        } else if (strcmp(kname, "squeeze") == 0 || strcmp(kname, "unsqueeze") == 0) {
            cr_assert_eq(na, 4);
            l.kind = kname[0] == 's' ? LAYER_SQUEEZE : LAYER_UNSQUEEZE;
            l.opt_int[0] = a[3];
            check_view(l.kind, a, a[2] ? 3 : 2, &l, ref.rows[i][res]);
        } else {
            continue;
        }
        rows++;
    }
    cr_expect_gt(rows, 40);
    csv_free(&ref);
}

/* ---- pad ---- */

Test(shape, pad_surrounds_the_last_dim_with_the_value_and_keeps_the_middle_gradient)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    enum { B = 2, T = 3, C = 4, L = 2, R = 1, W = C + L + R };
    float v[B * T * C], dy[B * T * W];
    for (int i = 0; i < B * T * C; i++)
        v[i] = (float)(i + 1);
    for (int i = 0; i < B * T * W; i++)
        dy[i] = (float)(1000 + i);
    int64_t shape[3] = {B, T, C};
    tensor *x = leaf(r, "x", DTYPE_FLOAT16, 3, shape, v);
    layer_spec l = {.name = "p", .kind = LAYER_PAD, .opt_int = {L, R}, .opt_real = {0.1}};
    tensor *y = forward_backward(r, &l, &x, dy);
    cr_assert_eq(y->shape[2], W);
    const float fill = 0.0999755859375f; /* 0.1 in float16: 1638 / 2^14 */
    for (int row = 0; row < B * T; row++)
        for (int j = 0; j < W; j++) {
            bool inside = j >= L && j < L + C;
            cr_expect_eq(tensor_at(y, row * W + j), inside ? v[row * C + j - L] : fill, "y[%d, %d]",
                         row, j);
            if (inside)
                cr_expect_eq(tensor_at(x->grad, row * C + j - L), dy[row * W + j]);
        }
    test_run_close(r);
}

/* ---- a case ---- */

#define ROTATE_HALF "tests/cases/small-graph-rotate-half-autocast.case"

Test(shape, rotate_half_case_reads_a_three_input_cat_and_holds_its_dtypes)
{
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(ROTATE_HALF, NULL, 0, cfg, &errs), 0, "%s", errs.n ? errs.msgs[0] : "");
    const layer_spec *wide = NULL;
    for (int i = 0; i < cfg->n_layers; i++)
        if (strcmp(cfg->layers[i].name, "wide") == 0)
            wide = &cfg->layers[i];
    cr_assert_not_null(wide);
    cr_expect_eq(wide->n_inputs, 3);
    cr_expect_eq(wide->inputs[1], LAYER_INPUT);
    cr_expect(wide->out_ndim == 2 && wide->out_shape[0] == 3 && wide->out_shape[1] == 24);
    err_list_free(&errs);
    free(cfg);
    char out[64];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file(ROTATE_HALF, out, &res, NULL);
    cr_expect(res.ok, "%s", res.error);
    cr_expect(res.passed && res.expect_total > 0, "%d/%d held\n%s", res.expect_passed,
              res.expect_total, res.failures);
    rm_rf(out);
}

/* ---- select and stack ---- */

static void check_stack_row(const char *a, const char *b, const char *want)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    r->autocast = true, r->autocast_dtype = DTYPE_FLOAT16;
    float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {7, 8, 9, 10, 11, 12}, dy[12];
    for (int k = 0; k < 12; k++)
        dy[k] = (float)(20 + k);
    int64_t s23[2] = {2, 3};
    tensor *in[2] = {leaf(r, "a", dtype_named(a), 2, s23, av),
                     leaf(r, "b", dtype_named(b), 2, s23, bv)};
    /* torch.stack((a, b), -1): y[n, j, 0] = a[n, j], y[n, j, 1] = b[n, j] */
    layer_spec l = {.name = "st", .kind = LAYER_STACK, .opt_int = {-1}, .n_inputs = 2};
    tensor *y = forward_backward(r, &l, in, dy);
    cr_expect_eq(y->dtype, dtype_named(want), "stack of %s and %s: %s, PyTorch %s", a, b,
                 dtype_name(y->dtype), want);
    cr_assert(y->ndim == 3 && y->shape[1] == 3 && y->shape[2] == 2);
    for (int k = 0; k < 6; k++) {
        cr_expect_eq(tensor_at(y, 2 * k), av[k]);
        cr_expect_eq(tensor_at(y, 2 * k + 1), bv[k]);
        cr_expect_eq(tensor_at(in[0]->grad, k), dy[2 * k]);
        cr_expect_eq(tensor_at(in[1]->grad, k), dy[2 * k + 1]);
    }
    cr_expect_eq(in[0]->grad->dtype, in[0]->dtype);
    cr_expect_eq(in[1]->grad->dtype, in[1]->dtype);
    test_run_close(r);
}

Test(shape, stack_output_dtype_is_the_dispatchers_and_its_gradients_come_back_by_position)
{
    cr_expect_eq(reference_rows("stack", check_stack_row), 9);
}

/* x.select(1, -1) of [2, 3, 4] is x[:, 2, :], by hand; select_backward puts the gradient
 * back at index 2 among zeros */
Test(shape, select_takes_one_index_and_places_its_gradient_back)
{
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    float v[24], dy[8];
    for (int i = 0; i < 24; i++)
        v[i] = (float)i;
    for (int i = 0; i < 8; i++)
        dy[i] = (float)(100 + i);
    int64_t shape[3] = {2, 3, 4};
    tensor *x = leaf(r, "x", DTYPE_BFLOAT16, 3, shape, v);
    layer_spec l = {.name = "sel", .kind = LAYER_SELECT, .opt_int = {1, -1}};
    layer_shape in = {2, {3, 4}}, out;
    sink s = {{sink_fail}, ""};
    cr_assert(layer_def_of(LAYER_SELECT)->shape(&l, &in, &out, &s.sc), "%s", s.msg);
    cr_expect(out.ndim == 1 && out.dim[0] == 4);
    tensor *y = forward_backward(r, &l, &x, dy);
    cr_assert(y->ndim == 2 && y->shape[1] == 4);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 3; j++)
            for (int c = 0; c < 4; c++) {
                int at = (b * 3 + j) * 4 + c;
                if (j == 2)
                    cr_expect_eq(tensor_at(y, b * 4 + c), v[at]);
                cr_expect_eq(tensor_at(x->grad, at), j == 2 ? dy[b * 4 + c] : 0.0f, "dx[%d]", at);
            }
    l.opt_int[1] = 3; /* out of range */
    cr_expect_not(layer_def_of(LAYER_SELECT)->shape(&l, &in, &out, &s.sc));
    cr_expect(strstr(s.msg, "index 3 out of range"), "%s", s.msg);
    test_run_close(r);
}
