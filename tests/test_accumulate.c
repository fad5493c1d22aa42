/*
 * test_accumulate.c: gradient accumulation ([train] accumulate = N). The float16 add of
 * accumulation against a sequence worked out by hand (the sums and the lost accumulations
 * exact), the [train] keys' checks, and cases run with accumulation: steps.csv's
 * lost_accumulations column, float16 .grad against float32 master gradients.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "train/optimizer.h"
#include "helpers.h"
#include "case/load.h"

/* a run on the CPU backend, enough for grad_accumulate_add (no results files) */
static void run_open(test_env *e, run *r, observer *obs, case_config *cfg)
{
    env_open(e);
    memset(r, 0, sizeof *r);
    memset(obs, 0, sizeof *obs);
    memset(cfg, 0, sizeof *cfg);
    obs->be = e->be;
    r->cfg = cfg;
    r->be = e->be;
    r->obs = obs;
    r->counting = true;
    r->pool = e->pool;
}

/* Seven float16 micro-gradients added into a float16 .grad that holds the first, per element
 * (float16's spacing is 2^-10 in [1, 2)):
 *   [0] 1.0, then 2^-12 seven times: 1 + 2^-12 rounds back to 1 (a quarter of a spacing):
 *       7 lost, the sum stays 1.0 (the exact sum is 1 + 7 * 2^-12).
 *   [1] 1 + 2^-10, then 2^-11 seven times: the first add is a tie, to even: 1 + 2^-9
 *       (changed); from there every add is a tie back to 1 + 2^-9: 6 lost.
 *   [2] 0.5, then 0 seven times: nothing to add, nothing lost.
 *   [3] 0.25, then 0.25 seven times: exact, 2.0, nothing lost.
 * 13 lost in all. */
Test(accumulate, float16_adds_against_a_hand_calculation)
{
    test_env e;
    run r;
    observer obs;
    case_config cfg;
    run_open(&e, &r, &obs, &cfg);
    if (setjmp(r.fail))
        cr_assert_fail("the run failed: %s", r.error);
    int64_t n = 4;
    float first[4] = {1.0f, 1.0f + ldexpf(1, -10), 0.5f, 0.25f};
    float next[4] = {ldexpf(1, -12), ldexpf(1, -11), 0.0f, 0.25f};
    tensor *acc = env_tensor(&e, "w.grad", DTYPE_FLOAT16, 1, &n, first);
    tensor *g = env_tensor(&e, "w.grad", DTYPE_FLOAT16, 1, &n, next);
    int64_t lost = 0, lost_first = -1;
    for (int k = 1; k < 8; k++) {
        lost += grad_accumulate_add(&r, acc, g, ROLE_GRAD_PARAM);
        if (k == 1)
            lost_first = lost;
    }
    cr_expect_eq(lost_first, 1, "the first add loses element 0 only, got %lld",
                 (long long)lost_first);
    cr_expect_eq(lost, 13, "lost accumulations: %lld, expected 7 + 6 + 0 + 0", (long long)lost);
    float want[4] = {1.0f, 1.0f + ldexpf(1, -9), 0.5f, 2.0f};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(tensor_at(acc, i), want[i], "element %d: %.9g, expected %.9g", i,
                     (double)tensor_at(acc, i), (double)want[i]);
    env_close(&e);
}

/* the same adds in float32 lose nothing: float32's spacing at 1 is 2^-23 */
Test(accumulate, float32_adds_keep_them)
{
    test_env e;
    run r;
    observer obs;
    case_config cfg;
    run_open(&e, &r, &obs, &cfg);
    if (setjmp(r.fail))
        cr_assert_fail("the run failed: %s", r.error);
    int64_t n = 2;
    float first[2] = {1.0f, 1.0f + ldexpf(1, -10)};
    float next[2] = {ldexpf(1, -12), ldexpf(1, -11)};
    tensor *acc = env_tensor(&e, "w.grad@float32", DTYPE_FLOAT32, 1, &n, first);
    tensor *g = env_tensor(&e, "g", DTYPE_FLOAT32, 1, &n, next);
    int64_t lost = 0;
    for (int k = 1; k < 8; k++)
        lost += grad_accumulate_add(&r, acc, g, ROLE_GRAD_MASTER);
    cr_expect_eq(lost, 0);
    cr_expect_eq(tensor_at(acc, 0), 1.0f + 7 * ldexpf(1, -12));
    cr_expect_eq(tensor_at(acc, 1), 1.0f + ldexpf(1, -10) + 7 * ldexpf(1, -11));
    env_close(&e);
}

