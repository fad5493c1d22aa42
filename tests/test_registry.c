/*
 * test_registry.c: the layer and loss registry (harness/layers/layer.h): every kind is
 * complete and named once, and found by its name; the completeness check catches a
 * definition left half done (tested on broken copies of real definitions); the kinds'
 * descriptions and report.md's **Model:** line are the hand-written texts below; their shape
 * and params rules give PyTorch's shapes. Kinds are named as case files name them, through
 * the registry. (The policies of their autocast entries are test_autocast_policy.c's.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "report/report.h"
#include "helpers.h"
#include "case/load.h"

static const layer_def *all_layers[LAYER_KIND_COUNT];
static const loss_def *all_losses[LOSS_KIND_COUNT];

/* the kind a case file calls name */
static layer_kind layer_named(const char *name)
{
    int k = layer_kind_of_name(name);
    cr_assert_geq(k, 0, "no layer kind is called %s", name);
    return (layer_kind)k;
}

static void fill(void)
{
    for (int k = 0; k < LAYER_KIND_COUNT; k++)
        all_layers[k] = layer_def_of((layer_kind)k);
    for (int k = 0; k < LOSS_KIND_COUNT; k++)
        all_losses[k] = loss_def_of((loss_kind)k);
}

Test(registry, every_kind_is_complete_and_named_once)
{
    fill();
    for (int k = 0; k < LAYER_KIND_COUNT; k++) {
        const layer_def *d = all_layers[k];
        cr_assert_not_null(d, "layer kind %d", k);
        cr_expect(d->name && *d->name, "layer kind %d has no name", k);
        cr_expect(d->n_opts == 0 || d->opts, "%s: options", d->name);
        cr_expect(d->signature != NULL, "%s: signature", d->name);
        cr_expect(d->shape && d->input_shape && d->params, "%s: shape or params rule", d->name);
        cr_expect(d->forward && d->describe, "%s: forward or description", d->name);
        cr_expect(d->autocast && d->n_autocast >= 1, "%s: autocast entry", d->name);
        for (int j = 0; j < k; j++)
            cr_expect_str_neq(d->name, all_layers[j]->name);
    }
    for (int k = 0; k < LOSS_KIND_COUNT; k++) {
        const loss_def *d = all_losses[k];
        cr_assert_not_null(d, "loss kind %d", k);
        cr_expect(d->name && *d->name && d->forward, "loss kind %d", k);
        cr_expect(d->autocast && d->n_autocast >= 1, "%s: autocast entry", d->name);
        for (int j = 0; j < k; j++)
            cr_expect_str_neq(d->name, all_losses[j]->name);
    }
    char err[256] = "";
    cr_expect_eq(layer_defs_check(all_layers, LAYER_KIND_COUNT, err, sizeof err), 0, "%s", err);
    cr_expect_eq(loss_defs_check(all_losses, LOSS_KIND_COUNT, err, sizeof err), 0, "%s", err);
    /* each kind is found by its name; the names case files use are there */
    for (int k = 0; k < LAYER_KIND_COUNT; k++)
        cr_expect_eq(layer_kind_of_name(all_layers[k]->name), k, "%s", all_layers[k]->name);
    for (int k = 0; k < LOSS_KIND_COUNT; k++)
        cr_expect_eq(loss_kind_of_name(all_losses[k]->name), k, "%s", all_losses[k]->name);
    static const char *const layers[] = {"linear", "conv2d", "flatten", "layer_norm", "embedding"};
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++)
        cr_expect_geq(layer_kind_of_name(layers[i]), 0, "%s", layers[i]);
    cr_expect_geq(loss_kind_of_name("cross_entropy"), 0);
    cr_expect_geq(loss_kind_of_name("mse"), 0);
    cr_expect_eq(layer_kind_of_name("lienar"), -1);
    cr_expect_eq(layer_kind_of_name("mse"), -1, "a loss is not a layer");
    cr_expect_eq(loss_kind_of_name("linear"), -1);
}

/* layer_defs_check on the registry with kind k replaced by a broken copy of it */
static int check_with(int k, const layer_def *broken, char *err, size_t len)
{
    fill();
    const layer_def *defs[LAYER_KIND_COUNT];
    memcpy(defs, all_layers, sizeof defs);
    defs[k] = broken;
    return layer_defs_check(defs, LAYER_KIND_COUNT, err, len);
}

static void expect_caught(int k, const layer_def *broken, const char *needle)
{
    char err[256] = "";
    cr_expect_eq(check_with(k, broken, err, sizeof err), -1, "not caught: %s", needle);
    cr_expect(strstr(err, needle) != NULL, "'%s' not in: %s", needle, err);
}

