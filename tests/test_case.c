/*
 * test_case.c: case file parsing and validation (harness/case*.c).
 *
 * Each test writes its case files into a fresh temporary folder. bad_cases loads every .case
 * file in tests/bad-cases (the tests run from the repository root); each names its expected
 * error on its first line ("# expect-error: TEXT") and may name its line ("# expect-line: N").
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/case.h"
#include "core/npy.h"
#include "case/load.h"
#include "layers/layer.h"
#include "train/optimizers.h"

static char tmp_dir[64];
static case_config *cfg;
static err_list errs;

static void setup(void)
{
    strcpy(tmp_dir, "/tmp/ampscope-case-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir), "mkdtemp failed");
    cfg = calloc(1, sizeof *cfg);
    cr_assert_not_null(cfg);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    err_list_free(&errs);
    free(cfg);
    cr_expect_eq(nftw(tmp_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0, "cleanup failed");
}

TestSuite(case_load, .init = setup, .fini = teardown);

/* Writes text to tmp_dir/rel (its folder must exist) and returns the full path (static). */
static const char *write_case(const char *rel, const char *text)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, rel);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    cr_assert_eq(fclose(f), 0);
    return path;
}

/* a real .npy of zeros (float32, or int64 labels 0) with the given shape */
static void write_npy(const char *rel, dtype dt, int ndim, const int64_t *shape)
{
    char path[PATH_MAX], err[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, rel);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    void *zeros = calloc((size_t)n, 8);
    cr_assert_not_null(zeros);
    cr_assert_eq(npy_write(path, dt, ndim, shape, zeros, err, sizeof err), 0, "%s", err);
    free(zeros);
}

static void make_dir(const char *rel)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, rel);
    cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s", path);
}

static int load_sets(const char *path, const char *const *sets, int n_sets)
{
    err_list_free(&errs);
    return case_load(path, sets, n_sets, cfg, &errs);
}

static int load(const char *path) { return load_sets(path, NULL, 0); }

/* Loads text as tmp_dir/t.case and expects no error. */
static void load_ok(const char *text)
{
    int n = load(write_case("t.case", text));
    for (int i = 0; i < errs.n; i++)
        cr_log_error("%s", errs.msgs[i]);
    cr_assert_eq(n, 0, "expected no error, got %d", n);
}

static const char *find_error(const char *substring)
{
    for (int i = 0; i < errs.n; i++)
        if (strstr(errs.msgs[i], substring))
            return errs.msgs[i];
    return NULL;
}

/* Expects an error containing substring, at `line` of tmp_dir/t.case (line < 0: any). */
static void expect_error(const char *substring, int line)
{
    const char *msg = find_error(substring);
    for (int i = 0; !msg && i < errs.n; i++)
        cr_log_error("got: %s", errs.msgs[i]);
    cr_assert_not_null(msg, "no error contains \"%s\"", substring);
    if (line >= 0) {
        char prefix[PATH_MAX + 32];
        snprintf(prefix, sizeof prefix, "%s/t.case:%d: ", tmp_dir, line);
        cr_assert(strncmp(msg, prefix, strlen(prefix)) == 0, "\"%s\" is not at line %d", msg, line);
    }
}

static void load_bad(const char *text, const char *substring, int line)
{
    cr_assert_gt(load(write_case("t.case", text)), 0, "expected an error: %s", substring);
    expect_error(substring, line);
}

#define MODEL "[model]\nfc1 = linear 16 -> 10\n"
#define DATA "[data]\nbatch = 4\n"

static const char full_case[] =
    "# a comment line\n"
    "[case]\n"
    "name = seed000-autocast-fp16-scaler   # trailing comment\n"
    "description = fp32 weights, autocast fp16, GradScaler (question 000)\n"
    "baseline = seed000-fp32\n"
    "observe = every 100\n"
    "[model]\n"
    "conv = conv2d 3 -> 8 kernel=3 stride=2 padding=1 dilation=1 bias=no\n"
    "act = relu\n"
    "flat = flatten\n"
    "fc1  = linear 512 -> 64\n"
    "fc2  = linear 64 -> 10 bias=no\n"
    "[data]\n"
    "batch = 64\n"
    "shape = 3x16x16\n"
    "input = file x.npy\n"
    "input_dtype = bf16\n"
    "target = file y.npy\n"
    "[precision]\n"
    "params = float16\n"
    "autocast = bfloat16\n"
    "loss_in_autocast = no\n"
    "master_weights = yes\n"
    "[scaler]\n"
    "enabled = true\n"
    "init_scale = 1024\n"
    "growth_factor = 4\n"
    "backoff_factor = 0.25\n"
    "growth_interval = 50\n"
    "[train]\n"
    "loss = cross_entropy\n"
    "optimizer = adam lr=3e-4 betas=0.8, 0.99 eps=1e-6 weight_decay=0.01 amsgrad=no\n"
    "schedule = cosine T_max=300 eta_min=1e-5\n"
    "steps = 1000\n"
    "seed = 18446744073709551615\n"
    "[init]\n"
    "fc1.weight = file w1.npy\n"
    "fc1.bias = file b1.npy\n"
    "[expect]\n"
    "dtype fc1.weight.grad = float32\n"
    "dtype   fc2.out = half\n"
    "error = none\n";

static void write_full_case_files(void)
{
    write_npy("x.npy", DTYPE_FLOAT32, 4, (const int64_t[]){64, 3, 16, 16});
    write_npy("y.npy", DTYPE_INT64, 1, (const int64_t[]){64});
    write_npy("w1.npy", DTYPE_FLOAT32, 2, (const int64_t[]){64, 512});
    write_npy("b1.npy", DTYPE_FLOAT32, 1, (const int64_t[]){64});
}

