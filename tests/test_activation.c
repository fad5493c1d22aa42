/*
 * test_activation.c: the ops of the row kinds softmax, log_softmax and causal_mask, and
 * what dropout's and gelu's rows add, on the CPU backend (the pointwise rows' formulas,
 * finite differences and PyTorch's values are tests/test_pointwise.c's):
 *  - backward against central finite differences of an independent float64 forward
 *    written here, at several shapes (the method of test_layers.c: L = sum(R * y));
 *  - forward and backward against PyTorch's values, tests/references/activations.csv
 *    (written by tools/activation_references.py; its comment says how the half rows are
 *    cast), in float32 within float32 noise and in float16/bfloat16 bit for bit;
 *  - dropout's mask: the kept fraction, the kept values' scale, the same mask in forward
 *    and backward, another one for another seed;
 *  - the kinds in case files: gelu's approximate=, dropout's p= (the first KIND_OPT_REAL
 *    option: default, value, range, JSON), causal_mask's refusal of a sample of rank 1;
 *  - softmax's three paths under autocast (float16 read as half_to_float, bfloat16 cast
 *    first) and outside it, in runs of tests/cases/small-softmax-autocast.case.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "helpers.h"
#include "case/load.h"
#include "layers/layer.h"

#define FD_H 1e-4
#define MAXN 512

static rng g_rng;

static void randn_fill(float *v, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(scale * rng_normal(&g_rng));
}

static bool close_fd(double got, double want)
{
    return fabs(got - want) <= 1e-4 * fabs(want) + 1e-5;
}

/* ---- the ops, by name ---- */

static bool is(const char *a, const char *b) { return strcmp(a, b) == 0; }

static int op_forward(backend *be, const char *op, const char *variant, const tensor *x, tensor *y)
{
    if (is(op, "softmax"))
        return be->softmax_forward(be, x, y, NULL);
    if (is(op, "log_softmax"))
        return be->log_softmax_forward(be, x, y, NULL);
    if (is(op, "causal_mask"))
        return be->causal_fill(be, x, -INFINITY, y, NULL);
    cr_assert_fail("no op %s", op);
    return -1;
}

/* dx from dy and what the op's backward reads (y) */
static int op_backward(backend *be, const char *op, const char *variant, const tensor *dy,
                       const tensor *x, const tensor *y, tensor *dx)
{
    if (is(op, "softmax"))
        return be->softmax_backward(be, dy, y, dx, NULL);
    if (is(op, "log_softmax"))
        return be->log_softmax_backward(be, dy, y, dx, NULL);
    if (is(op, "causal_mask"))
        return be->causal_fill(be, dy, 0.0f, dx, NULL);
    cr_assert_fail("no op %s", op);
    return -1;
}

/* ---- row ops: softmax, log_softmax, the causal mask ---- */

typedef struct rows_ctx {
    const char *op;
    int64_t batch, rows, cols; /* [batch, rows, cols]; softmax rows are batch * rows */
    const float *r;
} rows_ctx;

/* L = sum(R * op(x)); the causal mask fills 0 here: its gradient does not depend on the
 * value, and -inf would make L infinite */
static double rows_loss(const double *x, const rows_ctx *c)
{
    double L = 0;
    for (int64_t b = 0; b < c->batch * c->rows; b++) {
        const double *v = x + b * c->cols;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < c->cols; j++)
            mx = fmax(mx, v[j]);
        for (int64_t j = 0; j < c->cols; j++)
            s += exp(v[j] - mx);
        for (int64_t j = 0; j < c->cols; j++) {
            double y = is(c->op, "softmax")       ? exp(v[j] - mx) / s
                       : is(c->op, "log_softmax") ? v[j] - mx - log(s)
                       : j > b % c->rows          ? 0.0
                                                  : v[j];
            L += c->r[b * c->cols + j] * y;
        }
    }
    return L;
}

