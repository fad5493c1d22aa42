/*
 * test_optim.c: the optimizers, the cosine schedule, a master-weight step and lost-update
 * counting, on the CPU backend; the optimizer registry (names, state names, defaults).
 * Reference values: three steps of torch.optim.{SGD,Adam,RMSprop}(foreach=False) on a
 * float64 parameter 1.0 with gradients 0.5, 0.25, -0.125, printed by PyTorch 2.15 (CPU);
 * the first two SGD steps also by hand in the comments. float32 arithmetic stays within
 * 1e-6 relative of them. The float16 Adam step's -inf and NaN are also PyTorch's.
 * AdamW: the same three steps (torch.optim.AdamW), and tests/references/adamw_steps.csv
 * (written by tests/references/adamw_steps.py) for an 8-element parameter in float32,
 * float16 and bfloat16: every element of the parameter and both states after each step.
 * Each ISA level's build of the update (harness/ops/cpu/optim.c; AMPSCOPE_CPU_ISA) gives the bits
 * of the best level's: bin/ampscope run at each level on models without a GEMM, the dumped
 * parameters and states compared byte for byte.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu.h"
#include "core/dtype.h"
#include "train/optimizer.h"
#include "train/optimizers.h"
#include "helpers.h"

static const float grads3[3] = {0.5f, 0.25f, -0.125f};

/* the optimizer a case file calls name, through the registry */
static optim_kind kind(const char *name)
{
    int k = optim_find(name);
    cr_assert_geq(k, 0, "no optimizer is called %s", name);
    return (optim_kind)k;
}

/* runs three steps on a one-element float32 parameter; returns the parameter after each */
static void three_steps(optim_config cfg, double *out)
{
    test_env e;
    env_open(&e);
    int64_t n = 1;
    float one = 1.0f;
    tensor *p = env_tensor(&e, "p", DTYPE_FLOAT32, 1, &n, &one);
    tensor *g = env_zeros(&e, "g", DTYPE_FLOAT32, 1, &n);
    optim_tensors t = {.param = p, .grad = g, .visible = DTYPE_FLOAT32};
    for (int k = 0; k < optim_state_count(&cfg); k++)
        t.state[k] = env_zeros(&e, "s", DTYPE_FLOAT32, 1, &n);
    for (int s = 0; s < 3; s++) {
        store_from_float(g->data, DTYPE_FLOAT32, 0, grads3[s]);
        optim_hyper h = optim_hyper_at(&cfg, cfg.lr, s + 1);
        optim_result res;
        memset(&res, 0, sizeof res);
        cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
        out[s] = tensor_at(p, 0);
    }
    env_close(&e);
}

static void expect_steps(const char *what, const double *got, const double *want)
{
    for (int s = 0; s < 3; s++)
        cr_expect(fabs(got[s] - want[s]) <= 1e-6 * fabs(want[s]), "%s step %d: %.9g, PyTorch %.9g",
                  what, s + 1, got[s], want[s]);
}

Test(optim, sgd_momentum_weight_decay)
{
    /* step 1: g = 0.5 + 0.1 * 1 = 0.6, buf = 0.6, p = 1 - 0.1 * 0.6 = 0.94
     * step 2: g = 0.25 + 0.1 * 0.94 = 0.344, buf = 0.9 * 0.6 + 0.344 = 0.884,
     *         p = 0.94 - 0.0884 = 0.8516 */
    static const double want[3] = {0.94, 0.8516, 0.776024};
    double got[3];
    three_steps(
        (optim_config){.kind = kind("sgd"), .lr = 0.1, .momentum = 0.9, .weight_decay = 0.1}, got);
    expect_steps("sgd", got, want);
}

Test(optim, sgd_nesterov)
{
    /* step 1: buf = 0.5, g = 0.5 + 0.9 * 0.5 = 0.95, p = 1 - 0.095 = 0.905 */
    static const double want[3] = {0.905, 0.817, 0.78405};
    double got[3];
    three_steps((optim_config){.kind = kind("sgd"), .lr = 0.1, .momentum = 0.9, .nesterov = true},
                got);
    expect_steps("sgd nesterov", got, want);
}