Test(case_load, full_case_field_by_field)
{
    write_full_case_files();
    load_ok(full_case);
    cr_expect_str_eq(cfg->name, "seed000-autocast-fp16-scaler");
    cr_expect_str_eq(cfg->description, "fp32 weights, autocast fp16, GradScaler (question 000)");
    cr_expect_str_eq(cfg->baseline, "seed000-fp32");
    cr_expect_eq(cfg->observe_every, 100);
    cr_expect_eq(cfg->n_observe_steps, 0);

    cr_assert_eq(cfg->n_layers, 5);
    const layer_spec *conv = &cfg->layers[0];
    cr_expect_str_eq(conv->name, "conv");
    cr_expect_eq(conv->kind, layer_kind_of_name("conv2d"));
    cr_expect_eq(conv->line, 8);
    cr_expect_eq(conv->in, 3);
    cr_expect_eq(conv->out, 8);
    cr_expect_eq(conv->kernel, 3);
    cr_expect_eq(conv->stride, 2);
    cr_expect_eq(conv->padding, 1);
    cr_expect_eq(conv->dilation, 1);
    cr_expect_not(conv->bias);
    cr_expect_eq(conv->out_ndim, 3);
    cr_expect_eq(conv->out_shape[0], 8);
    cr_expect_eq(conv->out_shape[1], 8);
    cr_expect_eq(conv->out_shape[2], 8);
    cr_expect_eq(cfg->layers[1].kind, layer_kind_of_name("relu"));
    cr_expect_eq(cfg->layers[1].out_ndim, 3);
    cr_expect_eq(cfg->layers[2].kind, layer_kind_of_name("flatten"));
    cr_expect_eq(cfg->layers[2].out_ndim, 1);
    cr_expect_eq(cfg->layers[2].out_shape[0], 512);
    cr_expect_eq(cfg->layers[3].kind, layer_kind_of_name("linear"));
    cr_expect(cfg->layers[3].bias);
    cr_expect_eq(cfg->layers[3].out_shape[0], 64);
    cr_expect_str_eq(cfg->layers[4].name, "fc2");
    cr_expect_not(cfg->layers[4].bias);
    cr_expect_eq(cfg->layers[4].out_ndim, 1);
    cr_expect_eq(cfg->layers[4].out_shape[0], 10);

    char path[PATH_MAX];
    cr_expect_eq(cfg->batch, 64);
    cr_expect_eq(cfg->sample_ndim, 3);
    cr_expect_eq(cfg->sample_shape[0], 3);
    cr_expect_eq(cfg->sample_shape[2], 16);
    cr_expect_eq(cfg->input, INPUT_FILE);
    snprintf(path, sizeof path, "%s/x.npy", tmp_dir);
    cr_expect_str_eq(cfg->input_path, path);
    cr_expect_eq(cfg->input_dtype, DTYPE_BFLOAT16);
    cr_expect_eq(cfg->target, TARGET_FILE);
    snprintf(path, sizeof path, "%s/y.npy", tmp_dir);
    cr_expect_str_eq(cfg->target_path, path);

    cr_expect_eq(cfg->params, DTYPE_FLOAT16);
    cr_expect(cfg->autocast);
    cr_expect_eq(cfg->autocast_dtype, DTYPE_BFLOAT16);
    cr_expect_not(cfg->loss_in_autocast);
    cr_expect(cfg->master_weights);

    cr_expect(cfg->scaler);
    cr_expect_float_eq(cfg->init_scale, 1024.0, 0);
    cr_expect_float_eq(cfg->growth_factor, 4.0, 0);
    cr_expect_float_eq(cfg->backoff_factor, 0.25, 0);
    cr_expect_eq(cfg->growth_interval, 50);

    cr_expect_eq(cfg->loss, loss_kind_of_name("cross_entropy"));
    cr_expect_eq(cfg->loss_reduction, REDUCTION_MEAN);
    cr_expect_eq(cfg->optim.kind, optim_find("adam"));
    cr_expect_float_eq(cfg->optim.lr, 3e-4, 0);
    cr_expect_float_eq(cfg->optim.beta1, 0.8, 0);
    cr_expect_float_eq(cfg->optim.beta2, 0.99, 0);
    cr_expect_float_eq(cfg->optim.eps, 1e-6, 0);
    cr_expect_float_eq(cfg->optim.weight_decay, 0.01, 0);
    cr_expect_eq(cfg->schedule, SCHEDULE_COSINE);
    cr_expect_eq(cfg->t_max, 300);
    cr_expect_float_eq(cfg->eta_min, 1e-5, 0);
    cr_expect_eq(cfg->steps, 1000);
    cr_expect_eq(cfg->seed, UINT64_MAX);

    cr_assert_eq(cfg->n_inits, 2);
    cr_expect_str_eq(cfg->inits[0].tensor, "fc1.weight");
    snprintf(path, sizeof path, "%s/w1.npy", tmp_dir);
    cr_expect_str_eq(cfg->inits[0].path, path);
    cr_expect_eq(cfg->inits[0].line, 37);
    cr_expect_str_eq(cfg->inits[1].tensor, "fc1.bias");

    cr_assert_eq(cfg->n_expects, 3);
    cr_expect_eq(cfg->expects[0].kind, EXPECT_DTYPE);
    cr_expect_str_eq(cfg->expects[0].tensor, "fc1.weight.grad");
    cr_expect_eq(cfg->expects[0].dt, DTYPE_FLOAT32);
    cr_expect_eq(cfg->expects[0].line, 40);
    cr_expect_str_eq(cfg->expects[1].tensor, "fc2.out");
    cr_expect_eq(cfg->expects[1].dt, DTYPE_FLOAT16);
    cr_expect_eq(cfg->expects[2].kind, EXPECT_ERROR);
    cr_expect_str_eq(cfg->expects[2].text, "");
    cr_expect_eq(cfg->n_sets, 0);
}

