/*
 * test_layers.c: every op's backward on the CPU backend against central finite differences
 * of an independent float64 forward written here. Each test draws random inputs, takes
 * L = sum(R * y) for a random R (so dL/dy = R), computes the analytic gradients with the
 * backend's backward ops in float32, and compares them with (L(t+h) - L(t-h)) / 2h in
 * double. Tolerance: 1e-4 relative + 1e-5 absolute (float32 accumulation over <= 60 terms).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "helpers.h"

#define FD_H 1e-4
#define MAXN 512

typedef double (*loss_fn)(const double *const *in, const void *ctx);

static rng g_rng;

static void randn_fill(float *v, int n, double scale)
{
    for (int i = 0; i < n; i++)
        v[i] = (float)(scale * rng_normal(&g_rng));
}

/* numeric gradient of f with respect to input k (n elements), at the float values given */
static void fd_grad(loss_fn f, const void *ctx, double **in, int k, int n, double *out)
{
    for (int j = 0; j < n; j++) {
        double keep = in[k][j];
        in[k][j] = keep + FD_H;
        double up = f((const double *const *)in, ctx);
        in[k][j] = keep - FD_H;
        double down = f((const double *const *)in, ctx);
        in[k][j] = keep;
        out[j] = (up - down) / (2 * FD_H);
    }
}

static void expect_close(const char *what, const tensor *got, const double *want)
{
    for (int64_t i = 0; i < got->numel; i++) {
        double a = tensor_at(got, i), b = want[i];
        cr_expect(fabs(a - b) <= 1e-4 * fabs(b) + 1e-5,
                  "%s[%lld]: backward %.8g, finite "
                  "differences %.8g",
                  what, (long long)i, a, b);
    }
}

static double *widen(const float *v, int n)
{
    static double store[8][MAXN];
    static int next;
    double *d = store[next++ % 8];
    for (int i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

/* ---- linear: y[B,O] = x[B,I] w[O,I]^T + b[O] ---- */
enum { LB = 3, LI = 4, LO = 5 };
static float lin_r[LB * LO];

static double linear_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int b = 0; b < LB; b++)
        for (int o = 0; o < LO; o++) {
            double y = in[2][o];
            for (int i = 0; i < LI; i++)
                y += in[0][b * LI + i] * in[1][o * LI + i];
            L += lin_r[b * LO + o] * y;
        }
    return L;
}

Test(layers, linear_backward_matches_finite_differences)
{
    rng_seed(&g_rng, 1);
    float x[LB * LI], w[LO * LI], bias[LO];
    randn_fill(x, LB * LI, 1), randn_fill(w, LO * LI, 1), randn_fill(bias, LO, 1);
    randn_fill(lin_r, LB * LO, 1);
    test_env e;
    env_open(&e);
    int64_t xs[2] = {LB, LI}, ws[2] = {LO, LI}, bs[1] = {LO}, ys[2] = {LB, LO};
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, 2, xs, x);
    tensor *tw = env_tensor(&e, "w", DTYPE_FLOAT32, 2, ws, w);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 2, ys, lin_r);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 2, xs);
    tensor *dw = env_zeros(&e, "dw", DTYPE_FLOAT32, 2, ws);
    tensor *db = env_zeros(&e, "db", DTYPE_FLOAT32, 1, bs);
    cr_assert_eq(e.be->linear_backward_input(e.be, dy, tw, dx, NULL), 0);
    cr_assert_eq(e.be->linear_backward_weight(e.be, dy, tx, dw, NULL), 0);
    cr_assert_eq(reduce_channel_sum(e.be, dy, LB, 1, db, NULL), 0);
    double *in[3] = {widen(x, LB * LI), widen(w, LO * LI), widen(bias, LO)};
    double want[MAXN];
    fd_grad(linear_loss, NULL, in, 0, LB * LI, want);
    expect_close("dx", dx, want);
    fd_grad(linear_loss, NULL, in, 1, LO * LI, want);
    expect_close("dw", dw, want);
    fd_grad(linear_loss, NULL, in, 2, LO, want);
    expect_close("db", db, want);
    /* and the forward against the same float64 formula */
    tensor *tb = env_tensor(&e, "b", DTYPE_FLOAT32, 1, bs, bias);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, ys);
    cr_assert_eq(e.be->linear_forward(e.be, tx, tw, tb, y, NULL), 0);
    double L = 0;
    for (int k = 0; k < LB * LO; k++)
        L += lin_r[k] * tensor_at(y, k);
    cr_expect(fabs(L - linear_loss((const double *const *)in, NULL)) < 1e-4);
    env_close(&e);
}

/* ---- conv2d ---- */
static conv2d_geom conv_g;
static float conv_r[MAXN];