#define SMALL                                                                                      \
    "[model]\nfc1 = linear 8 -> 16\nrelu = relu\nfc2 = linear 16 -> 4\n[data]\nbatch = 4\n"        \
    "target = classes\n"

static int load_errors(const char *text, const char *want)
{
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "t.case", text, path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    int n = case_load(path, NULL, 0, cfg, &errs);
    bool found = false;
    for (int i = 0; i < errs.n; i++)
        found |= strstr(errs.msgs[i], want) != NULL;
    cr_expect(n == 0 || found, "no error contains \"%s\" (%d errors, first: %s)", want, n,
              n ? errs.msgs[0] : "");
    err_list_free(&errs);
    free(cfg);
    rm_rf(dir);
    return n;
}

Test(accumulate, keys_are_checked)
{
    cr_expect_eq(load_errors(SMALL "[train]\naccumulate = 0\n", "bad number '0' for accumulate"),
                 1);
    cr_expect_eq(load_errors(SMALL "[train]\naccumulate = 1025\n", "at most 1024"), 1);
    cr_expect_eq(load_errors(SMALL "[train]\ndelay_unscale = yes\n",
                             "delay_unscale = yes needs [precision] master_weights = yes"),
                 1);
    cr_expect_eq(load_errors(SMALL "[precision]\nparams = float16\nmaster_weights = yes\n"
                                   "[train]\naccumulate = 4\ndelay_unscale = yes\n",
                             ""),
                 0);
}

/* steps.csv: lost_accumulations per step where the case accumulates, empty where not */
static void steps_column(const char *out, const char *name, const char *col, char *buf, int len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    snprintf(buf, (size_t)len, "%s", c.rows[0][csv_col(&c, col)]);
    csv_free(&c);
}

Test(accumulate, half_grads_lose_what_master_grads_keep, .timeout = 120)
{
    char dir[256], path[512], out[512], lost[3][64];
    make_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out", dir);
    const char *common = "[model]\nfc1 = linear 64 -> 128\nrelu = relu\nfc2 = linear 128 -> 16\n"
                         "[data]\nbatch = 8\ntarget = classes\n";
    static const struct {
        const char *name, *extra;
    } runs[] = {
        {"half", "[precision]\nparams = float16\nautocast = float16\n[train]\noptimizer = sgd\naccumulate = 8\n"},
        {"master", "[precision]\nparams = float16\nmaster_weights = yes\nautocast = float16\n"
                   "[scaler]\n"
                   "[train]\noptimizer = sgd\naccumulate = 8\n"},
        {"plain", "[precision]\nparams = float16\nautocast = float16\n[train]\noptimizer = sgd\n"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char text[2048], file[64];
        snprintf(text, sizeof text, "[case]\nname = %s\n%s%s", runs[i].name, common, runs[i].extra);
        snprintf(file, sizeof file, "%s.case", runs[i].name);
        write_file(dir, file, text, path, sizeof path);
        case_result res;
        run_case_file(path, out, &res, NULL);
        cr_assert(res.ok, "%s: %s", runs[i].name, res.error);
        steps_column(out, runs[i].name, "lost_accumulations", lost[i], sizeof lost[i]);
    }
    /* the float16 .grad's adds lose some of the 8 contributions; the float32 master
     * gradients' adds lose (far) fewer; without accumulation the column is empty */
    cr_expect(atoll(lost[0]) > 0, "half: float16 adds lose some: %s", lost[0]);
    cr_expect(lost[1][0] && atoll(lost[1]) < atoll(lost[0]), "master %s, half %s", lost[1],
              lost[0]);
    cr_expect_str_eq(lost[2], "", "no accumulation: the column is empty");
    rm_rf(dir);
}

/* an inf in any micro-batch skips the step: the GradScaler starts at 2^24, whose scaled
 * float16 gradients overflow, both when the float16 .grad of fp32 parameters' autocast
 * copies accumulate into float32 .grad and when each micro-batch is unscaled into the
 * master gradients */
Test(accumulate, an_inf_in_a_micro_batch_skips_the_step, .timeout = 120)
{
    char dir[256], path[512], out[512], text[2048];
    make_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out", dir);
    static const char *const precision[] = {
        "[precision]\nautocast = float16\n",
        "[precision]\nparams = float16\nautocast = float16\nmaster_weights = yes\n"};
    static const char *const names[] = {"fp32-params", "master"};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text,
                 "[case]\nname = %s\n" SMALL "%s[scaler]\ninit_scale = 16777216\n[train]\n"
                 "optimizer = sgd\naccumulate = 3\nsteps = 2\n",
                 names[i], precision[i]);
        char file[64];
        snprintf(file, sizeof file, "%s.case", names[i]);
        write_file(dir, file, text, path, sizeof path);
        case_result res;
        run_case_file(path, out, &res, NULL);
        cr_assert(res.ok, "%s: %s", names[i], res.error);
        char skipped[64], found[64];
        steps_column(out, names[i], "skipped", skipped, sizeof skipped);
        steps_column(out, names[i], "found_inf", found, sizeof found);
        cr_expect_str_eq(found, "1", "%s: the scaler found the inf", names[i]);
        cr_expect_str_eq(skipped, "1", "%s: step 0 skipped", names[i]);
    }
    rm_rf(dir);
}

