/*
 * test_softmax_dim.c: softmax and log_softmax over every dim (`dim=D`, a dim of the whole
 * tensor, negative from the end), the last and the others, against a float64 forward
 * written here, and their backward against central finite differences of that forward:
 * x of shape [2, 3, 4] in float32, the gradient of L = sum(dy * y) for a fixed dy.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "autograd/run.h"
#include "helpers.h"
#include "layers/layer.h"

#define N 24
static const int64_t shape[3] = {2, 3, 4};

/* y = softmax (log_softmax when take_log) of x over dim d of shape [2, 3, 4], in float64 */
static void softmax64(const double *x, int d, bool take_log, double *y)
{
    int64_t stride = 1;
    for (int k = d + 1; k < 3; k++)
        stride *= shape[k];
    for (int64_t i = 0; i < N; i++) {
        int64_t base = i - ((i / stride) % shape[d]) * stride; /* the row's first element */
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < shape[d]; j++)
            mx = fmax(mx, x[base + j * stride]);
        for (int64_t j = 0; j < shape[d]; j++)
            sum += exp(x[base + j * stride] - mx);
        y[i] = take_log ? x[i] - mx - log(sum) : exp(x[i] - mx) / sum;
    }
}

static double loss64(const double *x, const double *dy, int d, bool take_log)
{
    double y[N], l = 0;
    softmax64(x, d, take_log, y);
    for (int i = 0; i < N; i++)
        l += dy[i] * y[i];
    return l;
}

static run *r;
static void run_open(void) { r = test_run_open(); }
static void run_close(void) { test_run_close(r); }

static float upstream[N];

static void consumer_backward(run *rr, node *n)
{
    tensor *g = node_grad_tensor(rr, n, 0);
    for (int64_t i = 0; i < g->numel; i++)
        store_from_float(g->data, g->dtype, i, upstream[i]);
    node_give_grad(rr, n, 0, g, NULL);
}

static void check(layer_kind kind, int64_t dim)
{
    bool take_log = kind == LAYER_LOG_SOFTMAX;
    int d = (int)(dim < 0 ? dim + 3 : dim);
    double x64[N], dy64[N], y64[N];
    tensor *x = run_tensor(r, "x", DTYPE_FLOAT32, 3, shape, MEM_PARAMS);
    for (int i = 0; i < N; i++) {
        float v = (float)sin(1.7 * i) * 2.0f;
        store_from_float(x->data, DTYPE_FLOAT32, i, v);
        x64[i] = v;
        upstream[i] = (float)cos(0.9 * i);
        dy64[i] = upstream[i];
    }
    x->requires_grad = x->is_leaf = true;
    layer_spec l = {.name = "sm", .kind = kind, .n_inputs = 1, .tied = -1};
    l.opt_int[0] = dim;
    tensor *in[] = {x};
    tensor *y = layer_def_of(kind)->forward(r, &l, in, NULL);
    cr_assert_eq(y->ndim, 3);
    softmax64(x64, d, take_log, y64);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(tensor_at(y, i) - y64[i]) <= 2e-6 * fmax(1.0, fabs(y64[i])),
                  "%s dim=%lld: y[%d] = %.9g, float64 %.9g", layer_def_of(kind)->name,
                  (long long)dim, i, tensor_at(y, i), y64[i]);
    int64_t one = 1;
    tensor *z = run_tensor(r, "z", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    tape_record(r, "consumer", consumer_backward, z, &y, 1);
    tape_backward(r, z, 1.0f);
    cr_assert_not_null(x->grad);
    for (int i = 0; i < N; i++) {
        double h = 1e-6, xp[N], xm[N];
        memcpy(xp, x64, sizeof xp);
        memcpy(xm, x64, sizeof xm);
        xp[i] += h;
        xm[i] -= h;
        double fd = (loss64(xp, dy64, d, take_log) - loss64(xm, dy64, d, take_log)) / (2 * h);
        cr_expect(fabs(tensor_at(x->grad, i) - fd) <= 1e-5 * fmax(1.0, fabs(fd)),
                  "%s dim=%lld: dx[%d] = %.9g, finite differences %.9g",
                  layer_def_of(kind)->name, (long long)dim, i, tensor_at(x->grad, i), fd);
    }
    tensor_release(&r->pool, y);
    tensor_release(&r->pool, z);
}

Test(softmax_dim, every_dim_matches_float64_and_finite_differences, .init = run_open,
     .fini = run_close)
{
    static const int64_t dims[] = {0, 1, 2, -1, -2, -3};
    for (int k = 0; k < 6; k++) {
        check(LAYER_SOFTMAX, dims[k]);
        check(LAYER_LOG_SOFTMAX, dims[k]);
    }
}