static void check_rows_fd(const char *op, int64_t batch, int64_t rows, int64_t cols)
{
    int64_t n = batch * rows * cols, shape[3] = {batch, rows, cols};
    float x[MAXN], r[MAXN];
    randn_fill(x, n, 2), randn_fill(r, n, 1);
    rows_ctx c = {op, batch, rows, cols, r};
    test_env env;
    env_open(&env);
    tensor *tx = env_tensor(&env, "x", DTYPE_FLOAT32, 3, shape, x);
    tensor *dy = env_tensor(&env, "dy", DTYPE_FLOAT32, 3, shape, r);
    tensor *y = env_zeros(&env, "y", DTYPE_FLOAT32, 3, shape);
    tensor *dx = env_zeros(&env, "dx", DTYPE_FLOAT32, 3, shape);
    cr_assert_eq(op_forward(env.be, op, "", tx, y), 0);
    cr_assert_eq(op_backward(env.be, op, "", dy, tx, y, dx), 0);
    double xd[MAXN];
    for (int64_t i = 0; i < n; i++)
        xd[i] = x[i];
    for (int64_t i = 0; i < n; i++) {
        double keep = xd[i];
        xd[i] = keep + FD_H;
        double up = rows_loss(xd, &c);
        xd[i] = keep - FD_H;
        double down = rows_loss(xd, &c);
        xd[i] = keep;
        double want = (up - down) / (2 * FD_H);
        cr_expect(close_fd(tensor_at(dx, i), want),
                  "%s [%lld, %lld, %lld] dx[%lld]: backward %.8g, finite differences %.8g", op,
                  (long long)batch, (long long)rows, (long long)cols, (long long)i,
                  tensor_at(dx, i), want);
    }
    if (is(op, "causal_mask")) /* the forward: -inf above the diagonal, x elsewhere */
        for (int64_t i = 0; i < n; i++) {
            bool masked = i % cols > (i / cols) % rows;
            cr_expect(masked ? tensor_at(y, i) == -INFINITY : tensor_at(y, i) == x[i],
                      "causal_mask y[%lld] = %g", (long long)i, tensor_at(y, i));
        }
    env_close(&env);
}

Test(activation, softmax_log_softmax_causal_mask_backward_match_finite_differences)
{
    rng_seed(&g_rng, 22);
    static const char *const ops[] = {"softmax", "log_softmax", "causal_mask"};
    static const int64_t shapes[4][3] = {{1, 3, 5}, {2, 4, 4}, {1, 2, 1}, {3, 5, 3}};
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 4; s++)
            check_rows_fd(ops[k], shapes[s][0], shapes[s][1], shapes[s][2]);
}

/* ---- dropout ---- */

Test(activation, dropout_backward_matches_finite_differences_of_its_mask)
{
    rng_seed(&g_rng, 23);
    const int64_t shapes[2][2] = {{6, 7}, {1, 33}};
    const double ps[3] = {0.0, 0.25, 0.5};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 3; k++) {
            int64_t n = shapes[s][0] * shapes[s][1];
            float x[MAXN], r[MAXN];
            randn_fill(x, n, 1), randn_fill(r, n, 1);
            test_env env;
            env_open(&env);
            tensor *tx = env_tensor(&env, "x", DTYPE_FLOAT32, 2, shapes[s], x);
            tensor *dy = env_tensor(&env, "dy", DTYPE_FLOAT32, 2, shapes[s], r);
            tensor *y = env_zeros(&env, "y", DTYPE_FLOAT32, 2, shapes[s]);
            tensor *dx = env_zeros(&env, "dx", DTYPE_FLOAT32, 2, shapes[s]);
            op_params p = {.real = {ps[k]}, .seed = 99};
            const tensor *xs[PW_MAX_ARITY] = {tx}, *none[PW_MAX_ARITY] = {NULL};
            cr_assert_eq(env.be->pointwise_forward(env.be, PW_OP_dropout, &p, xs, y, NULL), 0);
            cr_assert_eq(
                env.be->pointwise_backward(env.be, PW_OP_dropout, &p, 0, dy, none, NULL, dx, NULL),
                0);
            double scale = 1 / (1 - ps[k]);
            for (int64_t i = 0; i < n; i++) {
                /* the forward's own mask: y is x * scale or 0 */
                bool kept = tensor_at(y, i) != 0.0f;
                cr_expect(
                    !kept || fabs(tensor_at(y, i) - x[i] * scale) <= 1e-6 * fabs(x[i] * scale),
                    "y[%lld] = %g for x %g, p %g", (long long)i, tensor_at(y, i), x[i], ps[k]);
                double m = kept ? scale : 0.0; /* L = sum(R * x * m): dL/dx = R * m */
                double up = r[i] * (x[i] + FD_H) * m, down = r[i] * (x[i] - FD_H) * m;
                cr_expect(close_fd(tensor_at(dx, i), (up - down) / (2 * FD_H)),
                          "dx[%lld]: backward %.8g, finite differences %.8g (p %g)", (long long)i,
                          tensor_at(dx, i), (up - down) / (2 * FD_H), ps[k]);
            }
            if (ps[k] == 0.0)
                for (int64_t i = 0; i < n; i++)
                    cr_expect_eq(tensor_at(y, i), x[i], "p = 0 keeps every value");
            env_close(&env);
        }
}

