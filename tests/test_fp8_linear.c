/*
 * test_fp8_linear.c: te.Linear under fp8_autocast (harness/layers/fp8_linear.h) and the [fp8]
 * section.
 *  - tests/cases/small-fp8-{delayed,current,mxfp8,delayed-scaler}.case against
 *    tools/fp8_linear_reference.py (tests/references/fp8/): an emulation of te.Linear written
 *    in this project with PyTorch's float8 dtypes from Transformer Engine's sources, not
 *    Transformer Engine itself (hence the tests' names: *_matches_the_te_emulation): every
 *    quantization's amax, scale, saturated and underflow counts in fp8.csv, and every
 *    quantized copy's float8 values (`--dump`), exactly; the loss within 4 float32 ulps: the
 *    GEMMs sum in float32 in OpenBLAS's order here and MKL's in PyTorch, which may round a
 *    sum of exact float8 products differently by an ulp before the output's rounding (in
 *    these cases they agree: the test would still pass with such an ulp, the bytes and
 *    scales would show it);
 *  - delayed scaling's rule across steps, recomputed here from fp8.csv's amax column: the
 *    scale of step s is 1 for s = 0, else fp8_max / (the largest of the last
 *    amax_history_len amaxes, s - 1 back) for max, fp8_max / amax(s - 1) for most_recent;
 *  - the [fp8] defaults, the default layers, and its JSON.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"
#include "helpers.h"
#include "case/load.h"

static void run_fp8_case(const char *name, const char *const *sets, int n_sets, char *out,
                         int len, const char *dump)
{
    make_temp_dir(out, len);
    char path[512];
    snprintf(path, sizeof path, "tests/cases/%s.case", name);
    train_options opt = {.quiet = true, .dump_dir = dump};
    case_result res;
    run_case_file_set(path, sets, n_sets, out, &res, &opt);
    cr_assert(res.ok, "%s: %s", name, res.error);
}

static void compare_with_reference(const char *name)
{
    char out[512], dump[600], path[1024];
    make_temp_dir(dump, 512);
    run_fp8_case(name, NULL, 0, out, sizeof out, dump);
    csv got, want;
    snprintf(path, sizeof path, "%s/%s/fp8.csv", out, name);
    cr_assert(csv_read(path, &got), "%s", path);
    snprintf(path, sizeof path, "tests/references/fp8/%s.fp8.csv", name);
    cr_assert(csv_read(path, &want), "%s", path);
    cr_assert_eq(got.n_rows, want.n_rows);
    int gs = csv_col(&got, "step"), gt = csv_col(&got, "tensor"), gf = csv_col(&got, "format"),
        ga = csv_col(&got, "amax"), gc = csv_col(&got, "scale"), gsat = csv_col(&got, "saturated"),
        gu = csv_col(&got, "underflow");
    int ws = csv_col(&want, "step"), wt = csv_col(&want, "tensor"), wf = csv_col(&want, "format"),
        wa = csv_col(&want, "amax"), wc = csv_col(&want, "scale"),
        wsat = csv_col(&want, "saturated"), wu = csv_col(&want, "underflow");
    int64_t saturated = 0;
    for (int i = 0; i < got.n_rows; i++) {
        char **g = got.rows[i], **w = want.rows[i];
        const char *t = w[wt];
        cr_expect_str_eq(g[gs], w[ws], "row %d", i);
        cr_expect_str_eq(g[gt], t, "row %d", i);
        cr_expect_str_eq(g[gf], w[wf], "%s", t);
        cr_expect_eq(strtof(g[ga], NULL), strtof(w[wa], NULL), "step %s %s amax %s, want %a",
                     w[ws], t, g[ga], strtod(w[wa], NULL));
        cr_expect_eq(strtof(g[gc], NULL), strtof(w[wc], NULL), "step %s %s scale %s, want %a",
                     w[ws], t, g[gc], strtod(w[wc], NULL));
        cr_expect_str_eq(g[gsat], w[wsat], "step %s %s saturated", w[ws], t);
        cr_expect_str_eq(g[gu], w[wu], "step %s %s underflow", w[ws], t);
        saturated += atoll(g[gsat]);
        /* the quantized copy's values, as the dump widened them: "L.input@F8" for the row
         * "L.input", "L.input@F8.colwise" for MXFP8's "L.input.colwise" */
        char file[256], err[512];
        size_t tl = strlen(t), cl = strlen(".colwise");
        bool colwise = tl > cl && strcmp(t + tl - cl, ".colwise") == 0;
        snprintf(file, sizeof file, "%s/%.*s@%s%s.%s.npy", w[ws], (int)(colwise ? tl - cl : tl), t,
                 w[wf], colwise ? ".colwise" : "", w[wf]);
        npy_array a, b;
        snprintf(path, sizeof path, "%s/%s", dump, file);
        cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
        snprintf(path, sizeof path, "tests/references/fp8/%s/%s", name, file);
        cr_assert_eq(npy_read(path, &b, NULL, err, sizeof err), 0, "%s", err);
        cr_assert_eq(a.numel, b.numel, "%s", file);
        int differ = 0;
        for (int64_t k = 0; k < a.numel; k++) {
            float x = ((float *)a.data)[k], y = ((float *)b.data)[k];
            differ += !(x == y || (isnan(x) && isnan(y)));
        }
        cr_expect_eq(differ, 0, "%s: %d of %lld values differ", file, differ,
                     (long long)a.numel);
        npy_free(&a);
        npy_free(&b);
    }
    csv_free(&got);
    csv_free(&want);
    /* the loss of every step */
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    cr_assert(csv_read(path, &got));
    snprintf(path, sizeof path, "tests/references/fp8/%s.loss.csv", name);
    cr_assert(csv_read(path, &want));
    cr_assert_eq(got.n_rows, want.n_rows);
    for (int i = 0; i < got.n_rows; i++) {
        float g = strtof(got.rows[i][csv_col(&got, "loss")], NULL);
        float w = strtof(want.rows[i][csv_col(&want, "loss")], NULL);
        cr_expect(fabsf(g - w) <= 4 * (nextafterf(w, INFINITY) - w), "step %d loss %a, want %a",
                  i, g, w);
    }
    csv_free(&got);
    csv_free(&want);
    rm_rf(out);
    rm_rf(dump);
    if (strstr(name, "delayed")) /* the case's point: step 0's update grows the weights */
        cr_expect_gt(saturated, 0, "no saturation in %s", name);
}