Test(accumulate, json_names_the_keys)
{
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "t.case",
               SMALL "[precision]\nparams = float16\nmaster_weights = yes\n[train]\n"
                     "accumulate = 8\ndelay_unscale = yes\nclip_grad_norm = 0.5\nnorm_type = inf\n",
               path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(path, NULL, 0, cfg, &errs), 0, "%s", errs.n ? errs.msgs[0] : "");
    err_list_free(&errs);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(case_write_json(cfg, f), 0);
    fclose(f);
    cr_expect(strstr(buf, "\"accumulate\": 8, \"delay_unscale\": true, \"clip_grad_norm\": 0.5, "
                          "\"norm_type\": \"inf\", \"error_if_nonfinite\": false, "
                          "\"clip_grad_value\": null, \"clip_before_unscale\": false"),
              "%s", buf);
    free(buf);
    free(cfg);
    rm_rf(dir);
}

/* a float32 or int64 .npy in dir, values v (numel of them) */
static void write_npy(const char *dir, const char *name, dtype dt, int ndim, const int64_t *shape,
                      const void *v)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(npy_write(path, dt, ndim, shape, v, err, sizeof err), 0, "%s", err);
}

/* steps.csv's step-0 loss of case NAME with [data] input = IN, target = TGT */
static double file_case_loss(const char *dir, const char *name, const char *in, const char *tgt,
                             int accumulate)
{
    char text[1024], file[64], path[512], out[512], loss[64];
    snprintf(text, sizeof text,
             "[case]\nname = %s\n[model]\nfc1 = linear 3 -> 5\nrelu = relu\nfc2 = linear 5 -> 4\n"
             "[data]\nbatch = 2\ninput = file %s/%s\ntarget = file %s/%s\n"
             "[train]\nloss = cross_entropy\noptimizer = sgd\nsteps = 1\naccumulate = %d\n",
             name, dir, in, dir, tgt, accumulate);
    snprintf(file, sizeof file, "%s.case", name);
    write_file(dir, file, text, path, sizeof path);
    snprintf(out, sizeof out, "%s/out", dir);
    case_result res;
    run_case_file(path, out, &res, NULL);
    cr_assert(res.ok, "%s: %s", name, res.error);
    steps_column(out, name, "loss", loss, sizeof loss);
    return atof(loss);
}

/* accumulate = 2 over a file of 2 x batch samples: micro-batch k takes samples
 * [k * batch, (k + 1) * batch), so the step's loss, sum of each loss / 2, is the mean of
 * the two single-batch cases' losses on the halves (which differ: reading a half twice, or
 * the rows interleaved, gives another value) */
Test(accumulate, micro_batches_take_consecutive_rows_of_the_data_files, .timeout = 60)
{
    char dir[256];
    make_temp_dir(dir, sizeof dir);
    const float x[4][3] = {
        {1.5f, -2.0f, 0.25f}, {-0.5f, 1.0f, 3.0f}, {2.5f, 0.5f, -1.5f}, {-3.0f, -1.0f, 0.75f}};
    const int64_t y[4] = {0, 3, 1, 2};
    write_npy(dir, "x.npy", DTYPE_FLOAT32, 2, (int64_t[]){4, 3}, x);
    write_npy(dir, "y.npy", DTYPE_INT64, 1, (int64_t[]){4}, y);
    write_npy(dir, "x0.npy", DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x[0]);
    write_npy(dir, "y0.npy", DTYPE_INT64, 1, (int64_t[]){2}, y);
    write_npy(dir, "x1.npy", DTYPE_FLOAT32, 2, (int64_t[]){2, 3}, x[2]);
    write_npy(dir, "y1.npy", DTYPE_INT64, 1, (int64_t[]){2}, y + 2);
    double both = file_case_loss(dir, "both", "x.npy", "y.npy", 2);
    double l0 = file_case_loss(dir, "half0", "x0.npy", "y0.npy", 1);
    double l1 = file_case_loss(dir, "half1", "x1.npy", "y1.npy", 1);
    cr_expect(fabs(l0 - l1) > 1e-3, "the halves' losses differ: %.9g %.9g", l0, l1);
    /* steps.csv prints 8 significant digits */
    cr_expect(fabs(both - (l0 + l1) / 2) < 1e-6 * both, "%.9g against %.9g + %.9g halved", both, l0,
              l1);
    rm_rf(dir);
}

