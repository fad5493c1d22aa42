/*
 * test_bench.c: tools/gpu_bench.py, the GPU part of `make bench`, where there is no GPU: its
 * --tiny comparison run on the CPU (the harness's steps, observed and not, the floor, and
 * PyTorch's own steps) must write a row per MLP variant and one for the convolution, with
 * positive times, PyTorch's for every row but master weights (which PyTorch has no
 * equivalent of). Skipped when python3 cannot import torch. It checks that the script
 * works, not how fast anything is. Likewise tools/bench_torch.py, PyTorch's CPU step that
 * `make bench` compares with, run by $PYTHON (default python3) on a tiny MLP. And
 * `bin/ampscope-bench counting` ($AMPSCOPE_BENCH), the counting's cost alone: at the
 * processor's best level and as an emulated x86-64 processor (AMPSCOPE_CPU_ISA), its ISA
 * line and a positive figure for each level that runs, "not run here" for the others.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cpu/cpu.h"
#include "helpers.h"

Test(bench, gpu_bench_script_compares_on_the_cpu, .timeout = 300)
{
    if (system("python3 -c 'import torch' 2>/dev/null") != 0)
        cr_skip_test("python3 cannot import torch: tools/gpu_bench.py not checked");
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char out[256], cmd[1024], path[512];
    make_temp_dir(out, sizeof out);
    snprintf(cmd, sizeof cmd,
             "python3 tools/gpu_bench.py --tiny --device cpu --ampscope %s --out %s > %s/log 2>&1",
             bin, out, out);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s/log)", cmd, out);
    snprintf(path, sizeof path, "%s/bench-gpu.csv", out);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    cr_assert_eq(c.n_rows, 4, "one row per MLP variant, one for the convolution");
    static const char *const variants[] = {"fp32", "autocast-fp16-scaler", "autocast-fp16",
                                           "fp16-master-scaler"};
    static const char *const times[] = {"step_ms", "step_ms_observe_off", "floor_ms"};
    for (int v = 0; v < 4; v++) {
        char **row = csv_find(&c, "variant", variants[v], NULL, NULL, NULL, NULL);
        cr_assert_not_null(row, "no row for %s", variants[v]);
        for (int t = 0; t < 3; t++)
            cr_expect_gt(strtod(row[csv_col(&c, times[t])], NULL), 0.0, "%s %s", variants[v],
                         times[t]);
        const char *torch_ms = row[csv_col(&c, "pytorch_ms")];
        if (v < 3)
            cr_expect_gt(strtod(torch_ms, NULL), 0.0, "%s: PyTorch's step", variants[v]);
        else
            cr_expect_str_empty(torch_ms, "master weights have no PyTorch step");
    }
    csv_free(&c);
}

Test(bench, torch_step_script_times_each_variant, .timeout = 120)
{
    const char *py = getenv("PYTHON") ? getenv("PYTHON") : "python3";
    char cmd[1024], out[256], path[512], line[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' 2>/dev/null", py);
    if (system(cmd) != 0)
        cr_skip_test("%s cannot import torch: tools/bench_torch.py not checked", py);
    make_temp_dir(out, sizeof out);
    snprintf(path, sizeof path, "%s/log", out);
    snprintf(cmd, sizeof cmd, "%s tools/bench_torch.py 16 32 10 8 3 > %s 2>&1", py, path);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s)", cmd, path);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static const char *const variants[] = {"fp32", "autocast-bf16"};
    bool seen[2] = {false}, version = false;
    while (fgets(line, sizeof line, f)) {
        char name[64], rest[64];
        double ms;
        if (strncmp(line, "pytorch ", 8) == 0) {
            version = strstr(line, " threads ") != NULL;
            continue;
        }
        cr_assert_eq(sscanf(line, "%63s %63s", name, rest), 2, "unexpected line: %s", line);
        for (int v = 0; v < 2; v++)
            if (strcmp(name, variants[v]) == 0) {
                seen[v] = true;
                if (strcmp(rest, "unsupported") != 0) {
                    cr_expect_eq(sscanf(rest, "%lf", &ms), 1, "%s: %s", name, rest);
                    cr_expect_gt(ms, 0.0, "%s's step time", name);
                }
            }
    }
    fclose(f);
    cr_expect(version, "the PyTorch version and thread count");
    for (int v = 0; v < 2; v++)
        cr_expect(seen[v], "a line for %s", variants[v]);
}

/* `bin/ampscope-bench counting` under env (an environment assignment or ""): its output in
 * buf */
static void run_counting(const char *env, char *buf, size_t len)
{
    const char *bench = getenv("AMPSCOPE_BENCH") ? getenv("AMPSCOPE_BENCH") : "bin/ampscope-bench";
    char out[256], cmd[1024], path[512];
    make_temp_dir(out, sizeof out);
    snprintf(path, sizeof path, "%s/log", out);
    snprintf(cmd, sizeof cmd, "%s %s counting > %s 2>&1", env, bench, path);
    cr_assert_eq(system(cmd), 0, "%s failed (see %s)", cmd, path);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
}

/* the figure `name v` after `level` on the line that starts with dtype d; NAN for "not run
 * here", -1 when absent */
static double level_figure(const char *text, const char *d, const char *level)
{
    char head[64], key[64];
    snprintf(head, sizeof head, "\n  %-9s", d);
    const char *line = strstr(text, head);
    if (!line)
        return -1;
    const char *end = strchr(line + 1, '\n');
    snprintf(key, sizeof key, "  %s ", level);
    const char *at = strstr(line, key);
    if (!at || (end && at > end))
        return -1;
    at += strlen(key);
    return strncmp(at, "not run here", 12) == 0 ? NAN : strtod(at, NULL);
}

Test(bench, counting_mode_prints_each_level_it_runs, .timeout = 300)
{
    static char text[8192];
    static const char *const dtypes[] = {"float16", "bfloat16", "float32"};
    run_counting("", text, sizeof text);
    cr_expect(strncmp(text, "ISA level ", 10) == 0, "the first line names the level: %s", text);
    cr_expect(strstr(text, "(this processor's best)") != NULL, "%s", text);
    for (int d = 0; d < 3; d++) {
        for (int l = 0; l < CPU_ISA_COUNT; l++) {
            double v = level_figure(text, dtypes[d], cpu_isa_name((cpu_isa)l));
            if (cpu_isa_runs((cpu_isa)l))
                cr_expect_gt(v, 0.0, "%s at %s: %s", dtypes[d], cpu_isa_name((cpu_isa)l), text);
            else
                cr_expect(isnan(v), "%s at %s not run: %s", dtypes[d], cpu_isa_name((cpu_isa)l),
                          text);
        }
        cr_expect_gt(level_figure(text, dtypes[d], "cast alone"), 0.0, "%s", text);
    }
    run_counting("AMPSCOPE_CPU_ISA=x86-64", text, sizeof text);
    cr_expect(strstr(text, "ISA level x86-64, set by AMPSCOPE_CPU_ISA: an emulation of") == text,
              "the first line says it emulates: %s", text);
    for (int d = 0; d < 3; d++) {
        cr_expect_gt(level_figure(text, dtypes[d], "x86-64"), 0.0, "%s", text);
        cr_expect(isnan(level_figure(text, dtypes[d], "avx2")), "avx2 not run: %s", text);
        cr_expect(isnan(level_figure(text, dtypes[d], "avx512")), "avx512 not run: %s", text);
    }
}