static double conv_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    const conv2d_geom *g = &conv_g;
    double L = 0;
    for (int n = 0; n < g->n; n++)
        for (int co = 0; co < g->c_out; co++)
            for (int oh = 0; oh < g->h_out; oh++)
                for (int ow = 0; ow < g->w_out; ow++) {
                    double y = in[2][co];
                    /* output channel co reads its group's input channels */
                    int cin_g = (int)(g->c_in / g->groups);
                    int first = (int)(co / (g->c_out / g->groups)) * cin_g;
                    for (int ci = first; ci < first + cin_g; ci++)
                        for (int ki = 0; ki < g->kh; ki++)
                            for (int kj = 0; kj < g->kw; kj++) {
                                long ih = oh * g->stride - g->padding + ki * g->dilation;
                                long iw = ow * g->stride - g->padding + kj * g->dilation;
                                if (ih < 0 || ih >= g->h_in || iw < 0 || iw >= g->w_in)
                                    continue;
                                y += in[0][((n * g->c_in + ci) * g->h_in + ih) * g->w_in + iw] *
                                     in[1][((co * cin_g + ci - first) * g->kh + ki) * g->kw + kj];
                            }
                    L += conv_r[((n * g->c_out + co) * g->h_out + oh) * g->w_out + ow] * y;
                }
    return L;
}

static void check_conv(int64_t stride, int64_t padding, int64_t dilation, int64_t groups)
{
    conv2d_geom g = {.n = 2,
                     .c_in = groups == 1 ? 3 : 4,
                     .h_in = 5,
                     .w_in = 6,
                     .c_out = 4,
                     .kh = 3,
                     .kw = 3,
                     .stride = stride,
                     .padding = padding,
                     .dilation = dilation,
                     .groups = groups};
    g.h_out = (g.h_in + 2 * padding - dilation * (g.kh - 1) - 1) / stride + 1;
    g.w_out = (g.w_in + 2 * padding - dilation * (g.kw - 1) - 1) / stride + 1;
    conv_g = g;
    int nx = (int)(g.n * g.c_in * g.h_in * g.w_in), nw = (int)(g.c_out * g.c_in / groups * 9);
    int ny = (int)(g.n * g.c_out * g.h_out * g.w_out);
    float x[MAXN], w[MAXN], bias[4];
    rng_seed(&g_rng, 2);
    randn_fill(x, nx, 1), randn_fill(w, nw, 1), randn_fill(bias, 4, 1), randn_fill(conv_r, ny, 1);
    test_env e;
    env_open(&e);
    int64_t xs[4] = {g.n, g.c_in, g.h_in, g.w_in}, ws[4] = {g.c_out, g.c_in / groups, 3, 3};
    int64_t ys[4] = {g.n, g.c_out, g.h_out, g.w_out}, bs[1] = {g.c_out};
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, 4, xs, x);
    tensor *tw = env_tensor(&e, "w", DTYPE_FLOAT32, 4, ws, w);
    tensor *tb = env_tensor(&e, "b", DTYPE_FLOAT32, 1, bs, bias);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 4, ys, conv_r);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 4, ys);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 4, xs);
    tensor *dw = env_zeros(&e, "dw", DTYPE_FLOAT32, 4, ws);
    tensor *db = env_zeros(&e, "db", DTYPE_FLOAT32, 1, bs);
    cr_assert_eq(e.be->conv2d_forward(e.be, &g, tx, tw, tb, y, NULL), 0);
    cr_assert_eq(e.be->conv2d_backward_input(e.be, &g, dy, tw, dx, NULL), 0);
    cr_assert_eq(e.be->conv2d_backward_weight(e.be, &g, dy, tx, dw, NULL), 0);
    cr_assert_eq(reduce_channel_sum(e.be, dy, g.n, g.h_out * g.w_out, db, NULL), 0);
    double *in[3] = {widen(x, nx), widen(w, nw), widen(bias, 4)};
    double L = 0, want[MAXN];
    for (int k = 0; k < ny; k++)
        L += conv_r[k] * tensor_at(y, k);
    cr_expect(fabs(L - conv_loss((const double *const *)in, NULL)) < 1e-3, "forward");
    fd_grad(conv_loss, NULL, in, 0, nx, want);
    expect_close("dx", dx, want);
    fd_grad(conv_loss, NULL, in, 1, nw, want);
    expect_close("dw", dw, want);
    fd_grad(conv_loss, NULL, in, 2, 4, want);
    expect_close("db", db, want);
    env_close(&e);
}

