/*
 * test_rank6.c: tensors of 5 and 6 dims (TENSOR_MAX_DIMS), as models imported from PyTorch
 * make them (timm's ViT attention: qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4) and
 * unbind(0); HF Llama's eager repeat_kv: [B, KVH, 1, T, D] expanded to [B, KVH, n_rep, T, D]
 * and reshaped to [B, KVH * n_rep, T, D]).
 *  - chains of layers called on a bare run (forward, then backward from a chosen dL/dy),
 *    against float64: the forward against the op written here from PyTorch's
 *    documentation (permute's y[i_0, ...] = x[i at dims[k] = i_k], expand's size-1 and new
 *    dims read index 0, broadcasting's right-aligned dims, sum, mean, softmax), every
 *    input's gradient against central finite differences of L = sum R * y of that float64
 *    op: permute of 5 dims (ViT's (2, 0, 3, 1, 4), then select of dim 0) and 6, expand of 5
 *    (repeat_kv, then reshape) and 6, add and mul of a 5-d tensor with a 1-d and a 3-d one
 *    and of two 6-d ones, sum and mean over middle dims of 5 and 6 dims (three kept and
 *    three reduced groups), softmax over the last dim of a 5-d tensor and over a middle one,
 *    transpose, slice, pad, cat, squeeze, select, unsqueeze, stack and flatten of 6 dims;
 *  - whole runs of tests/cases/small-vit-qkv-5d-autocast.case under autocast float16,
 *    bfloat16 and off: each forward tensor's dtype and 5-d shape in tensors.csv against
 *    PyTorch's CUDA autocast dispatcher (tests/references/rank6.csv,
 *    tools/rank6_references.py), and the case's [expect] (its gradients' dtypes);
 *  - tests/bad-cases/150-154 refuse 7 dims (test_cli checks their messages).
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

#define MAXN 1024
#define MAXX 2 /* leaves of a chain */
#define CASE "tests/cases/small-vit-qkv-5d-autocast.case"
#define REFERENCE "tests/references/rank6.csv"

/* ---- indices ---- */

static int64_t count(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int k = 0; k < nd; k++)
        n *= s[k];
    return n;
}

static void unravel(int nd, const int64_t *s, int64_t at, int64_t *i)
{
    for (int k = nd - 1; k >= 0; k--)
        i[k] = at % s[k], at /= s[k];
}

static int64_t ravel(int nd, const int64_t *s, const int64_t *i)
{
    int64_t at = 0;
    for (int k = 0; k < nd; k++)
        at = at * s[k] + i[k];
    return at;
}

/* ---- a chain of layers against its float64 op ---- */

/* y (ys, yn values) of the leaves x[0..nx) (shapes xs), in float64 */
typedef void (*reference_fn)(const double *const *x, double *y);

typedef struct chain {
    const char *what;
    int nx;
    int xnd[MAXX];
    int64_t xs[MAXX][TENSOR_MAX_DIMS];
    int n_layers;
    layer_spec l[4]; /* l[0] reads the leaves, each next one its predecessor's output */
    int ynd;
    int64_t ys[TENSOR_MAX_DIMS];
    reference_fn ref;
    double tol; /* of the forward and of the gradients, relative (plus as much absolute) */
} chain;

static tensor *leaf(run *r, const char *name, int nd, const int64_t *shape, const float *v)
{
    tensor *t = run_tensor(r, name, DTYPE_FLOAT32, nd, shape, MEM_PARAMS);
    t->requires_grad = t->is_leaf = true;
    host_values_put(r, t, v, NULL);
    return t;
}

static double loss(const chain *c, const double *const *x, const float *rr, double *y)
{
    c->ref(x, y);
    double L = 0;
    for (int64_t i = 0; i < count(c->ynd, c->ys); i++)
        L += rr[i] * y[i];
    return L;
}