Test(optim, adam_with_l2_weight_decay)
{
    static const double want[3] = {0.9000000016666666, 0.8050097658613199, 0.7358516953412214};
    double got[3];
    three_steps((optim_config){.kind = kind("adam"),
                               .lr = 0.1,
                               .beta1 = 0.9,
                               .beta2 = 0.999,
                               .eps = 1e-8,
                               .weight_decay = 0.1},
                got);
    expect_steps("adam", got, want);
}

Test(optim, adamw_decays_before_the_adam_update)
{
    /* step 1: p = 1 * (1 - 0.1 * 0.1) = 0.99, then Adam's first step of lr: 0.89 (+2e-9 from
     * eps). PyTorch 2.15 prints 0.890000002, 0.7878820404574624, 0.7236370841035367. */
    static const double want[3] = {0.890000002, 0.7878820404574624, 0.7236370841035367};
    double got[3];
    optim_config c = optim_default(kind("adamw"));
    c.lr = 0.1, c.weight_decay = 0.1;
    three_steps(c, got);
    expect_steps("adamw", got, want);
}

Test(optim, adamw_defaults_step_as_pytorchs)
{
    /* lr=1e-3, weight_decay=1e-2: PyTorch 2.15 prints 0.99899000002, 0.9980478305047745,
     * 0.997474188666976 */
    static const double want[3] = {0.99899000002, 0.9980478305047745, 0.997474188666976};
    double got[3];
    three_steps(optim_default(kind("adamw")), got);
    expect_steps("adamw defaults", got, want);
}

/* The reference's rows for one dtype and configuration, steps 1..3 of 8 elements. */
#define ADAMW_N 8
static const float adamw_params[ADAMW_N] = {1.0f, -2.0f, 0.5f, 100.0f, 3e-3f, -0.7f, 1e-5f, 0.0f};
static const float adamw_grads[3][ADAMW_N] = {
    {1e-4f, 0.25f, 0.5f, -3.0f, 1e-2f, 7.0f, -0.03f, 2e-3f},
    {2e-4f, -0.25f, 0.125f, -1.0f, 0.0f, 6.0f, 0.03f, -2e-3f},
    {-1e-4f, 0.5f, 0.0f, 2.0f, 1e-3f, -5.0f, 0.01f, 4e-3f},
}; /* as adamw_steps.py's, which PyTorch rounds into the dtype as env_tensor does */

static bool same_value(float got, double want, dtype dt)
{
    if (isnan(want))
        return isnan(got);
    if (dt != DTYPE_FLOAT32 || isinf(want) || want == 0)
        return got == (float)want;
    return fabs(got - want) <= 1e-6 * fabs(want); /* float32: the order of a product's terms */
}

static void adamw_against_reference(const char *dtype_name_, const char *config)
{
    csv ref;
    cr_assert(csv_read("tests/references/adamw_steps.csv", &ref));
    dtype dt = DTYPE_FLOAT32;
    cr_assert(dtype_parse(dtype_name_, &dt), "%s", dtype_name_);
    char **first = csv_find(&ref, "dtype", dtype_name_, "config", config, "step", "1");
    cr_assert_not_null(first, "%s %s: no rows", dtype_name_, config);
    optim_config cfg = optim_default(kind("adamw"));
    cfg.lr = strtod(first[csv_col(&ref, "lr")], NULL);
    cfg.weight_decay = strtod(first[csv_col(&ref, "weight_decay")], NULL);
    cfg.eps = strtod(first[csv_col(&ref, "eps")], NULL);

    test_env e;
    env_open(&e);
    int64_t n = ADAMW_N;
    optim_tensors t = {.param = env_tensor(&e, "p", dt, 1, &n, adamw_params),
                       .grad = env_zeros(&e, "g", dt, 1, &n),
                       .state = {env_zeros(&e, "m", dt, 1, &n), env_zeros(&e, "v", dt, 1, &n)},
                       .visible = dt};
    int ip = csv_col(&ref, "param"), im = csv_col(&ref, "exp_avg"),
        iv = csv_col(&ref, "exp_avg_sq");
    int checked = 0;
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < ADAMW_N; i++)
            store_from_float(t.grad->data, dt, i, round_to(adamw_grads[s][i], dt));
        optim_hyper h = optim_hyper_at(&cfg, cfg.lr, s + 1);
        optim_result res;
        memset(&res, 0, sizeof res);
        cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
        for (int i = 0; i < ADAMW_N; i++) {
            char step[8], idx[8];
            snprintf(step, sizeof step, "%d", s + 1);
            snprintf(idx, sizeof idx, "%d", i);
            char **row = NULL;
            for (int r = 0; r < ref.n_rows && !row; r++) /* csv_find takes three columns */
                if (!strcmp(ref.rows[r][0], dtype_name_) && !strcmp(ref.rows[r][1], config) &&
                    !strcmp(ref.rows[r][csv_col(&ref, "step")], step) &&
                    !strcmp(ref.rows[r][csv_col(&ref, "index")], idx))
                    row = ref.rows[r];
            cr_assert_not_null(row, "%s %s step %s index %s", dtype_name_, config, step, idx);
            const struct {
                const char *what;
                const tensor *t;
                int col;
            } checks[3] = {{"param", t.param, ip},
                           {"exp_avg", t.state[0], im},
                           {"exp_avg_sq", t.state[1], iv}};
            for (int k = 0; k < 3; k++) {
                double want = strtod(row[checks[k].col], NULL);
                float got = tensor_at(checks[k].t, i);
                cr_expect(same_value(got, want, dt), "%s %s step %d [%d] %s: %a, PyTorch %a",
                          dtype_name_, config, s + 1, i, checks[k].what, got, want);
                checked++;
            }
        }
    }
    cr_expect_eq(checked, 3 * ADAMW_N * 3);
    env_close(&e);
    csv_free(&ref);
}

