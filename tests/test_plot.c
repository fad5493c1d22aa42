/*
 * test_plot.c: plot/plot.py draws the CSV files' numbers. Two cases are run into a temporary
 * folder (small-autocast-fp16-scaler, one step, and a 12-step variant whose GradScaler skips
 * steps and changes its scale); plot.py draws them (the PNG files must appear, and only
 * those its rules call for), then prints with --series every array it draws. The test
 * computes the same arrays here from tensors.csv, hist.csv, steps.csv and memory.csv, prints
 * them in the same format (%.17g for non-integers, so equal text means equal doubles), and
 * compares the two sorted lists line by line; the formats' limits it marks must be those
 * of format.h's table, which plot.py reads from `ampscope formats --json` (the binary is
 * $AMPSCOPE, else bin/ampscope, as in test_cli.c). The float8 plots are drawn from the
 * hand-written case folder tests/fixtures/fp8/fp8-fixture (test_report_fp8.c describes it):
 * fp8.csv's scales and amaxes, and the quantized copies' histograms, which hist_grads.png
 * leaves out. Skipped when /usr/bin/python3 has no matplotlib.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/format.h"
#include "helpers.h"

#define PYTHON "/usr/bin/python3"

typedef struct lines {
    char **v;
    int n, cap;
} lines;

static void add_line(lines *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_line(lines *l, const char *fmt, ...)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = realloc(l->v, sizeof *l->v * (size_t)l->cap);
        cr_assert_not_null(l->v);
    }
    va_list ap;
    va_start(ap, fmt);
    cr_assert_geq(vasprintf(&l->v[l->n++], fmt, ap), 0);
    va_end(ap);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_lines(lines *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

static const char *col(const csv *c, char **row, const char *name) { return row[csv_col(c, name)]; }

static bool is_float8_name(const char *name)
{
    dtype dt;
    return dtype_parse(name, &dt) && dtype_is_float8(dt);
}

static bool is_backward_grad(const csv *t, char **row)
{
    const char *role = col(t, row, "role");
    return !strcmp(col(t, row, "pass"), "backward") && col(t, row, "zeros")[0] &&
           (!strcmp(role, "grad_activation") || !strcmp(role, "grad_cast") ||
            !strcmp(role, "grad_param"));
}

/* one (dtype, bin) sum of hist.csv counts */
typedef struct bin_sum {
    char dtype[16], bin[32];
    long count;
} bin_sum;

static void add_bin(bin_sum *s, int *n, const char *dtype, const char *bin, long count)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(s[i].dtype, dtype) && !strcmp(s[i].bin, bin)) {
            s[i].count += count;
            return;
        }
    cr_assert_lt(*n, 4096);
    snprintf(s[*n].dtype, sizeof s[*n].dtype, "%s", dtype);
    snprintf(s[*n].bin, sizeof s[*n].bin, "%s", bin);
    s[(*n)++].count = count;
}

/* The histogram lines of one case: the gradient rows of the first step with any, their
 * hist.csv counts summed by dtype and bin, and the same moved by -log2(scale) when the step
 * scaled its loss. Also the underflow lines of those rows. */
