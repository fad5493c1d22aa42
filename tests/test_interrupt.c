/*
 * test_interrupt.c: signals in the middle of `ampscope run` (the binary, as a user runs it).
 * One signal: the step in progress finishes and the completed steps are kept: steps.csv holds
 * K whole rows, steps 0 to K - 1, K being what summary.csv, report.md and the run's own line
 * say ("interrupted after step K of N"), the case before it is kept, and the exit status is
 * 128 + the signal. Two signals: nothing of the case is kept, its earlier results stay
 * whole. Neither leaves a temporary folder. (A distributed case: tests/test_distributed.c.)
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static const char *ampscope(void)
{
    const char *b = getenv("AMPSCOPE");
    return b ? b : "bin/ampscope";
}

/* argv started with its stdout and stderr into these files (NULL: /dev/null) */
static pid_t spawn(char *const argv[], const char *out_file, const char *err_file)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        freopen(out_file ? out_file : "/dev/null", "w", stdout);
        freopen(err_file ? err_file : "/dev/null", "w", stderr);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int count_rows(const char *path)
{
    csv c;
    if (!csv_read(path, &c))
        return -1;
    int n = c.n_rows;
    csv_free(&c);
    return n;
}

/* a case that runs until it is stopped, however fast the machine */
static const char endless_case[] = "[case]\nname = endless\n"
                                   "[model]\nfc1 = linear 64 -> 256\nrelu = relu\n"
                                   "fc2 = linear 256 -> 10\n"
                                   "[data]\nbatch = 64\ntarget = classes\n"
                                   "[precision]\nparams = float32\nautocast = float16\n"
                                   "[scaler]\n"
                                   "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.01\n"
                                   "steps = 100000000\n";

static void wait_for(const char *path)
{
    for (int i = 0; i < 400 && access(path, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
}

static void expect_no_temporary_folder(const char *out)
{
    DIR *d = opendir(out);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));)
        cr_expect(strncmp(e->d_name, ".tmp-", 5) != 0, "left behind: %s", e->d_name);
    closedir(d);
}

/* K in "interrupted after step K of 100000000 (SIGNAL)" within text, or -1 */
static long steps_said(const char *text, const char *signal)
{
    char want[64];
    snprintf(want, sizeof want, " of 100000000 (%s)", signal);
    const char *p = text ? strstr(text, "interrupted after step ") : NULL;
    char *end;
    long k = p ? strtol(p + strlen("interrupted after step "), &end, 10) : -1;
    return p && strncmp(end, want, strlen(want)) == 0 ? k : -1;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no %s", path);
    char *buf = calloc(1, 1 << 20);
    cr_assert_not_null(buf);
    fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

Test(interrupt, sigterm_keeps_the_completed_steps, .timeout = 120)
{
    char out[256], path[1024], endless[1024], log[1024];
    make_temp_dir(out, sizeof out);
    write_file(out, "endless.case", endless_case, endless, sizeof endless);
    snprintf(log, sizeof log, "%s/stdout.txt", out);
    char *bin = (char *)ampscope();
    /* a small case, then the endless one, interrupted after the small one finished */
    char *argv[] = {bin,   "run", "tests/cases/small-fp32.case", endless, "--out", out,
                    "--device", "cpu", NULL};
    pid_t pid = spawn(argv, log, NULL);
    snprintf(path, sizeof path, "%s/small-fp32/steps.csv", out);
    wait_for(path);
    nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL); /* into the endless case */
    kill(pid, SIGTERM);
    cr_expect_eq(wait_status(pid), 128 + SIGTERM);

    cr_expect_eq(count_rows(path), 1, "the finished case's results are there");
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_not_null(csv_find(&s, "case", "small-fp32", "status", "ok", NULL, NULL));
    char **row = csv_find(&s, "case", "endless", NULL, NULL, NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&s, "status")], "interrupted");
    long k = steps_said(row[csv_col(&s, "error")], "SIGTERM");
    cr_assert_gt(k, 0, "summary.csv's error: %s", row[csv_col(&s, "error")]);
    csv_free(&s);

    /* K whole rows: steps 0 .. K-1, each with its loss and scale */
    snprintf(path, sizeof path, "%s/endless/steps.csv", out);
    csv c;
    cr_assert(csv_read(path, &c));
    cr_expect_eq(c.n_rows, k, "steps.csv has %d rows, summary.csv says %ld", c.n_rows, k);
    for (int i = 0; i < c.n_rows; i++) {
        cr_expect_eq(atol(c.rows[i][csv_col(&c, "step")]), i);
        cr_expect_gt(atof(c.rows[i][csv_col(&c, "loss")]), 0.0, "row %d", i);
        cr_expect_eq(atof(c.rows[i][csv_col(&c, "loss_scale")]), 65536.0, "row %d", i);
    }
    csv_free(&c);
    snprintf(path, sizeof path, "%s/endless/report.md", out);
    char *text = read_text(path);
    cr_expect_eq(steps_said(text, "SIGTERM"), k, "report.md says so");
    free(text);
    text = read_text(log);
    cr_expect_eq(steps_said(text, "SIGTERM"), k, "the run's line says so: %s", text);
    free(text);
    expect_no_temporary_folder(out);
    rm_rf(out);
}

Test(interrupt, a_second_signal_keeps_the_old_results_whole, .timeout = 120)
{
    char out[256], path[1024], endless[1024];
    make_temp_dir(out, sizeof out);
    write_file(out, "endless.case", endless_case, endless, sizeof endless);
    char *bin = (char *)ampscope();
    /* earlier results of the endless case: 5 steps, complete */
    char *first[] = {bin, "run", endless, "--steps", "5", "--out", out, "--device", "cpu", NULL};
    cr_assert_eq(wait_status(spawn(first, NULL, NULL)), 0);
    snprintf(path, sizeof path, "%s/endless/steps.csv", out);
    cr_assert_eq(count_rows(path), 5);
    char *again[] = {bin, "run", endless, "--out", out, "--device", "cpu", "--progress", NULL};
    char progress[1024];
    snprintf(progress, sizeof progress, "%s/progress.txt", out);
    pid_t pid = spawn(again, NULL, progress);
    struct stat st;
    for (int i = 0; i < 400 && (stat(progress, &st) || st.st_size == 0); i++) /* its first step */
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    /* two signals together: a Ctrl-C and a kill (two SIGINTs sent at once would be one);
     * either may be handled first, in two of the process's threads */
    kill(pid, SIGINT);
    kill(pid, SIGTERM);
    int rc = wait_status(pid);
    cr_expect(rc == 128 + SIGINT || rc == 128 + SIGTERM, "exit status %d", rc);
    cr_expect_eq(count_rows(path), 5, "the old results are whole");
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_not_null(csv_find(&s, "case", "endless", "status", "ok", NULL, NULL),
                       "the old row of the endless case stays");
    csv_free(&s);
    expect_no_temporary_folder(out);
    rm_rf(out);
}
