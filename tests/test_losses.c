/*
 * test_losses.c: the losses bce_with_logits and l1 on the CPU backend.
 *  - Backward against central finite differences of a float64 forward written here, at
 *    several shapes (the method of test_layers.c: float32 ops, h = 1e-4, tolerance 1e-4
 *    relative + 1e-5 absolute), and the forward against the same float64 formula.
 *  - Values against PyTorch: tests/references/losses.csv (written by losses.py there) holds
 *    a [6, 5] input and target, the loss and the input's gradient for float32, float16 and
 *    bfloat16 inputs and targets outside autocast, and under CUDA autocast's policy (cast up
 *    to float32 first, the gradient cast back down). The ops' chain here is the one the
 *    losses' forwards run (layers/bce_with_logits.c, layers/l1.c).
 *  - l1's gradient at input == target is 0 (PyTorch's sgn(0)), and at NaN too.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "helpers.h"

#define FD_H 1e-4
#define MAXN 256

static double log_sigmoid64(double x) { return fmin(x, 0.0) - log1p(exp(-fabs(x))); }

/* the float64 losses of x against t, n elements */
static double bce64(const double *x, const double *t, int n)
{
    double L = 0;
    for (int i = 0; i < n; i++)
        L += (1 - t[i]) * x[i] - log_sigmoid64(x[i]);
    return L / n;
}

static double l1_64(const double *x, const double *t, int n)
{
    double L = 0;
    for (int i = 0; i < n; i++)
        L += fabs(x[i] - t[i]);
    return L / n;
}

typedef struct shape_case {
    int ndim;
    int64_t shape[3];
} shape_case;

static int numel_of(const shape_case *s)
{
    int n = 1;
    for (int k = 0; k < s->ndim; k++)
        n *= (int)s->shape[k];
    return n;
}

/* the loss's ops in float32 (x, t float32): returns the loss, dx filled */
static float bce_ops(test_env *e, tensor *x, tensor *t, float dloss, tensor *dx)
{
    tensor *elem = env_zeros(e, "elem", t->dtype, x->ndim, x->shape);
    tensor *loss = env_zeros(e, "loss", t->dtype, 0, NULL);
    tensor *dy = env_tensor(e, "dy", t->dtype, 0, NULL, &dloss);
    cr_assert_eq(e->be->bce_logits_forward(e->be, x, t, elem, NULL), 0);
    cr_assert_eq(reduce_all(e->be, RD_OP_mean, elem, loss, NULL), 0);
    cr_assert_eq(e->be->bce_logits_backward(e->be, dy, x, t, dx, NULL), 0);
    return tensor_at(loss, 0);
}

/* sub, abs, mean, then their backward; the sub's gradient cast to dx's dtype */
static float l1_ops(test_env *e, tensor *x, tensor *t, dtype dt, float dloss, tensor *dx)
{
    tensor *diff = env_zeros(e, "diff", dt, x->ndim, x->shape);
    tensor *abs = env_zeros(e, "abs", dt, x->ndim, x->shape);
    tensor *loss = env_zeros(e, "loss", dt, 0, NULL);
    tensor *dy = env_tensor(e, "dy", dt, 0, NULL, &dloss);
    tensor *g1 = env_zeros(e, "g1", dt, x->ndim, x->shape);
    tensor *g2 = env_zeros(e, "g2", dt, x->ndim, x->shape);
    cr_assert_eq(e->be->sub_forward(e->be, x, t, diff, NULL), 0);
    cr_assert_eq(e->be->abs_forward(e->be, diff, abs, NULL), 0);
    cr_assert_eq(reduce_all(e->be, RD_OP_mean, abs, loss, NULL), 0);
    cr_assert_eq(e->be->reduce_backward(e->be, RD_OP_mean, &(op_params){.seed = 0}, dy, NULL, NULL,
                                        (1u << g1->ndim) - 1, g1, NULL),
                 0);
    cr_assert_eq(e->be->abs_backward(e->be, g1, diff, g2, NULL), 0);
    cr_assert_eq(e->be->cast(e->be, g2, dx, NULL), 0);
    return tensor_at(loss, 0);
}

static void expect_fd(const char *what, const tensor *dx,
                      double (*f)(const double *, const double *, int), double *x, const double *t,
                      int n, double scale)
{
    for (int j = 0; j < n; j++) {
        double keep = x[j];
        x[j] = keep + FD_H;
        double up = f(x, t, n);
        x[j] = keep - FD_H;
        double down = f(x, t, n);
        x[j] = keep;
        double want = scale * (up - down) / (2 * FD_H), got = tensor_at(dx, j);
        cr_expect(fabs(got - want) <= 1e-4 * fabs(want) + 1e-5 * scale,
                  "%s [%d of %d]: backward %.8g, finite differences %.8g", what, j, n, got, want);
    }
}