Test(activation, dropout_keeps_one_minus_p_of_the_values_and_a_seed_draws_its_own_mask)
{
    enum { N = 100000 };
    const int64_t shape[1] = {N};
    static float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    test_env env;
    env_open(&env);
    tensor *x = env_tensor(&env, "x", DTYPE_FLOAT16, 1, shape, ones);
    tensor *a = env_zeros(&env, "a", DTYPE_FLOAT16, 1, shape);
    tensor *b = env_zeros(&env, "b", DTYPE_FLOAT16, 1, shape);
    const double ps[3] = {0.1, 0.5, 0.9};
    for (int k = 0; k < 3; k++) {
        op_params p7 = {.real = {ps[k]}, .seed = 7}, p8 = {.real = {ps[k]}, .seed = 8};
        const tensor *xs[PW_MAX_ARITY] = {x};
        cr_assert_eq(env.be->pointwise_forward(env.be, PW_OP_dropout, &p7, xs, a, NULL), 0);
        cr_assert_eq(env.be->pointwise_forward(env.be, PW_OP_dropout, &p8, xs, b, NULL), 0);
        float scale = round_to(1.0f / (float)(1.0 - ps[k]), DTYPE_FLOAT16);
        int64_t kept = 0, same = 0;
        for (int i = 0; i < N; i++) {
            float v = tensor_at(a, i);
            cr_assert(v == 0.0f || v == scale, "p %g: element %d is %g (scale %g)", ps[k], i, v,
                      scale);
            kept += v != 0.0f;
            same += (v != 0.0f) == (tensor_at(b, i) != 0.0f);
        }
        /* a binomial count: within 5 standard deviations of N (1 - p) */
        double mean = N * (1 - ps[k]), sd = sqrt(N * ps[k] * (1 - ps[k]));
        cr_expect(fabs((double)kept - mean) < 5 * sd, "p %g: kept %lld of %d", ps[k],
                  (long long)kept, N);
        /* two independent masks agree where both keep or both drop: p^2 + (1-p)^2 */
        double agree = N * (ps[k] * ps[k] + (1 - ps[k]) * (1 - ps[k]));
        cr_expect(fabs((double)same - agree) < 5 * sqrt(agree),
                  "p %g: masks of seeds 7 and 8 "
                  "agree on %lld elements (independent: %.0f)",
                  ps[k], (long long)same, agree);
    }
    env_close(&env);
}

/* ---- PyTorch's values ---- */

/* float32 noise, or one unit in the last place of a half output */
static bool close_ref(double got, double want, dtype dt)
{
    if (isnan(want) || isinf(want))
        return isnan(want) ? isnan(got) : got == want;
    double rel = dt == DTYPE_FLOAT32 ? 1e-5 : dt == DTYPE_FLOAT16 ? 0x1p-10 : 0x1p-7;
    double abs = dt == DTYPE_FLOAT16    ? 0x1p-24 /* float16's smallest subnormal */
                 : dt == DTYPE_BFLOAT16 ? 1e-38
                                        : 1e-7;
    return fabs(got - want) <= rel * fabs(want) + abs;
}