Test(registry, the_check_catches_a_kind_left_half_done)
{
    fill();
    layer_kind conv = layer_named("conv2d"), linear = layer_named("linear"),
               flatten = layer_named("flatten"), softmax = layer_named("softmax");
    layer_def d = *all_layers[conv];
    d.forward = NULL;
    expect_caught(conv, &d, "(conv2d) has no forward");
    d = *all_layers[conv];
    d.describe = NULL;
    expect_caught(conv, &d, "has no description");
    d = *all_layers[conv];
    d.shape = NULL;
    expect_caught(conv, &d, "has no shape rule");
    d = *all_layers[conv];
    d.params = NULL;
    expect_caught(conv, &d, "has no params rule");
    d = *all_layers[softmax];
    d.n_autocast = 0;
    expect_caught(softmax, &d, "(softmax) has no autocast entry");
    /* an entry without its policy (AUTOCAST_UNSET) or its ATen op */
    autocast_op ac = all_layers[softmax]->autocast[0];
    ac.policy = AUTOCAST_UNSET;
    d = *all_layers[softmax];
    d.autocast = &ac;
    expect_caught(softmax, &d, "(softmax) has an autocast entry without its policy");
    ac = all_layers[softmax]->autocast[0];
    ac.aten[0] = NULL;
    expect_caught(softmax, &d, "(softmax) has an autocast entry without its ATen op");
    d = *all_layers[softmax];
    d.name = NULL;
    expect_caught(softmax, &d, "has no name");
    d = *all_layers[linear];
    d.n_args = 1; /* "IN -> OUT" reads two numbers */
    expect_caught(linear, &d, "numbers are not its args");
    d = *all_layers[linear];
    d.opts = NULL;
    expect_caught(linear, &d, "no options table");
    d = *all_layers[flatten];
    d.name = "linear";
    expect_caught(flatten, &d, "the name of another kind");
    char err[256] = "", want[64];
    cr_expect_eq(check_with(flatten, NULL, err, sizeof err), -1);
    snprintf(want, sizeof want, "layer kind %d ", (int)flatten);
    cr_expect(strstr(err, want) && strstr(err, "no definition"), "%s", err);
    /* a choice option without its choices */
    kind_opt opt = {.name = "mode", .type = KIND_OPT_CHOICE};
    d = *all_layers[flatten];
    d.opts = &opt;
    d.n_opts = 1;
    expect_caught(flatten, &d, "choice option without choices");

    int mse = loss_kind_of_name("mse");
    cr_assert_geq(mse, 0);
    loss_def l = *all_losses[mse];
    l.forward = NULL;
    const loss_def *losses[LOSS_KIND_COUNT];
    memcpy(losses, all_losses, sizeof losses);
    losses[mse] = &l;
    cr_expect_eq(loss_defs_check(losses, LOSS_KIND_COUNT, err, sizeof err), -1);
    cr_expect(strstr(err, "(mse) has no forward"), "%s", err);
    l = *all_losses[mse];
    l.autocast = NULL;
    cr_expect_eq(loss_defs_check(losses, LOSS_KIND_COUNT, err, sizeof err), -1);
    cr_expect(strstr(err, "(mse) has no autocast entry"), "%s", err);
}

static layer_spec spec(const char *kind, int64_t in, int64_t out, bool bias)
{
    return (layer_spec){.name = "x",
                        .kind = layer_named(kind),
                        .in = in,
                        .out = out,
                        .bias = bias,
                        .kernel = 3,
                        .stride = 2,
                        .padding = 1,
                        .dilation = 1,
                        .opt_int = {1}}; /* conv2d's groups */
}

Test(registry, descriptions_are_the_model_line_of_report_md)
{
    char buf[256];
    layer_spec l = spec("linear", 4, 8, true);
    layer_describe(&l, buf, sizeof buf);
    cr_expect_str_eq(buf, "x = linear 4 → 8");
    l.bias = false;
    layer_describe(&l, buf, sizeof buf);
    cr_expect_str_eq(buf, "x = linear 4 → 8 (no bias)");
    l = spec("conv2d", 3, 16, false);
    layer_describe(&l, buf, sizeof buf);
    cr_expect_str_eq(buf, "x = conv2d 3 → 16, kernel 3, stride 2, padding 1 (no bias)");
    l = spec("flatten", 0, 0, true);
    l.opt_int[0] = 1, l.opt_int[1] = -1; /* nn.Flatten's defaults */
    layer_describe(&l, buf, sizeof buf);
    cr_expect_str_eq(buf, "x = flatten");
    l.opt_int[0] = 2;
    layer_describe(&l, buf, sizeof buf);
    cr_expect_str_eq(buf, "x = flatten dims 2 to -1");
    /* snprintf's contract: the length it would have written */
    l = spec("linear", 4, 8, true);
    cr_expect_eq(layer_describe(&l, buf, 3), (int)strlen("x = linear 4 → 8"));
    cr_expect_str_eq(buf, "x ");
}