Test(case_load, defaults)
{
    load_ok(MODEL DATA);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/t.case", tmp_dir);
    cr_expect_str_eq(cfg->path, dir);
    cr_expect_str_eq(cfg->dir, tmp_dir);
    cr_expect_str_eq(cfg->name, "t");
    cr_expect_str_eq(cfg->description, "");
    cr_expect_str_eq(cfg->baseline, "");
    cr_expect_eq(cfg->sample_ndim, 1);
    cr_expect_eq(cfg->sample_shape[0], 16);
    cr_expect_eq(cfg->input, INPUT_RANDN);
    cr_expect_eq(cfg->input_dtype, DTYPE_FLOAT32);
    cr_expect_eq(cfg->target, TARGET_CLASSES);
    cr_expect_eq(cfg->params, DTYPE_FLOAT32);
    cr_expect_not(cfg->autocast);
    cr_expect(cfg->loss_in_autocast);
    cr_expect_not(cfg->master_weights);
    cr_expect_not(cfg->scaler);
    cr_expect_float_eq(cfg->init_scale, 65536.0, 0);
    cr_expect_float_eq(cfg->growth_factor, 2.0, 0);
    cr_expect_float_eq(cfg->backoff_factor, 0.5, 0);
    cr_expect_eq(cfg->growth_interval, 2000);
    cr_expect_eq(cfg->loss, loss_kind_of_name("cross_entropy"));
    cr_expect_eq(cfg->optim.kind, optim_find("sgd"));
    cr_expect_float_eq(cfg->optim.lr, 1e-3, 0);
    cr_expect_float_eq(cfg->optim.momentum, 0.0, 0);
    cr_expect_float_eq(cfg->optim.dampening, 0.0, 0);
    cr_expect_not(cfg->optim.nesterov);
    cr_expect_float_eq(cfg->optim.weight_decay, 0.0, 0);
    cr_expect_eq(cfg->schedule, SCHEDULE_CONSTANT);
    cr_expect_eq(cfg->steps, 1);
    cr_expect_eq(cfg->seed, 0);
    cr_expect_eq(cfg->n_inits, 0);
    cr_expect_eq(cfg->n_expects, 0);
    cr_expect(cfg->layers[0].bias);
    cr_expect_eq(cfg->layers[0].out_shape[0], 10);
}

Test(case_load, optimizer_defaults)
{
    load_ok(MODEL DATA "[train]\noptimizer = adam\n");
    cr_expect_float_eq(cfg->optim.lr, 1e-3, 0);
    cr_expect_float_eq(cfg->optim.beta1, 0.9, 0);
    cr_expect_float_eq(cfg->optim.beta2, 0.999, 0);
    cr_expect_float_eq(cfg->optim.eps, 1e-8, 0);
    load_ok(MODEL DATA "[train]\noptimizer = rmsprop centered=yes momentum=0.5\n");
    cr_expect_eq(cfg->optim.kind, optim_find("rmsprop"));
    cr_expect_float_eq(cfg->optim.lr, 1e-2, 0);
    cr_expect_float_eq(cfg->optim.alpha, 0.99, 0);
    cr_expect_float_eq(cfg->optim.eps, 1e-8, 0);
    cr_expect_float_eq(cfg->optim.momentum, 0.5, 0);
    cr_expect(cfg->optim.centered);
    load_ok(MODEL DATA "[train]\noptimizer = sgd lr = 0.1 momentum=0.9 nesterov=on\n");
    cr_expect_float_eq(cfg->optim.lr, 0.1, 0);
    cr_expect(cfg->optim.nesterov);
}

Test(case_load, scaler_section_alone_enables_it)
{
    load_ok(MODEL DATA "[scaler]\n");
    cr_expect(cfg->scaler);
    cr_expect_float_eq(cfg->init_scale, 65536.0, 0);
    load_ok(MODEL DATA "[scaler]\nenabled = off\n[precision]\nautocast = bf16\n");
    cr_expect_not(cfg->scaler);
}

Test(case_load, accepted_combinations)
{
    /* loss_in_autocast = no with autocast off changes nothing and is accepted */
    load_ok(MODEL DATA "[precision]\nloss_in_autocast = no\n");
    load_ok(MODEL DATA "[precision]\nparams = bf16\nmaster_weights = yes\n[scaler]\n");
    cr_expect(cfg->master_weights);
    load_ok(MODEL DATA "target = randn_like\n[train]\nloss = mse reduction=none\n");
    cr_expect_eq(cfg->loss, loss_kind_of_name("mse"));
    cr_expect_eq(cfg->loss_reduction, REDUCTION_NONE);
    cr_expect_eq(cfg->target, TARGET_RANDN_LIKE);
    load_ok(MODEL DATA "target = randn\n[train]\nloss = mse reduction=mean\n");
    cr_expect_eq(cfg->loss_reduction, REDUCTION_MEAN);
}

Test(case_load, conv_shapes)
{
    load_ok("[model]\n"
            "c1 = conv2d 3 -> 4 kernel=5\n"                    /* 32 - 4 = 28 */
            "c2 = conv2d 4 -> 6 kernel=3 dilation=2\n"         /* 28 - 4 = 24 */
            "c3 = conv2d 6 -> 2 kernel=3 stride=5 padding=2\n" /* (24 + 4 - 3) / 5 + 1 = 6 */
            "c4 = conv2d 2 -> 2 kernel=1 stride=4\n"           /* 5 / 4 + 1 = 2 */
            "flat = flatten\n"
            "fc = linear 8 -> 3\n"
            "[data]\nbatch = 2\nshape = 3x32x32\n");
    const int64_t h[] = {28, 24, 6, 2};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(cfg->layers[i].out_ndim, 3);
        cr_expect_eq(cfg->layers[i].out_shape[1], h[i], "layer %d: %lld", i,
                     (long long)cfg->layers[i].out_shape[1]);
        cr_expect_eq(cfg->layers[i].out_shape[2], h[i]);
    }
    cr_expect_eq(cfg->layers[4].out_shape[0], 8);
    cr_expect_eq(cfg->layers[5].out_shape[0], 3);
}

Test(case_load, accepts_crlf_bom_and_spacing)
{
    load_ok("\xef\xbb\xbf[case]\r\ndescription =   caf\xc3\xa9  \r\n"
            "[ model ]\r\nfc1=linear 16->10 bias = yes\r\n[data]\r\n\tbatch\t=\t4\r\n");
    cr_expect_str_eq(cfg->description, "caf\xc3\xa9");
    cr_expect_eq(cfg->layers[0].out_shape[0], 10);
    cr_expect_eq(cfg->batch, 4);
}

