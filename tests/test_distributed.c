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
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/distributed.h"
#include "core/npy.h"
#include "distributed/nccl_abi.h"
#include "helpers.h"
#include "case/load.h"

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
    cr_assert_eq(run_command(cmd, out, (size_t)len), 0, "%s: %s", cmd, out);
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
    return run_command(cmd, out, len);
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
/* a float32 or int64 .npy in dir */
static void write_npy(const char *dir, const char *name, dtype dt, int ndim, const int64_t *shape,
                      const void *v)
{
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_assert_eq(npy_write(path, dt, ndim, shape, v, err, sizeof err), 0, "%s", err);
}

/* the amax of tensor `name` at step 0 in a tensors.csv or (rank >= 0) ranks.csv */
static double amax_of(const char *file, const char *name, const char *rank)
{
    csv c;
    cr_assert(csv_read(file, &c), "no %s", file);
    char **row = rank ? csv_find(&c, "tensor", name, "rank", rank, "step", "0")
                      : csv_find(&c, "tensor", name, "step", "0", NULL, NULL);
    cr_assert_not_null(row, "%s: no %s", file, name);
    double a = atof(row[csv_col(&c, "amax")]);
    csv_free(&c);
    return a;
}

/* world_size = 2 over files of batch x 2 samples: rank r takes rows r, r + 2 (the
 * DistributedSampler's stride), so its local gradient is a one-process case's on those rows
 * (the same parameters: rank 0's, the seed's); a contiguous split would give others */
Test(distributed, ranks_take_strided_rows_of_the_data_files, .timeout = 120)
{
    char dir[256], path[512], out[8192], args[1024], file[600], text[1024];
    make_temp_dir(dir, sizeof dir);
    const float x[4][6] = {{1.5f, -2.0f, 0.25f, 1.0f, 0.5f, -1.0f},
                           {-0.5f, 1.0f, 3.0f, -2.5f, 0.75f, 2.0f},
                           {2.5f, 0.5f, -1.5f, 0.125f, -3.0f, 1.25f},
                           {-3.0f, -1.0f, 0.75f, 2.25f, 1.5f, -0.25f}};
    const int64_t y[4] = {0, 2, 1, 2};
    write_npy(dir, "x.npy", DTYPE_FLOAT32, 2, (int64_t[]){4, 6}, x);
    write_npy(dir, "y.npy", DTYPE_INT64, 1, (int64_t[]){4}, y);
    for (int r = 0; r < 2; r++) {
        float xr[2][6];
        memcpy(xr[0], x[r], sizeof xr[0]);
        memcpy(xr[1], x[r + 2], sizeof xr[1]);
        const int64_t yr[2] = {y[r], y[r + 2]};
        char name[32];
        snprintf(name, sizeof name, "x%d.npy", r);
        write_npy(dir, name, DTYPE_FLOAT32, 2, (int64_t[]){2, 6}, xr);
        snprintf(name, sizeof name, "y%d.npy", r);
        write_npy(dir, name, DTYPE_INT64, 1, (int64_t[]){2}, yr);
    }
    static const char model[] = "[model]\nfc1 = linear 6 -> 4\nrelu = relu\nfc2 = linear 4 -> 3\n"
                                "[data]\nbatch = 2\n";
    static const char train[] =
        "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\nsteps = 1\n";
    static const char *const names[] = {"two", "rows0", "rows1"};
    static const char *const files[][2] = {{"x", "y"}, {"x0", "y0"}, {"x1", "y1"}};
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, "%sinput = file %s/%s.npy\ntarget = file %s/%s.npy\n%s%s",
                 model, dir, files[i][0], dir, files[i][1], train,
                 i == 0 ? "[distributed]\nworld_size = 2\n" : "");
        char f[64];
        snprintf(f, sizeof f, "%s.case", names[i]);
        write_file(dir, f, text, path, sizeof path);
        snprintf(args, sizeof args, "run %s --device cpu --quiet --out %s/out", path, dir);
        cr_assert_eq(run_bin("", args, out, sizeof out), 0, "%s: %s", names[i], out);
    }
    static const char *const grads[] = {"fc1.weight.grad", "fc2.weight.grad", "fc2.bias.grad"};
    for (int g = 0; g < 3; g++) {
        snprintf(file, sizeof file, "%s/out/two/ranks.csv", dir);
        double r0 = amax_of(file, grads[g], "0"), r1 = amax_of(file, grads[g], "1");
        snprintf(file, sizeof file, "%s/out/rows0/tensors.csv", dir);
        double s0 = amax_of(file, grads[g], NULL);
        snprintf(file, sizeof file, "%s/out/rows1/tensors.csv", dir);
        double s1 = amax_of(file, grads[g], NULL);
        cr_expect(r0 != r1, "%s: the ranks' rows differ", grads[g]);
        cr_expect_eq(r0, s0, "%s: rank 0 %.9g, rows 0, 2 %.9g", grads[g], r0, s0);
        cr_expect_eq(r1, s1, "%s: rank 1 %.9g, rows 1, 3 %.9g", grads[g], r1, s1);
    }
    rm_rf(dir);
}
#endif

