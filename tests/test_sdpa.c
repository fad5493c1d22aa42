/*
 * test_sdpa.c: scaled_dot_product_attention's math path on the CPU backend.
 *  - Its ops (backend.h's sdpa_*, with mul_scalar for the sqrt(scale) factors) chained as the
 *    layer chains them, backward against central finite differences of a float64 attention
 *    written here, L = sum(R * out), at several geometries (causal or not, L != S, Ev != E,
 *    an additive mask broadcast over the attentions, whose gradient is checked too).
 *  - The layer's forward and the tape's backward on tensors made here, against PyTorch 2.15
 *    forced to SDPBackend.MATH: tests/references/sdpa.csv (written by sdpa.py there) holds
 *    q, k, v, the upstream gradient, the output, the float32 probabilities autograd saves,
 *    dq, dk, dv, and the saved tensors (dtype and size of each storage) for float32, float16
 *    and bfloat16 inputs, and float32 inputs under autocast float16 (cast down, then up);
 *    grouped-query attention (enable_gqa, k and v with fewer heads) and additive masks
 *    (broadcast or not, with their gradients dmask) in float32, float16 and bfloat16.
 *    Tolerances: float32 values within 1e-5 relative + 1e-6 (PyTorch's GEMMs sum in another
 *    order); half outputs and gradients within one unit in the last
 *    place of their dtype (their float32 values differ in the last bits, which can move a
 *    rounding); the saved tensors exactly.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "core/rng.h"
#include "helpers.h"
#include "case/load.h"

#define FD_H 1e-4
#define MAXN 512

/* ---- finite differences of the op chain ---- */

typedef struct sdpa_case {
    int64_t n, l, s, e, ev;
    bool causal;
    double scale;
    bool masked; /* an additive attn_mask [l, s], broadcast over the n attentions */
} sdpa_case;

static const sdpa_case *fd_case;
static double fd_r[MAXN]; /* dL/dout */
static double fd_attn_mask[MAXN];

/* L = sum(R * softmax(q k^T * scale + mask) v), float64 */
static double attention64(const double *q, const double *k, const double *v)
{
    const sdpa_case *c = fd_case;
    double L = 0, sc[64];
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t i = 0; i < c->l; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < c->s; j++) {
                double d = 0;
                for (int64_t t = 0; t < c->e; t++)
                    d += q[(n * c->l + i) * c->e + t] * k[(n * c->s + j) * c->e + t];
                sc[j] = c->causal && j > i ? -INFINITY : d * c->scale;
                if (c->masked)
                    sc[j] += fd_attn_mask[i * c->s + j];
                mx = fmax(mx, sc[j]);
            }
            for (int64_t j = 0; j < c->s; j++)
                sum += exp(sc[j] - mx);
            for (int64_t t = 0; t < c->ev; t++) {
                double o = 0;
                for (int64_t j = 0; j < c->s; j++)
                    o += exp(sc[j] - mx) / sum * v[(n * c->s + j) * c->ev + t];
                L += fd_r[(n * c->l + i) * c->ev + t] * o;
            }
        }
    return L;
}

static void expect_fd(const char *what, const tensor *got, double *x, int64_t nx, double *q,
                      double *k, double *v)
{
    for (int64_t j = 0; j < nx; j++) {
        double keep = x[j];
        x[j] = keep + FD_H;
        double up = attention64(q, k, v);
        x[j] = keep - FD_H;
        double down = attention64(q, k, v);
        x[j] = keep;
        double want = (up - down) / (2 * FD_H), g = tensor_at(got, j);
        cr_expect(fabs(g - want) <= 1e-4 * fabs(want) + 1e-5,
                  "%s[%lld]: backward %.8g, finite differences %.8g", what, (long long)j, g, want);
    }
}

static const sdpa_case fd_cases[] = {
    {1, 1, 1, 1, 1, false, 1.0, false}, {2, 3, 5, 4, 4, false, 0.5, false},
    {2, 4, 4, 3, 3, true, 0.577, false}, {1, 3, 6, 4, 2, true, 0.3, false},
    {1, 5, 2, 2, 3, true, 0.7, false},
    {3, 4, 5, 3, 2, false, 0.5, true}, {2, 3, 3, 4, 4, false, 0.577, true},
};

ParameterizedTestParameters(sdpa, ops_match_finite_differences)
{
    return cr_make_param_array(sdpa_case, fd_cases, sizeof fd_cases / sizeof fd_cases[0]);
}