Test(case_load, bad_cases)
{
    const char *dir_name = "tests/bad-cases";
    DIR *dir = opendir(dir_name);
    cr_assert_not_null(dir, "cannot open %s (run the tests from the repository root)", dir_name);
    int n_cases = 0;
    for (struct dirent *d; (d = readdir(dir));) {
        size_t len = strlen(d->d_name);
        if (len < 6 || strcmp(d->d_name + len - 5, ".case") != 0)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir_name, d->d_name);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f, "cannot open %s", path);
        char text[4096];
        size_t got = fread(text, 1, sizeof text - 1, f);
        cr_assert_eq(fclose(f), 0);
        text[got] = '\0';
        const char *tag = "# expect-error: ";
        cr_assert(strncmp(text, tag, strlen(tag)) == 0, "%s: no '%s' first line", path, tag);
        char want[512];
        size_t want_len = strcspn(text + strlen(tag), "\n");
        cr_assert_lt(want_len, sizeof want);
        memcpy(want, text + strlen(tag), want_len);
        want[want_len] = '\0';
        const char *line_tag = strstr(text, "# expect-line: ");
        int line = line_tag ? atoi(line_tag + strlen("# expect-line: ")) : -1;

        cr_expect_gt(load(path), 0, "%s: no error", path);
        const char *msg = find_error(want);
        cr_expect_not_null(msg, "%s: no error contains \"%s\"", path, want);
        for (int i = 0; !msg && i < errs.n; i++)
            cr_log_error("%s: got %s", path, errs.msgs[i]);
        if (msg && line >= 0) {
            char prefix[PATH_MAX + 32];
            snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
            cr_expect(strncmp(msg, prefix, strlen(prefix)) == 0, "%s: \"%s\" is not at line %d",
                      path, msg, line);
        }
        n_cases++;
    }
    cr_assert_eq(closedir(dir), 0);
    cr_expect_geq(n_cases, 30, "only %d bad cases", n_cases);
}

Test(case_load, one_megabyte_line)
{
    size_t n = 1 << 20;
    char *text = malloc(n + 256);
    cr_assert_not_null(text);
    char *o = stpcpy(text, "[case]\ndescription = ");
    memset(o, 'a', n);
    strcpy(o + n, "\n" MODEL DATA);
    cr_assert_eq(load(write_case("t.case", text)), 1);
    free(text);
    expect_error("line too long", 2);
}

Test(case_load, unreadable_files)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/missing.case", tmp_dir);
    cr_assert_eq(load(path), 1);
    cr_expect(strstr(errs.msgs[0], ":0: cannot open the case file: No such file or directory"),
              "%s", errs.msgs[0]);
    make_dir("folder.case");
    snprintf(path, sizeof path, "%s/folder.case", tmp_dir);
    cr_assert_eq(load(path), 1);
    cr_expect(strstr(errs.msgs[0], "cannot read the case file: Is a directory"), "%s",
              errs.msgs[0]);
    load_bad("", "empty file", 0);
    load_bad("[model]\nfc = linear 4 -> 2\n\x01\n", "not a text file (byte 0x01)", 3);
}

Test(case_load, syntax_errors)
{
    load_bad("[model]\n= linear 4 -> 2\n", "missing key before '='", 2);
    load_bad(MODEL DATA "[train]]\n", "unknown section [train]]", 5);
    load_bad(MODEL DATA "steps 3\n", "not a section, key = value or comment: 'steps 3'", 5);
    load_bad(MODEL DATA "[train]\nsteps =   # nothing\n", "missing value for steps", 6);
}

Test(case_load, collects_every_error_sorted_by_line)
{
    int n = load(write_case("t.case", "[train]\nsteps = 0\n[data]\nbatch = x\n[precision]\n"
                                      "params = fp8\n[bogus]\n"));
    cr_assert_eq(n, 5, "got %d errors", n);
    const char *want[] = {":0: missing [model] section", ":2: bad number '0' for steps",
                          ":4: bad number 'x' for batch", ":6: bad value 'fp8' for params",
                          ":7: unknown section [bogus]"};
    for (int i = 0; i < 5; i++)
        cr_expect(strstr(errs.msgs[i], want[i]), "error %d is \"%s\"", i, errs.msgs[i]);
}

Test(case_load, did_you_mean)
{
    load_bad(MODEL DATA "[train]\noptimiser = sgd\n",
             "unknown key 'optimiser' in [train]; "
             "did you mean 'optimizer'?",
             6);
    load_bad(MODEL DATA "[train]\noptim = sgd\n", "did you mean 'optimizer'?", 6);
    load_bad(MODEL "[data]\nBatch = 4\n", "unknown key 'Batch' in [data]; did you mean 'batch'?",
             4);
    load_bad(MODEL DATA "[precision]\nparms = float16\n", "did you mean 'params'?", 6);
    load_bad(MODEL DATA "[train]\nwhatever = 1\n",
             "unknown key 'whatever' in [train]; allowed keys: loss, optimizer, schedule, steps, "
             "seed, accumulate, delay_unscale, clip_grad_norm, norm_type, error_if_nonfinite, "
             "clip_grad_value, clip_before_unscale",
             6);
    load_bad(MODEL DATA "[scalar]\n", "unknown section [scalar]; did you mean 'scaler'?", 5);
    load_bad(MODEL DATA "[train]\noptimizer = adam beta=0.9,0.99\n",
             "unknown option 'beta' for adam; did you mean 'betas'?", 6);
    load_bad(MODEL DATA "[train]\noptimizer = adam foreach=no\n",
             "unknown option 'foreach' for adam; options: lr, betas, eps, weight_decay, amsgrad",
             6);
    load_bad("[model]\nc = conv2d 3 -> 4 kernal=3\n[data]\nbatch=1\nshape=3x8x8\n",
             "did you mean 'kernel'?", 2);
    load_bad(MODEL DATA "[init]\nfc1.wieght = file t.case\n",
             "bad key 'fc1.wieght' in [init]; did you mean 'fc1.weight'?", 6);
    load_bad(MODEL DATA "[expect]\neror = none\n", "did you mean 'error'?", 6);
}

