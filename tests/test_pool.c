/*
 * test_pool.c: the pooling kinds (max_pool2d, avg_pool2d, adaptive_avg_pool2d 1) on the CPU
 * backend:
 *  - their backward ops against central finite differences of an independent float64
 *    forward written here, at several shapes, strides and paddings (L = sum(R * y));
 *  - their forward and backward against PyTorch's values (tests/references/pool/, written
 *    by make_pool.py there), in float32 and in the half dtypes;
 *  - their shape rules' messages, and the ResNet head case in tests/cases/;
 *  - adaptive_avg_pool2d's backward is mean's (PyTorch runs the 1x1 pool as
 *    input.mean({-1, -2}, keepdim=True)), which multiplies by the float32 reciprocal of H W:
 *    at float32 values of dy where that and a division by H W round apart (found by
 *    enumeration: about a quarter of them at H W = 3136; no float16 or bfloat16 value does,
 *    their rounding hides the difference), the gradient is the product, computed by hand.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "core/rng.h"
#include "helpers.h"
#include "autograd/run.h"
#include "case/load.h"
#include "layers/layer.h"

#define FD_H 1e-4
#define MAXN 1024

typedef enum pool_op { POOL_MAX, POOL_AVG, POOL_GLOBAL } pool_op;

typedef struct pool_case {
    pool_op op;
    conv2d_geom g;
    bool count_include_pad;
} pool_case;

/* y in float64 as PyTorch defines the ops */
static void pool_ref(const pool_case *p, const double *x, double *y)
{
    const conv2d_geom *g = &p->g;
    for (int64_t pl = 0; pl < g->n * g->c_in; pl++)
        for (int64_t oh = 0; oh < g->h_out; oh++)
            for (int64_t ow = 0; ow < g->w_out; ow++) {
                int64_t h0 = oh * g->stride - g->padding, w0 = ow * g->stride - g->padding;
                double mx = -INFINITY, sum = 0;
                int64_t valid = 0;
                for (int64_t h = h0; h < h0 + g->kh; h++)
                    for (int64_t w = w0; w < w0 + g->kw; w++) {
                        if (h < 0 || w < 0 || h >= g->h_in || w >= g->w_in)
                            continue;
                        double v = x[(pl * g->h_in + h) * g->w_in + w];
                        mx = fmax(mx, v), sum += v, valid++;
                    }
                /* the padded window clipped at the padded input's far edge */
                int64_t hh =
                    (h0 + g->kh < g->h_in + g->padding ? h0 + g->kh : g->h_in + g->padding) - h0;
                int64_t ww =
                    (w0 + g->kw < g->w_in + g->padding ? w0 + g->kw : g->w_in + g->padding) - w0;
                double div = p->count_include_pad ? (double)(hh * ww) : (double)valid;
                y[(pl * g->h_out + oh) * g->w_out + ow] = p->op == POOL_MAX ? mx : sum / div;
            }
}

static double pool_loss(const pool_case *p, const double *x, const float *r)
{
    static double y[MAXN];
    pool_ref(p, x, y);
    double L = 0;
    for (int64_t i = 0; i < p->g.n * p->g.c_out * p->g.h_out * p->g.w_out; i++)
        L += r[i] * y[i];
    return L;
}

static pool_case make_case(pool_op op, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                           int64_t s, int64_t pad, bool cip)
{
    pool_case p = {op,
                   {.n = n,
                    .c_in = c,
                    .h_in = h,
                    .w_in = w,
                    .c_out = c,
                    .kh = k,
                    .kw = k,
                    .stride = s,
                    .padding = pad,
                    .dilation = 1},
                   cip};
    if (op == POOL_GLOBAL) {
        p.g.kh = h, p.g.kw = w, p.g.stride = 1, p.g.padding = 0, p.count_include_pad = true;
        p.g.h_out = p.g.w_out = 1;
    } else {
        p.g.h_out = (h + 2 * pad - k) / s + 1;
        p.g.w_out = (w + 2 * pad - k) / s + 1;
    }
    return p;
}