Test(layers, conv2d_backward_matches_finite_differences) { check_conv(1, 1, 1, 1); }
Test(layers, conv2d_strided_dilated_backward_matches_finite_differences) { check_conv(2, 1, 2, 1); }
Test(layers, conv2d_groups_backward_matches_finite_differences)
{
    check_conv(1, 1, 1, 2); /* 2 groups of 2 channels */
    check_conv(2, 1, 1, 4); /* depthwise: groups = in = out = 4 */
}
Test(layers, conv2d_other_paddings_and_strides_match_finite_differences)
{
    check_conv(1, 0, 1, 1); /* no padding: every column inside */
    check_conv(3, 2, 1, 1); /* padding wider than the stride's reach */
    check_conv(1, 2, 2, 1); /* dilated taps that fall outside on both sides */
}

/* ---- log_softmax, nll, mse, mean: elementwise or row ops on [R, C] ---- */
enum { RR = 3, RC = 5, RN = RR * RC };
static float row_r[RN];
static int64_t nll_target[RR] = {4, 0, 2};

static double log_softmax_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int r = 0; r < RR; r++) {
        double s = 0;
        for (int c = 0; c < RC; c++)
            s += exp(in[0][r * RC + c]);
        for (int c = 0; c < RC; c++)
            L += row_r[r * RC + c] * (in[0][r * RC + c] - log(s));
    }
    return L;
}

static double nll_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int r = 0; r < RR; r++)
        L -= in[0][r * RC + nll_target[r]];
    return L / RR;
}

static double mse_none_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int i = 0; i < RN; i++)
        L += row_r[i] * (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
    return L;
}

static double mse_mean_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int i = 0; i < RN; i++)
        L += (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
    return L / RN;
}

static double mean_loss(const double *const *in, const void *ctx)
{
    (void)ctx;
    double L = 0;
    for (int i = 0; i < RN; i++)
        L += in[0][i];
    return L / RN;
}

Test(layers, log_softmax_nll_mse_mean_backward_match_finite_differences)
{
    rng_seed(&g_rng, 3);
    float a[RN], b[RN];
    randn_fill(a, RN, 1), randn_fill(b, RN, 1), randn_fill(row_r, RN, 1);
    test_env e;
    env_open(&e);
    int64_t s[2] = {RR, RC}, ts[1] = {RR};
    tensor *ta = env_tensor(&e, "a", DTYPE_FLOAT32, 2, s, a);
    tensor *tb = env_tensor(&e, "b", DTYPE_FLOAT32, 2, s, b);
    tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 2, s, row_r);
    float one = 1.0f;
    tensor *d1 = env_tensor(&e, "one", DTYPE_FLOAT32, 0, NULL, &one);
    tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 2, s);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 2, s);
    tensor *target = env_zeros(&e, "target", DTYPE_INT64, 1, ts);
    memcpy(target->data, nll_target, sizeof nll_target);
    double *in[2] = {widen(a, RN), widen(b, RN)};
    double want[RN];

    cr_assert_eq(e.be->log_softmax_forward(e.be, ta, y, NULL), 0);
    cr_assert_eq(e.be->log_softmax_backward(e.be, dy, y, dx, NULL), 0);
    fd_grad(log_softmax_loss, NULL, in, 0, RN, want);
    expect_close("log_softmax dx", dx, want);

    tensor *loss = env_zeros(&e, "loss", DTYPE_FLOAT32, 0, NULL);
    cr_assert_eq(e.be->nll_loss_forward(e.be, ta, target, loss, NULL), 0);
    cr_expect(fabs(tensor_at(loss, 0) - nll_loss((const double *const *)in, NULL)) < 1e-6);
    cr_assert_eq(e.be->nll_loss_backward(e.be, d1, target, dx, NULL), 0);
    fd_grad(nll_loss, NULL, in, 0, RN, want);
    expect_close("nll dx", dx, want);

    cr_assert_eq(e.be->mse_backward(e.be, dy, ta, tb, 2.0, dx, NULL), 0);
    fd_grad(mse_none_loss, NULL, in, 0, RN, want);
    expect_close("mse(reduction=none) dx", dx, want);

    cr_assert_eq(e.be->mse_backward(e.be, d1, ta, tb, 2.0 / RN, dx, NULL), 0);
    fd_grad(mse_mean_loss, NULL, in, 0, RN, want);
    expect_close("mse(reduction=mean) dx", dx, want);
    cr_assert_eq(e.be->mse_forward(e.be, ta, tb, y, NULL), 0);
    cr_assert_eq(reduce_all(e.be, RD_OP_mean, y, loss, NULL), 0);
    cr_expect(fabs(tensor_at(loss, 0) - mse_mean_loss((const double *const *)in, NULL)) < 1e-5);

    cr_assert_eq(e.be->reduce_backward(e.be, RD_OP_mean, &(op_params){.seed = 0}, d1, NULL, NULL,
                                       (1u << dx->ndim) - 1, dx, NULL),
                 0);
    fd_grad(mean_loss, NULL, in, 0, RN, want);
    expect_close("mean dx", dx, want);
    env_close(&e);
}