/* report.md's **Model:** line of a run of tests/cases/small-conv-flatten.case, written by
 * hand from its [model] section: the layers in order, each as "name = kind" with a
 * convolution's channels, kernel, stride and padding and a linear's features (both with
 * their bias, which "(no bias)" would say otherwise). */
Test(registry, the_report_of_a_run_lists_the_model_s_layers, .timeout = 120)
{
    const char *path = "tests/cases/small-conv-flatten.case";
    const char *want = "**Model:** conv = conv2d 3 → 4, kernel 3, stride 2, padding 1, "
                       "relu = relu, flat = flatten, fc = linear 256 → 10.\n";
    char dir[256], case_dir[512], line[2048] = "";
    make_temp_dir(dir, sizeof dir);
    case_result res;
    run_case_file(path, dir, &res, NULL);
    static case_config cfg;
    err_list errs = {0};
    cr_assert_eq(case_load(path, NULL, 0, &cfg, &errs), 0);
    snprintf(case_dir, sizeof case_dir, "%s/%s", dir, cfg.name);
    char report[600];
    snprintf(report, sizeof report, "%s/report.md", case_dir);
    FILE *f = fopen(report, "r");
    cr_assert_not_null(f);
    while (fgets(line, sizeof line, f) && strncmp(line, "**Model:** ", 11) != 0)
        ;
    fclose(f);
    cr_expect_str_eq(line, want);
    rm_rf(dir);
}

static char last_msg[512];
static shape_blame last_who;
static void keep(shape_check *sc, shape_blame who, const char *msg)
{
    last_who = who;
    snprintf(last_msg, sizeof last_msg, "%s", msg);
}

Test(registry, shape_and_params_rules)
{
    shape_check sc = {keep};
    layer_shape out;
    /* nn.Conv2d(3, 16, 3, stride=2, padding=1) on 3x32x32: 16x16x16 */
    layer_spec c = spec("conv2d", 3, 16, true);
    layer_shape img = {3, {3, 32, 32}};
    cr_assert(conv2d_def.shape(&c, &img, &out, &sc));
    cr_expect(out.ndim == 3 && out.dim[0] == 16 && out.dim[1] == 16 && out.dim[2] == 16);
    /* flatten (nn.Flatten's start_dim=1, end_dim=-1): 16*16*16 features */
    layer_spec f = spec("flatten", 0, 0, true);
    f.opt_int[0] = 1, f.opt_int[1] = -1;
    cr_assert(flatten_def.shape(&f, &out, &out, &sc));
    cr_expect(out.ndim == 1 && out.dim[0] == 4096);
    /* linear on a wrong feature count: said about the input, and the walk goes on */
    layer_spec l = spec("linear", 10, 5, true);
    last_msg[0] = '\0';
    cr_expect(linear_def.shape(&l, &out, &out, &sc));
    cr_expect_str_eq(last_msg, "input has 4096 features");
    cr_expect_eq(last_who, SHAPE_INPUT);
    cr_expect(out.ndim == 1 && out.dim[0] == 5);
    /* conv2d whose output would be empty: said about the layer, the walk stops */
    layer_spec big = spec("conv2d", 3, 4, true);
    big.kernel = 9;
    big.padding = 0;
    layer_shape small = {3, {3, 4, 4}};
    cr_expect_not(conv2d_def.shape(&big, &small, &out, &sc));
    cr_expect_eq(last_who, SHAPE_LAYER);
    cr_expect_str_eq(last_msg, "output size 4x-2x-2 is too small (input 3x4x4)");

    /* nn.Conv2d's weight [out, in, k, k], bias [out], fan_in = in * k * k */
    layer_param ps[LAYER_MAX_PARAMS];
    cr_assert_eq(conv2d_def.params(&c, ps), 2);
    cr_expect_str_eq(ps[0].name, "weight");
    cr_expect(ps[0].ndim == 4 && ps[0].shape[0] == 16 && ps[0].shape[1] == 3 &&
              ps[0].shape[2] == 3 && ps[0].shape[3] == 3);
    cr_expect_eq(ps[0].fan_in, 27);
    cr_expect_str_eq(ps[1].name, "bias");
    cr_expect(ps[1].ndim == 1 && ps[1].shape[0] == 16 && ps[1].fan_in == 27);
    /* nn.Linear(10, 5, bias=False): weight [5, 10] only */
    l.bias = false;
    cr_assert_eq(linear_def.params(&l, ps), 1);
    cr_expect(ps[0].ndim == 2 && ps[0].shape[0] == 5 && ps[0].shape[1] == 10 && ps[0].fan_in == 10);
    cr_expect_eq(flatten_def.params(&l, ps), 0);
    /* only a linear first layer implies the input shape */
    cr_expect(linear_def.input_shape(&l, &out) && out.ndim == 1 && out.dim[0] == 10);
    cr_expect_not(conv2d_def.input_shape(&c, &out));
}