Test(case_load, number_errors)
{
    load_bad(MODEL "[data]\nbatch = 4.5\n", "bad number '4.5' for batch: expected an integer", 4);
    load_bad(MODEL "[data]\nbatch = 9223372036854775808\n", "out of range", 4);
    load_bad(MODEL DATA "[train]\noptimizer = sgd lr=-0.1\n",
             "bad number '-0.1' for lr: must "
             "be >= 0",
             6);
    load_bad(MODEL DATA "[train]\noptimizer = sgd lr=inf\n", "must be a finite number", 6);
    load_bad(MODEL DATA "[train]\noptimizer = sgd lr=0.1x\n", "expected a number", 6);
    load_bad(MODEL DATA "[scaler]\ninit_scale = 0\n", "bad number '0' for init_scale: must be > 0",
             6);
    load_bad(MODEL DATA "[scaler]\nbackoff_factor = 0\n", "must be in (0, 1)", 6);
    load_bad(MODEL DATA "[scaler]\ngrowth_interval = 0\n", "must be > 0", 6);
    load_bad(MODEL DATA "[train]\nseed = -1\n", "bad number '-1' for seed", 6);
    load_bad("[model]\nc = conv2d 3 -> 4 kernel=3 padding=-1\n[data]\nbatch=1\nshape=3x8x8\n",
             "bad number '-1' for padding: must be >= 0", 2);
    load_bad(MODEL DATA "[train]\noptimizer = sgd momentum=0.9 dampening=0.1 nesterov=yes\n",
             "nesterov=yes requires momentum > 0 and dampening = 0", 6);
    load_bad(MODEL DATA "[train]\noptimizer = rmsprop alpha=-1\n", "must be >= 0", 6);
    load_bad(MODEL DATA "[train]\noptimizer = adam betas=0.9\n",
             "bad value '0.9' for betas: expected two numbers", 6);
}

Test(case_load, memory_limits)
{
    load_bad("[model]\nfc = linear 1099511627776 -> 2\n[data]\nbatch = 1\n", "cannot fit in memory",
             -1);
    load_bad("[model]\nfc = linear 4 -> 1099511627776\n" DATA,
             "fc = linear 4 -> 1099511627776: the model's parameters cannot fit in memory", 2);
    load_bad("[model]\nc = conv2d 3 -> 1024 kernel=1\nf = flatten\nfc = linear 3 -> 3\n"
             "[data]\nbatch = 2048\nshape = 3x1024x1024\n",
             "c = conv2d 3 -> 1024 kernel=1: its output batch 2048 x 1024x1024x1024 cannot fit", 2);
    load_bad("[model]\nc = conv2d 3 -> 1 kernel=4611686018427387904 dilation=4\n"
             "[data]\nbatch = 1\nshape = 3x1x1\n",
             "sizes overflow int64", 2);
}

Test(case_load, set_overrides)
{
    write_npy("w.npy", DTYPE_FLOAT32, 2, (const int64_t[]){10, 16});
    const char *path = write_case("base.case", MODEL "fc2 = linear 10 -> 5\n" DATA
                                                     "[precision]\nautocast = float16\n");
    const char *sets[] = {"precision.autocast=bfloat16",
                          "train.optimizer=sgd lr=0.1",
                          "model.fc2 = linear 10 -> 7 bias=no",
                          "model.out = relu",
                          "scaler.init_scale=8",
                          " data . shape = 16",
                          "init.fc1.weight=file w.npy",
                          "expect.dtype fc1.out=bf16"};
    int n = load_sets(path, sets, 8);
    for (int i = 0; i < errs.n; i++)
        cr_log_error("%s", errs.msgs[i]);
    cr_assert_eq(n, 0);
    cr_expect_eq(cfg->n_sets, 8);
    cr_expect_eq(cfg->autocast_dtype, DTYPE_BFLOAT16);
    cr_expect_eq(cfg->optim.kind, optim_find("sgd"));
    cr_expect_float_eq(cfg->optim.lr, 0.1, 0);
    cr_assert_eq(cfg->n_layers, 3);
    cr_expect_str_eq(cfg->layers[1].name, "fc2");
    cr_expect_eq(cfg->layers[1].out, 7);
    cr_expect_not(cfg->layers[1].bias);
    cr_expect_eq(cfg->layers[1].line, 0);
    cr_expect_str_eq(cfg->layers[2].name, "out");
    cr_expect(cfg->scaler);
    cr_expect_float_eq(cfg->init_scale, 8.0, 0);
    cr_expect_eq(cfg->sample_shape[0], 16);
    cr_expect_eq(cfg->n_inits, 1);
    cr_expect_str_eq(cfg->expects[0].tensor, "fc1.out");

    const char *later[] = {"train.steps=5", "train.steps=7"};
    cr_assert_eq(load_sets(path, later, 2), 0);
    cr_expect_eq(cfg->steps, 7);
}

Test(case_load, set_override_errors)
{
    const char *path = write_case("base.case", MODEL DATA);
    const char *sets[] = {"precision.autocast=fp64", "nodot",         "train.steps", "bogus.key=1",
                          "train.optimiser=sgd",     "data.shape=15", "data.=3"};
    cr_assert_eq(load_sets(path, sets, 7), 7);
    const char *want[] = {
        "--set precision.autocast=fp64: bad value 'fp64' for autocast: expected off, float16 "
        "or bfloat16",
        "--set nodot: expected section.key=value",
        "--set train.steps: expected section.key=value",
        "--set bogus.key=1: unknown section [bogus]",
        "--set train.optimiser=sgd: unknown key 'optimiser' in [train]; did you mean "
        "'optimizer'?",
        "--set data.shape=15: [data] shape does not match the first layer: fc1 = linear 16 -> "
        "10: input has 15 features",
        "--set data.=3: missing key after 'data.'"};
    for (int i = 0; i < 7; i++)
        cr_expect(strncmp(errs.msgs[i], want[i], strlen(want[i])) == 0, "error %d is \"%s\"", i,
                  errs.msgs[i]);
}