Test(optim, adamw_float32_against_pytorch)
{
    adamw_against_reference("float32", "defaults");
    adamw_against_reference("float32", "lr0.1-wd0.1-eps1e-3");
}

Test(optim, adamw_float16_against_pytorch)
{
    adamw_against_reference("float16", "defaults");
    adamw_against_reference("float16", "lr0.1-wd0.1-eps1e-3");
}

Test(optim, adamw_bfloat16_against_pytorch)
{
    adamw_against_reference("bfloat16", "defaults");
    adamw_against_reference("bfloat16", "lr0.1-wd0.1-eps1e-3");
}

Test(optim, adamw_decay_lost_in_float16_is_a_lost_update)
{
    /* 1 - 1e-3 * 1e-2 = 0.99999 rounds 2048.0 back to itself in float16 (spacing 2 there:
     * the decay asks for -0.02); a zero gradient adds u = 0 / (0 + eps) = 0. The step meant
     * to change the element and did not: one lost update. 0.0 decays to 0: nothing meant. */
    test_env e;
    env_open(&e);
    int64_t n = 2;
    float p[2] = {2048.0f, 0.0f}, g[2] = {0, 0};
    optim_config cfg = optim_default(kind("adamw"));
    cfg.eps = 1e-3; /* float16 holds it: 0 / eps is 0, not NaN */
    optim_tensors t = {.param = env_tensor(&e, "p", DTYPE_FLOAT16, 1, &n, p),
                       .grad = env_tensor(&e, "g", DTYPE_FLOAT16, 1, &n, g),
                       .state = {env_zeros(&e, "m", DTYPE_FLOAT16, 1, &n),
                                 env_zeros(&e, "v", DTYPE_FLOAT16, 1, &n)},
                       .visible = DTYPE_FLOAT16};
    optim_hyper h = optim_hyper_at(&cfg, cfg.lr, 1);
    optim_result res;
    memset(&res, 0, sizeof res);
    cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
    cr_expect_eq(tensor_at(t.param, 0), 2048.0f);
    cr_expect_eq(res.lost_updates, 1);
    env_close(&e);
}

Test(optim, rmsprop_centered_momentum)
{
    static const double want[3] = {0.899496238676095, 0.7637340994926962, 0.663687749776144};
    double got[3];
    three_steps((optim_config){.kind = kind("rmsprop"),
                               .lr = 0.01,
                               .alpha = 0.99,
                               .eps = 1e-8,
                               .momentum = 0.9,
                               .centered = true},
                got);
    expect_steps("rmsprop centered", got, want);
}

Test(optim, rmsprop_weight_decay)
{
    static const double want[3] = {0.900000016666664, 0.8505111103590103, 0.8563452346851794};
    double got[3];
    three_steps(
        (optim_config){
            .kind = kind("rmsprop"), .lr = 0.01, .alpha = 0.99, .eps = 1e-8, .weight_decay = 0.1},
        got);
    expect_steps("rmsprop", got, want);
}