ParameterizedTest(const sdpa_case *c, sdpa, ops_match_finite_differences)
{
    fd_case = c;
    rng g;
    rng_seed(&g, 5 + (uint64_t)(c->l * 7 + c->s));
    int64_t nq = c->n * c->l * c->e, nk = c->n * c->s * c->e, nv = c->n * c->s * c->ev,
            no = c->n * c->l * c->ev;
    float qv[MAXN], kv[MAXN], vv[MAXN], rv[MAXN];
    double q[MAXN], k[MAXN], v[MAXN];
    for (int64_t i = 0; i < nq; i++)
        q[i] = qv[i] = (float)rng_normal(&g);
    for (int64_t i = 0; i < nk; i++)
        k[i] = kv[i] = (float)rng_normal(&g);
    for (int64_t i = 0; i < nv; i++)
        v[i] = vv[i] = (float)rng_normal(&g);
    for (int64_t i = 0; i < no; i++)
        fd_r[i] = rv[i] = (float)rng_normal(&g);
    float mv[MAXN];
    int64_t nm = c->l * c->s;
    for (int64_t i = 0; i < nm; i++) /* some keys hidden (-inf) as a padding mask hides them */
        fd_attn_mask[i] = mv[i] = c->masked && i % 4 == 3 ? -INFINITY : (float)rng_normal(&g);
    test_env e;
    env_open(&e);
    backend *be = e.be;
    sdpa_geom geo = {.n = c->n, .l = c->l, .s = c->s, .e = c->e, .ev = c->ev,
                     .causal = c->causal, .heads = c->n, .mask_stride = {0, 0, c->s, 1}};
    int64_t sm[2] = {c->l, c->s};
    tensor *tm = c->masked ? env_tensor(&e, "mask", DTYPE_FLOAT32, 2, sm, mv) : NULL;
    int64_t sq[4] = {1, c->n, c->l, c->e}, sk[4] = {1, c->n, c->s, c->e},
            sv[4] = {1, c->n, c->s, c->ev}, so[4] = {1, c->n, c->l, c->ev},
            sp[4] = {1, c->n, c->l, c->s};
    tensor *tq = env_tensor(&e, "q", DTYPE_FLOAT32, 4, sq, qv);
    tensor *tk = env_tensor(&e, "k", DTYPE_FLOAT32, 4, sk, kv);
    tensor *tv = env_tensor(&e, "v", DTYPE_FLOAT32, 4, sv, vv);
    tensor *dout = env_tensor(&e, "dout", DTYPE_FLOAT32, 4, so, rv);
    tensor *qs = env_zeros(&e, "qs", DTYPE_FLOAT32, 4, sq),
           *ks = env_zeros(&e, "ks", DTYPE_FLOAT32, 4, sk);
    tensor *p = env_zeros(&e, "p", DTYPE_FLOAT32, 4, sp),
           *o = env_zeros(&e, "o", DTYPE_FLOAT32, 4, so);
    tensor *dp = env_zeros(&e, "dp", DTYPE_FLOAT32, 4, sp),
           *dv = env_zeros(&e, "dv", DTYPE_FLOAT32, 4, sv);
    tensor *dqs = env_zeros(&e, "dqs", DTYPE_FLOAT32, 4, sq),
           *dks = env_zeros(&e, "dks", DTYPE_FLOAT32, 4, sk);
    tensor *dq = env_zeros(&e, "dq", DTYPE_FLOAT32, 4, sq),
           *dk = env_zeros(&e, "dk", DTYPE_FLOAT32, 4, sk),
           *ds = env_zeros(&e, "dscores", DTYPE_FLOAT32, 4, sp);
    float sf = (float)sqrt(c->scale);
    cr_assert_eq(be->mul_scalar(be, tq, sf, qs, NULL), 0);
    cr_assert_eq(be->mul_scalar(be, tk, sf, ks, NULL), 0);
    cr_assert_eq(be->sdpa_probs_forward(be, &geo, qs, ks, tm, p, NULL), 0);
    cr_assert_eq(be->sdpa_value_forward(be, &geo, p, tv, o, NULL), 0);
    double L = 0;
    for (int64_t i = 0; i < no; i++)
        L += fd_r[i] * tensor_at(o, i);
    double want = attention64(q, k, v);
    cr_expect(fabs(L - want) <= 1e-5 * fabs(want) + 1e-5, "L %.9g, float64 %.9g", L, want);
    cr_assert_eq(be->sdpa_value_backward(be, &geo, dout, p, tv, dp, dv), 0);
    cr_assert_eq(be->sdpa_probs_backward(be, &geo, dp, qs, ks, p, dqs, dks, ds), 0);
    cr_assert_eq(be->mul_scalar(be, dqs, sf, dq, NULL), 0);
    cr_assert_eq(be->mul_scalar(be, dks, sf, dk, NULL), 0);
    /* the scale the float64 side uses is the float32 factor squared, as the chain applies it */
    fd_case = &(sdpa_case){c->n, c->l, c->s, c->e, c->ev, c->causal, (double)sf * sf, c->masked};
    expect_fd("dq", dq, q, nq, q, k, v);
    expect_fd("dk", dk, k, nk, q, k, v);
    expect_fd("dv", dv, v, nv, q, k, v);
    if (c->masked) { /* the mask's gradient: the scores' summed over the attentions */
        float dmv[MAXN];
        for (int64_t i = 0; i < nm; i++) {
            double sum = 0;
            for (int64_t n = 0; n < c->n; n++)
                sum += tensor_at(ds, n * nm + i);
            dmv[i] = (float)sum;
            if (isinf(fd_attn_mask[i])) /* a hidden key: as far out as finite differences can go */
                fd_attn_mask[i] = -1e4;
        }
        expect_fd("dmask", env_tensor(&e, "dmask", DTYPE_FLOAT32, 2, sm, dmv), fd_attn_mask, nm, q, k,
                  v);
    }
    for (int64_t i = 0; i < c->n * c->l * c->s; i++) /* masked probabilities are exact zeros */
        if (c->causal && (i % c->s) > (i / c->s) % c->l)
            cr_expect_eq(tensor_at(p, i), 0.0f, "p[%lld] is masked", (long long)i);
    env_close(&e);
}