Test(case_load, observe_rules)
{
    load_ok(MODEL DATA "[train]\nsteps = 4\n");
    cr_expect_eq(cfg->observe_every, 0);
    cr_expect_eq(cfg->n_observe_steps, 4);
    for (int s = 0; s < 4; s++)
        cr_expect(case_observes_step(cfg, s));
    cr_expect_not(case_observes_step(cfg, 4));
    cr_expect_not(case_observes_step(cfg, -1));

    load_ok(MODEL DATA "[train]\nsteps = 25\n");
    cr_expect_eq(cfg->observe_every, 3);
    cr_expect(case_observes_step(cfg, 0));
    cr_expect(case_observes_step(cfg, 3));
    cr_expect_not(case_observes_step(cfg, 4));
    cr_expect(case_observes_step(cfg, 24));

    load_ok(MODEL DATA "[train]\nsteps = 100\n");
    cr_expect_eq(cfg->observe_every, 10);
    cr_expect(case_observes_step(cfg, 90));
    cr_expect_not(case_observes_step(cfg, 95));
    cr_expect(case_observes_step(cfg, 99));

    load_ok("[case]\nobserve = 50, 1,1 ,0\n" MODEL DATA "[train]\nsteps = 100\n");
    cr_expect_eq(cfg->observe_every, 0);
    cr_assert_eq(cfg->n_observe_steps, 3);
    cr_expect_eq(cfg->observe_steps[0], 0);
    cr_expect_eq(cfg->observe_steps[1], 1);
    cr_expect_eq(cfg->observe_steps[2], 50);
    cr_expect(case_observes_step(cfg, 50));
    cr_expect_not(case_observes_step(cfg, 2));
    cr_expect(case_observes_step(cfg, 99));

    load_ok("[case]\nobserve = all\n" MODEL DATA "[train]\nsteps = 100\n");
    cr_expect(case_observes_step(cfg, 37));

    load_ok("[case]\nobserve = every 7\n" MODEL DATA "[train]\nsteps = 20\n");
    cr_expect(case_observes_step(cfg, 14));
    cr_expect_not(case_observes_step(cfg, 15));
    cr_expect(case_observes_step(cfg, 19));

    load_bad("[case]\nobserve = every 0\n" MODEL DATA, "bad number '0' for observe every", 2);
    load_bad("[case]\nobserve = 0,,2\n" MODEL DATA, "bad value '0,,2' for observe", 2);
    load_bad("[case]\nobserve = 0,3\n" MODEL DATA "[train]\nsteps = 3\n",
             "observe step 3 is past the last step", 2);
}

Test(case_load, paths_relative_to_case_folder)
{
    make_dir("sub");
    make_dir("sub/data");
    write_npy("sub/data/w.npy", DTYPE_FLOAT32, 2, (const int64_t[]){10, 16});
    write_npy("top.npy", DTYPE_FLOAT32, 2, (const int64_t[]){4, 16});
    write_npy("target.npy", DTYPE_FLOAT32, 2, (const int64_t[]){4, 10});
    char abs_path[PATH_MAX], want[PATH_MAX];
    snprintf(abs_path, sizeof abs_path, "%s/target.npy", tmp_dir);
    char text[2 * PATH_MAX];
    snprintf(text, sizeof text,
             MODEL DATA "input = file ../top.npy\ntarget = file %s\n[init]\n"
                        "fc1.weight = file data/w.npy\n[train]\nloss = mse\n",
             abs_path);
    const char *path = write_case("sub/c.case", text);
    cr_assert_eq(load(path), 0, "%s", errs.n ? errs.msgs[0] : "");
    snprintf(want, sizeof want, "%s/sub", tmp_dir);
    cr_expect_str_eq(cfg->dir, want);
    cr_expect_str_eq(cfg->name, "c");
    snprintf(want, sizeof want, "%s/sub/data/w.npy", tmp_dir);
    cr_expect_str_eq(cfg->inits[0].path, want);
    snprintf(want, sizeof want, "%s/sub/../top.npy", tmp_dir);
    cr_expect_str_eq(cfg->input_path, want);
    cr_expect_str_eq(cfg->target_path, abs_path);

    /* relative to the folder of the case file, not the current directory */
    snprintf(text, sizeof text, MODEL DATA "[init]\nfc1.weight = file top.npy\n");
    write_case("sub/d.case", text);
    snprintf(want, sizeof want, "%s/sub/d.case", tmp_dir);
    cr_assert_gt(load(want), 0);
    snprintf(want, sizeof want, "no such file: %s/sub/top.npy", tmp_dir);
    cr_expect_not_null(find_error(want), "%s", errs.msgs[0]);
    make_dir("sub/dir.npy");
    load_bad(MODEL DATA "[init]\nfc1.weight = file sub/dir.npy\n", "is not a regular file", 6);
}

Test(case_load, names)
{
    load_bad("[case]\nname = ..\n" MODEL DATA, "bad case name '..'", 2);
    load_bad("[case]\nname = a/b\n" MODEL DATA, "bad case name 'a/b'", 2);
    load_bad("[case]\nbaseline = t\n" MODEL DATA, "baseline names this case itself", 2);
    load_bad("[model]\n_ok = relu\nfc.1 = linear 4 -> 2\n" DATA "shape = 4\n",
             "bad layer name 'fc.1'", 3);
    cr_assert_gt(load(write_case("bad name.case", MODEL DATA)), 0);
    cr_expect_not_null(find_error(":0: the file name 'bad name.case' is not a case name"));
    load_ok("[case]\nname = fine.name_1-x\n" MODEL DATA);
    cr_expect_str_eq(cfg->name, "fine.name_1-x");
}

Test(case_load, expect_section)
{
    load_ok(MODEL DATA "[expect]\nerror = Attempting to unscale FP16 gradients.\n"
                       "dtype target = int64\n");
    cr_expect_eq(cfg->expects[0].kind, EXPECT_ERROR);
    cr_expect_str_eq(cfg->expects[0].text, "Attempting to unscale FP16 gradients.");
    cr_expect_eq(cfg->expects[1].dt, DTYPE_INT64);
    load_bad(MODEL DATA "[expect]\ndtype = float32\n",
             "expected 'dtype TENSOR', 'saturated OPERAND' or 'error'", 6);
    load_bad(MODEL DATA "[expect]\ndtype a/b = float32\n", "bad tensor name 'a/b'", 6);
}

/* [expect] names the float8 dtypes of [fp8]'s quantized copies and their saturations;
 * params, input_dtype and autocast refuse float8 (tests/bad-cases/84-90 say how) */
#define FP8_CASE                                                                               \
    "[model]\nfc1 = linear 16 -> 16\n[data]\nbatch = 8\n[precision]\nautocast = bfloat16\n"    \
    "[fp8]\nenabled = yes\n"