static void check_pool_fd(const pool_case *p, uint64_t seed)
{
    const conv2d_geom *g = &p->g;
    int64_t nx = g->n * g->c_in * g->h_in * g->w_in, ny = g->n * g->c_out * g->h_out * g->w_out;
    cr_assert_leq(nx, MAXN);
    rng gen;
    rng_seed(&gen, seed);
    static float xf[MAXN], rf[MAXN];
    static double x[MAXN], want[MAXN];
    /* distinct values 0.01 apart, shuffled: no two in a window within the step of h */
    for (int64_t i = 0; i < nx; i++)
        xf[i] = (float)(0.01 * (double)(i - nx / 2));
    for (int64_t i = nx - 1; i > 0; i--) {
        int64_t j = rng_below(&gen, i + 1);
        float t = xf[i];
        xf[i] = xf[j], xf[j] = t;
    }
    for (int64_t i = 0; i < nx; i++)
        x[i] = xf[i];
    for (int64_t i = 0; i < ny; i++)
        rf[i] = (float)rng_normal(&gen);
    test_env e;
    env_open(&e);
    int64_t xs[4] = {g->n, g->c_in, g->h_in, g->w_in}, ys[4] = {g->n, g->c_out, g->h_out, g->w_out};
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, 4, xs, xf);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 4, ys, rf);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 4, ys);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 4, xs);
    switch (p->op) {
    case POOL_MAX: {
        tensor *idx = env_zeros(&e, "indices", DTYPE_INT64, 4, ys);
        cr_assert_eq(e.be->max_pool2d_forward(e.be, g, tx, y, idx, NULL), 0);
        cr_assert_eq(e.be->max_pool2d_backward(e.be, g, dy, idx, dx, NULL), 0);
        break;
    }
    case POOL_AVG:
        cr_assert_eq(e.be->avg_pool2d_forward(e.be, g, p->count_include_pad, tx, y, NULL), 0);
        cr_assert_eq(e.be->avg_pool2d_backward(e.be, g, p->count_include_pad, dy, dx, NULL), 0);
        break;
    case POOL_GLOBAL:
        cr_assert_eq(e.be->reduce_forward(e.be, RD_OP_mean, &(op_params){.seed = 0}, tx,
                                          1u << 2 | 1u << 3, y, NULL),
                     0);
        cr_assert_eq(e.be->reduce_backward(e.be, RD_OP_mean, &(op_params){.seed = 0}, dy, NULL,
                                           NULL, 1u << 2 | 1u << 3, dx, NULL),
                     0);
        break;
    }
    pool_ref(p, x, want);
    for (int64_t i = 0; i < ny; i++)
        cr_expect(fabs(tensor_at(y, i) - want[i]) <= 1e-6 * fabs(want[i]) + 1e-7,
                  "y[%lld]: %.8g, expected %.8g", (long long)i, tensor_at(y, i), want[i]);
    for (int64_t j = 0; j < nx; j++) {
        double keep = x[j];
        x[j] = keep + FD_H;
        double up = pool_loss(p, x, rf);
        x[j] = keep - FD_H;
        double down = pool_loss(p, x, rf);
        x[j] = keep;
        want[j] = (up - down) / (2 * FD_H);
    }
    for (int64_t i = 0; i < nx; i++)
        cr_expect(fabs(tensor_at(dx, i) - want[i]) <= 1e-4 * fabs(want[i]) + 1e-5,
                  "dx[%lld]: backward %.8g, finite differences %.8g", (long long)i,
                  tensor_at(dx, i), want[i]);
    env_close(&e);
}