/* ---- the layer against PyTorch ---- */

static run *r;

static void run_open(void) { r = test_run_open(); }
static void run_close(void) { test_run_close(r); }

typedef struct ref_case {
    csv t;
    int first, last; /* the config's rows [first, last) */
} ref_case;

/* the config's rows of tensor `name`: its values into v (at most cap), returns the count */
static int ref_values(const ref_case *rc, const char *name, float *v, int cap)
{
    int it = csv_col(&rc->t, "tensor"), iv = csv_col(&rc->t, "value"), n = 0;
    for (int i = rc->first; i < rc->last; i++)
        if (strcmp(rc->t.rows[i][it], name) == 0) {
            cr_assert_lt(n, cap);
            v[n++] = strtof(rc->t.rows[i][iv], NULL);
        }
    return n;
}

static int64_t ref_int(const ref_case *rc, const char *col)
{
    return strtoll(rc->t.rows[rc->first][csv_col(&rc->t, col)], NULL, 10);
}

static bool near(float got, float want, dtype dt)
{
    if (dt == DTYPE_FLOAT32)
        return fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-6f;
    int mant = dt == DTYPE_FLOAT16 ? 10 : 7, emin = dt == DTYPE_FLOAT16 ? -14 : -126;
    int ex = want == 0 ? emin : ilogbf(want) < emin ? emin : ilogbf(want);
    return fabsf(got - want) <= ldexpf(1.0f, ex - mant);
}

static void expect_near(const char *config, const char *what, const tensor *t, const float *want,
                        int n)
{
    cr_assert_eq(t->numel, n, "%s %s: %lld elements, PyTorch %d", config, what, (long long)t->numel,
                 n);
    for (int i = 0; i < n; i++)
        cr_expect(near(tensor_at(t, i), want[i], t->dtype), "%s %s[%d]: %a, PyTorch %a", config,
                  what, i, tensor_at(t, i), want[i]);
}