static void expect_hist(const char *out, const char *name, lines *want)
{
    char path[512];
    csv t, h, s;
    snprintf(path, sizeof path, "%s/%s/tensors.csv", out, name);
    cr_assert(csv_read(path, &t));
    long step = -1;
    for (int r = 0; r < t.n_rows && step < 0; r++)
        if (is_backward_grad(&t, t.rows[r]))
            step = atol(col(&t, t.rows[r], "step"));
    cr_assert_geq(step, 0);
    bool scaled = false;
    for (int r = 0; r < t.n_rows; r++) {
        char **row = t.rows[r];
        if (atol(col(&t, row, "step")) != step)
            continue;
        scaled |= !strcmp(col(&t, row, "tensor"), "loss.scaled");
        if (is_backward_grad(&t, row)) {
            long u = atol(col(&t, row, "underflow")), n = atol(col(&t, row, "numel"));
            add_line(want, "underflow %s %s %ld %ld %.17g", name, col(&t, row, "tensor"), u, n,
                     100.0 * (double)u / (double)n);
        }
    }
    double scale = 0;
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    cr_assert(csv_read(path, &s));
    char step_text[32];
    snprintf(step_text, sizeof step_text, "%ld", step);
    char **srow = csv_find(&s, "step", step_text, NULL, NULL, NULL, NULL);
    if (scaled && srow)
        scale = strtod(col(&s, srow, "loss_scale"), NULL);
    csv_free(&s);

    static bin_sum sums[4096];
    int n = 0;
    snprintf(path, sizeof path, "%s/%s/hist.csv", out, name);
    cr_assert(csv_read(path, &h));
    for (int r = 0; r < h.n_rows; r++) {
        char **row = h.rows[r];
        if (atol(col(&h, row, "step")) != step || strcmp(col(&h, row, "pass"), "backward"))
            continue;
        char **tr =
            csv_find(&t, "tensor", col(&h, row, "tensor"), "step", step_text, "pass", "backward");
        if (tr && is_backward_grad(&t, tr) && !is_float8_name(col(&t, tr, "dtype")))
            add_bin(sums, &n, col(&t, tr, "dtype"), col(&h, row, "bin"),
                    atol(col(&h, row, "count")));
    }
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++) {
        const char *b = sums[i].bin;
        bool special = !strcmp(b, "zero") || !strcmp(b, "inf") || !strcmp(b, "nan");
        if (special)
            add_line(want, "hist %s computed %s %s %ld", name, sums[i].dtype, b, sums[i].count);
        else
            add_line(want, "hist %s computed %s %.17g %ld", name, sums[i].dtype, atof(b),
                     sums[i].count);
        if (scale > 0 && special)
            add_line(want, "hist %s divided %s %s %ld", name, sums[i].dtype, b, sums[i].count);
        else if (scale > 0)
            add_line(want, "hist %s divided %s %.17g %ld", name, sums[i].dtype,
                     atof(b) - log2(scale), sums[i].count);
    }
    csv_free(&h);
    csv_free(&t);
}

/* memory.csv's categories that add up to the total, and the total */
static void expect_memory(const char *out, const char *name, lines *want)
{
    static const char *const stacked[] = {"params",          "grads",       "master_params",
                                          "optimizer_state", "activations", "autocast_cache",
                                          "inputs",          "total"};
    char path[512];
    csv m;
    snprintf(path, sizeof path, "%s/%s/memory.csv", out, name);
    cr_assert(csv_read(path, &m));
    for (size_t i = 0; i < sizeof stacked / sizeof stacked[0]; i++) {
        char **row = csv_find(&m, "category", stacked[i], NULL, NULL, NULL, NULL);
        cr_assert_not_null(row, "memory.csv has no %s", stacked[i]);
        add_line(want, "memory %s %s %s %s", name, stacked[i], col(&m, row, "peak_bytes"),
                 col(&m, row, "end_bytes"));
    }
    csv_free(&m);
}

/* steps.csv over the steps, for cases with two steps or more */
static void expect_steps(const char *out, const char *name, bool scaled, lines *want)
{
    char path[512];
    csv s;
    snprintf(path, sizeof path, "%s/%s/steps.csv", out, name);
    cr_assert(csv_read(path, &s));
    for (int r = 0; s.n_rows >= 2 && r < s.n_rows; r++) {
        char **row = s.rows[r], scale[64] = "-";
        if (scaled)
            snprintf(scale, sizeof scale, "%.17g", strtod(col(&s, row, "loss_scale"), NULL));
        add_line(want, "loss_scale %s %s %.17g %s %s", name, col(&s, row, "step"),
                 strtod(col(&s, row, "loss"), NULL), scale, col(&s, row, "skipped"));
    }
    csv_free(&s);
}

/* "limits DTYPE SUBNORMAL NORMAL MAX ZERO": log2 of the limits plot.py marks, from the table;
 * "fp8_limits ..." the same for the quantized copies' formats (float8 and float4) */
static void expect_limits(lines *want)
{
    static const struct {
        dtype dt;
        const char *what;
    } marked[] = {{DTYPE_FLOAT16, "limits"},
                  {DTYPE_BFLOAT16, "limits"},
                  {DTYPE_FLOAT8_E4M3FN, "fp8_limits"},
                  {DTYPE_FLOAT8_E5M2, "fp8_limits"},
                  {DTYPE_FLOAT4_E2M1FN, "fp8_limits"}};
    for (size_t i = 0; i < sizeof marked / sizeof marked[0]; i++) {
        const format_info *f = format_of(marked[i].dt);
        cr_assert_not_null(f);
        add_line(want, "%s %s %d %d %.17g %d", marked[i].what, f->name, f->min_subnormal_exp,
                 f->min_normal_exp, log2((double)f->largest), f->zero_exp);
    }
}