static const shape_case fd_shapes[] = {{1, {1}}, {2, {3, 5}}, {2, {4, 1}}, {3, {2, 3, 7}}};

ParameterizedTestParameters(losses, bce_with_logits_matches_finite_differences)
{
    return cr_make_param_array(shape_case, fd_shapes, sizeof fd_shapes / sizeof fd_shapes[0]);
}

ParameterizedTest(const shape_case *s, losses, bce_with_logits_matches_finite_differences)
{
    int n = numel_of(s);
    rng g;
    rng_seed(&g, 7 + (uint64_t)n);
    float xv[MAXN], tv[MAXN];
    double x[MAXN], t[MAXN];
    for (int i = 0; i < n; i++) {
        xv[i] = (float)(3 * rng_normal(&g));
        tv[i] = i % 3 == 0 ? 0.3f : (float)(rng_normal(&g) > 0); /* hard and soft labels */
        x[i] = xv[i], t[i] = tv[i];
    }
    static const float seeds[2] = {1.0f, 65536.0f}; /* a GradScaler's scale multiplies dx */
    for (int k = 0; k < 2; k++) {
        test_env e;
        env_open(&e);
        tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, s->ndim, s->shape, xv);
        tensor *tt = env_tensor(&e, "t", DTYPE_FLOAT32, s->ndim, s->shape, tv);
        tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, s->ndim, s->shape);
        float loss = bce_ops(&e, tx, tt, seeds[k], dx);
        double want = bce64(x, t, n);
        cr_expect(fabs(loss - want) <= 1e-6 * fabs(want) + 1e-7, "bce loss %.9g, float64 %.9g",
                  loss, want);
        expect_fd("bce_with_logits dx", dx, bce64, x, t, n, seeds[k]);
        env_close(&e);
    }
}

ParameterizedTestParameters(losses, l1_matches_finite_differences)
{
    return cr_make_param_array(shape_case, fd_shapes, sizeof fd_shapes / sizeof fd_shapes[0]);
}

ParameterizedTest(const shape_case *s, losses, l1_matches_finite_differences)
{
    int n = numel_of(s);
    rng g;
    rng_seed(&g, 11 + (uint64_t)n);
    float xv[MAXN], tv[MAXN];
    double x[MAXN], t[MAXN];
    for (int i = 0; i < n; i++) {
        xv[i] = (float)rng_normal(&g);
        tv[i] = (float)rng_normal(&g);
        if (fabsf(xv[i] - tv[i]) < 0.05f) /* away from the kink */
            tv[i] = xv[i] + 0.5f;
        x[i] = xv[i], t[i] = tv[i];
    }
    test_env e;
    env_open(&e);
    tensor *tx = env_tensor(&e, "x", DTYPE_FLOAT32, s->ndim, s->shape, xv);
    tensor *tt = env_tensor(&e, "t", DTYPE_FLOAT32, s->ndim, s->shape, tv);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, s->ndim, s->shape);
    float loss = l1_ops(&e, tx, tt, DTYPE_FLOAT32, 1.0f, dx);
    double want = l1_64(x, t, n);
    cr_expect(fabs(loss - want) <= 1e-6 * fabs(want), "l1 loss %.9g, float64 %.9g", loss, want);
    expect_fd("l1 dx", dx, l1_64, x, t, n, 1.0);
    env_close(&e);
}

Test(losses, l1_gradient_is_zero_where_input_equals_target_and_at_nan)
{
    /* abs's backward is grad * sgn(x - t); torch.sign(0) and torch.sign(nan) are 0 */
    test_env e;
    env_open(&e);
    int64_t n = 4;
    float xv[4] = {1.5f, -2.0f, NAN, 3.0f}, tv[4] = {1.5f, -2.0f, 0.0f, 1.0f};
    tensor *x = env_tensor(&e, "x", DTYPE_FLOAT32, 1, &n, xv);
    tensor *t = env_tensor(&e, "t", DTYPE_FLOAT32, 1, &n, tv);
    tensor *dx = env_zeros(&e, "dx", DTYPE_FLOAT32, 1, &n);
    l1_ops(&e, x, t, DTYPE_FLOAT32, 1.0f, dx);
    cr_expect_eq(tensor_at(dx, 0), 0.0f);
    cr_expect_eq(tensor_at(dx, 1), 0.0f);
    cr_expect_eq(tensor_at(dx, 2), 0.0f);
    cr_expect_eq(tensor_at(dx, 3), 0.25f);
    env_close(&e);
}

/* ---- against PyTorch (tests/references/losses.csv) ---- */

#define REF_N 30
static const int64_t ref_shape[2] = {6, 5};