Test(fp8_linear, delayed_scaling_matches_the_te_emulation)
{
    compare_with_reference("small-fp8-delayed");
}

Test(fp8_linear, current_scaling_matches_the_te_emulation)
{
    compare_with_reference("small-fp8-current");
}

/* autocast float16 and a GradScaler: the output gradients quantized with the loss scale in them */
Test(fp8_linear, delayed_scaling_with_grad_scaler_matches_the_te_emulation)
{
    compare_with_reference("small-fp8-delayed-scaler");
}

/* MXFP8 (the CPU only): every row-wise and column-wise copy's bytes, amax, block-scale column,
 * counts, and the loss, against the reference's own E8M0 rule and dequantized GEMMs */
Test(fp8_linear, mxfp8_matches_the_te_emulation) { compare_with_reference("small-fp8-mxfp8"); }

/* fp8.csv's scales against the rule, recomputed from its amaxes, over 6 steps */
static void check_delayed_rule(int history_len, bool most_recent, int margin)
{
    char out[512], set_len[64], set_margin[64];
    snprintf(set_len, sizeof set_len, "fp8.amax_history_len=%d", history_len);
    snprintf(set_margin, sizeof set_margin, "fp8.margin=%d", margin);
    const char *sets[] = {"train.steps=6", set_len,
                          most_recent ? "fp8.amax_compute_algo=most_recent"
                                      : "fp8.amax_compute_algo=max",
                          set_margin};
    run_fp8_case("small-fp8-delayed", sets, 4, out, sizeof out, NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/small-fp8-delayed/fp8.csv", out);
    csv c;
    cr_assert(csv_read(path, &c));
    enum { STEPS = 6, TENSORS = 6 };
    cr_assert_eq(c.n_rows, STEPS * TENSORS, "6 quantizations a step");
    int ct = csv_col(&c, "tensor"), ca = csv_col(&c, "amax"), cs = csv_col(&c, "scale"),
        cf = csv_col(&c, "format"), cst = csv_col(&c, "step");
    for (int k = 0; k < TENSORS; k++) { /* rows in the order of the quantizations */
        float amax[STEPS];
        for (int s = 0; s < STEPS; s++) {
            char **row = c.rows[s * TENSORS + k];
            cr_assert_eq(atoi(row[cst]), s);
            cr_assert_str_eq(row[ct], c.rows[k][ct], "the same tensor at step %d", s);
            amax[s] = strtof(row[ca], NULL);
            float fp8_max = strcmp(row[cf], "float8_e5m2") == 0 ? 57344.0f : 448.0f;
            float want = 1.0f;
            if (s > 0) {
                float m = amax[s - 1];
                for (int j = s - 2; !most_recent && j >= 0 && j > s - 1 - history_len; j--)
                    m = fmaxf(m, amax[j]);
                want = fp8_max / m / (float)(1 << margin); /* exact: a power of two */
            }
            cr_expect_eq(strtof(row[cs], NULL), want, "%s step %d (len %d%s): scale %s, want %.9g",
                         row[ct], s, history_len, most_recent ? ", most_recent" : "", row[cs],
                         (double)want);
        }
    }
    csv_free(&c);
    rm_rf(out);
}

Test(fp8_linear, delayed_scales_follow_the_history_rule)
{
    check_delayed_rule(1, false, 0);
    check_delayed_rule(2, false, 0);
    check_delayed_rule(4, false, 0);
    check_delayed_rule(4, true, 0);
    check_delayed_rule(4, false, 2);
}

/* format = e4m3: the output gradients are E4M3 too, observed under that name */
Test(fp8_linear, e4m3_format_quantizes_gradients_to_e4m3)
{
    char out[512], path[1024];
    const char *sets[] = {"fp8.format=e4m3"};
    run_fp8_case("small-fp8-current", sets, 1, out, sizeof out, NULL);
    snprintf(path, sizeof path, "%s/small-fp8-current/fp8.csv", out);
    csv c;
    cr_assert(csv_read(path, &c));
    int grads = 0;
    for (int i = 0; i < c.n_rows; i++)
        if (strstr(c.rows[i][csv_col(&c, "tensor")], ".out.grad")) {
            cr_expect_str_eq(c.rows[i][csv_col(&c, "format")], "float8_e4m3fn");
            /* current scaling: 448 / amax */
            float amax = strtof(c.rows[i][csv_col(&c, "amax")], NULL);
            cr_expect_eq(strtof(c.rows[i][csv_col(&c, "scale")], NULL), 448.0f / amax);
            grads++;
        }
    cr_expect_eq(grads, 6, "two layers, three steps");
    csv_free(&c);
    snprintf(path, sizeof path, "%s/small-fp8-current/tensors.csv", out);
    cr_assert(csv_read(path, &c));
    char **row = csv_find(&c, "tensor", "fc2.out.grad@float8_e4m3fn", "step", "0", NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&c, "role")], "grad_cast");
    cr_expect_str_eq(row[csv_col(&c, "dtype")], "float8_e4m3fn");
    row = csv_find(&c, "tensor", "fc1.weight@float8_e4m3fn", "step", "0", NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&c, "role")], "cast");
    csv_free(&c);
    rm_rf(out);
}