/* fp8.csv's rows, and the hist.csv bins of the counted tensors.csv rows of each operand's
 * quantized copy "<tensor>@<format>" */
static void expect_fp8(const char *out, const char *name, lines *want)
{
    char path[512], copy[256];
    csv p, t, h;
    snprintf(path, sizeof path, "%s/%s/fp8.csv", out, name);
    cr_assert(csv_read(path, &p));
    for (int r = 0; r < p.n_rows; r++) {
        char **row = p.rows[r];
        add_line(want, "fp8_scale %s %s %s %s %.17g %.17g %s %s", name, col(&p, row, "tensor"),
                 col(&p, row, "format"), col(&p, row, "step"), strtod(col(&p, row, "scale"), NULL),
                 strtod(col(&p, row, "amax"), NULL), col(&p, row, "saturated"),
                 col(&p, row, "underflow"));
    }
    snprintf(path, sizeof path, "%s/%s/tensors.csv", out, name);
    cr_assert(csv_read(path, &t));
    snprintf(path, sizeof path, "%s/%s/hist.csv", out, name);
    cr_assert(csv_read(path, &h));
    int n = 0;
    for (int r = 0; r < h.n_rows; r++) {
        char **row = h.rows[r];
        const char *tensor = col(&h, row, "tensor");
        char **tr = csv_find(&t, "tensor", tensor, "step", col(&h, row, "step"), NULL, NULL);
        if (!tr || !col(&t, tr, "zeros")[0])
            continue;
        bool operand = false;
        for (int q = 0; q < p.n_rows && !operand; q++) {
            snprintf(copy, sizeof copy, "%s@%s", col(&p, p.rows[q], "tensor"),
                     col(&p, p.rows[q], "format"));
            operand = !strcmp(copy, tensor);
        }
        if (!operand)
            continue;
        add_line(want, "fp8_hist %s %s %s %s %s", name, tensor, col(&h, row, "step"),
                 col(&h, row, "bin"), col(&h, row, "count"));
        n++;
    }
    cr_expect_gt(n, 0);
    csv_free(&h);
    csv_free(&t);
    csv_free(&p);
}

/* plot.py --series on out, sorted into got, against want sorted, line by line */
static void expect_series(const char *bin, const char *out, lines *want, lines *got)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, PYTHON " plot/plot.py --ampscope %s --series %s", bin, out);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, p) > 0) {
        line[strcspn(line, "\n")] = '\0';
        add_line(got, "%s", line);
    }
    free(line);
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);

    qsort(want->v, (size_t)want->n, sizeof *want->v, cmp_str);
    qsort(got->v, (size_t)got->n, sizeof *got->v, cmp_str);
    cr_expect_eq(got->n, want->n, "plot.py printed %d values, the CSV files give %d", got->n,
                 want->n);
    for (int i = 0; i < got->n && i < want->n; i++)
        cr_expect_str_eq(got->v[i], want->v[i]);
}