/* at check time the data files hold the global batch: batch x world_size samples */
Test(distributed, data_files_hold_the_global_batch)
{
    char dir[256], path[512], text[1024], err[256];
    make_temp_dir(dir, sizeof dir);
    const float x[4 * 4] = {0};
    snprintf(path, sizeof path, "%s/x.npy", dir);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, 2, (int64_t[]){2, 4}, x, err, sizeof err), 0);
    snprintf(text, sizeof text,
             "[model]\nfc1 = linear 4 -> 2\n[data]\nbatch = 2\ninput = file %s\ntarget = classes\n"
             "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\n"
             "[distributed]\nworld_size = 2\n",
             path);
    write_file(dir, "bad.case", text, path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(path, NULL, 0, cfg, &errs), 1);
    cr_expect(strstr(errs.msgs[0], "bad.case:5: ") != NULL, "%s", errs.msgs[0]);
    cr_expect(strstr(errs.msgs[0], "x.npy: shape 2x4, expected 4x4 (world_size = 2 ranks of "
                                   "batch 2)") != NULL,
              "%s", errs.msgs[0]);
    err_list_free(&errs);
    free(cfg);
    rm_rf(dir);
}

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

#ifdef TEST_MPI_CHECK
/* the float32 values of an .npy file (n of them) */
static float *npy_values(const char *path, int64_t *n)
{
    npy_array a;
    char err[512];
    cr_assert_eq(npy_read(path, &a, NULL, err, sizeof err), 0, "%s", err);
    float *v = malloc(sizeof(float) * (size_t)a.numel);
    cr_assert_not_null(v);
    for (int64_t i = 0; i < a.numel; i++)
        v[i] = load_as_float(a.data, a.dt, i);
    *n = a.numel;
    npy_free(&a);
    return v;
}

/* 4 ranks, DDP in float32, one SGD step: the parameters after it (--dump's DIR/0/) against
 * PyTorch's step on the full batch of 16 samples (tests/references/distributed/ddp_step.py),
 * within 1e-6; once with batch 4 per rank, once with accumulate = 2 micro-batches of 2 (DDP's
 * no_sync: one all-reduce of the accumulated .grad). The step moves some weight by far more
 * than the tolerance, so a wrong reduction or a rank on the wrong rows would fail. */