Test(case_load, expect_float8)
{
    load_ok(FP8_CASE "[expect]\n"
                     "dtype fc1.weight@float8_e4m3fn = float8_e4m3fn\n" /* line 10 */
                     "dtype fc1.out.grad@float8_e5m2 = e5m2\n"
                     "saturated fc1.weight = yes\n"
                     "saturated   fc1.out.grad = no\n");
    cr_assert_eq(cfg->n_expects, 4);
    cr_expect_eq(cfg->expects[0].kind, EXPECT_DTYPE);
    cr_expect_str_eq(cfg->expects[0].tensor, "fc1.weight@float8_e4m3fn");
    cr_expect_eq(cfg->expects[0].dt, DTYPE_FLOAT8_E4M3FN);
    cr_expect_eq(cfg->expects[1].dt, DTYPE_FLOAT8_E5M2);
    cr_expect_eq(cfg->expects[2].kind, EXPECT_SATURATED);
    cr_expect_str_eq(cfg->expects[2].tensor, "fc1.weight");
    cr_expect(cfg->expects[2].saturated);
    cr_expect_eq(cfg->expects[2].line, 12);
    cr_expect_str_eq(cfg->expects[3].tensor, "fc1.out.grad");
    cr_expect_not(cfg->expects[3].saturated);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(case_write_json(cfg, f), 0);
    cr_assert_eq(fclose(f), 0);
    const char *want[] = {
        "{\"kind\": \"dtype\", \"tensor\": \"fc1.weight@float8_e4m3fn\", \"dtype\": "
        "\"float8_e4m3fn\", \"line\": 10}",
        "{\"kind\": \"saturated\", \"tensor\": \"fc1.weight\", \"saturated\": true, "
        "\"line\": 12}",
        "{\"kind\": \"saturated\", \"tensor\": \"fc1.out.grad\", \"saturated\": false, "
        "\"line\": 13}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_not_null(strstr(buf, want[i]), "missing %s in\n%s", want[i], buf);
    free(buf);
    /* every other dtype key refuses float8, saying where float8 belongs */
    load_bad(MODEL DATA "[precision]\nparams = e4m3\n", "(float8_e4m3fn is only the dtype", 6);
    load_bad(MODEL DATA "input_dtype = float8_e5m2\n", "for input_dtype: expected float32", 5);
    load_bad(MODEL DATA "[precision]\nautocast = e5m2\n", "torch.autocast has no float8", 6);
    /* an operand of a layer that [fp8] does not choose, and a misspelt one */
    load_bad(FP8_CASE "layers = fc1\n[expect]\nsaturated fc1.wieght = yes\n",
             "'fc1.wieght' is not a float8 GEMM operand of this case; did you mean 'fc1.weight'?",
             11);
}

Test(case_load, json_output)
{
    write_full_case_files();
    load_ok(full_case);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(case_write_json(cfg, f), 0);
    cr_assert_eq(fclose(f), 0);
    const char *want[] = {
        "\"name\": \"seed000-autocast-fp16-scaler\"",
        "\"baseline\": \"seed000-fp32\"",
        "\"observe\": {\"every\": 100, \"steps\": []}",
        "{\"name\": \"conv\", \"kind\": \"conv2d\", \"line\": 8, \"in\": 3, \"out\": 8, "
        "\"bias\": false, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"dilation\": 1, "
        "\"groups\": 1, \"inputs\": [\"input\"], \"weight_of\": null, \"out_shape\": [8, 8, 8]}",
        "{\"name\": \"act\", \"kind\": \"relu\"",
        "\"kind\": \"linear\", \"line\": 12, \"in\": 64, \"out\": 10, \"bias\": false",
        "\"batch\": 64, \"shape\": [3, 16, 16], \"input\": \"file\"",
        "\"input_dtype\": \"bfloat16\", \"target\": \"file\"",
        "\"params\": \"float16\", \"autocast\": \"bfloat16\", \"loss_in_autocast\": false, "
        "\"master_weights\": true",
        "\"scaler\": {\"enabled\": true, \"init_scale\": 1024.0, \"growth_factor\": 4.0, "
        "\"backoff_factor\": 0.25, \"growth_interval\": 50}",
        "\"loss\": \"cross_entropy\", \"reduction\": \"mean\"",
        "\"optimizer\": {\"kind\": \"adam\", \"options\": {\"lr\": 0.0003, \"betas\": [0.8, "
        "0.99], \"eps\": 1e-06, \"weight_decay\": 0.01, \"amsgrad\": false}}",
        "\"schedule\": {\"kind\": \"cosine\", \"T_max\": 300, \"eta_min\": 1e-05}",
        "\"steps\": 1000, \"seed\": 18446744073709551615",
        "{\"tensor\": \"fc1.weight\", \"path\": \"/tmp/ampscope-case-",
        "{\"kind\": \"dtype\", \"tensor\": \"fc2.out\", \"dtype\": \"float16\", \"line\": 41}",
        "{\"kind\": \"error\", \"text\": null, \"line\": 42}",
        "\"n_sets\": 0\n}\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_not_null(strstr(buf, want[i]), "missing %s in\n%s", want[i], buf);
    free(buf);

    load_ok("[case]\ndescription = say \"hi\" \\ \t tab\n" MODEL DATA
            "[train]\noptimizer = sgd momentum=0.9\n");
    f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(case_write_json(cfg, f), 0);
    cr_assert_eq(fclose(f), 0);
    cr_expect_not_null(strstr(buf, "\"description\": \"say \\\"hi\\\" \\\\ \\u0009 tab\""), "%s",
                       buf);
    cr_expect_not_null(strstr(buf, "\"baseline\": null"));
    cr_expect_not_null(strstr(buf, "\"classes\": 10"));
    cr_expect_not_null(strstr(buf, "{\"kind\": \"sgd\", \"options\": {\"lr\": 0.001, "
                                   "\"weight_decay\": 0.0, \"momentum\": 0.9, \"dampening\": "
                                   "0.0, \"nesterov\": false}}"),
                       "%s", buf);
    free(buf);
}

Test(case_load, err_list_grows)
{
    err_list e = {0};
    for (int i = 0; i < 100; i++)
        err_list_add(&e, "error %d of %s", i, "many");
    cr_assert_eq(e.n, 100);
    cr_expect_str_eq(e.msgs[99], "error 99 of many");
    err_list_free(&e);
    cr_expect_eq(e.n, 0);
    cr_expect_null(e.msgs);
}

/* ---- graph models ---- */

Test(case_load, graph_inputs_resolve_to_earlier_layers)
{
    load_ok("[model]\n"
            "tok  = embedding 10 -> 4 padding_idx=0\n"
            "fc   = linear 4 -> 4\n"
            "gate = linear 4 -> 4 from=tok\n"
            "g    = mul fc gate\n"
            "s    = scale 0.125\n"
            "res  = add tok s\n"
            "head = linear 4 -> 10 bias=no weight=tok.weight\n"
            "[data]\nbatch = 2\nshape = 3\ninput = tokens vocab=7\n");
    cr_assert_eq(cfg->n_layers, 7);
    const int want[7][2] = {{LAYER_INPUT}, {0}, {0}, {1, 2}, {3}, {0, 4}, {5}};
    const int n_in[7] = {1, 1, 1, 2, 1, 2, 1};
    for (int i = 0; i < 7; i++) {
        cr_expect_eq(cfg->layers[i].n_inputs, n_in[i], "layer %d", i);
        for (int k = 0; k < n_in[i]; k++)
            cr_expect_eq(cfg->layers[i].inputs[k], want[i][k], "layer %d input %d: %d", i, k,
                         cfg->layers[i].inputs[k]);
        cr_expect_eq(cfg->layers[i].tied, i == 6 ? 0 : -1, "layer %d", i);
    }
    cr_expect_eq(cfg->layers[0].opt_int[0], 0);      /* padding_idx */
    cr_expect_eq(cfg->layers[4].opt_real[0], 0.125); /* scale's factor, a double */
    /* shapes: [T] ids -> [T, C], linear on the last dim -> [T, V] */
    cr_expect(cfg->layers[0].out_ndim == 2 && cfg->layers[0].out_shape[0] == 3 &&
              cfg->layers[0].out_shape[1] == 4);
    cr_expect(cfg->layers[6].out_ndim == 2 && cfg->layers[6].out_shape[1] == 10);
    cr_expect(cfg->input_tokens && cfg->input == INPUT_TOKENS && cfg->vocab == 7);
    cr_expect_eq(cfg->input_dtype, DTYPE_INT64);
}

Test(case_load, graph_from_input_reads_the_model_s_input)
{
    load_ok("[model]\nfc1 = linear 4 -> 4\nfc2 = linear 4 -> 4 from=input\n"
            "res = add fc1 fc2\n[data]\nbatch = 2\n");
    cr_expect_eq(cfg->layers[0].inputs[0], LAYER_INPUT);
    cr_expect_eq(cfg->layers[1].inputs[0], LAYER_INPUT);
    cr_expect(cfg->layers[2].inputs[0] == 0 && cfg->layers[2].inputs[1] == 1);
    cr_expect_eq(cfg->layers[2].out_shape[0], 4);
}

/* a kind whose signature word is a name-like dtype (`to float16`) with from=: the dtype is
 * its argument, not its input (a one-input kind names its input first only when the line
 * has one word more than its signature: `p = pow x 2.0`) */
Test(case_load, a_signature_word_before_from_is_the_argument_not_the_input)
{
    load_ok("[model]\na = linear 4 -> 4\nb = linear 4 -> 4\nc = to float16 from=a\n"
            "p = pow b 2.0\n[data]\nbatch = 2\n");
    cr_expect_eq(cfg->layers[2].inputs[0], 0);
    cr_expect_eq(cfg->layers[3].inputs[0], 1);
}

Test(case_load, graph_name_errors)
{
    load_bad("[model]\nfc1 = linear 4 -> 4\nfc2 = linear 4 -> 4 from=fc\n[data]\nbatch = 2\n",
             "fc2 = linear 4 -> 4 from=fc: no layer named 'fc'; did you mean 'fc1'?", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4\nres = add fc1 zzz\n[data]\nbatch = 2\n",
             "no layer named 'zzz'; it can read: input, fc1", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4 from=fc2\nfc2 = linear 4 -> 4\n[data]\nbatch = 2\n",
             "layer 'fc2' is defined below this line (line 3)", 2);
    load_bad("[model]\nfc1 = linear 4 -> 4 from=fc1\n[data]\nbatch = 2\n",
             "layer 'fc1' is defined below this line (line 2)", 2);
    load_bad("[model]\nfc1 = linear 4 -> 4\nres = add fc1\n[data]\nbatch = 2\n",
             "expected add A B, then options", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4\nres = add fc1 fc1 from=fc1\n[data]\nbatch = 2\n",
             "add takes its 2 inputs by position", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4 weight=fc0.weight\n[data]\nbatch = 2\n",
             "no layer named 'fc0'", 2);
    load_bad("[model]\nfc1 = linear 4 -> 4\nfc2 = linear 4 -> 4 weight=fc1.bias\n"
             "[data]\nbatch = 2\n",
             "bad value 'fc1.bias' for weight: expected LAYER.weight", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4\nr = relu weight=fc1.weight\n[data]\nbatch = 2\n",
             "relu has no weight to share", 3);
    load_bad("[model]\nfc1 = linear 4 -> 4\ns = scale x\n[data]\nbatch = 2\n",
             "bad number 'x' for factor", 3);
}

Test(case_load, graph_tokens_and_class_targets)
{
    /* [B, T, V] with classes over the last dim */
    load_ok("[model]\ntok = embedding 5 -> 3\nhead = linear 3 -> 5\n"
            "[data]\nbatch = 2\nshape = 4\ninput = tokens vocab=5\ntarget = classes\n");
    /* an int64 file read by an embedding is token ids, checked against its vocabulary */
    int64_t shape[2] = {2, 4};
    write_npy("ids.npy", DTYPE_INT64, 2, shape);
    load_ok("[model]\ntok = embedding 5 -> 3\n"
            "[data]\nbatch = 2\nshape = 4\ninput = file ids.npy\ntarget = randn\n"
            "[train]\nloss = mse\n");
    cr_expect(cfg->input_tokens && cfg->input_dtype == DTYPE_INT64);
    /* a float file is refused there; tokens go only to an embedding */
    write_npy("x.npy", DTYPE_FLOAT32, 2, shape);
    load_bad("[model]\ntok = embedding 5 -> 3\n"
             "[data]\nbatch = 2\nshape = 4\ninput = file x.npy\ntarget = randn\n"
             "[train]\nloss = mse\n",
             "expected int64 class labels", 6);
    load_bad("[model]\nfc = linear 4 -> 3\n"
             "[data]\nbatch = 2\nshape = 4\ninput = tokens vocab=5\n",
             "the input is int64 token ids, which linear does not take", 2);
    load_bad("[model]\ntok = embedding 5 -> 3\n[data]\nbatch = 2\nshape = 4\ninput = tokens\n",
             "input = tokens needs vocab=V", 6);
}