Test(activation, values_match_pytorch)
{
    csv ref;
    const char *path = "tests/references/activations.csv";
    cr_assert(csv_read(path, &ref), "cannot read %s", path);
    int c_op = csv_col(&ref, "op"), c_var = csv_col(&ref, "variant"), c_dt = csv_col(&ref, "dtype");
    int c_odt = csv_col(&ref, "out_dtype"), c_rows = csv_col(&ref, "rows");
    int c_cols = csv_col(&ref, "cols"), c_x = csv_col(&ref, "x"), c_dy = csv_col(&ref, "dy");
    int c_y = csv_col(&ref, "y"), c_dx = csv_col(&ref, "dx");
    int groups = 0;
    for (int r0 = 0; r0 < ref.n_rows;) {
        char **f = ref.rows[r0];
        int64_t rows = atoll(f[c_rows]), cols = atoll(f[c_cols]), n = rows * cols;
        cr_assert(n > 0 && n <= MAXN && r0 + n <= ref.n_rows);
        const char *op = f[c_op], *variant = f[c_var];
        dtype dt = dtype_named(f[c_dt]), odt = dtype_named(f[c_odt]);
        float x[MAXN], dyv[MAXN];
        for (int64_t i = 0; i < n; i++) {
            x[i] = strtof(ref.rows[r0 + i][c_x], NULL);
            dyv[i] = strtof(ref.rows[r0 + i][c_dy], NULL);
        }
        int64_t shape[2] = {rows, cols};
        test_env env;
        env_open(&env);
        tensor *tx = env_tensor(&env, "x", dt, 2, shape, x);
        tensor *dy = env_tensor(&env, "dy", odt, 2, shape, dyv);
        tensor *y = env_zeros(&env, "y", odt, 2, shape);
        tensor *dx = env_zeros(&env, "dx", dt, 2, shape);
        cr_assert_eq(op_forward(env.be, op, variant, tx, y), 0);
        cr_assert_eq(op_backward(env.be, op, variant, dy, tx, y, dx), 0);
        for (int64_t i = 0; i < n; i++) {
            char **row = ref.rows[r0 + i];
            double want_y = strtod(row[c_y], NULL), want_dx = strtod(row[c_dx], NULL);
            /* half values are PyTorch's bit for bit */
            cr_expect(odt == DTYPE_FLOAT32 || tensor_at(y, i) == (float)want_y || isnan(want_y),
                      "%s %s %s->%s y[%lld] at x %g: %.9g, PyTorch %.9g (the same bits expected)",
                      op, variant, f[c_dt], f[c_odt], (long long)i, x[i], tensor_at(y, i), want_y);
            cr_expect(dt == DTYPE_FLOAT32 || tensor_at(dx, i) == (float)want_dx || isnan(want_dx),
                      "%s %s %s->%s dx[%lld] at x %g: %.9g, PyTorch %.9g (the same bits expected)",
                      op, variant, f[c_dt], f[c_odt], (long long)i, x[i], tensor_at(dx, i),
                      want_dx);
            cr_expect(close_ref(tensor_at(y, i), want_y, odt),
                      "%s %s %s->%s y[%lld] at x %g: %.9g, PyTorch %.9g", op, variant, f[c_dt],
                      f[c_odt], (long long)i, x[i], tensor_at(y, i), want_y);
            cr_expect(close_ref(tensor_at(dx, i), want_dx, dt),
                      "%s %s %s->%s dx[%lld] at x %g: %.9g, PyTorch %.9g", op, variant, f[c_dt],
                      f[c_odt], (long long)i, x[i], tensor_at(dx, i), want_dx);
        }
        env_close(&env);
        r0 += (int)n;
        groups++;
    }
    cr_expect_eq(groups, 2 * 4 + 3, "every op, variant and dtype of the file");
    csv_free(&ref);
}

/* ---- the kinds in case files ---- */

/* Loads a case whose [model] is `model` (a 16-feature input, cross entropy); returns the
 * number of errors and the first one in first. */
static int load_model(const char *model, const char *data, case_config *cfg, char *first,
                      size_t len)
{
    char dir[256], path[512], text[2048];
    make_temp_dir(dir, sizeof dir);
    snprintf(text, sizeof text,
             "[model]\n%s[data]\nbatch = 2\n%starget = classes\n[train]\nloss = cross_entropy\n",
             model, data);
    write_file(dir, "m.case", text, path, sizeof path);
    err_list errs = {0};
    int n = case_load(path, NULL, 0, cfg, &errs);
    snprintf(first, len, "%s", n ? errs.msgs[0] : "");
    err_list_free(&errs);
    rm_rf(dir);
    return n;
}