static tensor *leaf(const char *name, dtype dt, int ndim, const int64_t *shape, const float *v)
{
    char err[256];
    tensor *t = tensor_new(&r->pool, name, dt, ndim, shape, MEM_ACTIVATIONS, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    for (int64_t i = 0; i < t->numel; i++)
        store_from_float(t->data, dt, i, v[i]);
    t->is_leaf = true;
    t->requires_grad = true;
    return t;
}

/* the tape's saved storages (each once): "float32 120", with " input" for a given tensor */
static int saved_list(char (*out)[64], int cap, tensor *const *inputs)
{
    const tensor *seen[RUN_MAX_NODES * NODE_MAX_INPUTS];
    int n = 0;
    for (int k = 0; k < r->n_nodes; k++)
        for (int i = 0; i < NODE_MAX_INPUTS; i++) {
            const tensor *t = r->nodes[k].saved[i];
            if (!t)
                continue;
            bool dup = false;
            for (int j = 0; j < n && !dup; j++)
                dup = seen[j] == t;
            if (dup)
                continue;
            cr_assert_lt(n, cap);
            seen[n] = t;
            bool given = t == inputs[0] || t == inputs[1] || t == inputs[2];
            snprintf(out[n++], 64, "%s %lld%s", dtype_name(t->dtype), (long long)t->numel,
                     given ? " input" : "");
        }
    return n;
}

static void against_pytorch(const char *config)
{
    ref_case rc;
    cr_assert(csv_read("tests/references/sdpa.csv", &rc.t));
    int ic = csv_col(&rc.t, "config");
    rc.first = -1;
    for (int i = 0; i < rc.t.n_rows; i++)
        if (strcmp(rc.t.rows[i][ic], config) == 0) {
            if (rc.first < 0)
                rc.first = i;
            rc.last = i + 1;
        }
    cr_assert_geq(rc.first, 0, "no rows of %s", config);
    dtype dt = DTYPE_FLOAT32;
    cr_assert(dtype_parse(rc.t.rows[rc.first][csv_col(&rc.t, "dtype")], &dt));
    int64_t b = ref_int(&rc, "b"), h = ref_int(&rc, "h"), l = ref_int(&rc, "l"),
            s = ref_int(&rc, "s"), e = ref_int(&rc, "e"), ev = ref_int(&rc, "ev"),
            hkv = ref_int(&rc, "hkv");
    static float q[MAXN], k[MAXN], v[MAXN], m[MAXN], dout[MAXN], want[MAXN];
    ref_values(&rc, "q", q, MAXN), ref_values(&rc, "k", k, MAXN), ref_values(&rc, "v", v, MAXN);
    ref_values(&rc, "dout", dout, MAXN);
    int64_t sm[4];
    int nm = 0; /* the mask's dims, 0: none */
    for (char *w = rc.t.rows[rc.first][csv_col(&rc.t, "mask")]; *w && nm < 4; w += *w == 'x')
        sm[nm++] = strtoll(w, &w, 10);
    ref_values(&rc, "mask", m, MAXN);

    run_open();
    int kind = layer_kind_of_name("scaled_dot_product_attention");
    cr_assert_geq(kind, 0);
    layer_spec spec = {.name = "att", .kind = (layer_kind)kind};
    const layer_def *d = layer_def_of(spec.kind);
    cr_assert_eq(d->n_inputs, 4);
    spec.n_inputs = nm ? 4 : 3;
    spec.opt_bool[0] = ref_int(&rc, "causal") != 0;
    spec.opt_bool[1] = hkv != h; /* enable_gqa */
    const char *scale = rc.t.rows[rc.first][csv_col(&rc.t, "scale")];
    spec.opt_real[0] = *scale ? strtod(scale, NULL) : 0.0;
    int64_t sq[4] = {b, h, l, e}, sk[4] = {b, hkv, s, e}, sv[4] = {b, hkv, s, ev},
            so[4] = {b, h, l, ev};
    tensor *in[4] = {leaf("q", dt, 4, sq, q), leaf("k", dt, 4, sk, k), leaf("v", dt, 4, sv, v),
                     nm ? leaf("mask", dt, nm, sm, m) : NULL};
    bool autocast = strncmp(config, "autocast-", 9) == 0; /* float16 */
    r->autocast = autocast;
    r->autocast_dtype = DTYPE_FLOAT16;
    if (setjmp(r->fail))
        cr_assert_fail("%s: the run failed", config);
    tensor *y = d->forward(r, &spec, in, NULL);
    if (autocast)
        autocast_exit(r);
    dtype out_dt = autocast ? DTYPE_FLOAT16 : dt;
    cr_expect_eq(y->dtype, out_dt, "%s: out is %s", config, dtype_name(y->dtype));
    cr_expect_str_eq(y->name, "att.out");
    int n = ref_values(&rc, "out", want, MAXN);
    expect_near(config, "out", y, want, n);

    /* what the tape keeps, against saved_tensors_hooks' storages */
    char ours[16][64];
    int n_ours = saved_list(ours, 16, in);
    int it = csv_col(&rc.t, "tensor"), iv = csv_col(&rc.t, "value"), n_ref = 0;
    for (int i = rc.first; i < rc.last; i++) {
        if (strcmp(rc.t.rows[i][it], "saved"))
            continue;
        n_ref++;
        bool found = false;
        for (int j = 0; j < n_ours && !found; j++)
            if (strcmp(ours[j], rc.t.rows[i][iv]) == 0) {
                found = true;
                ours[j][0] = '\0'; /* matched once */
            }
        cr_expect(found, "%s: PyTorch saves '%s', the tape does not", config, rc.t.rows[i][iv]);
    }
    cr_expect_eq(n_ours, n_ref, "%s: the tape saves %d storages, PyTorch %d", config, n_ours,
                 n_ref);
    /* the saved probabilities: float32, never the inputs' dtype */
    const tensor *probs = NULL;
    for (int k2 = 0; k2 < r->n_nodes && !probs; k2++)
        for (int i = 0; i < NODE_MAX_INPUTS; i++)
            if (r->nodes[k2].saved[i] && strcmp(r->nodes[k2].saved[i]->name, "att.probs") == 0)
                probs = r->nodes[k2].saved[i];
    cr_assert_not_null(probs, "%s: no saved att.probs", config);
    cr_expect_eq(probs->dtype, DTYPE_FLOAT32);
    n = ref_values(&rc, "probs", want, MAXN);
    expect_near(config, "probs", probs, want, n);

    /* backward from dout, as tape_backward runs the nodes */
    char err[256];
    tensor *g = tensor_new(&r->pool, "att.out.grad", out_dt, 4, so, MEM_GRADS, err, sizeof err);
    cr_assert_not_null(g, "%s", err);
    for (int64_t i = 0; i < g->numel; i++)
        store_from_float(g->data, out_dt, i, dout[i]);
    r->nodes[y->grad_fn].grad = g;
    for (int k2 = y->grad_fn; k2 >= 0; k2--)
        if (r->nodes[k2].grad)
            r->nodes[k2].backward(r, &r->nodes[k2]);
    static const char *const grads[4] = {"dq", "dk", "dv", "dmask"};
    for (int i = 0; i < spec.n_inputs; i++) {
        cr_assert_not_null(in[i]->grad, "%s: no %s", config, grads[i]);
        cr_expect_eq(in[i]->grad->dtype, dt);
        n = ref_values(&rc, grads[i], want, MAXN);
        expect_near(config, grads[i], in[i]->grad, want, n);
    }
    tensor_release(&r->pool, y);
    run_close();
    csv_free(&rc.t);
}

Test(sdpa, float32_against_pytorch_math) { against_pytorch("f32"); }
Test(sdpa, float32_causal_scale_against_pytorch_math) { against_pytorch("f32-causal-scale"); }
Test(sdpa, float32_causal_more_keys_than_queries) { against_pytorch("f32-causal-wide"); }
Test(sdpa, float16_computes_in_float32_and_saves_float32) { against_pytorch("f16-causal"); }
Test(sdpa, bfloat16_against_pytorch_math) { against_pytorch("bf16"); }
Test(sdpa, autocast_float16_casts_down_then_computes_in_float32)
{
    against_pytorch("autocast-f16-causal");
}
Test(sdpa, grouped_query_float32_against_pytorch_math) { against_pytorch("gqa-f32"); }
Test(sdpa, grouped_query_float16_causal_against_pytorch_math)
{
    against_pytorch("gqa-f16-causal");
}
Test(sdpa, additive_mask_float32_against_pytorch_math) { against_pytorch("mask-f32"); }
Test(sdpa, additive_mask_multi_query_bfloat16_against_pytorch_math)
{
    against_pytorch("mask-gqa-bf16");
}
Test(sdpa, autocast_casts_a_float32_mask_down_with_q_k_v)
{
    against_pytorch("autocast-f16-mask-gqa");
}

/* A case names the three inputs (tests/cases/small-graph-sdpa-autocast.case): it runs, and
 * its expectations hold (the float32 probabilities and copies, the float16 output); a
 * second input missing is refused at its line. */
Test(sdpa, a_case_names_its_three_inputs)
{
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    case_result res;
    run_case_file("tests/cases/small-graph-sdpa-autocast.case", dir, &res, NULL);
    cr_expect(res.ok, "%s", res.error);
    cr_expect(res.passed, "%s", res.failures);
    cr_expect_eq(res.expect_passed, res.expect_total);
    cr_expect_gt(res.expect_total, 5);

    write_file(dir, "a.case",
               "[model]\nq = linear 4 -> 4\natt = scaled_dot_product_attention q q causal=yes\n"
               "[data]\nbatch = 2\n",
               path, sizeof path);
    static case_config cfg;
    err_list errs = {0};
    cr_expect_eq(case_load(path, NULL, 0, &cfg, &errs), 1);
    cr_expect(errs.n == 1 && strstr(errs.msgs[0], "a.case:3:"), "%s",
              errs.n ? errs.msgs[0] : "no error");
    err_list_free(&errs);
    rm_rf(dir);
}