Test(optim, adam_in_float16_divides_by_zero)
{
    /* eps = 1e-8 is 0 in float16; g = 1e-4: v = 0.001 * g^2 underflows, m / 0 = inf;
     * g = 0: 0 / 0 = NaN; g = 0.5: an ordinary step of lr. PyTorch 2.15 prints
     * tensor([-inf, nan, 0.9990], dtype=torch.float16) for the same step. */
    test_env e;
    env_open(&e);
    int64_t n = 3;
    float ones[3] = {1, 1, 1}, g[3] = {1e-4f, 0, 0.5f};
    optim_config cfg = {
        .kind = kind("adam"), .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    optim_tensors t = {.param = env_tensor(&e, "p", DTYPE_FLOAT16, 1, &n, ones),
                       .grad = env_tensor(&e, "g", DTYPE_FLOAT16, 1, &n, g),
                       .state = {env_zeros(&e, "m", DTYPE_FLOAT16, 1, &n),
                                 env_zeros(&e, "v", DTYPE_FLOAT16, 1, &n)},
                       .visible = DTYPE_FLOAT16};
    optim_hyper h = optim_hyper_at(&cfg, cfg.lr, 1);
    optim_result res;
    memset(&res, 0, sizeof res);
    res.counting = true;
    round_stats_init(&res.param);
    cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
    cr_expect(isinf(tensor_at(t.param, 0)) && tensor_at(t.param, 0) < 0);
    cr_expect(isnan(tensor_at(t.param, 1)));
    cr_expect_eq(tensor_at(t.param, 2), 0.9990234375f); /* float16 nearest to 1 - 1e-3 */
    cr_expect_eq(tensor_at(t.state[1], 0), 0.0f);       /* exp_avg_sq underflowed */
    cr_expect_eq(res.param.counts.nan, 1);
    cr_expect_eq(res.param.counts.overflow, 0); /* the inf came from m / 0, not a rounding */
    cr_expect(isinf(res.param.counts.amax));
    env_close(&e);
}

Test(optim, lost_updates_counts_ignored_updates)
{
    /* float16 1.0 has spacing 2^-10 above and 2^-11 below: an update of -2^-12 is a tie
     * between 1 - 2^-11 and 1 and rounds to even 1.0, so it is lost; -2^-9 moves the value;
     * a zero gradient asks for no update and is not counted. */
    test_env e;
    env_open(&e);
    int64_t n = 8;
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float g[8] = {0x1p-12f, 0x1p-12f, 0x1p-12f, 0, 0, 0x1p-9f, 0x1p-9f, 0x1p-9f};
    optim_config cfg = {.kind = kind("sgd"), .lr = 1.0};
    optim_tensors t = {.param = env_tensor(&e, "p", DTYPE_FLOAT16, 1, &n, ones),
                       .grad = env_tensor(&e, "g", DTYPE_FLOAT16, 1, &n, g),
                       .visible = DTYPE_FLOAT16};
    optim_hyper h = optim_hyper_at(&cfg, cfg.lr, 1);
    optim_result res;
    memset(&res, 0, sizeof res);
    cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
    cr_expect_eq(res.lost_updates, 3);
    cr_expect_eq(tensor_at(t.param, 0), 1.0f);
    cr_expect_eq(tensor_at(t.param, 5), 1.0f - 0x1p-9f);
    env_close(&e);
}

Test(optim, master_weights_keep_the_updates_float16_loses)
{
    /* The same -2^-12 update, applied twice to a float32 master of a float16 1.0: the first
     * leaves the visible value at 1.0 (lost), the second brings the master to 1 - 2^-11,
     * which float16 holds, so the refreshed parameter moves. */
    test_env e;
    env_open(&e);
    int64_t n = 4;
    float ones[4] = {1, 1, 1, 1}, g[4] = {0x1p-12f, 0x1p-12f, 0x1p-12f, 0x1p-12f};
    tensor *half = env_tensor(&e, "p", DTYPE_FLOAT16, 1, &n, ones);
    optim_config cfg = {.kind = kind("sgd"), .lr = 1.0};
    optim_tensors t = {.param = env_tensor(&e, "p@float32", DTYPE_FLOAT32, 1, &n, ones),
                       .grad = env_tensor(&e, "g", DTYPE_FLOAT32, 1, &n, g),
                       .visible = DTYPE_FLOAT16};
    int64_t lost[2];
    for (int s = 0; s < 2; s++) {
        optim_hyper h = optim_hyper_at(&cfg, cfg.lr, s + 1);
        optim_result res;
        memset(&res, 0, sizeof res);
        cr_assert_eq(e.be->optimizer_step(e.be, &cfg, &h, &t, &res), 0);
        cr_assert_eq(e.be->cast(e.be, t.param, half, NULL), 0);
        lost[s] = res.lost_updates;
    }
    cr_expect_eq(lost[0], 4);
    cr_expect_eq(lost[1], 0);
    cr_expect_eq(tensor_at(t.param, 0), 1.0f - 0x1p-11f);
    cr_expect_eq(tensor_at(half, 0), 1.0f - 0x1p-11f);
    env_close(&e);
}

Test(optim, cosine_schedule_follows_the_closed_form)
{
    /* PyTorch's CosineAnnealingLR steps a recursive formula; over two periods it must stay
     * on eta_min + (base - eta_min) * (1 + cos(pi * t / T)) / 2 */
    optimizer o = {
        .schedule = SCHEDULE_COSINE, .base_lr = 0.1, .lr = 0.1, .eta_min = 0.001, .t_max = 10};
    for (int t = 1; t <= 25; t++) {
        scheduler_step(&o);
        double want = 0.001 + (0.1 - 0.001) * (1 + cos(M_PI * t / 10.0)) / 2;
        cr_expect(fabs(o.lr - want) < 1e-12, "t = %d: %.15g, closed form %.15g", t, o.lr, want);
    }
    optimizer c = {.schedule = SCHEDULE_CONSTANT, .base_lr = 0.1, .lr = 0.1};
    scheduler_step(&c);
    cr_expect_eq(c.lr, 0.1);
}

/* ---- the registry (optimizers.h) ---- */

Test(optim, registry_rows_are_filled_and_agree_with_the_update_rule)
{
    char err[256] = "";
    cr_expect(optim_registry_check(err, sizeof err), "%s", err);
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        cr_expect_eq(optim_find(optim_name((optim_kind)k)), k, "%s", optim_name((optim_kind)k));
    static const char *const names[] = {"sgd", "adam", "rmsprop", "adamw"}; /* torch.optim's */
    for (int i = 0; i < 4; i++) {
        cr_expect_geq(optim_find(names[i]), 0, "%s", names[i]);
        cr_expect_str_eq(optim_name((optim_kind)optim_find(names[i])), names[i]);
    }
    cr_expect_eq(optim_find("AdamW"), -1);
    cr_expect_eq(optim_find("Adam"), -1);
}

/* the states' names, slot by slot, as torch.optim's optimizer.state[p] keys them */
static void expect_states(optim_config c, int n, const char *const *want)
{
    cr_expect_eq(optim_state_count(&c), n, "%s momentum %g centered %d", optim_name(c.kind),
                 c.momentum, c.centered);
    for (int k = 0; k < n; k++)
        cr_expect_str_eq(optim_state_name(&c, k), want[k], "%s slot %d", optim_name(c.kind), k);
    cr_expect_null(optim_state_name(&c, n), "%s has a state past slot %d", optim_name(c.kind),
                   n - 1);
}

Test(optim, state_names_follow_the_options)
{
    expect_states((optim_config){.kind = kind("sgd")}, 0, NULL);
    expect_states((optim_config){.kind = kind("sgd"), .momentum = 0.9}, 1,
                  (const char *const[]){"momentum_buffer"});
    expect_states((optim_config){.kind = kind("adam")}, 2,
                  (const char *const[]){"exp_avg", "exp_avg_sq"});
    expect_states((optim_config){.kind = kind("adamw"), .weight_decay = 1e-2}, 2,
                  (const char *const[]){"exp_avg", "exp_avg_sq"});
    expect_states((optim_config){.kind = kind("rmsprop")}, 1, (const char *const[]){"square_avg"});
    expect_states((optim_config){.kind = kind("rmsprop"), .momentum = 0.5}, 2,
                  (const char *const[]){"square_avg", "momentum_buffer"});
    expect_states((optim_config){.kind = kind("rmsprop"), .centered = true}, 2,
                  (const char *const[]){"square_avg", "grad_avg"});
    expect_states((optim_config){.kind = kind("rmsprop"), .momentum = 0.5, .centered = true}, 3,
                  (const char *const[]){"square_avg", "momentum_buffer", "grad_avg"});
}

Test(optim, defaults_are_pytorchs)
{
    optim_config s = optim_default(kind("sgd")), a = optim_default(kind("adam")),
                 r = optim_default(kind("rmsprop"));
    cr_expect_str_eq(optim_name(s.kind), "sgd");
    cr_expect_eq(s.lr, 1e-3);
    cr_expect_eq(s.momentum, 0);
    cr_expect(!s.nesterov);
    cr_expect_str_eq(optim_name(a.kind), "adam");
    cr_expect_eq(a.lr, 1e-3);
    cr_expect_eq(a.beta1, 0.9);
    cr_expect_eq(a.beta2, 0.999);
    cr_expect_eq(a.eps, 1e-8);
    cr_expect_str_eq(optim_name(r.kind), "rmsprop");
    cr_expect_eq(r.lr, 1e-2);
    cr_expect_eq(r.alpha, 0.99);
    cr_expect_eq(r.eps, 1e-8);
    cr_expect(!r.centered);
    optim_config w = optim_default(kind("adamw")); /* torch/optim/adamw.py's __init__ */
    cr_expect_str_eq(optim_name(w.kind), "adamw");
    cr_expect_eq(w.lr, 1e-3);
    cr_expect_eq(w.beta1, 0.9);
    cr_expect_eq(w.beta2, 0.999);
    cr_expect_eq(w.eps, 1e-8);
    cr_expect_eq(w.weight_decay, 1e-2);
}

Test(optim, format_names_the_kind_and_its_non_zero_options)
{
    char buf[128];
    optim_format(&(optim_config){.kind = kind("sgd"), .lr = 0.1, .momentum = 0.9}, buf, sizeof buf);
    cr_expect_str_eq(buf, "sgd lr=0.1 momentum=0.9");
    optim_format(&(optim_config){.kind = kind("adam"), .lr = 3e-4, .beta1 = 0.9}, buf, sizeof buf);
    cr_expect_str_eq(buf, "adam lr=0.0003");
    optim_format(&(optim_config){.kind = kind("rmsprop"), .lr = 0.01, .weight_decay = 1e-4}, buf,
                 sizeof buf);
    cr_expect_str_eq(buf, "rmsprop lr=0.01 weight_decay=0.0001");
    optim_format(&(optim_config){.kind = kind("sgd"), .lr = 1, .momentum = 0.5, .weight_decay = 2},
                 buf, 12);
    cr_expect_str_eq(buf, "sgd lr=1 mo"); /* cut at the buffer's end */
}

static void real_g(FILE *f, double v) { fprintf(f, "%g", v); }

Test(optim, json_lists_every_option_with_its_value)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    optim_config r = optim_default(kind("rmsprop"));
    r.momentum = 0.5, r.centered = true;
    optim_write_json(f, &r, real_g);
    fputc('\n', f);
    optim_write_json(f, &(optim_config){.kind = kind("sgd"), .lr = 0.1, .nesterov = true}, real_g);
    fputc('\n', f);
    optim_write_json(f, &(optim_config){.kind = kind("adam"), .beta1 = 0.8, .beta2 = 0.9}, real_g);
    fputc('\n', f);
    optim_write_json(f, &(optim_config){.kind = kind("adamw"), .lr = 0.1, .weight_decay = 0.5},
                     real_g);
    cr_assert_eq(fclose(f), 0);
    cr_expect_str_eq(buf, "{\"kind\": \"rmsprop\", \"options\": {\"lr\": 0.01, \"alpha\": 0.99, "
                          "\"eps\": 1e-08, \"weight_decay\": 0, \"momentum\": 0.5, \"centered\": "
                          "true}}\n"
                          "{\"kind\": \"sgd\", \"options\": {\"lr\": 0.1, \"weight_decay\": 0, "
                          "\"momentum\": 0, \"dampening\": 0, \"nesterov\": true}}\n"
                          "{\"kind\": \"adam\", \"options\": {\"lr\": 0, \"betas\": [0.8, 0.9], "
                          "\"eps\": 0, \"weight_decay\": 0, \"amsgrad\": false}}\n"
                          "{\"kind\": \"adamw\", \"options\": {\"lr\": 0.1, \"betas\": [0, 0], "
                          "\"eps\": 0, \"weight_decay\": 0.5, \"amsgrad\": false}}");
    free(buf);
}

