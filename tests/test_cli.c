/*
 * test_cli.c: the command line as a user meets it: exit codes (0 passed, 1 an expectation
 * failed, 2 bad input), file:line messages for bad case files, nothing written for bad
 * input, and --device cuda without a GPU.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

/* runs the binary with args through the shell; stderr+stdout into out; returns the status */
static int run_cli(const char *args, char *out, size_t len)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", bin, args);
    return run_command(cmd, out, len);
}

Test(cli, typo_in_a_key_is_reported_with_file_and_line)
{
    char dir[256], path[512], out[8192], args[1024];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "typo.case", "[model]\nfc = linear 4 -> 2\n[data]\nbatch = 2\nbacth = 3\n",
               path, sizeof path);
    snprintf(args, sizeof args, "check %s", path);
    cr_expect_eq(run_cli(args, out, sizeof out), 2);
    char want[600];
    snprintf(want, sizeof want, "%s:5: unknown key 'bacth' in [data]; did you mean 'batch'?", path);
    cr_expect(strstr(out, want) != NULL, "got: %s", out);
    /* run validates first: nothing is written */
    snprintf(args, sizeof args, "run %s --out %s/results", path, dir);
    cr_expect_eq(run_cli(args, out, sizeof out), 2);
    snprintf(path, sizeof path, "%s/results", dir);
    cr_expect_neq(access(path, F_OK), 0, "results/ was created for an invalid case");
    rm_rf(dir);
}

Test(cli, a_failed_expectation_exits_1_and_says_which)
{
    char dir[256], path[512], out[8192], args[1024];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "wrong.case",
               "[model]\nfc = linear 4 -> 2\n[data]\nbatch = 2\n[expect]\ndtype fc.out = float16\n",
               path, sizeof path);
    snprintf(args, sizeof args, "run %s --out %s/r --device cpu", path, dir);
    cr_expect_eq(run_cli(args, out, sizeof out), 1);
    cr_expect(strstr(out, ":6: expectation failed: dtype fc.out: expected float16, got float32"),
              "got: %s", out);
    rm_rf(dir);
}

Test(cli, device_cuda_without_a_gpu_exits_2)
{
    char err[512], out[8192], dir[256], args[1024];
    backend *gpu = backend_cuda_load(NULL, NULL, err, sizeof err);
    if (gpu) {
        gpu->close(gpu);
        cr_skip_test("a GPU is present");
    }
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --device cuda --out %s", dir);
    cr_expect_eq(run_cli(args, out, sizeof out), 2);
    cr_expect(strstr(out, "no usable CUDA device: ") != NULL, "got: %s", out);
    /* the library itself loaded: what stopped it was the missing GPU, not a link error */
    cr_expect(strstr(out, "undefined symbol") == NULL && strstr(out, "cannot open") == NULL,
              "the CUDA library did not load: %s", out);
    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --device auto --out %s --quiet",
             dir);
    cr_expect_eq(run_cli(args, out, sizeof out), 0);
    cr_expect(strstr(out, "running on the CPU") != NULL, "got: %s", out);
    rm_rf(dir);
}

Test(cli, usage_errors_exit_2_and_help_exits_0)
{
    char out[8192];
    cr_expect_eq(run_cli("--help", out, sizeof out), 0);
    cr_expect(strstr(out, "usage: ampscope run") != NULL);
    cr_expect_eq(run_cli("run tests/cases/small-fp32.case --frobnicate", out, sizeof out), 2);
    cr_expect(strstr(out, "unknown option --frobnicate") != NULL, "got: %s", out);
    cr_expect_eq(run_cli("run tests/cases/small-fp32.case --device tpu", out, sizeof out), 2);
    cr_expect_eq(run_cli("fly", out, sizeof out), 2);
    cr_expect_eq(
        run_cli("run tests/cases/small-fp32.case --device cpu --gpu-math native", out, sizeof out),
        2);
    cr_expect(strstr(out, "--gpu-math native needs the CUDA backend") != NULL, "got: %s", out);
    cr_expect_eq(run_cli("ops", out, sizeof out), 0);
    cr_expect(strstr(out, "linear") && strstr(out, "autocast dtype"), "got: %s", out);
    cr_expect_eq(run_cli("ops --json", out, sizeof out), 0);
    cr_expect(strstr(out, "\"name\": \"linear\", \"aten\": [\"linear\"], \"policy\": "
                          "\"lower_precision_fp\""),
              "got: %s", out);
    cr_expect_eq(run_cli("ops --yaml", out, sizeof out), 2);
    cr_expect(strstr(out, "ops takes only --json") != NULL, "got: %s", out);
}

/* every file in tests/bad-cases/ through the binary: exit 2, its expected message, and the
 * results folder left as it was */