static bool is_png(const char *path)
{
    unsigned char sig[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t got = fread(sig, 1, sizeof sig, f);
    cr_assert_eq(fclose(f), 0);
    return got == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
}

Test(plot, draws_the_numbers_of_the_csv_files, .timeout = 300)
{
    if (system(PYTHON " -c 'import matplotlib, numpy' 2>/dev/null") != 0)
        cr_skip_test(PYTHON " has no matplotlib or numpy (apt-get install python3-matplotlib)");
    char out[256], path[768], cmd[1024];
    make_temp_dir(out, sizeof out);
    case_result res;
    run_case_file("tests/cases/small-autocast-fp16-scaler.case", out, &res, NULL);
    write_file(out, "multi.case",
               "[case]\nname = multi\n[model]\nfc1 = linear 16 -> 32\nrelu = relu\n"
               "fc2 = linear 32 -> 32\nfc3 = linear 32 -> 8\n[data]\nbatch = 4\ninput = randn\n"
               "target = classes\n[precision]\nautocast = float16\n[scaler]\n"
               "init_scale = 1048576\ngrowth_interval = 3\n[train]\nloss = cross_entropy\n"
               "optimizer = adam lr=1e-3\nsteps = 12\n",
               path, sizeof path);
    run_case_file(path, out, &res, NULL);

    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(cmd, sizeof cmd, PYTHON " plot/plot.py --ampscope %s %s", bin, out);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    static const char *const pngs[] = {"small-autocast-fp16-scaler/hist_grads.png",
                                       "small-autocast-fp16-scaler/memory.png",
                                       "multi/hist_grads.png",
                                       "multi/memory.png",
                                       "multi/loss_scale.png",
                                       "memory.png",
                                       "underflow.png"};
    for (size_t i = 0; i < sizeof pngs / sizeof pngs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", out, pngs[i]);
        cr_expect(is_png(path), "%s is not a PNG file", path);
    }
    snprintf(path, sizeof path, "%s/small-autocast-fp16-scaler/loss_scale.png", out);
    cr_expect(access(path, F_OK) != 0, "a one-step case has no loss_scale.png");

    lines want = {0}, got = {0};
    expect_hist(out, "small-autocast-fp16-scaler", &want);
    expect_hist(out, "multi", &want);
    expect_memory(out, "small-autocast-fp16-scaler", &want);
    expect_memory(out, "multi", &want);
    expect_steps(out, "small-autocast-fp16-scaler", true, &want);
    expect_steps(out, "multi", true, &want);
    expect_limits(&want);

    expect_series(bin, out, &want, &got);
    /* the multi-step case really changed its scale and skipped steps */
    int skipped = 0;
    for (int i = 0; i < want.n; i++)
        skipped +=
            !strncmp(want.v[i], "loss_scale multi ", 17) && want.v[i][strlen(want.v[i]) - 1] == '1';
    cr_expect_gt(skipped, 0);
    free_lines(&want);
    free_lines(&got);
    rm_rf(out);
}

Test(plot, draws_the_float8_scales_and_copies_of_the_fixture, .timeout = 120)
{
    if (system(PYTHON " -c 'import matplotlib, numpy' 2>/dev/null") != 0)
        cr_skip_test(PYTHON " has no matplotlib or numpy (apt-get install python3-matplotlib)");
    char out[256], dir[512], src[512], path[768], cmd[1024];
    make_temp_dir(out, sizeof out);
    snprintf(dir, sizeof dir, "%s/fp8-fixture", out);
    cr_assert_eq(mkdir(dir, 0700), 0);
    static const char *const files[] = {"tensors.csv", "steps.csv", "memory.csv", "hist.csv",
                                        "fp8.csv"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(src, sizeof src, "tests/fixtures/fp8/fp8-fixture/%s", files[i]);
        FILE *f = fopen(src, "r");
        cr_assert_not_null(f, "cannot read %s", src);
        char *text = NULL;
        size_t cap = 0;
        cr_assert_gt(getdelim(&text, &cap, '\0', f), 0);
        cr_assert_eq(fclose(f), 0);
        write_file(dir, files[i], text, path, sizeof path);
        free(text);
    }
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(cmd, sizeof cmd, PYTHON " plot/plot.py --ampscope %s %s", bin, out);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    static const char *const pngs[] = {"fp8_hist.png", "fp8_scale.png", "hist_grads.png",
                                       "loss_scale.png", "memory.png"};
    for (size_t i = 0; i < sizeof pngs / sizeof pngs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, pngs[i]);
        cr_expect(is_png(path), "%s is not a PNG file", path);
    }

    lines want = {0}, got = {0};
    expect_hist(out, "fp8-fixture", &want);
    expect_memory(out, "fp8-fixture", &want);
    expect_steps(out, "fp8-fixture", false, &want);
    expect_limits(&want);
    expect_fp8(out, "fp8-fixture", &want);
    expect_series(bin, out, &want, &got);
    /* the gradient histogram left the float8 copies out; the underflow table kept them */
    int f8_hist = 0, f8_underflow = 0;
    for (int i = 0; i < got.n; i++) {
        f8_hist += !strncmp(got.v[i], "hist ", 5) && strstr(got.v[i], "float8") != NULL;
        f8_underflow += !strncmp(got.v[i], "underflow fp8-fixture fc.out.grad@float8_e5m2 ", 46);
    }
    cr_expect_eq(f8_hist, 0);
    cr_expect_eq(f8_underflow, 1);
    free_lines(&want);
    free_lines(&got);
    rm_rf(out);
}
