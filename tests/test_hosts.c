/*
 * test_hosts.c: a distributed case on two hosts, made on this machine as network namespaces
 * (tests/fixtures/hosts/hosts.sh: a bridge and veth pairs, Open MPI's TCP transport between
 * them, its launcher reaching each through that script as its rsh agent, each host with a
 * hostname and a /tmp of its own). Rank 0 runs on a host whose /tmp the launcher cannot
 * see, so the results must reach the launcher without a shared folder. The two-host run's
 * files equal the one-host run's of the same case (timings aside: same_run_file), field by
 * field; a host that cannot be reached is the harness's message naming it, exit 2.
 * Skipped, saying why, where the namespaces cannot be made (not root, no iproute2) and where
 * ampscope was built without MPI. Each test run makes hosts of its own (a network number
 * from its pid, AMPSCOPE_HOSTS_NET), so runs at the same time on one machine do not remove
 * each other's; each mpirun is under `timeout`, so hosts that vanish make a failure, not a
 * hang.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

#define HOSTS_SH "tests/fixtures/hosts/hosts.sh"
/* a two-host run takes seconds; one whose daemons lost their hosts would wait for ever */
#define TIMEOUT "timeout -k 5 60"

static void hosts_down(void) { system(HOSTS_SH " down >/dev/null 2>&1"); }

/* the case and its run's hostfiles in a folder outside /tmp (each host has its own /tmp) */
static const char four_ranks[] = "[case]\nname = four\n"
                                 "[model]\nfc1 = linear 6 -> 4\nrelu = relu\nfc2 = linear 4 -> 3\n"
                                 "[data]\nbatch = 2\ntarget = classes\n"
                                 "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\nsteps = 2\n"
                                 "[distributed]\nworld_size = 4\ncomm = fp16_compress\n"
                                 "allreduce_algorithm = ring\n";

Test(hosts, two_hosts_equal_one_host_and_an_unreachable_host_is_named, .timeout = 120,
     .fini = hosts_down)
{
#ifndef TEST_WITH_MPI
    cr_skip_test("ampscope was built without MPI (make MPI=0)");
#endif
    if (geteuid() != 0)
        cr_skip_test("making network namespaces needs root");
    int net = 1 + (int)(getpid() % 250);
    char num[8];
    snprintf(num, sizeof num, "%d", net);
    setenv("AMPSCOPE_HOSTS_NET", num, 1);
    char why[2048];
    int rc = run_command(HOSTS_SH " up 2>&1", why, sizeof why);
    if (rc != 0)
        cr_skip_test("no hosts made of network namespaces here: %s", why);

    char dir[256], path[512], hostfile[512], bad[512], args[2048], out[8192], text[128];
    snprintf(dir, sizeof dir, "build/test-hosts-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    write_file(dir, "four.case", four_ranks, path, sizeof path);
    snprintf(text, sizeof text, "10.231.%d.1 slots=2\n10.231.%d.2 slots=2\n", net, net);
    write_file(dir, "hostfile", text, hostfile, sizeof hostfile);
    char unreachable[32];
    snprintf(unreachable, sizeof unreachable, "10.231.%d.9", net);
    snprintf(text, sizeof text, "10.231.%d.1 slots=2\n%s slots=2\n", net, unreachable);
    write_file(dir, "unreachable", text, bad, sizeof bad);
    char one[256], two[256];
    make_temp_dir(one, sizeof one); /* the launcher's /tmp: no host sees it */
    make_temp_dir(two, sizeof two);
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    snprintf(args, sizeof args, NO_LEAK_CHECK " %s run %s --device cpu --quiet --out %s 2>&1",
             bin, path, one);
    cr_assert_eq(run_command(args, out, sizeof out), 0, "one host: %s", out);

    /* Open MPI over the namespaces: the agent, TCP on the bridge's addresses */
    char agent[1024], cwd[512];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(agent, sizeof agent, "%s/" HOSTS_SH, cwd);
    setenv("OMPI_MCA_plm_rsh_agent", agent, 1);
    setenv("OMPI_MCA_plm_rsh_no_tree_spawn", "1", 1);
    setenv("OMPI_MCA_routed", "direct", 1);
    char subnet[32];
    snprintf(subnet, sizeof subnet, "10.231.%d.0/24", net);
    setenv("OMPI_MCA_oob_tcp_if_include", subnet, 1);
    setenv("OMPI_MCA_btl_tcp_if_include", subnet, 1);
    setenv("OMPI_MCA_btl", "self,vader,tcp", 1);
    snprintf(args, sizeof args,
             NO_LEAK_CHECK " " TIMEOUT " %s run %s --device cpu --quiet --out %s --hostfile %s 2>&1",
             bin, path, two, hostfile);
    cr_assert_eq(run_command(args, out, sizeof out), 0, "two hosts: %s", out);
    static const char *const files[] = {"tensors.csv", "hist.csv",      "steps.csv",
                                        "memory.csv",  "allreduce.csv", "ranks.csv",
                                        "expect.csv",  "config.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char a[600], b[600], diff[1024];
        snprintf(a, sizeof a, "%s/four/%s", one, files[i]);
        snprintf(b, sizeof b, "%s/four/%s", two, files[i]);
        cr_expect(same_run_file(a, b, diff, sizeof diff), "%s: %s", files[i], diff);
    }
    /* the ranks did run on the two hosts: each rank's rows are there, from both */
    char ranks[600];
    snprintf(ranks, sizeof ranks, "%s/four/ranks.csv", two);
    csv c;
    cr_assert(csv_read(ranks, &c));
    cr_expect_not_null(csv_find(&c, "rank", "3", "step", "1", NULL, NULL));
    csv_free(&c);

    snprintf(args, sizeof args,
             NO_LEAK_CHECK " " TIMEOUT " %s run %s --device cpu --quiet --out %s --hostfile %s 2>&1",
             bin, path, two, bad);
    cr_expect_eq(run_command(args, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "four: Open MPI could not start its daemon on a host of ") != NULL &&
                  strstr(out, unreachable) != NULL,
              "%s", out);
    rm_rf(one);
    rm_rf(two);
    rm_rf(dir);
}