/*
 * AMPSCOPE_CPU_ISA reaches the optimizer's update: bin/ampscope ($AMPSCOPE), three steps of
 * the models of tests/fixtures/isa/ (float32 with a GradScaler, float16 under autocast,
 * bfloat16 with float32 master weights: lost updates) under SGD (plain, and momentum with
 * L2 decay), Adam with L2 decay, AdamW and centered RMSprop with momentum, at each level
 * this processor runs; the parameters and optimizer states it dumps after each step,
 * tensors.csv, hist.csv and steps.csv (lost updates; timings aside) are those of the best
 * level, byte for byte. The models have no GEMM: at a lower level the harness also runs
 * OpenBLAS on that processor's GEMM kernels (core/libenv.c), whose float32 sums may differ
 * in the last bits from the best level's, and so would every value after a GEMM, whatever
 * the update did; without one, a difference can come only from the code the level chooses.
 * The test neither sets nor reads OPENBLAS_CORETYPE.
 */
Test(optim, every_isa_level_updates_to_the_same_bits, .timeout = 180)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    static const char *const optimizers[] = {
        "sgd lr=1e-2", "sgd lr=1e-2 momentum=0.9 weight_decay=0.01",
        "adam lr=1e-3 weight_decay=0.01", "adamw lr=1e-2 weight_decay=0.1",
        "rmsprop lr=1e-3 momentum=0.9 centered=yes"};
    static const char *const models[] = {"isa-fp32-scaler", "isa-half", "isa-bf16-master"};
    int n_opt = (int)(sizeof optimizers / sizeof *optimizers);
    char dir[256], cmd[4096], a[1024], b[1024], why[2048];
    make_temp_dir(dir, sizeof dir);
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (!cpu_isa_runs((cpu_isa)l))
            continue;
        const char *name = cpu_isa_name((cpu_isa)l);
        for (int o = 0; o < n_opt; o++) {
            snprintf(cmd, sizeof cmd,
                     "for c in %s %s %s; do d=%s/%s/$c-%d; mkdir -p $d; AMPSCOPE_CPU_ISA=%s %s run "
                     "tests/fixtures/isa/$c.case --device cpu --out $d --dump $d/dump --quiet "
                     "--set 'train.optimizer=%s' && cp $d/$c+*/steps.csv $d/ || exit 1; done "
                     ">>%s/log 2>&1",
                     models[0], models[1], models[2], dir, name, o, name, bin, optimizers[o], dir);
            /* a --set run reports the cases' expectations without judging */
            cr_assert_eq(system(cmd), 0, "%s: failed (see %s/log)", optimizers[o], dir);
        }
    }
    const char *best = cpu_isa_name(cpu_isa_best());
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (l == (int)cpu_isa_best() || !cpu_isa_runs((cpu_isa)l))
            continue;
        const char *level = cpu_isa_name((cpu_isa)l);
        snprintf(cmd, sizeof cmd,
                 "diff -r -x report.md -x REPORT.md -x summary.csv -x steps.csv -x memory.csv "
                 "%s/%s %s/%s >%s/diff-%s 2>&1",
                 dir, best, dir, level, dir, level);
        cr_expect_eq(system(cmd), 0, "the %s level's updates differ from the %s level's (%s)",
                     level, best, cmd);
        for (int m = 0; m < 3; m++)
            for (int o = 0; o < n_opt; o++) { /* steps.csv: lost updates, its timing aside */
                snprintf(a, sizeof a, "%s/%s/%s-%d/steps.csv", dir, best, models[m], o);
                snprintf(b, sizeof b, "%s/%s/%s-%d/steps.csv", dir, level, models[m], o);
                cr_expect(same_run_file(a, b, why, sizeof why), "at %s: %s", level, why);
            }
    }
    rm_rf(dir);
}
