/*
 * test_distributed.c: data parallel cases (harness/distributed*.c): FSDP's predivide
 * factors; the policies' dtypes and divide points against PyTorch's functions on stacked
 * per-rank gradients (tests/references/distributed/policies.csv); the engine's float16,
 * bfloat16 and float32 sums over 2 and 4 ranks, whose roundings are worked out by hand
 * below; a 2-rank case's files; a rank that fails mid-step; the section's errors.
 * The MPI tests skip when ampscope was built without MPI (make MPI=0).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../harness/distributed.h"
#include "../kernels/nccl_allreduce.h"
#include "helpers.h"

Test(distributed, predivide_factor_as_fsdp_computes_it)
{
    /* DefaultState._get_gradient_predivide_factor: doubles while N % f == 0 and N / f > f */
    static const struct {
        int64_t n;
        double f;
    } want[] = {{1, 1}, {2, 2}, {4, 2}, {6, 4}, {8, 4}, {16, 4}, {32, 8}, {64, 8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(distributed_predivide_factor(want[i].n), want[i].f, "N = %lld",
                     (long long)want[i].n);
    comm_plan p = distributed_plan(COMM_FSDP, DTYPE_FLOAT32, DTYPE_FLOAT16, 8);
    cr_expect(p.wire == DTYPE_FLOAT16 && p.prediv == 4 && p.postdiv == 2);
    p = distributed_plan(COMM_FSDP2, DTYPE_FLOAT32, DTYPE_BFLOAT16, 8); /* AVG */
    cr_expect(p.wire == DTYPE_BFLOAT16 && p.premul == 0.125 && p.prediv == 1 && p.postdiv == 1);
    p = distributed_plan(COMM_DDP, DTYPE_FLOAT16, DTYPE_FLOAT32, 4);
    cr_expect(p.wire == DTYPE_FLOAT16 && p.premul == 0.25);
}

static float from_hex(const char *s)
{
    uint32_t u = (uint32_t)strtoul(s, NULL, 16);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

Test(distributed, policies_match_pytorch_on_stacked_ranks)
{
    csv c;
    cr_assert(csv_read("tests/references/distributed/policies.csv", &c));
    int cp = csv_col(&c, "policy"), crd = csv_col(&c, "reduce_dtype"), cg = csv_col(&c, "grad_dtype"),
        cn = csv_col(&c, "world_size"), cr0 = csv_col(&c, "rank0"), cres = csv_col(&c, "result");
    int checked = 0;
    for (int r = 0; r < c.n_rows; r++) {
        char **row = c.rows[r];
        int p = -1;
        for (int k = 0; k < COMM_POLICY_COUNT; k++)
            if (!strcmp(row[cp], comm_policy_names[k]))
                p = k;
        dtype rd, gd;
        cr_assert(p >= 0 && dtype_parse(row[crd], &rd) && dtype_parse(row[cg], &gd));
        int n = atoi(row[cn]);
        comm_plan plan = distributed_plan((comm_policy)p, gd, rd, n);
        float sum = 0;
        for (int k = 0; k < n; k++) {
            float g = from_hex(row[cr0 + k]), w;
            distributed_contribution(&plan, &g, &w, 1);
            sum = k == 0 ? w : distributed_add(sum, w, plan.wire); /* rank 0 first */
        }
        distributed_finish(&plan, gd, &sum, 1);
        float want = from_hex(row[cres]);
        cr_expect(bits(sum) == bits(want) || (sum != sum && want != want),
                  "%s reduce_dtype=%s grad %s N=%d element %s: got %a, PyTorch %a", row[cp],
                  row[crd], row[cg], n, row[csv_col(&c, "element")], (double)sum, (double)want);
        checked++;
    }
    cr_expect_eq(checked, 264);
    csv_free(&c);
}

#ifdef TEST_MPI_CHECK
/* Processes under mpirun run without LeakSanitizer (make test SAN=1): Open MPI keeps
 * allocations past MPI_Finalize in components it has unloaded by then, which no
 * suppression can name; the one-process runs of the other tests check ampscope's own. */
#define NO_LEAK_CHECK "LSAN_OPTIONS=detect_leaks=0"

/* mpirun -np N allreduce_check DTYPE VALUES... with Open MPI's algorithm pinned; rank 0's
 * printed sum */
static void mpi_sum(const char *algorithm, int n, const char *dt, const char *values, char *out,
                    int len)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             NO_LEAK_CHECK " mpirun -np %d %s --oversubscribe --bind-to none --mca coll_tuned_use_dynamic_rules 1 "
             "--mca coll_tuned_allreduce_algorithm %s %s %s %s 2>&1",
             n, geteuid() == 0 ? "--allow-run-as-root" : "", algorithm, TEST_MPI_CHECK, dt,
             values);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t got = fread(out, 1, (size_t)len - 1, p);
    out[got] = '\0';
    cr_assert_eq(pclose(p), 0, "%s: %s", cmd, out);
    out[strcspn(out, "\n")] = '\0';
}