Test(pool, max_pool2d_backward_matches_finite_differences)
{
    /* kernel = stride; overlapping windows (stride 1; kernel 3 stride 2); padding */
    pool_case a = make_case(POOL_MAX, 2, 3, 6, 6, 2, 2, 0, true);
    pool_case b = make_case(POOL_MAX, 1, 2, 5, 6, 3, 1, 0, true);
    pool_case c = make_case(POOL_MAX, 2, 1, 7, 5, 3, 2, 1, true);
    check_pool_fd(&a, 1);
    check_pool_fd(&b, 2);
    check_pool_fd(&c, 3);
}

Test(pool, avg_pool2d_backward_matches_finite_differences)
{
    pool_case a = make_case(POOL_AVG, 2, 3, 6, 6, 2, 2, 0, true);
    pool_case b = make_case(POOL_AVG, 1, 2, 5, 6, 3, 1, 1, true);
    pool_case c = make_case(POOL_AVG, 2, 1, 7, 5, 3, 2, 1, false);
    pool_case d = make_case(POOL_AVG, 1, 2, 8, 8, 4, 3, 2, true);
    check_pool_fd(&a, 4);
    check_pool_fd(&b, 5);
    check_pool_fd(&c, 6);
    check_pool_fd(&d, 7);
}

Test(pool, adaptive_avg_pool2d_backward_matches_finite_differences)
{
    pool_case a = make_case(POOL_GLOBAL, 2, 3, 4, 5, 0, 0, 0, true);
    pool_case b = make_case(POOL_GLOBAL, 3, 1, 1, 7, 0, 0, 0, true);
    check_pool_fd(&a, 8);
    check_pool_fd(&b, 9);
}

/* ---- PyTorch's values ---- */

typedef struct ref_config {
    const char *name;
    pool_op op;
    int64_t k, s, p;
    bool count_include_pad;
    dtype dt;
} ref_config;

static const ref_config ref_configs[] = {
    {"max-f32-k2", POOL_MAX, 2, 2, 0, true, DTYPE_FLOAT32},
    {"max-f32-k3s2p1", POOL_MAX, 3, 2, 1, true, DTYPE_FLOAT32},
    {"max-f32-k3s1", POOL_MAX, 3, 1, 0, true, DTYPE_FLOAT32},
    {"max-f16-half", POOL_MAX, 2, 2, 0, true, DTYPE_FLOAT16},
    {"avg-f32-k2", POOL_AVG, 2, 2, 0, true, DTYPE_FLOAT32},
    {"avg-f32-k3s2p1", POOL_AVG, 3, 2, 1, true, DTYPE_FLOAT32},
    {"avg-f32-k3s2p1-nopad", POOL_AVG, 3, 2, 1, false, DTYPE_FLOAT32},
    {"avg-bf16-half", POOL_AVG, 3, 1, 1, true, DTYPE_BFLOAT16},
    {"gap-f32", POOL_GLOBAL, 0, 0, 0, true, DTYPE_FLOAT32},
    {"gap-f16-half", POOL_GLOBAL, 0, 0, 0, true, DTYPE_FLOAT16},
};

static npy_array ref_read(const char *cfg, const char *t)
{
    char path[PATH_MAX], err[512];
    snprintf(path, sizeof path, "tests/references/pool/%s.%s.npy", cfg, t);
    npy_array a;
    cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.dt, DTYPE_FLOAT32, "%s", path);
    return a;
}

static tensor *ref_tensor(test_env *e, const char *cfg, const char *t, dtype dt)
{
    npy_array a = ref_read(cfg, t);
    tensor *r = env_tensor(e, t, dt, a.ndim, a.shape, a.data);
    npy_free(&a);
    return r;
}

/* within a few float32 ulps of PyTorch's value, or one ulp of a half dtype */
static void expect_ref(const char *cfg, const char *t, const tensor *got)
{
    npy_array a = ref_read(cfg, t);
    cr_assert_eq(a.numel, got->numel, "%s.%s", cfg, t);
    const float *want = a.data;
    double rel = got->dtype == DTYPE_FLOAT16    ? 0x1p-10
                 : got->dtype == DTYPE_BFLOAT16 ? 0x1p-7
                                                : 1e-6;
    for (int64_t i = 0; i < a.numel; i++) {
        double g = tensor_at(got, i), w = want[i];
        cr_expect(fabs(g - w) <= rel * fabs(w) + 1e-7, "%s.%s[%lld]: %.8g, PyTorch %.8g", cfg, t,
                  (long long)i, g, w);
    }
    npy_free(&a);
}