Test(distributed, ddp_step_equals_pytorchs_full_batch_step, .timeout = 180)
{
    static const char *const params[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    char dir[256], path[512], cwd[512], text[8192], args[2048], out[8192], ref[1200], got[1200];
    make_temp_dir(dir, sizeof dir);
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    for (int acc = 1; acc <= 2; acc++) {
        const char *r = "tests/references/distributed/ddp";
        snprintf(text, sizeof text,
                 "[case]\nname = ddp%d\n"
                 "[model]\nfc1 = linear 6 -> 8\nrelu = relu\nfc2 = linear 8 -> 3\n"
                 "[data]\nbatch = %d\ninput = file %s/%s/x.npy\ntarget = file %s/%s/y.npy\n"
                 "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.5\nsteps = 1\n"
                 "accumulate = %d\n"
                 "[init]\nfc1.weight = file %s/%s/init.fc1.weight.npy\n"
                 "fc1.bias = file %s/%s/init.fc1.bias.npy\n"
                 "fc2.weight = file %s/%s/init.fc2.weight.npy\n"
                 "fc2.bias = file %s/%s/init.fc2.bias.npy\n"
                 "[distributed]\nworld_size = 4\ncomm = ddp\n",
                 acc, 4 / acc, cwd, r, cwd, r, acc, cwd, r, cwd, r, cwd, r, cwd, r);
        char name[32];
        snprintf(name, sizeof name, "ddp%d.case", acc);
        write_file(dir, name, text, path, sizeof path);
        snprintf(args, sizeof args,
                 "run %s --device cpu --quiet --out %s/out --dump %s/dump%d --dump-ranks", path,
                 dir, dir, acc);
        cr_assert_eq(run_bin("", args, out, sizeof out), 0, "accumulate = %d: %s", acc, out);
        double moved = 0;
        /* --dump-ranks: the ranks' own (accumulated) gradients, whose mean the all-reduce is */
        for (int p = 0; p < 4; p++) {
            int64_t n, m;
            snprintf(got, sizeof got, "%s/dump%d/0/%s.grad@allreduce.npy", dir, acc, params[p]);
            float *reduced = npy_values(got, &n);
            double *mean = calloc((size_t)n, sizeof(double));
            for (int k = 0; k < 4; k++) {
                snprintf(got, sizeof got, "%s/dump%d/rank-%d/0/%s.grad.npy", dir, acc, k,
                         params[p]);
                float *g = npy_values(got, &m);
                cr_assert_eq(m, n);
                for (int64_t i = 0; i < n; i++)
                    mean[i] += (double)g[i] / 4;
                free(g);
            }
            for (int64_t i = 0; i < n; i++)
                cr_expect_leq(fabs(mean[i] - (double)reduced[i]), 1e-6,
                              "accumulate = %d: %s.grad[%lld]: the ranks' mean %.9g, reduced %.9g",
                              acc, params[p], (long long)i, mean[i], (double)reduced[i]);
            free(mean), free(reduced);
        }
        for (int p = 0; p < 4; p++) {
            int64_t n_ref, n_got, n_init;
            snprintf(ref, sizeof ref, "%s/step.%s.npy", r, params[p]);
            snprintf(got, sizeof got, "%s/dump%d/0/%s.npy", dir, acc, params[p]);
            float *want = npy_values(ref, &n_ref), *have = npy_values(got, &n_got);
            snprintf(ref, sizeof ref, "%s/init.%s.npy", r, params[p]);
            float *init = npy_values(ref, &n_init);
            cr_assert_eq(n_ref, n_got);
            for (int64_t i = 0; i < n_ref; i++) {
                cr_expect_leq(fabs((double)have[i] - (double)want[i]), 1e-6,
                              "accumulate = %d: %s[%lld]: %.9g, PyTorch %.9g", acc, params[p],
                              (long long)i, (double)have[i], (double)want[i]);
                moved = fmax(moved, fabs((double)want[i] - (double)init[i]));
            }
            free(want), free(have), free(init);
        }
        cr_expect_gt(moved, 1e-3, "the step moves the weights");
    }
    rm_rf(dir);
}
#endif

#ifdef TEST_MPI_CHECK
static const char endless_text[] = "[model]\nfc1 = linear 6 -> 4\nrelu = relu\nfc2 = linear 4 -> 3\n"
                                   "[data]\nbatch = 2\ntarget = classes\n"
                                   "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\n"
                                   "steps = 100000000\n"
                                   "[distributed]\nworld_size = 2\n";

/* `ampscope run CASE --out DIR/out --dump DIR/dump` started in the background */
static pid_t start_endless(const char *dir, const char *case_path)
{
    char out[600], dump[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(dump, sizeof dump, "%s/dump", dir);
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        putenv((char *)NO_LEAK_CHECK);
        execl(bin, bin, "run", case_path, "--device", "cpu", "--quiet", "--out", out, "--dump",
              dump, "--dump-only", "target", (char *)NULL);
        _exit(127);
    }
    /* rank 0 dumps the target once step 0 is done: every rank is then in its steps */
    snprintf(dump, sizeof dump, "%s/dump/init/target.npy", dir);
    for (int i = 0; i < 600 && access(dump, F_OK) != 0; i++)
        usleep(50 * 1000);
    return pid;
}

static int exit_status(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Ctrl-C at the launcher of a 2-rank case: every rank stops after the same step K and rank 0's
 * K steps are kept, as summary.csv says; a second signal ends the ranks and keeps nothing */
Test(distributed, ctrl_c_keeps_every_ranks_completed_steps, .timeout = 120)
{
    char dir[256], path[512], file[600];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "endless.case", endless_text, path, sizeof path);
    pid_t pid = start_endless(dir, path);
    kill(pid, SIGINT);
    cr_assert_eq(exit_status(pid), 128 + SIGINT);
    snprintf(file, sizeof file, "%s/out/summary.csv", dir);
    csv s;
    cr_assert(csv_read(file, &s));
    char **row = csv_find(&s, "case", "endless", "status", "interrupted", NULL, NULL);
    cr_assert_not_null(row);
    long k = -1;
    cr_assert_eq(sscanf(row[csv_col(&s, "error")], "interrupted after step %ld of 100000000 (SIGINT)",
                        &k), 1, "%s", row[csv_col(&s, "error")]);
    csv_free(&s);
    snprintf(file, sizeof file, "%s/out/endless/steps.csv", dir);
    cr_assert(csv_read(file, &s));
    cr_expect_eq(s.n_rows, k, "steps.csv: %d rows, summary.csv: %ld", s.n_rows, k);
    for (int i = 0; i < s.n_rows; i++)
        cr_expect_eq(atol(s.rows[i][csv_col(&s, "step")]), i);
    csv_free(&s);
    snprintf(file, sizeof file, "%s/out/endless/ranks.csv", dir);
    cr_assert(csv_read(file, &s));
    cr_expect_not_null(csv_find(&s, "rank", "1", "step", "0", NULL, NULL), "rank 1's rows too");
    csv_free(&s);

    /* again, with two signals: the results above stay whole */
    char before[8192], after[8192];
    snprintf(file, sizeof file, "%s/out/endless/steps.csv", dir);
    FILE *f = fopen(file, "r");
    size_t n = fread(before, 1, sizeof before - 1, f);
    before[n] = '\0';
    fclose(f);
    snprintf(file, sizeof file, "%s/dump", dir);
    rm_rf(file);
    pid = start_endless(dir, path);
    kill(pid, SIGINT);
    kill(pid, SIGTERM);
    int rc = exit_status(pid);
    cr_expect(rc == 128 + SIGINT || rc == 128 + SIGTERM, "exit status %d", rc);
    snprintf(file, sizeof file, "%s/out/endless/steps.csv", dir);
    f = fopen(file, "r");
    cr_assert_not_null(f);
    n = fread(after, 1, sizeof after - 1, f);
    after[n] = '\0';
    fclose(f);
    cr_expect(strcmp(before, after) == 0, "the earlier results stay whole");
    rm_rf(dir);
}

/* --sweep over a 2-rank case: each variant's values reach the ranks (its steps, both ranks'
 * rows), and the table has a row per variant */
Test(distributed, sweep_runs_each_variant_on_the_ranks, .timeout = 120)
{
    char dir[256], path[512], out[8192], args[1024], file[600];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "two.case", case_text, path, sizeof path);
    snprintf(args, sizeof args, "run %s --device cpu --quiet --out %s/out --sweep train.steps=1,3",
             path, dir);
    cr_assert_eq(run_bin("", args, out, sizeof out), 0, "%s", out);
    for (int steps = 1; steps <= 3; steps += 2) {
        csv c;
        snprintf(file, sizeof file, "%s/out/two+train.steps=%d/steps.csv", dir, steps);
        cr_assert(csv_read(file, &c), "%s", file);
        cr_expect_eq(c.n_rows, steps);
        csv_free(&c);
        snprintf(file, sizeof file, "%s/out/two+train.steps=%d/ranks.csv", dir, steps);
        cr_assert(csv_read(file, &c), "%s", file);
        char last[16];
        snprintf(last, sizeof last, "%d", steps - 1);
        cr_expect_not_null(csv_find(&c, "rank", "1", "step", last, NULL, NULL));
        csv_free(&c);
    }
    csv t;
    snprintf(file, sizeof file, "%s/out/two.sweep/sweep.csv", dir);
    cr_assert(csv_read(file, &t));
    cr_expect_eq(t.n_rows, 2);
    csv_free(&t);
    rm_rf(dir);
}