/* ---- the [fp8] section ---- */

static case_config cfg;

static int load_text(const char *text, char *json, size_t json_len)
{
    char dir[512], path[1024];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "c.case", text, path, sizeof path);
    err_list errs = {0};
    memset(&cfg, 0, sizeof cfg);
    int n = case_load(path, NULL, 0, &cfg, &errs);
    for (int i = 0; i < errs.n; i++)
        cr_log_info("%s", errs.msgs[i]);
    err_list_free(&errs);
    if (n == 0 && json) {
        FILE *f = fmemopen(json, json_len, "w");
        cr_assert_not_null(f);
        cr_assert_eq(case_write_json(&cfg, f), 0);
        fclose(f);
    }
    rm_rf(dir);
    return n;
}

#define MODEL                                                                                      \
    "[model]\nfc1 = linear 16 -> 32\nact = relu\nfc2 = linear 32 -> 16\nhead = linear 16 -> 10\n" \
    "[data]\nbatch = 8\n"

Test(fp8_linear, section_defaults_and_default_layers)
{
    static char json[16384];
    cr_assert_eq(load_text(MODEL "[fp8]\nenabled = yes\n", json, sizeof json), 0);
    cr_expect(cfg.fp8);
    cr_expect_eq(cfg.fp8_format, FP8_FORMAT_HYBRID);
    cr_expect_eq(cfg.fp8_recipe, FP8_RECIPE_DELAYED);
    cr_expect_eq(cfg.fp8_amax_history_len, 1024);
    cr_expect_eq(cfg.fp8_amax_compute_algo, 0, "max");
    cr_expect_eq(cfg.fp8_margin, 0);
    /* fc1 and fc2 (multiples of 16, 8 rows); head's 10 outputs TE refuses; act is no linear */
    bool want[4] = {true, false, true, false};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(cfg.fp8_layer[i], want[i], "layer %d", i);
    cr_expect(strstr(json, "\"fp8\": {\"format\": \"hybrid\", \"recipe\": \"delayed\", "
                           "\"amax_history_len\": 1024, \"amax_compute_algo\": \"max\", "
                           "\"margin\": 0, \"layers\": [\"fc1\", \"fc2\"]}") != NULL,
              "%s", json);
}

