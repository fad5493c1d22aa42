/*
 * test_interpolate.c: the interpolate kind (F.interpolate, mode="nearest"): its backend ops
 * against PyTorch's values (tests/references/interpolate.csv, written by
 * tools/interpolate_references.py) and against float64 finite differences of the nearest
 * rule written with integer division, and its dtype under CUDA autocast's float32 list.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast.h"
#include "helpers.h"
#include "layers/layer.h"

#define MAXN 512

static conv2d_geom up_geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t s)
{
    return (conv2d_geom){.n = n, .c_in = c, .c_out = c, .h_in = h, .w_in = w, .h_out = h * s,
                         .w_out = w * s, .stride = s};
}

/* the config's values of tensor `name` (rows in index order) into v; the count */
static int ref_values(const csv *t, const char *config, const char *name, float *v)
{
    int ic = csv_col(t, "config"), it = csv_col(t, "tensor"), iv = csv_col(t, "value"), n = 0;
    for (int i = 0; i < t->n_rows; i++)
        if (strcmp(t->rows[i][ic], config) == 0 && strcmp(t->rows[i][it], name) == 0) {
            cr_assert_lt(n, MAXN);
            v[n++] = strtof(t->rows[i][iv], NULL);
        }
    return n;
}

Test(interpolate, nearest_matches_pytorch)
{
    csv t;
    cr_assert(csv_read("tests/references/interpolate.csv", &t));
    int ic = csv_col(&t, "config");
    int configs = 0;
    for (int row = 0; row < t.n_rows; row++) {
        if (row > 0 && strcmp(t.rows[row][ic], t.rows[row - 1][ic]) == 0)
            continue;
        const char *config = t.rows[row][ic];
        char **f = t.rows[row];
        dtype dt = dtype_named(f[csv_col(&t, "dtype")]);
        conv2d_geom g = up_geom(atoll(f[csv_col(&t, "n")]), atoll(f[csv_col(&t, "c")]),
                                atoll(f[csv_col(&t, "h")]), atoll(f[csv_col(&t, "w")]),
                                atoll(f[csv_col(&t, "scale_factor")]));
        static float x[MAXN], dy[MAXN], y_want[MAXN], dx_want[MAXN];
        int nx = ref_values(&t, config, "x", x), ny = ref_values(&t, config, "dy", dy);
        cr_assert_eq(ref_values(&t, config, "y", y_want), ny, "%s", config);
        cr_assert_eq(ref_values(&t, config, "dx", dx_want), nx, "%s", config);
        int64_t xs[4] = {g.n, g.c_in, g.h_in, g.w_in}, ys[4] = {g.n, g.c_out, g.h_out, g.w_out};
        cr_assert_eq(xs[0] * xs[1] * xs[2] * xs[3], nx, "%s", config);
        test_env e;
        env_open(&e);
        tensor *tx = env_tensor(&e, "x", dt, 4, xs, x), *tdy = env_tensor(&e, "dy", dt, 4, ys, dy);
        tensor *y = env_zeros(&e, "y", dt, 4, ys), *dx = env_zeros(&e, "dx", dt, 4, xs);
        cr_assert_eq(e.be->upsample_nearest2d_forward(e.be, &g, tx, y, NULL), 0);
        cr_assert_eq(e.be->upsample_nearest2d_backward(e.be, &g, tdy, dx, NULL), 0);
        /* a copy, and float32 sums in PyTorch's order rounded once: bit for bit */
        for (int i = 0; i < ny; i++)
            cr_expect_eq(tensor_at(y, i), y_want[i], "%s y[%d]: %a, PyTorch %a", config, i,
                         tensor_at(y, i), y_want[i]);
        for (int i = 0; i < nx; i++)
            cr_expect_eq(tensor_at(dx, i), dx_want[i], "%s dx[%d]: %a, PyTorch %a", config, i,
                         tensor_at(dx, i), dx_want[i]);
        env_close(&e);
        configs++;
    }
    cr_expect_eq(configs, 5);
    csv_free(&t);
}

/* L = sum(R * y), y[n, c, oh, ow] = x[n, c, oh / S, ow / S] (integer division) in float64 */
static double up_loss(const conv2d_geom *g, const double *x, const float *r)
{
    double L = 0;
    for (int64_t p = 0; p < g->n * g->c_in; p++)
        for (int64_t oh = 0; oh < g->h_out; oh++)
            for (int64_t ow = 0; ow < g->w_out; ow++)
                L += r[(p * g->h_out + oh) * g->w_out + ow] *
                     x[(p * g->h_in + oh / g->stride) * g->w_in + ow / g->stride];
    return L;
}