Test(distributed, two_ranks_round_each_pairwise_sum, .timeout = 60)
{
    char out[4096];
    /* float16: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even, 1 (3c00) */
    mpi_sum("1", 2, "float16", "3c00 1000", out, sizeof out);
    cr_expect_str_eq(out, "3c00");
    /* 1 + 2^-11 + 2^-21 (1001 = 2^-11 * (1 + 2^-10)) is above it: 1 + 2^-10 */
    mpi_sum("1", 2, "float16", "3c00 1001", out, sizeof out);
    cr_expect_str_eq(out, "3c01");
    /* bfloat16: 1 + 2^-8, halfway between 1 and 1 + 2^-7: 1 (3f80); a float32 sum keeps it */
    mpi_sum("1", 2, "bfloat16", "3f80 3b80", out, sizeof out);
    cr_expect_str_eq(out, "3f80");
    mpi_sum("1", 2, "float32", "3f800000 3b800000", out, sizeof out);
    cr_expect_str_eq(out, "3f808000");
}

Test(distributed, four_ranks_order_follows_the_pinned_algorithm, .timeout = 60)
{
    char out[4096];
    /* 1 and three times 2^-11, in float16:
     *   basic_linear (a reduce to rank 0 from the last rank down, then a broadcast):
     *     ((x3 + x2) + x1) + x0 = (2^-10 + 2^-11) + 1 = 1 + 1.5 * 2^-10, a tie between
     *     1 + 2^-10 (odd) and 1 + 2^-9 (even): 1 + 2^-9 (3c02)
     *   recursive_doubling: (x0 + x1) + (x2 + x3) = 1 (a tie, to even) + 2^-10: 3c01 */
    mpi_sum("1", 4, "float16", "3c00 1000 1000 1000", out, sizeof out);
    cr_expect_str_eq(out, "3c02");
    mpi_sum("3", 4, "float16", "3c00 1000 1000 1000", out, sizeof out);
    cr_expect_str_eq(out, "3c01");
}

static const char case_text[] = "[model]\nfc1 = linear 6 -> 4\nrelu = relu\nfc2 = linear 4 -> 3\n"
                                "[data]\nbatch = 2\ntarget = classes\n"
                                "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\nsteps = 2\n"
                                "[distributed]\nworld_size = 2\ncomm = fp16_compress\n"
                                "allreduce_algorithm = basic_linear\n";