Test(cli, every_bad_case_exits_2_and_leaves_results_untouched, .timeout = 120)
{
    char dir[256], out[16384], args[2048], path[1024], before[4096], after[4096];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args, "run tests/cases/small-fp32.case --out %s/r --device cpu --quiet",
             dir);
    cr_assert_eq(run_cli(args, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/r/summary.csv", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t nb = fread(before, 1, sizeof before - 1, f);
    before[nb] = '\0';
    fclose(f);
    FILE *ls = popen("ls tests/bad-cases/*.case", "r");
    cr_assert_not_null(ls);
    char bad[1024];
    int n = 0;
    while (fgets(bad, sizeof bad, ls)) {
        bad[strcspn(bad, "\n")] = '\0';
        char want[600] = "";
        FILE *c = fopen(bad, "r");
        cr_assert_not_null(c);
        char first[600];
        if (fgets(first, sizeof first, c) && strncmp(first, "# expect-error: ", 16) == 0) {
            snprintf(want, sizeof want, "%s", first + 16);
            want[strcspn(want, "\n")] = '\0';
        }
        fclose(c);
        snprintf(args, sizeof args, "run '%s' --out %s/r --device cpu --quiet", bad, dir);
        cr_expect_eq(run_cli(args, out, sizeof out), 2, "%s", bad);
        cr_expect(strstr(out, want) != NULL, "%s: '%s' not in: %s", bad, want, out);
        n++;
    }
    pclose(ls);
    cr_expect_geq(n, 30);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t na = fread(after, 1, sizeof after - 1, f);
    after[na] = '\0';
    fclose(f);
    cr_expect_str_eq(after, before, "summary.csv changed");
    rm_rf(dir);
}

/* --progress prints progress lines on stderr from the first step (plain lines, no carriage
 * returns, when stderr is not a terminal: the first step, then every 5 s, and the last);
 * --quiet silences them, and the two together are bad usage. (Without either option the
 * lines start once a case has run 2 s, which depends on the machine's speed: not tested.) */
Test(cli, progress_lines_and_quiet, .timeout = 300)
{
    char out[65536], args[1024], dir[256], run[512];
    make_temp_dir(dir, sizeof dir);
    snprintf(run, sizeof run,
             "run cases/long-scaler-sawtooth.case --steps 300 --device cpu --out %s", dir);
    snprintf(args, sizeof args, "%s --progress", run);
    cr_assert_eq(run_cli(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "long-scaler-sawtooth: step 1/300, ") != NULL, "got: %s", out);
    cr_expect(strstr(out, "long-scaler-sawtooth: step 300/300, ") != NULL, "got: %s", out);
    cr_expect(strchr(out, '\r') == NULL, "carriage returns in non-terminal output");
    snprintf(args, sizeof args, "%s --quiet", run);
    cr_assert_eq(run_cli(args, out, sizeof out), 0, "%s", out);
    cr_expect(strstr(out, "step 300/300") == NULL, "--quiet printed progress: %s", out);
    snprintf(args, sizeof args, "%s --quiet --progress", run);
    cr_expect_eq(run_cli(args, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "--quiet and --progress contradict each other") != NULL, "got: %s", out);
    rm_rf(dir);
}

/* --steps N runs N steps, observes each of them (it is applied as train.steps=N, so the
 * observed steps follow), and does not rename the run as a --set does */
Test(cli, steps_option_runs_that_many_steps_under_the_same_name)
{
    char dir[256], path[1024], out[8192], args[1024];
    make_temp_dir(dir, sizeof dir);
    snprintf(args, sizeof args,
             "run tests/cases/small-fp32.case --steps 3 --quiet --device cpu "
             "--out %s",
             dir);
    cr_assert_eq(run_cli(args, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/small-fp32/steps.csv", dir);
    csv c;
    cr_assert(csv_read(path, &c), "no %s", path);
    cr_expect_eq(c.n_rows, 3);
    for (int s = 0; s < c.n_rows; s++)
        cr_expect_eq(atoi(c.rows[s][csv_col(&c, "step")]), s);
    csv_free(&c);
    snprintf(path, sizeof path, "%s/small-fp32/config.csv", dir);
    cr_assert(csv_read(path, &c));
    cr_expect_str_eq(c.rows[0][csv_col(&c, "steps")], "3");
    csv_free(&c);
    snprintf(path, sizeof path, "%s/small-fp32/tensors.csv", dir);
    cr_assert(csv_read(path, &c));
    cr_expect_not_null(csv_find(&c, "step", "2", "tensor", "fc1.weight", NULL, NULL),
                       "step 2 was not observed");
    cr_expect_null(csv_find(&c, "step", "3", NULL, NULL, NULL, NULL));
    csv_free(&c);
    /* with a --set, the variant is named after the --set alone */
    snprintf(args, sizeof args,
             "run tests/cases/small-fp32.case --steps 2 --set train.seed=7 "
             "--quiet --device cpu --out %s",
             dir);
    cr_assert_eq(run_cli(args, out, sizeof out), 0, "%s", out);
    snprintf(path, sizeof path, "%s/small-fp32+train.seed=7/steps.csv", dir);
    cr_assert(csv_read(path, &c), "no %s: %s", path, out);
    cr_expect_eq(c.n_rows, 2);
    cr_expect_str_eq(c.rows[0][csv_col(&c, "case")], "small-fp32+train.seed=7");
    csv_free(&c);
    rm_rf(dir);
}