Test(pool, values_match_pytorch)
{
    for (size_t k = 0; k < sizeof ref_configs / sizeof ref_configs[0]; k++) {
        const ref_config *rc = &ref_configs[k];
        test_env e;
        env_open(&e);
        tensor *x = ref_tensor(&e, rc->name, "x", rc->dt);
        tensor *dy = ref_tensor(&e, rc->name, "dy", rc->dt);
        pool_case p = make_case(rc->op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], rc->k,
                                rc->s, rc->p, rc->count_include_pad);
        tensor *y = env_zeros(&e, "y", rc->dt, dy->ndim, dy->shape);
        tensor *dx = env_zeros(&e, "dx", rc->dt, x->ndim, x->shape);
        switch (rc->op) {
        case POOL_MAX: {
            tensor *idx = env_zeros(&e, "indices", DTYPE_INT64, dy->ndim, dy->shape);
            cr_assert_eq(e.be->max_pool2d_forward(e.be, &p.g, x, y, idx, NULL), 0);
            cr_assert_eq(e.be->max_pool2d_backward(e.be, &p.g, dy, idx, dx, NULL), 0);
            break;
        }
        case POOL_AVG:
            cr_assert_eq(e.be->avg_pool2d_forward(e.be, &p.g, rc->count_include_pad, x, y, NULL),
                         0);
            cr_assert_eq(e.be->avg_pool2d_backward(e.be, &p.g, rc->count_include_pad, dy, dx, NULL),
                         0);
            break;
        case POOL_GLOBAL:
            cr_assert_eq(e.be->reduce_forward(e.be, RD_OP_mean, &(op_params){.seed = 0}, x,
                                              1u << 2 | 1u << 3, y, NULL),
                         0);
            cr_assert_eq(e.be->reduce_backward(e.be, RD_OP_mean, &(op_params){.seed = 0}, dy, NULL,
                                               NULL, 1u << 2 | 1u << 3, dx, NULL),
                         0);
            break;
        }
        expect_ref(rc->name, "y", y);
        expect_ref(rc->name, "dx", dx);
        env_close(&e);
    }
}

/* ---- shapes and the case ---- */