/* float32: within 2 units in the last place (the order of the mean's sum, and CPU PyTorch's
 * vectorised exp in sigmoid, move the last bit: 17 of bce's 30 float32 gradients differ by
 * an ulp); float16 and bfloat16: the same bits (every rounding into the half dtype agrees) */
static bool near_ulp(double got, double want, dtype dt)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    int mant = dt == DTYPE_FLOAT32 ? 23 : dt == DTYPE_FLOAT16 ? 10 : 7;
    int emin = dt == DTYPE_FLOAT16 ? -14 : -126;
    int ex = want == 0 ? emin : ilogb(want) < emin ? emin : ilogb(want);
    double ulp = ldexp(1.0, ex - mant);
    return dt == DTYPE_FLOAT32 ? fabs(got - want) <= 2 * ulp : got == want;
}

static void against_reference(const char *loss, const char *config)
{
    csv ref;
    cr_assert(csv_read("tests/references/losses.csv", &ref));
    int il = csv_col(&ref, "loss"), ic = csv_col(&ref, "config"), ix = csv_col(&ref, "x"),
        it = csv_col(&ref, "t"), iv = csv_col(&ref, "value"), ig = csv_col(&ref, "grad");
    float xv[REF_N], tv[REF_N], want_g[REF_N];
    double want_loss = 0;
    dtype xd = DTYPE_FLOAT32, td = DTYPE_FLOAT32;
    int n = 0;
    for (int r = 0; r < ref.n_rows; r++) {
        char **row = ref.rows[r];
        if (strcmp(row[il], loss) || strcmp(row[ic], config))
            continue;
        cr_assert_lt(n, REF_N);
        cr_assert(dtype_parse(row[csv_col(&ref, "x_dtype")], &xd));
        cr_assert(dtype_parse(row[csv_col(&ref, "t_dtype")], &td));
        xv[n] = strtof(row[ix], NULL), tv[n] = strtof(row[it], NULL);
        want_g[n] = strtof(row[ig], NULL);
        want_loss = strtod(row[iv], NULL);
        n++;
    }
    cr_assert_eq(n, REF_N, "%s %s: %d rows", loss, config, n);
    bool autocast = strncmp(config, "autocast-", 9) == 0;
    test_env e;
    env_open(&e);
    tensor *x = env_tensor(&e, "x", xd, 2, ref_shape, xv);
    tensor *t = env_tensor(&e, "t", td, 2, ref_shape, tv);
    tensor *dx = env_zeros(&e, "dx", xd, 2, ref_shape);
    tensor *xa = x, *ta = t, *dxa = dx; /* what the op receives: autocast's float32 copies */
    if (autocast) {
        xa = env_zeros(&e, "x@float32", DTYPE_FLOAT32, 2, ref_shape);
        ta = env_zeros(&e, "t@float32", DTYPE_FLOAT32, 2, ref_shape);
        dxa = env_zeros(&e, "x@float32.grad", DTYPE_FLOAT32, 2, ref_shape);
        cr_assert_eq(e.be->cast(e.be, x, xa, NULL), 0);
        cr_assert_eq(e.be->cast(e.be, t, ta, NULL), 0);
    }
    float got_loss;
    dtype loss_dt;
    if (strcmp(loss, "bce_with_logits") == 0) {
        got_loss = bce_ops(&e, xa, ta, 1.0f, dxa);
        loss_dt = ta->dtype;
    } else {
        loss_dt = xa->dtype == ta->dtype ? xa->dtype : DTYPE_FLOAT32;
        got_loss = l1_ops(&e, xa, ta, loss_dt, 1.0f, dxa);
    }
    if (autocast) /* the cast node's backward */
        cr_assert_eq(e.be->cast(e.be, dxa, dx, NULL), 0);
    cr_expect(near_ulp(got_loss, want_loss, loss_dt), "%s %s: loss %a, PyTorch %a", loss, config,
              got_loss, want_loss);
    for (int i = 0; i < n; i++)
        cr_expect(near_ulp(tensor_at(dx, i), want_g[i], xd), "%s %s: grad[%d] %a, PyTorch %a", loss,
                  config, i, tensor_at(dx, i), want_g[i]);
    env_close(&e);
    csv_free(&ref);
}

static const char *const ref_configs[] = {"float32",  "float16-x-float32-t", "float16",
                                          "bfloat16", "autocast-float16",    "autocast-bfloat16"};

Test(losses, bce_with_logits_against_pytorch)
{
    for (size_t k = 0; k < sizeof ref_configs / sizeof ref_configs[0]; k++)
        against_reference("bce_with_logits", ref_configs[k]);
}

Test(losses, l1_against_pytorch)
{
    for (size_t k = 0; k < sizeof ref_configs / sizeof ref_configs[0]; k++)
        against_reference("l1", ref_configs[k]);
}