Test(interpolate, nearest_backward_matches_finite_differences)
{
    static const int64_t shapes[][5] = {{2, 2, 3, 4, 2}, {1, 3, 2, 2, 3}, {1, 1, 4, 1, 4}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const int64_t *s = shapes[k];
        conv2d_geom g = up_geom(s[0], s[1], s[2], s[3], s[4]);
        int64_t nx = g.n * g.c_in * g.h_in * g.w_in, ny = g.n * g.c_out * g.h_out * g.w_out;
        cr_assert_leq(ny, MAXN);
        static float xf[MAXN], rf[MAXN];
        static double x[MAXN];
        for (int64_t i = 0; i < nx; i++)
            xf[i] = (float)sin(0.7 * (double)i + 0.1), x[i] = xf[i];
        for (int64_t i = 0; i < ny; i++)
            rf[i] = (float)cos(1.3 * (double)i);
        test_env e;
        env_open(&e);
        int64_t xs[4] = {g.n, g.c_in, g.h_in, g.w_in}, ys[4] = {g.n, g.c_out, g.h_out, g.w_out};
        tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, 4, xs, xf);
        tensor *dy = env_tensor(&e, "dy", DTYPE_FLOAT32, 4, ys, rf);
        tensor *y = env_zeros(&e, "y", DTYPE_FLOAT32, 4, ys);
        tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 4, xs);
        cr_assert_eq(e.be->upsample_nearest2d_forward(e.be, &g, tx, y, NULL), 0);
        cr_assert_eq(e.be->upsample_nearest2d_backward(e.be, &g, dy, dx, NULL), 0);
        for (int64_t p = 0; p < g.n * g.c_in; p++)
            for (int64_t oh = 0; oh < g.h_out; oh++)
                for (int64_t ow = 0; ow < g.w_out; ow++)
                    cr_expect_eq(tensor_at(y, (p * g.h_out + oh) * g.w_out + ow),
                                 xf[(p * g.h_in + oh / g.stride) * g.w_in + ow / g.stride]);
        for (int64_t j = 0; j < nx; j++) {
            double keep = x[j];
            x[j] = keep + 1e-3;
            double up = up_loss(&g, x, rf);
            x[j] = keep - 1e-3;
            double down = up_loss(&g, x, rf);
            x[j] = keep;
            double want = (up - down) / 2e-3;
            cr_expect(fabs(tensor_at(dx, j) - want) <= 1e-5 * (1 + fabs(want)),
                      "dx[%lld]: %g, differences %g", (long long)j, tensor_at(dx, j), want);
        }
        env_close(&e);
    }
}

/* upsample_nearest2d is on CUDA autocast's float32 list: a float16 input gives float32
 * (tests/references/autocast_policies.csv's row), and its gradient comes back float16 */
Test(interpolate, float32_under_autocast)
{
    struct run *r = test_run_open();
    int kind = layer_kind_of_name("interpolate");
    cr_assert_geq(kind, 0);
    layer_spec spec = {.name = "up", .kind = (layer_kind)kind};
    spec.opt_int[0] = 2;
    const layer_def *d = layer_def_of(spec.kind);
    char err[256];
    int64_t xs[4] = {1, 2, 2, 3};
    tensor *x = tensor_new(&r->pool, "x", DTYPE_FLOAT16, 4, xs, MEM_ACTIVATIONS, err, sizeof err);
    cr_assert_not_null(x, "%s", err);
    for (int64_t i = 0; i < x->numel; i++)
        store_from_float(x->data, x->dtype, i, (float)i * 0.25f);
    x->is_leaf = true;
    x->requires_grad = true;
    r->autocast = true;
    r->autocast_dtype = DTYPE_FLOAT16;
    if (setjmp(r->fail))
        cr_assert_fail("the run failed");
    tensor *y = d->forward(r, &spec, &x, NULL);
    autocast_exit(r);
    cr_expect_eq(y->dtype, DTYPE_FLOAT32, "out is %s", dtype_name(y->dtype));
    cr_assert_eq(y->numel, 48);
    cr_expect_eq(tensor_at(y, 0 * 6 + 1), tensor_at(x, 0)); /* y[0, 0, 0, 1] = x[0, 0, 0, 0] */
    cr_expect_eq(tensor_at(y, 3 * 6 + 5), tensor_at(x, 1 * 3 + 2)); /* y[.., 3, 5] = x[.., 1, 2] */
    test_run_close(r);
}