static void check_chain(const chain *c, uint64_t seed)
{
    rng g;
    rng_seed(&g, seed);
    static float xv[MAXX][MAXN], rr[MAXN];
    static double xd[MAXX][MAXN], yd[MAXN];
    int64_t ny = count(c->ynd, c->ys);
    cr_assert(ny <= MAXN);
    for (int k = 0; k < c->nx; k++) {
        cr_assert(count(c->xnd[k], c->xs[k]) <= MAXN);
        for (int64_t i = 0; i < count(c->xnd[k], c->xs[k]); i++)
            xd[k][i] = xv[k][i] = (float)rng_normal(&g);
    }
    for (int64_t i = 0; i < ny; i++)
        rr[i] = (float)rng_normal(&g);
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s: %s", c->what, r->error);
    tensor *x[MAXX];
    for (int k = 0; k < c->nx; k++)
        x[k] = leaf(r, k ? "w" : "x", c->xnd[k], c->xs[k], xv[k]);
    tensor *y = layer_def_of(c->l[0].kind)->forward(r, &c->l[0], x, NULL);
    for (int j = 1; j < c->n_layers; j++)
        y = layer_def_of(c->l[j].kind)->forward(r, &c->l[j], &y, NULL);
    cr_assert_eq(y->ndim, c->ynd, "%s: y has %d dims", c->what, y->ndim);
    for (int k = 0; k < c->ynd; k++)
        cr_assert_eq(y->shape[k], c->ys[k], "%s: y's dim %d", c->what, k);
    const double *xp[MAXX] = {xd[0], xd[1]};
    loss(c, xp, rr, yd);
    for (int64_t i = 0; i < ny; i++)
        cr_expect(fabs(tensor_at(y, i) - yd[i]) <= c->tol * (1 + fabs(yd[i])),
                  "%s: y[%lld] %.9g, float64 %.9g", c->what, (long long)i, tensor_at(y, i), yd[i]);
    test_backward_from(r, y, rr);
    const double h = 1e-3;
    for (int k = 0; k < c->nx; k++)
        for (int64_t i = 0; i < x[k]->numel; i++) {
            double keep = xd[k][i];
            xd[k][i] = keep + h;
            double up = loss(c, xp, rr, yd);
            xd[k][i] = keep - h;
            double want = (up - loss(c, xp, rr, yd)) / (2 * h);
            xd[k][i] = keep;
            cr_assert_not_null(x[k]->grad, "%s: no gradient of input %d", c->what, k);
            double got = tensor_at(x[k]->grad, i);
            cr_expect(fabs(got - want) <= c->tol * (1 + fabs(want)),
                      "%s: d%s[%lld]: backward %.9g, finite differences %.9g", c->what,
                      k ? "w" : "x", (long long)i, got, want);
        }
    test_run_close(r);
}

/* ---- permute ---- */

/* ViT: x [B, N, 3, H, D] = [2, 3, 3, 2, 2]; qkv = x.permute(2, 0, 3, 1, 4) [3, B, H, N, D],
 * then qkv[which] (unbind(0)'s output `which`, a select of dim 0): y [B, H, N, D] with
 * y[b, h, n, d] = x[b, n, which, h, d] */
static const int64_t vit_x[5] = {2, 3, 3, 2, 2}, vit_y[4] = {2, 2, 3, 2};
static int vit_which;
static void vit_qkv(const double *const *x, double *y)
{
    int64_t yi[4];
    for (int64_t i = 0; i < count(4, vit_y); i++) {
        unravel(4, vit_y, i, yi);
        const int64_t xi[5] = {yi[0], yi[2], vit_which, yi[1], yi[3]};
        y[i] = x[0][ravel(5, vit_x, xi)];
    }
}

/* x [2, 3, 2, 2, 3, 2] by dims=0,5,3,1,4,2: y[i_0, ..., i_5] = x at i_k in dim dims[k] */
static const int64_t p6_x[6] = {2, 3, 2, 2, 3, 2};
static const int p6_dims[6] = {0, 5, 3, 1, 4, 2};
static void permute6(const double *const *x, double *y)
{
    int64_t ys[6], yi[6], xi[6];
    for (int k = 0; k < 6; k++)
        ys[k] = p6_x[p6_dims[k]];
    for (int64_t i = 0; i < count(6, ys); i++) {
        unravel(6, ys, i, yi);
        for (int k = 0; k < 6; k++)
            xi[p6_dims[k]] = yi[k];
        y[i] = x[0][ravel(6, p6_x, xi)];
    }
}

