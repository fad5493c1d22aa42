/*
 * test_graph.c: what graph models add to the tape and the backend.
 *  - A tensor read by several nodes sums their gradients as autograd does, in its dtype,
 *    rounded at each sum (a float16 sum of 1 + 2^-11 + 2^-11 in that order is 1: each
 *    2^-11 is half an ulp of 1 and ties to even, where one float32 sum would give
 *    1 + 2^-10), and the contributions and the sum carry the names results/README.md
 *    gives ("h.grad_1", ..., "h.grad"); a parameter read twice sums into one .grad.
 *  - The graph ops' backward against central finite differences of a float64 forward
 *    written here (embedding with repeated ids and a padding row, matmul), as
 *    tests/test_layers.c does for linear and conv2d (add's and mul's are the pointwise
 *    table's, tests/test_pointwise.c).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "layers/layer.h"
#include "autograd/run.h"
#include "helpers.h"
#include "case/load.h"

static run *r;

static void run_open(void) { r = test_run_open(); }
static void run_close(void) { test_run_close(r); }

/* ---- sums of gradients ---- */

/* the value each consumer hands back, by the order the consumers run in backward */
static const float contributions[] = {1.0f, 0x1p-11f, 0x1p-11f};
static int n_run;
static char names[4][TENSOR_NAME_MAX];
static float summed;
static char summed_name[TENSOR_NAME_MAX];

static void consumer_backward(run *rr, node *n)
{
    tensor *g = node_grad_tensor(rr, n, 0);
    snprintf(names[n_run], sizeof names[n_run], "%s", g->name);
    cr_assert_eq(rr->be->fill(rr->be, g, contributions[n_run++]), 0);
    node_give_grad(rr, n, 0, g, NULL);
}

static void producer_backward(run *rr, node *n)
{
    (void)rr;
    summed = tensor_at(n->grad, 0);
    snprintf(summed_name, sizeof summed_name, "%s", n->grad->name);
}

static void ignore_backward(run *rr, node *n) { (void)rr, (void)n; }

Test(graph, an_activation_read_three_times_sums_in_its_dtype_rounding_each_sum, .init = run_open,
     .fini = run_close)
{
    int64_t one = 1;
    tensor *x = run_tensor(r, "x", DTYPE_FLOAT16, 1, &one, MEM_PARAMS);
    x->requires_grad = x->is_leaf = true;
    tensor *h = run_tensor(r, "h", DTYPE_FLOAT16, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "producer", producer_backward, h, &x, 1));
    tensor *ys[3];
    for (int k = 0; k < 3; k++) {
        ys[k] = run_tensor(r, "y", DTYPE_FLOAT16, 1, &one, MEM_ACTIVATIONS);
        cr_assert_not_null(tape_record(r, "consumer", consumer_backward, ys[k], &h, 1));
    }
    /* one root reading the three consumers, so backward runs them all */
    tensor *root = run_tensor(r, "root", DTYPE_FLOAT32, 0, NULL, MEM_ACTIVATIONS);
    node *n = tape_record(r, "root", ignore_backward, root, ys, 3);
    cr_assert_not_null(n);
    n_run = 0;
    summed = -1;
    /* the root's backward hands nothing on: give each consumer its gradient by hand */
    for (int k = 2; k >= 0; k--)
        r->nodes[ys[k]->grad_fn].grad = run_tensor(r, "g", DTYPE_FLOAT16, 1, &one, MEM_GRADS);
    r->error[0] = '\0';
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tape_backward(r, root, 1.0f);
    cr_assert_eq(n_run, 3);
    cr_expect_str_eq(names[0], "h.grad_1");
    cr_expect_str_eq(names[1], "h.grad_2");
    cr_expect_str_eq(names[2], "h.grad_3");
    cr_expect_str_eq(summed_name, "h.grad");
    cr_expect_eq(summed, 1.0f, "float16 sums rounded at each step give 1, got %.10g", summed);
}