Test(fp8_linear, section_keys_read_and_off_by_default)
{
    static char json[16384];
    cr_assert_eq(load_text(MODEL "[fp8]\nenabled = yes\nformat = e4m3\nrecipe = current\n"
                                 "layers = fc2\n",
                           json, sizeof json),
                 0);
    cr_expect_eq(cfg.fp8_format, FP8_FORMAT_E4M3);
    cr_expect_eq(cfg.fp8_recipe, FP8_RECIPE_CURRENT);
    cr_expect(!cfg.fp8_layer[0] && cfg.fp8_layer[2]);
    cr_expect(strstr(json, "\"fp8\": {\"format\": \"e4m3\", \"recipe\": \"current\", "
                           "\"layers\": [\"fc2\"]}") != NULL,
              "%s", json);
    /* a section without enabled = yes is off, and not in the JSON */
    cr_assert_eq(load_text(MODEL "[fp8]\nrecipe = current\nlayers = fc1\n", json, sizeof json), 0);
    cr_expect(!cfg.fp8 && !cfg.fp8_layer[0]);
    cr_expect(strstr(json, "\"fp8\"") == NULL);
    cr_assert_eq(load_text(MODEL "[fp8]\nenabled = yes\namax_history_len = 16\nmargin = 2\n"
                                 "amax_compute_algo = most_recent\n",
                           NULL, 0),
                 0);
    cr_expect_eq(cfg.fp8_amax_history_len, 16);
    cr_expect_eq(cfg.fp8_margin, 2);
    cr_expect_eq(cfg.fp8_amax_compute_algo, 1, "most_recent");
}

/* recipe = mxfp8: format e4m3 by default (MXFP8BlockScaling's), hybrid when asked; the default
 * layers are those with rows, in and out multiples of 32 (MXFP8Quantizer.is_quantizable) */
#define MX_MODEL                                                                                   \
    "[model]\nfc1 = linear 32 -> 64\nact = relu\nfc2 = linear 64 -> 16\nfc3 = linear 16 -> 32\n"  \
    "[data]\nbatch = 32\n"

Test(fp8_linear, mxfp8_defaults_and_default_layers)
{
    static char json[16384];
    cr_assert_eq(load_text(MX_MODEL "[fp8]\nenabled = yes\nrecipe = mxfp8\n", json, sizeof json),
                 0);
    cr_expect_eq(cfg.fp8_recipe, FP8_RECIPE_MXFP8);
    cr_expect_eq(cfg.fp8_format, FP8_FORMAT_E4M3);
    /* fc2's 16 outputs and fc3's 16 inputs are multiples of 16, not of 32 */
    bool want[4] = {true, false, false, false};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(cfg.fp8_layer[i], want[i], "layer %d", i);
    cr_expect(strstr(json, "\"fp8\": {\"format\": \"e4m3\", \"recipe\": \"mxfp8\", "
                           "\"layers\": [\"fc1\"]}") != NULL,
              "%s", json);
    cr_assert_eq(load_text(MX_MODEL "[fp8]\nenabled = yes\nrecipe = mxfp8\nformat = hybrid\n",
                           NULL, 0),
                 0);
    cr_expect_eq(cfg.fp8_format, FP8_FORMAT_HYBRID);
    /* the same model under delayed scaling takes fc2 and fc3 too */
    cr_assert_eq(load_text(MX_MODEL "[fp8]\nenabled = yes\n", NULL, 0), 0);
    cr_expect(cfg.fp8_layer[0] && cfg.fp8_layer[2] && cfg.fp8_layer[3]);
}