Test(rank6, permute_of_5_and_6_dims_matches_finite_differences)
{
    /* ViT's own order, which moves the batch dim (a case file keeps it first: an input
     * without a batch dim here), then select(0, which) for q, k and v */
    for (vit_which = 0; vit_which < 3; vit_which++) {
        chain c = {"permute(2, 0, 3, 1, 4) then select(0, which)",
                   1,
                   {5},
                   {{2, 3, 3, 2, 2}},
                   2,
                   {{.name = "qkv",
                     .kind = LAYER_PERMUTE,
                     .whole_inputs = 1,
                     .opt_list = {5, {2, 0, 3, 1, 4}}},
                    {.name = "q", .kind = LAYER_SELECT, .opt_int = {0, vit_which}}},
                   4,
                   {2, 2, 3, 2},
                   vit_qkv,
                   1e-6};
        check_chain(&c, 11 + (uint64_t)vit_which);
    }
    /* the form a case file writes: permute dims=0,2,3,1,4 then select dim=1 index=-1 (v) */
    vit_which = 2;
    chain v = {"permute(0, 2, 3, 1, 4) then select(1, -1)",
               1,
               {5},
               {{2, 3, 3, 2, 2}},
               2,
               {{.name = "qkv", .kind = LAYER_PERMUTE, .opt_list = {5, {0, 2, 3, 1, 4}}},
                {.name = "v", .kind = LAYER_SELECT, .opt_int = {1, -1}}},
               4,
               {2, 2, 3, 2},
               vit_qkv,
               1e-6};
    check_chain(&v, 14);
    chain p = {"permute(0, 5, 3, 1, 4, 2) of 6 dims",
               1,
               {6},
               {{2, 3, 2, 2, 3, 2}},
               1,
               {{.name = "p", .kind = LAYER_PERMUTE, .opt_list = {6, {0, -1, 3, 1, -2, 2}}}},
               6,
               {2, 2, 2, 3, 3, 2},
               permute6,
               1e-6};
    check_chain(&p, 15);
}

/* ---- expand ---- */

/* repeat_kv: x [B, KVH, 1, T, D] = [2, 2, 1, 3, 2] expanded to [2, 2, 3, 3, 2], then reshaped
 * to [B, KVH * 3, T, D]: y[b, j, t, d] = x[b, j / 3, 0, t, d] */
static const int64_t kv_x[5] = {2, 2, 1, 3, 2}, kv_y[4] = {2, 6, 3, 2};
static void repeat_kv(const double *const *x, double *y)
{
    int64_t yi[4];
    for (int64_t i = 0; i < count(4, kv_y); i++) {
        unravel(4, kv_y, i, yi);
        const int64_t xi[5] = {yi[0], yi[1] / 3, 0, yi[2], yi[3]};
        y[i] = x[0][ravel(5, kv_x, xi)];
    }
}

/* x [2, 1, 3, 1, 2, 1] to sizes=-1,2,-1,2,-1,3: y[i] = x[i_0, 0, i_2, 0, i_4, 0] */
static const int64_t e6_x[6] = {2, 1, 3, 1, 2, 1}, e6_y[6] = {2, 2, 3, 2, 2, 3};
static void expand6(const double *const *x, double *y)
{
    int64_t yi[6];
    for (int64_t i = 0; i < count(6, e6_y); i++) {
        unravel(6, e6_y, i, yi);
        const int64_t xi[6] = {yi[0], 0, yi[2], 0, yi[4], 0};
        y[i] = x[0][ravel(6, e6_x, xi)];
    }
}

Test(rank6, expand_of_5_and_6_dims_matches_finite_differences)
{
    chain kv = {"repeat_kv: expand(-1, -1, 3, -1, -1) then reshape(B, 6, T, D)",
                1,
                {5},
                {{2, 2, 1, 3, 2}},
                2,
                {{.name = "e", .kind = LAYER_EXPAND, .opt_list = {5, {-1, -1, 3, -1, -1}}},
                 {.name = "r", .kind = LAYER_RESHAPE, .out_ndim = 3, .out_shape = {6, 3, 2}}},
                4,
                {2, 6, 3, 2},
                repeat_kv,
                1e-6};
    check_chain(&kv, 21);
    chain e = {"expand(-1, 2, -1, 2, -1, 3) of 6 dims",
               1,
               {6},
               {{2, 1, 3, 1, 2, 1}},
               1,
               {{.name = "e", .kind = LAYER_EXPAND, .opt_list = {6, {-1, 2, -1, 2, -1, 3}}}},
               6,
               {2, 2, 3, 2, 2, 3},
               expand6,
               1e-6};
    check_chain(&e, 22);
}