/* at check time a data file must hold accumulate x batch samples */
Test(accumulate, data_files_hold_every_micro_batch)
{
    char dir[256], text[1024];
    make_temp_dir(dir, sizeof dir);
    const float x[8 * 8] = {0};
    const int64_t y[8] = {0};
    write_npy(dir, "x4.npy", DTYPE_FLOAT32, 2, (int64_t[]){4, 8}, x);
    write_npy(dir, "x8.npy", DTYPE_FLOAT32, 2, (int64_t[]){8, 8}, x);
    write_npy(dir, "y4.npy", DTYPE_INT64, 1, (int64_t[]){4}, y);
    write_npy(dir, "y8.npy", DTYPE_INT64, 1, (int64_t[]){8}, y);
    static const char model[] = "[model]\nfc1 = linear 8 -> 16\nrelu = relu\nfc2 = linear 16 -> 4\n"
                                "[data]\nbatch = 4\n";
    snprintf(text, sizeof text,
             "%sinput = file %s/x8.npy\ntarget = file %s/y8.npy\n"
             "[train]\naccumulate = 2\n",
             model, dir, dir);
    cr_expect_eq(load_errors(text, ""), 0);
    snprintf(text, sizeof text,
             "%sinput = file %s/x4.npy\ntarget = file %s/y8.npy\n"
             "[train]\naccumulate = 2\n",
             model, dir, dir);
    cr_expect_eq(load_errors(text, "t.case:7: " /* the input key's line */), 1);
    cr_expect_eq(load_errors(text, "x4.npy: shape 4x8, expected 8x8 (accumulate = 2 "
                                   "micro-batches of batch 4)"),
                 1);
    snprintf(text, sizeof text,
             "%sinput = file %s/x8.npy\ntarget = file %s/y4.npy\n"
             "[train]\naccumulate = 2\n",
             model, dir, dir);
    cr_expect_eq(load_errors(text, "t.case:8: "), 1);
    cr_expect_eq(
        load_errors(text, "y4.npy: shape 4, expected 8 (accumulate = 2 micro-batches of batch 4)"),
        1);
    rm_rf(dir);
}

/* micro-batches of a token model: micro-batch 1's token ids are drawn over the vocabulary
 * (int64, as the model's own batch), and its labels are shaped [B, T] as the model's target
 * (cross entropy over every position); both aborted or overran before. The loss of every
 * step is finite and the float32 .grad took both micro-batches (lost_accumulations is
 * written) */
Test(accumulate, token_models_draw_ids_and_labels_per_micro_batch, .timeout = 60)
{
    char dir[256], path[512], out[512], loss[64], lost[64];
    make_temp_dir(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/out", dir);
    write_file(dir, "tokens.case",
               "[case]\nname = tokens\n[model]\ntok = embedding 16 -> 8\n"
               "pos = position_embedding 6 -> 8\nfc = linear 8 -> 16\n"
               "[data]\nbatch = 2\nshape = 6\ninput = tokens vocab=16\ntarget = classes\n"
               "[train]\noptimizer = sgd\naccumulate = 2\nsteps = 2\n",
               path, sizeof path);
    case_result res;
    run_case_file(path, out, &res, NULL);
    cr_assert(res.ok, "%s", res.error);
    steps_column(out, "tokens", "loss", loss, sizeof loss);
    steps_column(out, "tokens", "lost_accumulations", lost, sizeof lost);
    cr_expect(isfinite(atof(loss)) && atof(loss) > 0, "loss %s", loss);
    cr_expect(lost[0] != '\0', "accumulation's column written: '%s'", lost);
    rm_rf(dir);
}