/* a rank killed with SIGKILL mid-step ends every rank; the message names the signal, exit 2 */
Test(distributed, a_rank_killed_ends_every_rank_with_its_status, .timeout = 120)
{
    char dir[256], path[512], out[8192], args[1024];
    make_temp_dir(dir, sizeof dir);
    write_file(dir, "two.case", case_text, path, sizeof path);
    snprintf(args, sizeof args, "run %s --device cpu --quiet --out %s/out", path, dir);
    cr_expect_eq(run_bin("AMPSCOPE_DISTRIBUTED_FAIL=1:1:kill", args, out, sizeof out), 2, "%s", out);
    cr_expect(strstr(out, "two: mpirun ended with status ") != NULL, "%s", out);
    cr_expect(strstr(out, "rank 1") != NULL && strstr(out, "signal 9") != NULL, "%s", out);
    rm_rf(dir);
}
#endif

/* with accumulate > 1 too, a data file holds accumulate x world_size x batch samples, the
 * layout said at the file's line; hosts = FILE must be a file; the float32 masters' own
 * accumulation is refused with ranks */
Test(distributed, accumulation_with_ranks_at_load_time)
{
    char dir[256], path[512], text[1024], err[256];
    make_temp_dir(dir, sizeof dir);
    const float x[4 * 4] = {0};
    snprintf(path, sizeof path, "%s/x.npy", dir);
    cr_assert_eq(npy_write(path, DTYPE_FLOAT32, 2, (int64_t[]){4, 4}, x, err, sizeof err), 0);
    snprintf(text, sizeof text,
             "[model]\nfc1 = linear 4 -> 2\n[data]\nbatch = 2\ninput = file %s\ntarget = classes\n"
             "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\naccumulate = 2\n"
             "[distributed]\nworld_size = 2\nhosts = no-such-hostfile\n",
             path);
    write_file(dir, "bad.case", text, path, sizeof path);
    case_config *cfg = calloc(1, sizeof *cfg);
    err_list errs = {0};
    cr_assert_eq(case_load(path, NULL, 0, cfg, &errs), 2);
    cr_expect(strstr(errs.msgs[1], "bad.case:13: no such file: ") != NULL &&
                  strstr(errs.msgs[1], "/no-such-hostfile") != NULL,
              "%s", errs.msgs[1]);
    cr_expect(strstr(errs.msgs[0], "bad.case:5: ") != NULL, "%s", errs.msgs[0]);
    cr_expect(strstr(errs.msgs[0], "x.npy: shape 4x4, expected 8x4 (accumulate = 2 micro-batches "
                                   "x world_size = 2 ranks of batch 2: sample i of micro-batch "
                                   "k of rank r is row (k * batch + i) * world_size + r)") != NULL,
              "%s", errs.msgs[0]);
    err_list_free(&errs);
    write_file(dir, "masters.case",
               "[model]\nfc1 = linear 4 -> 2\n[data]\nbatch = 2\ntarget = classes\n"
               "[precision]\nparams = float16\nmaster_weights = yes\n"
               "[train]\nloss = cross_entropy\noptimizer = sgd lr=0.1\naccumulate = 2\n"
               "[distributed]\nworld_size = 2\n",
               path, sizeof path);
    cr_assert_eq(case_load(path, NULL, 0, cfg, &errs), 1);
    cr_expect(strstr(errs.msgs[0], "masters.case:14: world_size > 1 with [train] accumulate > 1 "
                                   "and master weights needs delay_unscale = yes") != NULL,
              "%s", errs.msgs[0]);
    err_list_free(&errs);
    free(cfg);
    rm_rf(dir);
}