/* ---- broadcasting ---- */

/* x [2, 3, 2, 2, 4] + c [4] and x * w [2, 1, 4] (w's dims against x's last three) */
static const int64_t b5[5] = {2, 3, 2, 2, 4};
static void add_1d(const double *const *x, double *y)
{
    int64_t i5[5];
    for (int64_t i = 0; i < count(5, b5); i++) {
        unravel(5, b5, i, i5);
        y[i] = x[0][i] + x[1][i5[4]];
    }
}
static void mul_3d(const double *const *x, double *y)
{
    int64_t i5[5];
    for (int64_t i = 0; i < count(5, b5); i++) {
        unravel(5, b5, i, i5);
        y[i] = x[0][i] * x[1][i5[2] * 4 + i5[4]];
    }
}

/* x [2, 1, 3, 1, 2, 2] * w [2, 3, 1, 2, 1, 2], y [2, 3, 3, 2, 2, 2] */
static const int64_t m6_x[6] = {2, 1, 3, 1, 2, 2}, m6_w[6] = {2, 3, 1, 2, 1, 2},
                     m6_y[6] = {2, 3, 3, 2, 2, 2};
static void mul_6d(const double *const *x, double *y)
{
    int64_t yi[6];
    for (int64_t i = 0; i < count(6, m6_y); i++) {
        unravel(6, m6_y, i, yi);
        const int64_t xi[6] = {yi[0], 0, yi[2], 0, yi[4], yi[5]},
                      wi[6] = {yi[0], yi[1], 0, yi[3], 0, yi[5]};
        y[i] = x[0][ravel(6, m6_x, xi)] * x[1][ravel(6, m6_w, wi)];
    }
}

Test(rank6, broadcast_add_and_mul_of_5_and_6_dims_match_finite_differences)
{
    chain a = {"add of [2, 3, 2, 2, 4] and [4]",
               2,
               {5, 1},
               {{2, 3, 2, 2, 4}, {4}},
               1,
               {{.name = "a", .kind = LAYER_ROW(add), .n_inputs = 2, .whole_inputs = 2}},
               5,
               {2, 3, 2, 2, 4},
               add_1d,
               1e-6};
    check_chain(&a, 31);
    chain m = {"mul of [2, 3, 2, 2, 4] and [2, 1, 4]",
               2,
               {5, 3},
               {{2, 3, 2, 2, 4}, {2, 1, 4}},
               1,
               {{.name = "m", .kind = LAYER_ROW(mul), .n_inputs = 2, .whole_inputs = 2}},
               5,
               {2, 3, 2, 2, 4},
               mul_3d,
               1e-5};
    check_chain(&m, 32);
    chain s = {"mul of [2, 1, 3, 1, 2, 2] and [2, 3, 1, 2, 1, 2]",
               2,
               {6, 6},
               {{2, 1, 3, 1, 2, 2}, {2, 3, 1, 2, 1, 2}},
               1,
               {{.name = "m", .kind = LAYER_ROW(mul), .n_inputs = 2}},
               6,
               {2, 3, 3, 2, 2, 2},
               mul_6d,
               1e-5};
    check_chain(&s, 33);
}

/* ---- reductions ---- */

/* x [2, 3, 4, 2, 3]: sum over dim 2 ([2, 3, 2, 3]), mean over dim -3 with keepdim
 * ([2, 3, 1, 2, 3]); x [2, 3, 2, 2, 2, 3] summed over dims 1, 3, 5 ([2, 2, 2]) */