Test(graph, a_parameter_read_twice_sums_into_one_grad, .init = run_open, .fini = run_close)
{
    int64_t one = 1;
    tensor *w = run_tensor(r, "w", DTYPE_FLOAT32, 1, &one, MEM_PARAMS);
    w->requires_grad = w->is_leaf = true;
    tensor *ys[2];
    for (int k = 0; k < 2; k++) {
        ys[k] = run_tensor(r, "y", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
        cr_assert_not_null(tape_record(r, "consumer", consumer_backward, ys[k], &w, 1));
    }
    tensor *root = run_tensor(r, "root", DTYPE_FLOAT32, 0, NULL, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "root", ignore_backward, root, ys, 2));
    for (int k = 0; k < 2; k++)
        r->nodes[ys[k]->grad_fn].grad = run_tensor(r, "g", DTYPE_FLOAT32, 1, &one, MEM_GRADS);
    n_run = 0;
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tape_backward(r, root, 1.0f);
    cr_assert_not_null(w->grad);
    cr_expect_str_eq(names[0], "w.grad_1");
    cr_expect_str_eq(names[1], "w.grad_2");
    cr_expect_str_eq(w->grad->name, "w.grad");
    /* float32: 1 + 2^-11 is exact */
    cr_expect_eq(tensor_at(w->grad, 0), 1.0f + 0x1p-11f);
}

/* ---- the ops' backward against finite differences ---- */

#define FD_H 1e-4
static rng g_rng;

static void randn(float *v, int n)
{
    for (int i = 0; i < n; i++)
        v[i] = (float)rng_normal(&g_rng);
}

static void expect_close(const char *what, const tensor *got, const double *want)
{
    for (int64_t i = 0; i < got->numel; i++) {
        double a = tensor_at(got, i), b = want[i];
        cr_expect(fabs(a - b) <= 1e-4 * fabs(b) + 1e-5,
                  "%s[%lld]: backward %.8g, finite differences %.8g", what, (long long)i, a, b);
    }
}

/* embedding: y[n, :] = w[idx[n], :]; L = sum R * y */
enum { EV = 5, EC = 3, EN = 7 };
static const int64_t ids[EN] = {1, 3, 1, 0, 4, 1, 0};

static double embedding_loss(const double *w, const float *rr, int64_t pad)
{
    double L = 0;
    for (int n = 0; n < EN; n++)
        for (int c = 0; c < EC; c++) /* the padding row's lookups take no gradient */
            L += rr[n * EC + c] * (ids[n] == pad ? 0.0 : w[ids[n] * EC + c]);
    return L;
}

static void check_embedding(int64_t pad)
{
    rng_seed(&g_rng, 5);
    float w[EV * EC], rr[EN * EC];
    randn(w, EV * EC), randn(rr, EN * EC);
    test_env e;
    env_open(&e);
    int64_t sw[2] = {EV, EC}, si[1] = {EN}, sy[2] = {EN, EC};
    tensor *tw = env_tensor(&e, "w", DTYPE_FLOAT32, 2, sw, w);
    tensor *ti = env_zeros(&e, "ids", DTYPE_INT64, 1, si);
    memcpy(ti->data, ids, sizeof ids);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, sy);
    cr_assert_eq(e.be->embedding_forward(e.be, ti, tw, y, NULL), 0);
    for (int n = 0; n < EN; n++)
        for (int c = 0; c < EC; c++)
            cr_expect_eq(tensor_at(y, n * EC + c), w[ids[n] * EC + c]);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 2, sy, rr);
    tensor *dw = env_zeros(&e, "dw", DTYPE_FLOAT32, 2, sw);
    cr_assert_eq(e.be->embedding_backward(e.be, dy, ti, pad, dw, NULL), 0);
    double wd[EV * EC], want[EV * EC];
    for (int i = 0; i < EV * EC; i++)
        wd[i] = w[i];
    for (int j = 0; j < EV * EC; j++) {
        double keep = wd[j];
        wd[j] = keep + FD_H;
        double up = embedding_loss(wd, rr, pad);
        wd[j] = keep - FD_H;
        want[j] = (up - embedding_loss(wd, rr, pad)) / (2 * FD_H);
        wd[j] = keep;
    }
    expect_close("dw", dw, want);
    env_close(&e);
}

Test(graph, embedding_backward_matches_finite_differences) { check_embedding(-1); }
Test(graph, embedding_backward_leaves_the_padding_row_zero) { check_embedding(1); }

/* the weight gradient in float16 sums in float32 and rounds once: a row that gets 1 and
 * three times 2^-11 sums to 1 + 1.5 ulps of float16, which rounds (ties to even) to
 * 1 + 2^-9; rounded at each sum, as a tensor's gradients are, it would stay 1 */