static int run_bin(const char *env, const char *args, char *out, size_t len)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, NO_LEAK_CHECK " %s %s %s 2>&1", env, bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(distributed, two_rank_case_files_and_a_rank_failing_mid_step, .timeout = 120)
{
    char dir[256], path[512], out[8192], args[1024], file[600];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "two.case", case_text, path, sizeof path);
    snprintf(args, sizeof args, "run %s --device cpu --quiet --out %s/out", path, dir);
    cr_assert_eq(run_bin("", args, out, sizeof out), 0, "%s", out);
    csv c;
    snprintf(file, sizeof file, "%s/out/two/allreduce.csv", dir);
    cr_assert(csv_read(file, &c));
    cr_expect_eq(c.n_rows, 8, "4 parameters, 2 steps");
    char **row = csv_find(&c, "tensor", "fc1.weight.grad@allreduce", "step", "0", NULL, NULL);
    cr_assert_not_null(row);
    cr_expect_str_eq(row[csv_col(&c, "wire_dtype")], "float16");
    cr_expect_str_eq(row[csv_col(&c, "algorithm")], "basic_linear");
    csv_free(&c);
    snprintf(file, sizeof file, "%s/out/two/ranks.csv", dir);
    cr_assert(csv_read(file, &c));
    cr_expect_not_null(csv_find(&c, "rank", "1", "tensor", "fc2.bias.grad", "step", "1"));
    cr_expect_eq(c.n_rows, 16, "2 ranks, 4 parameters, 2 steps");
    csv_free(&c);
    snprintf(file, sizeof file, "%s/out/two/tensors.csv", dir);
    cr_assert(csv_read(file, &c));
    cr_expect_not_null(csv_find(&c, "tensor", "fc2.weight.grad@allreduce", NULL, NULL, NULL, NULL));
    csv_free(&c);

    /* rank 1 fails after its backward of step 1, while rank 0 waits in the all-reduce */
    snprintf(file, sizeof file, "%s/out", dir);
    int before = count_entries(file);
    char old[8192];
    snprintf(file, sizeof file, "%s/out/two/allreduce.csv", dir);
    FILE *f = fopen(file, "r");
    size_t n_old = fread(old, 1, sizeof old - 1, f);
    fclose(f);
    old[n_old] = '\0';
    int rc = run_bin("AMPSCOPE_DISTRIBUTED_FAIL=1:1", args, out, sizeof out);
    cr_expect_eq(rc, 2, "%s", out);
    cr_expect(strstr(out, "two: rank 1: failing at step 1") != NULL, "%s", out);
    snprintf(file, sizeof file, "%s/out", dir);
    cr_expect_eq(count_entries(file), before, "the results folder as it was");
    snprintf(file, sizeof file, "%s/out/two/allreduce.csv", dir);
    f = fopen(file, "r");
    cr_assert_not_null(f);
    char now[8192];
    size_t n_now = fread(now, 1, sizeof now - 1, f);
    fclose(f);
    now[n_now] = '\0';
    cr_expect_str_eq(now, old, "the earlier results kept");
    rm_rf(dir);
}
#endif

Test(distributed, section_errors)
{
    char dir[256], path[512];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "bad.case",
               "[model]\nfc1 = linear 4 -> 2\n[data]\nbatch = 2\ntarget = classes\n"
               "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\n"
               "[distributed]\nworld_size = 2\ncomm = fsdp\nalgorithm = ring\n",
               path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(path, NULL, 0, cfg, &errs), 2);
    cr_expect(strstr(errs.msgs[0], ":11: comm = fsdp needs reduce_dtype=") != NULL, "%s",
              errs.msgs[0]);
    cr_expect(strstr(errs.msgs[1], ":12: unknown key 'algorithm' in [distributed]") != NULL,
              "%s", errs.msgs[1]);
    err_list_free(&errs);
    free(cfg);
    rm_rf(dir);
}

/* lib/libampscope_nccl.so (built where the CUDA toolkit has NCCL) loads, and refuses more
 * ranks than GPUs with the counts; on a GPU machine with fewer than 64 GPUs as well */
Test(distributed, nccl_library_refuses_more_ranks_than_gpus)
{
    void *lib = dlopen("lib/libampscope_nccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        cr_skip_test("no lib/libampscope_nccl.so (no CUDA toolkit with NCCL): %s", dlerror());
    nccl_init_fn init = (nccl_init_fn)dlsym(lib, "ampscope_nccl_init");
    cr_assert_not_null(init);
    unsigned char id[AMPSCOPE_NCCL_ID_BYTES] = {0};
    char err[512] = "";
    cr_expect_eq(init(0, 64, id, err, sizeof err), -1);
    cr_expect(strstr(err, "world_size = 64 needs 64 GPUs for NCCL (one per rank), this machine "
                          "has ") != NULL,
              "%s", err);
}