static const int64_t r5[5] = {2, 3, 4, 2, 3}, r6[6] = {2, 3, 2, 2, 2, 3};
static void reduce_dim2(const double *const *x, double *y, double scale)
{
    int64_t xi[5];
    memset(y, 0, sizeof(double) * 36);
    for (int64_t i = 0; i < count(5, r5); i++) {
        unravel(5, r5, i, xi);
        y[((xi[0] * 3 + xi[1]) * 2 + xi[3]) * 3 + xi[4]] += x[0][i] * scale;
    }
}
static void sum_dim2(const double *const *x, double *y) { reduce_dim2(x, y, 1.0); }
static void mean_dim2(const double *const *x, double *y) { reduce_dim2(x, y, 0.25); }
static void sum_135(const double *const *x, double *y)
{
    int64_t xi[6];
    memset(y, 0, sizeof(double) * 8);
    for (int64_t i = 0; i < count(6, r6); i++) {
        unravel(6, r6, i, xi);
        y[(xi[0] * 2 + xi[2]) * 2 + xi[4]] += x[0][i];
    }
}

/* KIND_OPT_DIMS's mask of dim d */
static int64_t dim_bit(int d) { return (int64_t)1 << (d >= 0 ? d : KIND_DIMS_NEG - 1 - d); }

Test(rank6, sum_and_mean_over_middle_dims_of_5_and_6_dims_match_finite_differences)
{
    chain s = {"sum dim=2 of [2, 3, 4, 2, 3]",
               1,
               {5},
               {{2, 3, 4, 2, 3}},
               1,
               {{.name = "s", .kind = LAYER_REDUCE + RD_OP_sum, .opt_int = {dim_bit(2)}}},
               4,
               {2, 3, 2, 3},
               sum_dim2,
               1e-5};
    check_chain(&s, 41);
    chain m = {"mean dim=-3 keepdim=yes of [2, 3, 4, 2, 3]",
               1,
               {5},
               {{2, 3, 4, 2, 3}},
               1,
               {{.name = "m",
                 .kind = LAYER_REDUCE + RD_OP_mean,
                 .opt_int = {dim_bit(-3)},
                 .opt_bool = {true}}},
               5,
               {2, 3, 1, 2, 3},
               mean_dim2,
               1e-5};
    check_chain(&m, 42);
    chain t = {"sum dim=1,3,5 of [2, 3, 2, 2, 2, 3]",
               1,
               {6},
               {{2, 3, 2, 2, 2, 3}},
               1,
               {{.name = "s",
                 .kind = LAYER_REDUCE + RD_OP_sum,
                 .opt_int = {dim_bit(1) | dim_bit(3) | dim_bit(-1)}}},
               3,
               {2, 2, 2},
               sum_135,
               1e-5};
    check_chain(&t, 43);
}

/* ---- softmax ---- */

/* x [2, 2, 3, 2, 5], softmax over dim `sm_dim`: y = exp(x - max) / sum exp(x - max) */
static const int64_t s5[5] = {2, 2, 3, 2, 5};
static int sm_dim;
static void softmax5(const double *const *x, double *y)
{
    int64_t inner = 1, n = s5[sm_dim];
    for (int k = sm_dim + 1; k < 5; k++)
        inner *= s5[k];
    for (int64_t o = 0; o < count(5, s5) / n; o++) {
        int64_t base = o / inner * n * inner + o % inner;
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < n; j++)
            m = fmax(m, x[0][base + j * inner]);
        for (int64_t j = 0; j < n; j++)
            z += exp(x[0][base + j * inner] - m);
        for (int64_t j = 0; j < n; j++)
            y[base + j * inner] = exp(x[0][base + j * inner] - m) / z;
    }
}

Test(rank6, softmax_of_5_dims_matches_finite_differences)
{
    static const int dims[2][2] = {{-1, 4}, {2, 2}}; /* dim=, and the dim it is */
    for (int k = 0; k < 2; k++) {
        sm_dim = dims[k][1];
        chain c = {k ? "softmax dim=2 of [2, 2, 3, 2, 5]" : "softmax dim=-1 of [2, 2, 3, 2, 5]",
                   1,
                   {5},
                   {{2, 2, 3, 2, 5}},
                   1,
                   {{.name = "sm", .kind = LAYER_SOFTMAX, .opt_int = {dims[k][0]}}},
                   5,
                   {2, 2, 3, 2, 5},
                   softmax5,
                   1e-5};
        check_chain(&c, 51 + (uint64_t)k);
    }
}