Test(graph, embedding_backward_in_float16_rounds_once)
{
    test_env e;
    env_open(&e);
    int64_t sw[2] = {2, 1}, si[1] = {4}, sy[2] = {4, 1};
    const int64_t same[4] = {0, 0, 0, 0};
    const float g[4] = {1.0f, 0x1p-11f, 0x1p-11f, 0x1p-11f};
    tensor *ti = env_zeros(&e, "ids", DTYPE_INT64, 1, si);
    memcpy(ti->data, same, sizeof same);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT16, 2, sy, g);
    tensor *dw = env_zeros(&e, "dw", DTYPE_FLOAT16, 2, sw);
    cr_assert_eq(e.be->embedding_backward(e.be, dy, ti, -1, dw, NULL), 0);
    cr_expect_eq(tensor_at(dw, 0), 1.0f + 0x1p-9f, "got %.10g", tensor_at(dw, 0));
    cr_expect_eq(tensor_at(dw, 1), 0.0f);
    env_close(&e);
}

/* matmul: y[b] = a[b] c[b] for a [B, M, K], c [B, K, N], at several shapes; L = sum R * y;
 * the backward is matmul(dy, c^T) and matmul(a^T, dy), as layers/matmul.c runs it */
typedef struct mm_shape {
    int b, m, k, n;
} mm_shape;
static mm_shape mm;

static double matmul_loss(const double *a, const double *c, const float *rr)
{
    double L = 0;
    for (int b = 0; b < mm.b; b++)
        for (int i = 0; i < mm.m; i++)
            for (int j = 0; j < mm.n; j++) {
                double y = 0;
                for (int k = 0; k < mm.k; k++)
                    y += a[(b * mm.m + i) * mm.k + k] * c[(b * mm.k + k) * mm.n + j];
                L += rr[(b * mm.m + i) * mm.n + j] * y;
            }
    return L;
}

static void fd(double *v, int n, const double *a, const double *c, const float *rr, double *out)
{
    for (int j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + FD_H;
        double up = matmul_loss(a, c, rr);
        v[j] = keep - FD_H;
        out[j] = (up - matmul_loss(a, c, rr)) / (2 * FD_H);
        v[j] = keep;
    }
}

#define MM_MAX 128

static void check_matmul(mm_shape shape)
{
    mm = shape;
    rng_seed(&g_rng, (uint64_t)(6 + shape.m));
    int na = mm.b * mm.m * mm.k, nc = mm.b * mm.k * mm.n, ny = mm.b * mm.m * mm.n;
    cr_assert(na <= MM_MAX && nc <= MM_MAX && ny <= MM_MAX);
    float a[MM_MAX], c[MM_MAX], rr[MM_MAX];
    randn(a, na), randn(c, nc), randn(rr, ny);
    test_env e;
    env_open(&e);
    int64_t sa[3] = {mm.b, mm.m, mm.k}, sc[3] = {mm.b, mm.k, mm.n}, sy[3] = {mm.b, mm.m, mm.n};
    tensor *ta = env_tensor(&e, "a", DTYPE_FLOAT32, 3, sa, a);
    tensor *tc = env_tensor(&e, "c", DTYPE_FLOAT32, 3, sc, c);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 3, sy);
    cr_assert_eq(e.be->matmul(e.be, ta, tc, false, false, y, NULL), 0);
    double ad[MM_MAX], cd[MM_MAX], want_a[MM_MAX], want_c[MM_MAX];
    for (int i = 0; i < na; i++)
        ad[i] = a[i];
    for (int i = 0; i < nc; i++)
        cd[i] = c[i];
    double L = 0;
    for (int i = 0; i < ny; i++)
        L += rr[i] * tensor_at(y, i);
    cr_expect(fabs(L - matmul_loss(ad, cd, rr)) < 1e-4, "forward");
    fd(ad, na, ad, cd, rr, want_a);
    fd(cd, nc, ad, cd, rr, want_c);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 3, sy, rr);
    tensor *da = env_zeros(&e, "da", DTYPE_FLOAT32, 3, sa);
    tensor *dc = env_zeros(&e, "dc", DTYPE_FLOAT32, 3, sc);
    cr_assert_eq(e.be->matmul(e.be, dy, tc, false, true, da, NULL), 0);
    cr_assert_eq(e.be->matmul(e.be, ta, dy, true, false, dc, NULL), 0);
    expect_close("da", da, want_a);
    expect_close("dc", dc, want_c);
    env_close(&e);
}

Test(graph, matmul_backward_matches_finite_differences)
{
    check_matmul((mm_shape){2, 3, 4, 5});
    check_matmul((mm_shape){1, 1, 6, 2}); /* a row times a matrix */
    check_matmul((mm_shape){4, 5, 1, 3}); /* K = 1: outer products */
}