Test(activation, case_files_read_the_options_and_refuse_what_pytorch_would)
{
    static case_config cfg;
    char err[1024];
    cr_assert_eq(
        load_model("fc = linear 16 -> 8\nact = gelu approximate=tanh\n", "", &cfg, err, sizeof err),
        0, "%s", err);
    cr_expect_eq(cfg.layers[1].kind, layer_kind_of_name("gelu"));
    cr_expect_eq(cfg.layers[1].opt_choice[0], GELU_TANH);
    cr_assert_eq(load_model("fc = linear 16 -> 8\nact = gelu\n", "", &cfg, err, sizeof err), 0);
    cr_expect_eq(cfg.layers[1].opt_choice[0], GELU_NONE, "approximate='none' is the default");
    cr_expect_eq(
        load_model("fc = linear 16 -> 8\nact = gelu approximate=fast\n", "", &cfg, err, sizeof err),
        1);
    cr_expect(strstr(err, "m.case:3:") && strstr(err, "approximate"), "%s", err);
    /* a 16-feature sample has no [T, S] */
    cr_expect_eq(load_model("fc = linear 16 -> 8\nmask = causal_mask\n", "", &cfg, err, sizeof err),
                 1);
    cr_expect(strstr(err, "m.case:3:") && strstr(err, "last two dims"), "%s", err);
    cr_assert_eq(load_model("conv = conv2d 1 -> 1 kernel=1\nmask = causal_mask\nflat = flatten\n",
                            "shape = 1x4x4\n", &cfg, err, sizeof err),
                 0, "%s", err);
    cr_expect_eq(cfg.layers[1].out_ndim, 3);
}

/* dropout's p is the first kind option of type KIND_OPT_REAL: its default, a value, the
 * range's refusal at its line, and its value in `check --json` */
Test(activation, dropout_p_is_a_real_option_with_a_default_a_range_and_json)
{
    static case_config cfg;
    char err[1024];
    cr_assert_eq(load_model("fc = linear 16 -> 8\ndrop = dropout\n", "", &cfg, err, sizeof err), 0,
                 "%s", err);
    cr_expect_eq(cfg.layers[1].kind, layer_kind_of_name("dropout"));
    cr_expect_eq(cfg.layers[1].opt_real[0], 0.5, "nn.Dropout's default p");
    cr_assert_eq(
        load_model("fc = linear 16 -> 8\ndrop = dropout p=0.125\n", "", &cfg, err, sizeof err), 0,
        "%s", err);
    cr_expect_eq(cfg.layers[1].opt_real[0], 0.125);
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    cr_assert_not_null(f);
    cr_assert_eq(case_write_json(&cfg, f), 0);
    fclose(f);
    cr_expect(strstr(json, "\"kind\": \"dropout\"") && strstr(json, "\"p\": 0.125"), "%s", json);
    free(json);
    static const char *const bad[] = {"1", "-0.1", "1.5", "half", "nan"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char model[128];
        snprintf(model, sizeof model, "fc = linear 16 -> 8\ndrop = dropout p=%s\n", bad[k]);
        cr_expect_eq(load_model(model, "", &cfg, err, sizeof err), 1, "p=%s", bad[k]);
        cr_expect(strstr(err, "m.case:3:") && strstr(err, "for p:"), "p=%s: %s", bad[k], err);
    }
    cr_assert_eq(load_model("fc = linear 16 -> 8\ndrop = dropout p=1\n", "", &cfg, err, sizeof err),
                 1);
    cr_expect(strstr(err, "m.case:3: bad number '1' for p: must be in [0, 1)"), "%s", err);
}

/* ---- softmax's three paths, in a run ---- */

/* the dtype of tensor `name` in step 0 of the run's tensors.csv; "" when it has none */
static void dtype_in_run(const char *dir, const char *name, char *out, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/small-softmax-autocast/tensors.csv", dir);
    csv t;
    cr_assert(csv_read(path, &t), "cannot read %s", path);
    char **row = csv_find(&t, "step", "0", "tensor", name, NULL, NULL);
    snprintf(out, len, "%s", row ? row[csv_col(&t, "dtype")] : "");
    csv_free(&t);
}