/* ---- the other shape kinds ---- */

/* x [2, 3, 2, 2, 2, 4]: transpose(1, -1) [2, 4, 2, 2, 2, 3], [:, :, 1:] [2, 4, 1, 2, 2, 3],
 * F.pad(., (1, 2), value=0.5) [2, 4, 1, 2, 2, 6]: y[a, b, 0, d, e, f] = x[a, f - 1, 1, d, e, b]
 * for 1 <= f <= 3, else 0.5 */
static const int64_t t6_x[6] = {2, 3, 2, 2, 2, 4}, t6_y[6] = {2, 4, 1, 2, 2, 6};
static void transpose_slice_pad(const double *const *x, double *y)
{
    int64_t yi[6];
    for (int64_t i = 0; i < count(6, t6_y); i++) {
        unravel(6, t6_y, i, yi);
        const int64_t xi[6] = {yi[0], yi[5] - 1, 1, yi[3], yi[4], yi[1]};
        y[i] = yi[5] >= 1 && yi[5] <= 3 ? x[0][ravel(6, t6_x, xi)] : 0.5;
    }
}

/* x [2, 1, 2, 3, 1, 2] and w [2, 1, 2, 1, 1, 2]: cat dim=3 [2, 1, 2, 4, 1, 2], squeeze(1),
 * select(3, 0) [2, 2, 4, 2], unsqueeze(1) [2, 1, 2, 4, 2]:
 * y[a, 0, c, d, f] = d < 3 ? x[a, 0, c, d, 0, f] : w[a, 0, c, d - 3, 0, f] */
static const int64_t c6_x[6] = {2, 1, 2, 3, 1, 2}, c6_w[6] = {2, 1, 2, 1, 1, 2},
                     c6_y[5] = {2, 1, 2, 4, 2};
static void cat_squeeze_select_unsqueeze(const double *const *x, double *y)
{
    int64_t yi[5];
    for (int64_t i = 0; i < count(5, c6_y); i++) {
        unravel(5, c6_y, i, yi);
        const int64_t xi[6] = {yi[0], 0, yi[2], yi[3], 0, yi[4]},
                      wi[6] = {yi[0], 0, yi[2], yi[3] - 3, 0, yi[4]};
        y[i] = yi[3] < 3 ? x[0][ravel(6, c6_x, xi)] : x[1][ravel(6, c6_w, wi)];
    }
}

/* x and w [2, 2, 1, 2, 3]: stack dim=2 [2, 2, 2, 1, 2, 3], flatten(2, 4) [2, 2, 4, 3]:
 * y[a, b, 2 * s + e, f] = (s ? w : x)[a, b, 0, e, f] */
static const int64_t s6_x[5] = {2, 2, 1, 2, 3}, s6_y[4] = {2, 2, 4, 3};
static void stack_flatten(const double *const *x, double *y)
{
    int64_t yi[4];
    for (int64_t i = 0; i < count(4, s6_y); i++) {
        unravel(4, s6_y, i, yi);
        const int64_t xi[5] = {yi[0], yi[1], 0, yi[2] % 2, yi[3]};
        y[i] = x[yi[2] / 2][ravel(5, s6_x, xi)];
    }
}