/* transpose of dims 1 and 2 of [2, 3, 4, 5], and back: every element where
 * x.transpose(1, 2) puts it, and the round trip the identity (the gradient's rule) */
Test(graph, transpose_puts_each_element_where_pytorch_does_and_back)
{
    test_env e;
    env_open(&e);
    enum { N0 = 2, N1 = 3, N2 = 4, N3 = 5, N = N0 * N1 * N2 * N3 };
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)i;
    int64_t sx[4] = {N0, N1, N2, N3}, sy[4] = {N0, N2, N1, N3};
    tensor *x = env_tensor(&e, "x", DTYPE_FLOAT16, 4, sx, v);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT16, 4, sy);
    tensor *back = env_zeros(&e, "back", DTYPE_FLOAT16, 4, sx);
    cr_assert_eq(e.be->transpose(e.be, x, 1, 2, y, NULL), 0);
    for (int a = 0; a < N0; a++)
        for (int b = 0; b < N2; b++)
            for (int c = 0; c < N1; c++)
                for (int d = 0; d < N3; d++)
                    cr_expect_eq(tensor_at(y, ((a * N2 + b) * N1 + c) * N3 + d),
                                 v[((a * N1 + c) * N2 + b) * N3 + d]);
    cr_assert_eq(e.be->transpose(e.be, y, 1, 2, back, NULL), 0);
    for (int i = 0; i < N; i++)
        cr_expect_eq(tensor_at(back, i), v[i]);
    /* the last two dims of a 3-d tensor (k.transpose(-2, -1)) */
    int64_t s3[3] = {N0 * N1, N2, N3}, t3[3] = {N0 * N1, N3, N2};
    tensor *x3 = env_tensor(&e, "x3", DTYPE_FLOAT32, 3, s3, v);
    tensor *y3 = env_zeros(&e, "y3", DTYPE_FLOAT32, 3, t3);
    cr_assert_eq(e.be->transpose(e.be, x3, 1, 2, y3, NULL), 0);
    cr_expect_eq(tensor_at(y3, 1), v[N3]); /* y3[0, 0, 1] = x3[0, 1, 0] */
    cr_expect_eq(tensor_at(y3, N2), v[1]); /* y3[0, 1, 0] = x3[0, 0, 1] */
    env_close(&e);
}

/* a consumer the root does not reach hands no gradient on: the one that comes keeps the
 * plain name */
Test(graph, a_consumer_outside_the_loss_leaves_the_gradient_its_plain_name, .init = run_open,
     .fini = run_close)
{
    int64_t one = 1;
    tensor *x = run_tensor(r, "x", DTYPE_FLOAT32, 1, &one, MEM_PARAMS);
    x->requires_grad = x->is_leaf = true;
    tensor *h = run_tensor(r, "h", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "producer", producer_backward, h, &x, 1));
    tensor *used = run_tensor(r, "used", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "consumer", consumer_backward, used, &h, 1));
    tensor *side = run_tensor(r, "side", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    cr_assert_not_null(tape_record(r, "consumer", consumer_backward, side, &h, 1));
    n_run = 0;
    summed_name[0] = '\0';
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    tape_backward(r, used, 1.0f);
    cr_assert_eq(n_run, 1);
    cr_expect_str_eq(names[0], "h.grad");
    cr_expect_str_eq(summed_name, "h.grad");
    cr_expect_eq(summed, 1.0f);
}

/* report.md's **Model:** line says what a layer reads when it is not the previous output */
Test(graph, a_layer_s_description_names_its_inputs_and_tied_weight)
{
    static case_config cfg;
    err_list errs = {0};
    cr_assert_eq(case_load("tests/cases/small-graph-tokens-autocast.case", NULL, 0, &cfg, &errs),
                 0);
    char buf[256];
    const char *want[] = {"tok = embedding 16 → 8",
                          "pos = position_embedding 6 → 8",
                          "fc = linear 8 → 8",
                          "act = relu",
                          "gate = linear 8 → 8 (from pos)",
                          "g = mul (act, gate)",
                          "s = scale 0.5",
                          "res = add (pos, s)",
                          "head = linear 8 → 16 (no bias) (weight: tok.weight)"};
    cr_assert_eq(cfg.n_layers, 9);
    for (int i = 0; i < 9; i++) {
        layer_describe_at(&cfg, i, buf, sizeof buf);
        cr_expect_str_eq(buf, want[i]);
    }
    err_list_free(&errs);
}