Test(pool, shapes_are_checked)
{
    char dir[64], path[PATH_MAX];
    make_temp_dir(dir, sizeof dir);
    case_config *cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
    err_list errs = {0};
    static const char *const good[][2] = {
        {"p = max_pool2d kernel=2", "4x4"},
        {"p = max_pool2d kernel=3 stride=2 padding=1", "4x4"},
        {"p = avg_pool2d kernel=3 stride=1", "6x6"},
        {"p = adaptive_avg_pool2d 1", "1x1"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[model]\nc = conv2d 3 -> 4 kernel=1\n%s\n[data]\nbatch = 2\nshape = 3x8x8\n"
                 "target = randn\n[train]\nloss = mse\n",
                 good[i][0]);
        write_file(dir, "t.case", text, path, sizeof path);
        err_list_free(&errs);
        int n = case_load(path, NULL, 0, cfg, &errs);
        cr_assert_eq(n, 0, "%s: %s", good[i][0], n ? errs.msgs[0] : "");
        char want[32], got[64];
        snprintf(want, sizeof want, "4x%s", good[i][1]);
        const layer_spec *l = &cfg->layers[1];
        cr_assert_eq(l->out_ndim, 3, "%s", good[i][0]);
        snprintf(got, sizeof got, "%lldx%lldx%lld", (long long)l->out_shape[0],
                 (long long)l->out_shape[1], (long long)l->out_shape[2]);
        cr_expect_str_eq(got, want, "%s", good[i][0]);
    }
    static const char *const bad[][2] = {
        {"p = max_pool2d kernel=2 padding=2",
         "t.case:3: p = max_pool2d kernel=2 padding=2: pad should be at most half of effective "
         "kernel size, but got pad=2, kernel_size=2 and dilation=1"},
        {"p = avg_pool2d kernel=9",
         "t.case:3: p = avg_pool2d kernel=9: Given input size: (4x8x8). Calculated output size: "
         "(4x0x0). Output size is too small"},
        {"p = max_pool2d", "t.case:3: max_pool2d layer p needs kernel=K"},
        {"p = max_pool2d kernel=2 ceil_mode=yes", "ceil_mode is not supported"},
        {"p = adaptive_avg_pool2d 2", "expected adaptive_avg_pool2d 1, then options"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[model]\nc = conv2d 3 -> 4 kernel=1\n%s\n[data]\nbatch = 2\nshape = 3x8x8\n"
                 "target = randn\n[train]\nloss = mse\n",
                 bad[i][0]);
        write_file(dir, "t.case", text, path, sizeof path);
        err_list_free(&errs);
        cr_assert_gt(case_load(path, NULL, 0, cfg, &errs), 0, "%s", bad[i][0]);
        cr_expect_not_null(strstr(errs.msgs[0], bad[i][1]), "%s: got %s", bad[i][0], errs.msgs[0]);
    }
    err_list_free(&errs);
    free(cfg);
    rm_rf(dir);
}

Test(pool, resnet_head_case_holds_its_expectations)
{
    char out[64];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-resnet-head.case", out, &res, NULL);
    cr_expect(res.ok, "%s", res.error);
    cr_expect(res.passed && res.expect_total > 0, "%d/%d held\n%s", res.expect_passed,
              res.expect_total, res.failures);
    rm_rf(out);
}

/* ---- the global pool's backward: mean's, a product with the float32 reciprocal ---- */

Test(pool, global_pool_backward_multiplies_by_the_float32_reciprocal_of_h_w)
{
    enum { H = 56, W = 56, C = 6 };
    const float recip = 1.0f / (float)(H * W);
    /* float32 values v from 1 up where v * (1 / HW) != v / HW */
    float dyv[C];
    int found = 0;
    for (float v = 1.0f; v < 2.0f && found < C; v = nextafterf(v, 2.0f))
        if (v * recip != v / (float)(H * W))
            dyv[found++] = v;
    cr_assert_eq(found, C, "only %d float32 values where the two round apart", found);
    run *r = test_run_open();
    cr_assert_eq(setjmp(r->fail), 0, "%s", r->error);
    int64_t xs[4] = {1, C, H, W};
    tensor *x = run_tensor(r, "x", DTYPE_FLOAT32, 4, xs, MEM_PARAMS);
    x->requires_grad = x->is_leaf = true;
    cr_assert_eq(r->be->fill(r->be, x, 1.0f), 0);
    layer_spec l = {.name = "gap", .kind = LAYER_ADAPTIVE_AVG_POOL2D};
    tensor *in[1] = {x};
    tensor *y = layer_def_of(LAYER_ADAPTIVE_AVG_POOL2D)->forward(r, &l, in, NULL);
    test_backward_from(r, y, dyv);
    cr_assert_not_null(x->grad);
    for (int c = 0; c < C; c++) {
        float want = dyv[c] * recip; /* by hand */
        float divided = dyv[c] / (float)(H * W);
        for (int64_t i = 0; i < H * W; i++)
            cr_expect_eq(tensor_at(x->grad, c * H * W + i), want,
                         "dy %.9g: dx %.9g, dy * (1 / HW) %.9g (dy / HW would be %.9g)", dyv[c],
                         tensor_at(x->grad, c * H * W + i), want, divided);
    }
    test_run_close(r);
}
