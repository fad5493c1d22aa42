/*
 * test_interrupt.c: SIGTERM in the middle of `ampscope run` (the binary, as a user runs it):
 * the finished case's results and summary row are kept, the interrupted case's earlier
 * results stay complete, no temporary folder is left, and the exit status is 128 + 15.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static const char *ampscope(void)
{
    const char *b = getenv("AMPSCOPE");
    return b ? b : "bin/ampscope";
}

static pid_t spawn(char *const argv[])
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
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

Test(interrupt, sigterm_keeps_complete_results, .timeout = 120)
{
    char out[256], path[1024], endless[1024];
    make_temp_dir(out, sizeof out);
    write_file(out, "endless.case", endless_case, endless, sizeof endless);
    char *bin = (char *)ampscope();
    /* earlier results of the endless case: 5 steps, complete */
    char *first[] = {bin, "run", endless, "--steps", "5", "--out", out, "--device", "cpu", NULL};
    cr_assert_eq(wait_status(spawn(first)), 0);
    /* now a small case, then the endless one, interrupted after the small one finished */
    char *second[] = {bin,   "run", "tests/cases/small-fp32.case", endless, "--out", out,
                      "--device", "cpu", NULL};
    pid_t pid = spawn(second);
    snprintf(path, sizeof path, "%s/small-fp32/steps.csv", out);
    for (int i = 0; i < 200 && access(path, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL); /* into the endless case */
    kill(pid, SIGTERM);
    cr_expect_eq(wait_status(pid), 128 + SIGTERM);

    cr_expect_eq(count_rows(path), 1, "the finished case's results are there");
    snprintf(path, sizeof path, "%s/endless/steps.csv", out);
    cr_expect_eq(count_rows(path), 5, "the interrupted case's earlier results are intact");
    snprintf(path, sizeof path, "%s/summary.csv", out);
    csv s;
    cr_assert(csv_read(path, &s));
    cr_expect_not_null(csv_find(&s, "case", "small-fp32", NULL, NULL, NULL, NULL));
    char **row = csv_find(&s, "case", "endless", NULL, NULL, NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&s, "status")], "ok", "the old row of the endless case stays");
    csv_free(&s);
    DIR *d = opendir(out);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));)
        cr_expect(strncmp(e->d_name, ".tmp-", 5) != 0, "left behind: %s", e->d_name);
    closedir(d);
    rm_rf(out);
}