Test(rank6, shape_kinds_of_6_dims_match_finite_differences)
{
    chain t = {"transpose(1, -1), slice dim=2 start=1, pad (1, 2) of 6 dims",
               1,
               {6},
               {{2, 3, 2, 2, 2, 4}},
               3,
               {{.name = "t", .kind = LAYER_TRANSPOSE, .opt_int = {1, -1}},
                {.name = "s", .kind = LAYER_SLICE, .opt_int = {2, 1, INT64_MAX, 1}},
                {.name = "p", .kind = LAYER_PAD, .opt_int = {1, 2}, .opt_real = {0.5}}},
               6,
               {2, 4, 1, 2, 2, 6},
               transpose_slice_pad,
               1e-6};
    check_chain(&t, 61);
    chain c = {"cat dim=3, squeeze(1), select(3, 0), unsqueeze(1) of 6 dims",
               2,
               {6, 6},
               {{2, 1, 2, 3, 1, 2}, {2, 1, 2, 1, 1, 2}},
               4,
               {{.name = "c", .kind = LAYER_CAT, .n_inputs = 2, .opt_int = {3}},
                {.name = "q", .kind = LAYER_SQUEEZE, .opt_int = {1}},
                {.name = "s", .kind = LAYER_SELECT, .opt_int = {3, 0}},
                {.name = "u", .kind = LAYER_UNSQUEEZE, .opt_int = {1}}},
               5,
               {2, 1, 2, 4, 2},
               cat_squeeze_select_unsqueeze,
               1e-6};
    check_chain(&c, 62);
    chain s = {"stack dim=2 into 6 dims, flatten(2, 4)",
               2,
               {5, 5},
               {{2, 2, 1, 2, 3}, {2, 2, 1, 2, 3}},
               2,
               {{.name = "st", .kind = LAYER_STACK, .n_inputs = 2, .opt_int = {2}},
                {.name = "f", .kind = LAYER_FLATTEN, .opt_int = {2, 4}}},
               4,
               {2, 2, 4, 3},
               stack_flatten,
               1e-6};
    check_chain(&s, 63);
}

/* ---- a whole run ---- */

/* The case run under autocast float16 (its own), bfloat16 and off: every forward tensor's
 * dtype and shape in step 0 of its tensors.csv against PyTorch's CUDA autocast dispatcher on
 * fake tensors (tests/references/rank6.csv, tools/rank6_references.py), the shapes of 5
 * dims printed as "2x3x3x2x4"; under float16 the case's [expect] (gradient dtypes) holds and
 * ke's gradient has ke's 5-d shape. */
Test(rank6, a_run_of_a_5_d_chain_has_pytorch_s_dtypes_and_shapes, .timeout = 60)
{
    static const struct {
        const char *config, *set;
    } runs[] = {{"float16", NULL},
                {"bfloat16", "precision.autocast=bfloat16"},
                {"off", "precision.autocast=off"}};
    csv ref;
    cr_assert(csv_read(REFERENCE, &ref), "cannot read %s", REFERENCE);
    int c_cfg = csv_col(&ref, "config"), c_t = csv_col(&ref, "tensor"),
        c_dt = csv_col(&ref, "dtype"), c_sh = csv_col(&ref, "shape");
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char out[64];
        make_temp_dir(out, sizeof out);
        case_result res;
        run_case_file_set(CASE, &runs[k].set, runs[k].set ? 1 : 0, out, &res, NULL);
        cr_assert(res.ok, "%s: %s", runs[k].config, res.error);
        char path[4096];
        snprintf(path, sizeof path, "%s/%.200s/tensors.csv", out, res.name);
        csv t;
        cr_assert(csv_read(path, &t), "cannot read %s", path);
        int checked = 0;
        for (int i = 0; i < ref.n_rows; i++) {
            char **f = ref.rows[i];
            if (strcmp(f[c_cfg], runs[k].config) != 0)
                continue;
            char **row = csv_find(&t, "step", "0", "tensor", f[c_t], NULL, NULL);
            cr_expect_not_null(row, "%s: no row of %s", runs[k].config, f[c_t]);
            if (!row)
                continue;
            cr_expect_str_eq(row[csv_col(&t, "dtype")], f[c_dt], "%s: %s's dtype",
                             runs[k].config, f[c_t]);
            cr_expect_str_eq(row[csv_col(&t, "shape")], f[c_sh], "%s: %s's shape",
                             runs[k].config, f[c_t]);
            checked++;
        }
        cr_expect_geq(checked, 13, "%s: %d rows of the reference", runs[k].config, checked);
        if (!runs[k].set) {
            cr_expect(res.passed && res.expect_total > 0, "%d/%d held\n%s", res.expect_passed,
                      res.expect_total, res.failures);
            char **row = csv_find(&t, "step", "0", "tensor", "ke.out.grad", NULL, NULL);
            cr_expect_not_null(row, "no row of ke.out.grad");
            if (row)
                cr_expect_str_eq(row[csv_col(&t, "shape")], "2x2x3x3x4");
        }
        csv_free(&t);
        rm_rf(out);
    }
    csv_free(&ref);
}