Test(activation,
     softmax_reads_float16_as_half_to_float_casts_bfloat16_and_keeps_a_half_model_s_dtype,
     .timeout = 60)
{
    static const struct {
        const char *sets[3];
        int n_sets;
        const char *sm, *fc1_up, *fc1_grad; /* sm.out, fc1.out@float32, fc1.out.grad */
    } runs[] = {
        /* _softmax(half_to_float=true): no cast node, a float16 gradient */
        {{NULL}, 0, "float32", "", "float16"},
        /* toType(float32), then _softmax: a cast node, whose backward rounds to bfloat16 */
        {{"precision.autocast=bfloat16"}, 1, "float32", "float32", "bfloat16"},
        /* outside autocast: the input's dtype */
        {{"precision.autocast=off", "precision.params=float16", "data.input_dtype=float16"},
         3,
         "float16",
         "",
         "float16"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char dir[256], got[32];
        make_temp_dir(dir, sizeof dir);
        case_result res;
        run_case_file_set("tests/cases/small-softmax-autocast.case", runs[k].sets, runs[k].n_sets,
                          dir, &res, NULL);
        cr_assert(res.ok, "%s", res.error);
        dtype_in_run(dir, "sm.out", got, sizeof got);
        cr_expect_str_eq(got, runs[k].sm, "run %zu: sm.out", k);
        dtype_in_run(dir, "fc1.out@float32", got, sizeof got);
        cr_expect_str_eq(got, runs[k].fc1_up, "run %zu: fc1.out@float32", k);
        dtype_in_run(dir, "fc1.out.grad", got, sizeof got);
        cr_expect_str_eq(got, runs[k].fc1_grad, "run %zu: fc1.out.grad", k);
        rm_rf(dir);
    }
}

/* rows longer than the CPU's chunk (4096): the sums run over the whole row */
Test(activation, softmax_of_rows_longer_than_a_chunk_matches_float64)
{
    enum { R = 2, C = 5000 };
    const int64_t shape[2] = {R, C};
    static float x[R * C], dyv[R * C];
    rng_seed(&g_rng, 24);
    randn_fill(x, R * C, 3), randn_fill(dyv, R * C, 1);
    test_env env;
    env_open(&env);
    tensor *tx = env_tensor(&env, "x", DTYPE_FLOAT32, 2, shape, x);
    tensor *dy = env_tensor(&env, "dy", DTYPE_FLOAT32, 2, shape, dyv);
    tensor *y = env_zeros(&env, "y", DTYPE_FLOAT32, 2, shape);
    tensor *dx = env_zeros(&env, "dx", DTYPE_FLOAT32, 2, shape);
    cr_assert_eq(env.be->softmax_forward(env.be, tx, y, NULL), 0);
    cr_assert_eq(env.be->softmax_backward(env.be, dy, y, dx, NULL), 0);
    static double yd[C];
    for (int r = 0; r < R; r++) {
        const float *v = x + r * C;
        double mx = -INFINITY, s = 0, dot = 0;
        for (int j = 0; j < C; j++)
            mx = fmax(mx, v[j]);
        for (int j = 0; j < C; j++)
            s += exp(v[j] - mx);
        for (int j = 0; j < C; j++) {
            yd[j] = exp(v[j] - mx) / s;
            dot += dyv[r * C + j] * yd[j];
        }
        for (int j = 0; j < C; j++) {
            int64_t i = (int64_t)r * C + j;
            double want_dx = yd[j] * (dyv[i] - dot);
            cr_expect(fabs(tensor_at(y, i) - yd[j]) <= 1e-5 * yd[j] + 1e-12,
                      "y[%lld]: %.9g vs %.9g", (long long)i, tensor_at(y, i), yd[j]);
            cr_expect(fabs(tensor_at(dx, i) - want_dx) <= 1e-4 * fabs(want_dx) + 1e-9,
                      "dx[%lld]: %.9g vs %.9g", (long long)i, tensor_at(dx, i), want_dx);
        }
    }
    env_close(&env);
}
