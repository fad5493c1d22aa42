/*
 * bench.c: `make bench`, the performance benchmark (not a test: it prints figures and
 * ratios and never fails on speed). For each configuration it runs real training steps
 * through the harness, in a child process of its own (so its peak resident memory is its
 * own), and measures in the same run the floor the step cannot go below:
 *   - the step's GEMMs (forward, backward input, backward weight) as plain float32
 *     cblas_sgemm calls of the same shapes (convolutions as their im2col GEMMs),
 *   - plus the bytes the optimizer, the unavoidable casts and the GradScaler must read and
 *     write, divided by this machine's copy bandwidth (measured on both cores).
 * Step times are taken over the steps after the first (a warm-up), in BENCH_ROUNDS rounds of
 * observed run, unobserved run and floor; ratios compare the fastest step with the floor,
 * itself the fastest of its runs, because interference on a shared machine only ever adds
 * time (the lowest median is printed beside). Observation overhead is the fastest step with
 * every tensor counted and histogrammed against the fastest with `--observe off`.
 * Beside: the copy bandwidth; what counting costs per value on one thread, for each ISA
 * level the processor runs (counting_cost, counting_levels); instructions per step of a
 * reduced step, observed and not, which do not depend on the machine's load (perf stat where
 * the kernel allows it, else callgrind: instruction_counts); and PyTorch's own CPU step on
 * the same MLP (tools/bench_torch.py) where the python given imports torch.
 * Graph models (graph_rows): the GPT-2 block, ResNet block and Llama block cases in float32 and
 * under autocast bfloat16, each run by BIN observed and with --observe off and then by
 * PyTorch's own CPU step on the same model, parameters and batch (tools/bench_torch.py
 * --case), one after the other in one run, with the run's GEMMs by path (config.csv).
 * Output: tables on stdout, results/bench.csv, results/bench.md (the tables in Markdown).
 *
 * Usage: bin/ampscope-bench [quick|all|counting|graph] [--python PY] [--ampscope BIN]
 *   quick: the scaled-down MLP and the scaling table; counting: the counting's cost only
 *   (a few seconds, stdout only, nothing written); graph: the graph models' rows only
 *   (stdout and results/bench-graph.md); PY: the python that runs PyTorch's
 *   steps (default python3); BIN: the harness run for the instruction counts (default
 *   bin/ampscope)
 */
#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ops/backend.h"
#include "ops/cpu/cpu.h"
#include "config/case.h"
#include "results/csv_table.h"
#include "core/libenv.h"
#include "results/results.h"
#include "train/train.h"
#include "case/load.h"

typedef struct bench_case {
    const char *group;              /* mlp | q000 | q003 | scaling */
    const char *variant;            /* fp32 | autocast-fp16-scaler | fp16-master-scaler */
    int64_t in, hidden, out, batch; /* MLP: in-hidden-hidden-out */
    bool conv;                      /* question 003's convolution instead */
    int steps;                      /* warm-up included */
} bench_case;

typedef struct bench_row {
    double step_ms, step_median_ms, step_off_ms, gemm_ms, bytes_ms;
    double rss_mib, account_mib, workspace_mib;
} bench_row;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* copy bandwidth in bytes/ms over both cores (read + write counted) */
static double copy_bandwidth(void)
{
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        fprintf(stderr, "bench: out of memory\n");
        exit(2);
    }
    memset(a, 1, n), memset(b, 2, n);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ms();
#pragma omp parallel for schedule(static)
        for (int k = 0; k < 64; k++)
            memcpy(b + (size_t)k * (n / 64), a + (size_t)k * (n / 64), n / 64);
        double bw = 2.0 * (double)n / (now_ms() - t0);
        best = bw > best ? bw : best;
    }
    free(a), free(b);
    return best;
}

/* the fastest of five runs of one float32 GEMM of these shapes: a floor is a lower bound,
 * and the minimum is what this noisy machine's interference leaves alone */
static double sgemm_ms(int64_t m, int64_t n, int64_t k, bool ta, bool tb)
{
    float *a = calloc((size_t)(m * k), 4), *b = calloc((size_t)(k * n), 4),
          *c = calloc((size_t)(m * n), 4);
    if (!a || !b || !c) {
        fprintf(stderr, "bench: out of memory for a %lldx%lldx%lld GEMM\n", (long long)m,
                (long long)n, (long long)k);
        exit(2);
    }
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now_ms();
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (blasint)m, (blasint)n, (blasint)k, 1.0f, a, (blasint)(ta ? m : k), b,
                    (blasint)(tb ? k : n), 0.0f, c, (blasint)n);
        t[r] = now_ms() - t0;
    }
    free(a), free(b), free(c);
    qsort(t, 5, sizeof t[0], cmp_double);
    return t[0];
}

/* the GEMMs of one training step */
static double gemm_floor(const bench_case *b)
{
    /* the convolution per sample: [64, 27] x [27, 555*555], its weight gradient alike (x
     * needs no gradient) */
    if (b->conv) {
        int64_t hw = 555 * 555;
        return 40 * (sgemm_ms(64, hw, 27, false, false) + sgemm_ms(64, 27, hw, false, true));
    }
    int64_t dims[4] = {b->in, b->hidden, b->hidden, b->out};
    double ms = 0;
    for (int l = 0; l < 3; l++) {
        int64_t i = dims[l], o = dims[l + 1];
        ms += sgemm_ms(b->batch, o, i, false, true); /* forward */
        ms += sgemm_ms(o, i, b->batch, true, false); /* weight gradient */
        if (l > 0)
            ms += sgemm_ms(b->batch, i, o, false, false); /* input gradient */
    }
    return ms;
}

/* bytes the optimizer, casts and scaler must move per step, by variant; for the
 * convolution also its float16 activation passes, per output element: the conv writes it
 * (2), mse reads it and the target and writes the loss (6), mean reads that (2), mse's
 * backward reads output and target and writes the gradient (6), the bias gradient reads
 * it (2): 18 bytes */
static double floor_bytes(const bench_case *b)
{
    if (b->conv)
        return (double)b->batch * 64 * 555 * 555 * 18 + (64 * 27 + 64) * 4 * 5;
    double p = (double)(b->in * b->hidden + b->hidden * b->hidden + b->hidden * b->out +
                        2 * b->hidden + b->out);
    if (strcmp(b->variant, "fp32") == 0)
        return p * 7 * 4; /* Adam: read p, g, m, v; write p, m, v */
    if (strcmp(b->variant, "autocast-fp16-scaler") == 0)
        return p * (7 * 4 + 6 + 6 + 8); /* + weight cast down, grad cast up, unscale */
    return p * (7 * 4 + 6 + 8 + 6);     /* master: grad copy up, unscale, refresh the half */
}

static const char *case_text(const bench_case *b, char *buf, size_t len)
{
    const char *prec =
        strcmp(b->variant, "fp32") == 0 ? "params = float32\n"
        : strcmp(b->variant, "autocast-fp16-scaler") == 0
            ? "params = float32\nautocast = float16\n[scaler]\n"
            : "params = float16\nautocast = float16\nmaster_weights = yes\n[scaler]\n";
    if (b->conv)
        snprintf(buf, len,
                 "[case]\nname = bench\n[model]\nlayer1 = conv2d 3 -> 64 kernel=3 padding=1\n"
                 "[data]\nbatch = 40\nshape = 3x555x555\ninput_dtype = float16\n"
                 "target = randn_like\n[precision]\nparams = float32\nautocast = float16\n"
                 "loss_in_autocast = no\n[train]\nloss = mse reduction=none\n"
                 "optimizer = rmsprop lr=3e-5 alpha=0.99 eps=1e-7\nsteps = %d\n",
                 b->steps);
    else
        snprintf(buf, len,
                 "[case]\nname = bench\nobserve = all\n[model]\nfc1 = linear %lld -> %lld\n"
                 "relu = relu\nfc2 = linear %lld -> %lld\nfc3 = linear %lld -> %lld\n"
                 "[data]\nbatch = %lld\n[precision]\n%s[train]\noptimizer = adam lr=1e-3\n"
                 "steps = %d\n",
                 (long long)b->in, (long long)b->hidden, (long long)b->hidden, (long long)b->hidden,
                 (long long)b->hidden, (long long)b->out, (long long)b->batch, prec, b->steps);
    return buf;
}

/* the fastest and the median step time after the warm-up, from steps.csv */
static void step_times(const run_record *rec, double *fastest, double *median)
{
    double v[64];
    int n = 0;
    for (int64_t r = 1; r < rec->n_steps && n < 64; r++) /* after the warm-up step */
        v[n++] = rec->steps[r].step_ms;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *fastest = n ? v[0] : NAN;
    *median = n ? v[n / 2] : NAN;
}

/* Each configuration runs observed, unobserved and its floor this many times in turn, and
 * keeps the fastest of each: a slow spell of this shared machine then spoils at most one
 * round of the three together. */
#define BENCH_ROUNDS 2

/* one run of the case in this process; lowers the row's step times to its own when faster,
 * fills memory */
static void run_once(const bench_case *b, bool observe_off, bench_row *row)
{
    char dir[] = "/tmp/ampscope-bench-XXXXXX", path[4096], text[2048];
    if (!mkdtemp(dir))
        exit(2);
    snprintf(path, sizeof path, "%s/bench.case", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(case_text(b, text, sizeof text), f) < 0 || fclose(f))
        exit(2);
    static case_config cfg;
    err_list errs = {0};
    if (case_load(path, NULL, 0, &cfg, &errs)) {
        fprintf(stderr, "bench: %s\n", errs.msgs[0]);
        exit(2);
    }
    mem_account account = {0};
    backend *be = backend_cpu_open(&account);
    train_options opt = {.quiet = true, .observe_off = observe_off};
    run_record *rec = record_new();
    if (!rec)
        exit(2);
    const case_result *res = &rec->result;
    if (train_case(&cfg, be, &opt, rec) || !res->ok) {
        fprintf(stderr, "bench: %s\n", res->error);
        exit(2);
    }
    double fastest, median;
    step_times(rec, &fastest, &median);
    if (observe_off) {
        row->step_off_ms = fmin(row->step_off_ms, fastest);
    } else {
        row->step_ms = fmin(row->step_ms, fastest);
        row->step_median_ms = fmin(row->step_median_ms, median);
        row->account_mib = (double)res->peak_bytes / 1048576.0;
        row->workspace_mib = (double)res->workspace_peak_bytes / 1048576.0;
    }
    record_free(rec);
    results_discard(dir);
    be->close(be);
}

/* What counting costs: a cast of CPU_COUNT_N float32 values to float16 (in cache, on one
 * thread: below the size the ops share among threads) with its counts and histogram
 * (out[0]) and without (out[1]), in ns per element, each the fastest of five loops. The
 * values are a sine under a decaying exponential: about twenty octaves, zeros among them. */
#define CPU_COUNT_N 4096
static void counting_cost(const void *arg, void *result)
{
    (void)arg;
    double *out = result;
    mem_account account = {0};
    backend *be = backend_cpu_open(&account);
    tensor_pool pool = {.be = be, .account = &account};
    char err[256];
    int64_t shape[1] = {CPU_COUNT_N};
    tensor *src =
        be ? tensor_new(&pool, "src", DTYPE_FLOAT32, 1, shape, MEM_ACTIVATIONS, err, sizeof err)
           : NULL;
    tensor *dst =
        src ? tensor_new(&pool, "dst", DTYPE_FLOAT16, 1, shape, MEM_ACTIVATIONS, err, sizeof err)
            : NULL;
    if (!dst) {
        fprintf(stderr, "bench: cannot set up the counting measurement\n");
        exit(2);
    }
    for (int i = 0; i < CPU_COUNT_N; i++)
        ((float *)src->data)[i] = (float)(1e-3 * sin(0.37 * i) * exp(-0.1 * (i % 97)));
    static round_stats st;
    enum { LOOPS = 5, REPS = 20000 };
    for (int k = 0; k < 2; k++) {
        out[k] = INFINITY;
        for (int l = 0; l < LOOPS; l++) {
            round_stats_init(&st);
            double t0 = now_ms();
            for (int r = 0; r < REPS; r++)
                if (be->cast(be, src, dst, k == 0 ? &st : NULL)) {
                    fprintf(stderr, "bench: cast: %s\n", be->err);
                    exit(2);
                }
            double ns = (now_ms() - t0) * 1e6 / ((double)REPS * CPU_COUNT_N);
            out[k] = ns < out[k] ? ns : out[k];
        }
    }
    tensor_pool_clear(&pool);
    be->close(be);
}

/* What counting costs at each ISA level (out: count_levels): cpu_store_at of CPU_COUNT_N values
 * (counting_cost's) into each stored dtype, in ns per value, each the fastest of five loops;
 * the cast alone (no stats) beside; NAN for a level this processor does not run. */
static const dtype count_dtypes[3] = {DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32};
typedef struct count_levels {
    double counted[3][CPU_ISA_COUNT], cast[3];
} count_levels;

static double store_ns(cpu_isa isa, const float *src, void *dst, dtype dt, round_stats *st)
{
    enum { LOOPS = 5, REPS = 20000 };
    double best = INFINITY;
    for (int l = 0; l < LOOPS; l++) {
        if (st)
            round_stats_init(st);
        double t0 = now_ms();
        for (int r = 0; r < REPS; r++)
            cpu_store_at(isa, src, dst, dt, 0, CPU_COUNT_N, st);
        best = fmin(best, (now_ms() - t0) * 1e6 / ((double)REPS * CPU_COUNT_N));
    }
    return best;
}

static void counting_levels(const void *arg, void *result)
{
    (void)arg;
    count_levels *out = result;
    static float src[CPU_COUNT_N];
    static uint32_t dst[CPU_COUNT_N];
    static round_stats st;
    for (int i = 0; i < CPU_COUNT_N; i++) /* counting_cost's values */
        src[i] = (float)(1e-3 * sin(0.37 * i) * exp(-0.1 * (i % 97)));
    for (int d = 0; d < 3; d++) {
        out->cast[d] = store_ns(cpu_isa_best(), src, dst, count_dtypes[d], NULL);
        for (int l = 0; l < CPU_ISA_COUNT; l++)
            out->counted[d][l] = cpu_isa_runs((cpu_isa)l)
                                     ? store_ns((cpu_isa)l, src, dst, count_dtypes[d], &st)
                                     : NAN;
    }
}

/* the per-level table, on stdout and in Markdown (md: NULL for stdout only) */
static void print_levels(const count_levels *c, FILE *md)
{
    printf("counting per ISA level (one thread, in cache, %d values, ns per value: counts and "
           "histogram, cast alone)\n",
           CPU_COUNT_N);
    if (md) {
        fprintf(md,
                "Counting per ISA level (one thread, in cache, %d values; ns per value of the "
                "store with its counts and histogram, and of the cast alone):\n\n| stored as |",
                CPU_COUNT_N);
        for (int l = CPU_ISA_COUNT - 1; l >= 0; l--)
            fprintf(md, " %s |", cpu_isa_name((cpu_isa)l));
        fprintf(md, " cast alone |\n|---|");
        for (int l = 0; l <= CPU_ISA_COUNT; l++)
            fprintf(md, "---:|");
        fprintf(md, "\n");
    }
    for (int d = 0; d < 3; d++) {
        printf("  %-9s", dtype_name(count_dtypes[d]));
        if (md)
            fprintf(md, "| %s |", dtype_name(count_dtypes[d]));
        for (int l = CPU_ISA_COUNT - 1; l >= 0; l--) {
            double v = c->counted[d][l];
            if (isnan(v))
                printf("  %s not run here", cpu_isa_name((cpu_isa)l));
            else
                printf("  %s %.3f", cpu_isa_name((cpu_isa)l), v);
            if (md && isnan(v))
                fprintf(md, " not run here |");
            else if (md)
                fprintf(md, " %.3f |", v);
        }
        printf("  cast alone %.3f\n", c->cast[d]);
        if (md)
            fprintf(md, " %.3f |\n", c->cast[d]);
    }
    if (md)
        fprintf(md, "\n");
}

static void copy_bandwidth_into(const void *arg, void *out)
{
    (void)arg;
    *(double *)out = copy_bandwidth();
}

/* One configuration, observed and not, each BENCH_ROUNDS times (arg: the bench_case, out:
 * its bench_row). */
static void measure_rounds(const void *arg, void *out)
{
    const bench_case *b = arg;
    bench_row r = {.step_ms = INFINITY,
                   .step_median_ms = INFINITY,
                   .step_off_ms = INFINITY,
                   .gemm_ms = INFINITY};
    for (int round = 0; round < BENCH_ROUNDS; round++) {
        run_once(b, false, &r);
        if (round == 0) { /* the observed run's peak: the off run holds less */
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            r.rss_mib = (double)ru.ru_maxrss / 1024.0;
        }
        run_once(b, true, &r);
        r.gemm_ms = fmin(r.gemm_ms, gemm_floor(b));
    }
    *(bench_row *)out = r;
}

/*
 * Instructions per step: figures that do not depend on the machine's load, beside the
 * timings. A reduced step (the MLP INSN_IN-INSN_HIDDEN-INSN_HIDDEN-INSN_OUT, batch 256 as the
 * benchmark's, on one thread: OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1) run by
 * bin/ampscope with every tensor observed and with `--observe off`, each for one step and for two:
 * the difference is the second step's instructions, without the start-up and the first step's
 * allocations. Counted by `perf stat -e instructions` where the kernel gives perf the counter, else
 * by valgrind's callgrind, which emulates no AVX-512: the processor it shows has AVX2, so the
 * counting runs its AVX2 build (and OpenBLAS its Haswell kernels, which bin/ampscope would choose
 * for such a processor).
 */
#define INSN_IN 256
#define INSN_HIDDEN 256
#define INSN_OUT 100
typedef enum insn_tool { INSN_NONE, INSN_PERF, INSN_CALLGRIND } insn_tool;

static insn_tool insn_tool_found(void)
{
    FILE *p = popen("perf stat -x, -e instructions true 2>&1", "r");
    char line[512];
    bool counted = false;
    while (p && fgets(line, sizeof line, p)) /* "<count>,,instructions,..." when counted */
        counted |= strstr(line, "instructions") && line[0] >= '0' && line[0] <= '9';
    if (p)
        pclose(p);
    if (counted)
        return INSN_PERF;
    return system("valgrind --version >/dev/null 2>&1") == 0 ? INSN_CALLGRIND : INSN_NONE;
}

/* the instructions bin/ampscope executes running the case at `path` (in dir); -1 when it
 * could not run or the count could not be read */
static double run_instructions(insn_tool tool, const char *ampscope, const char *dir,
                               const char *path, bool observe_off)
{
    char cmd[16384], count[4096], line[512];
    snprintf(count, sizeof count, "%s/count", dir);
    const char *env = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive";
    const char *args = observe_off ? "--observe off" : "";
    if (tool == INSN_PERF)
        snprintf(cmd, sizeof cmd,
                 "%s perf stat -x, -e instructions -o %s -- %s run %s --device cpu --out %s/out "
                 "--quiet %s >%s/log 2>&1",
                 env, count, ampscope, path, dir, args, dir);
    else
        snprintf(cmd, sizeof cmd,
                 "%s OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} valgrind --tool=callgrind "
                 "--callgrind-out-file=/dev/null --log-file=%s %s run %s --device cpu --out "
                 "%s/out --quiet %s >%s/log 2>&1",
                 env, count, ampscope, path, dir, args, dir);
    if (system(cmd) != 0)
        return -1;
    FILE *f = fopen(count, "r");
    double n = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *c = strstr(line, "Collected : ");
        if (tool == INSN_CALLGRIND && c)
            n = atof(c + strlen("Collected : "));
        else if (tool == INSN_PERF && strstr(line, "instructions") && line[0] >= '0' &&
                 line[0] <= '9')
            n = atof(line);
    }
    if (f)
        fclose(f);
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf %s/out", dir);
    if (system(rm) != 0)
        return -1;
    return n;
}

/* the second step's instructions of variant, observed or not; -1 on failure */
static double step_instructions(insn_tool tool, const char *ampscope, const char *variant,
                                bool observe_off)
{
    char dir[] = "/tmp/ampscope-insn-XXXXXX", path[4096], text[2048];
    if (!mkdtemp(dir))
        return -1;
    double n[2] = {-1, -1};
    for (int steps = 1; steps <= 2; steps++) {
        bench_case b = {"insn", variant, INSN_IN, INSN_HIDDEN, INSN_OUT, 256, false, steps};
        snprintf(path, sizeof path, "%s/bench.case", dir);
        FILE *f = fopen(path, "w");
        if (!f || fputs(case_text(&b, text, sizeof text), f) < 0 || fclose(f))
            break;
        n[steps - 1] = run_instructions(tool, ampscope, dir, path, observe_off);
    }
    char rm[4200];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        return -1;
    return n[0] > 0 && n[1] > n[0] ? n[1] - n[0] : -1;
}

/* the instruction counts' lines, on stdout and in Markdown */
static void instruction_counts(bool quick, const char *ampscope, FILE *md)
{
    insn_tool tool = insn_tool_found();
    if (tool == INSN_NONE) {
        printf("instructions per step: skipped: perf cannot count instructions here and "
               "valgrind is not installed\n");
        fprintf(md, "Instructions per step: not counted (no perf counter, no valgrind).\n\n");
        return;
    }
    char how[256];
    cpu_isa at = cpu_isa_best();
    if (tool == INSN_PERF)
        snprintf(how, sizeof how, "perf stat -e instructions; the %s build of the counting",
                 cpu_isa_name(at));
    else
        snprintf(how, sizeof how,
                 "valgrind --tool=callgrind (perf cannot count instructions here); valgrind "
                 "emulates no AVX-512, so this counts the %s build of the counting",
                 cpu_isa_name(at < CPU_ISA_AVX2 ? at : CPU_ISA_AVX2));
    printf("instructions per step (MLP %d-%d-%d-%d, batch 256, one thread, the second step; %s):\n",
           INSN_IN, INSN_HIDDEN, INSN_HIDDEN, INSN_OUT, how);
    fprintf(md,
            "Instructions per step (MLP %d-%d-%d-%d, batch 256, one thread, the second step; "
            "%s):\n\n| variant | observed | observe off | overhead |\n|---|---:|---:|---:|\n",
            INSN_IN, INSN_HIDDEN, INSN_HIDDEN, INSN_OUT, how);
    static const char *const variants[] = {"autocast-fp16-scaler", "fp32", "fp16-master-scaler"};
    for (int v = 0; v < (quick ? 1 : 3); v++) {
        fflush(stdout);
        double on = step_instructions(tool, ampscope, variants[v], false),
               off = step_instructions(tool, ampscope, variants[v], true);
        if (on <= 0 || off <= 0) {
            printf("  %-22s could not be counted (is %s built?)\n", variants[v], ampscope);
            continue;
        }
        printf("  %-22s observed %.2fM, observe off %.2fM, overhead %.1f%%\n", variants[v],
               on / 1e6, off / 1e6, 100 * (on / off - 1));
        fprintf(md, "| %s | %.2fM | %.2fM | %.1f%% |\n", variants[v], on / 1e6, off / 1e6,
                100 * (on / off - 1));
    }
    fprintf(md, "\n");
}

/*
 * PyTorch's own CPU step on the MLP of shape b (tools/bench_torch.py, run by python), beside
 * the harness's fully observed steps of that shape (rows[0..n) of cases[]); skipped with a
 * line when python cannot import torch.
 */
static void pytorch_rows(const char *python, const bench_case *shape, const bench_case *cases,
                         const bench_row *rows, const bool *ran, int n, FILE *md)
{
    char cmd[4096], line[512], what[64];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", python);
    if (system(cmd) != 0) {
        printf("PyTorch: skipped: %s cannot import torch (bin/ampscope-bench --python PY)\n",
               python);
        fprintf(md, "PyTorch: not measured (%s cannot import torch).\n\n", python);
        return;
    }
    snprintf(cmd, sizeof cmd, "%s tools/bench_torch.py %lld %lld %lld %lld %d 2>&1", python,
             (long long)shape->in, (long long)shape->hidden, (long long)shape->out,
             (long long)shape->batch, shape->steps);
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    char version[sizeof line] = "?";
    double fp32 = NAN, bf16 = NAN, ms;
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "pytorch ", 8) == 0)
            snprintf(version, sizeof version, "%s", line + 8);
        else if (sscanf(line, "%63s %lf", what, &ms) == 2 && strcmp(what, "fp32") == 0)
            fp32 = ms;
        else if (sscanf(line, "%63s %lf", what, &ms) == 2 && strcmp(what, "autocast-bf16") == 0)
            bf16 = ms;
        else /* a variant this PyTorch does not support, or an error */
            printf("  PyTorch: %s\n", line);
    }
    if (!p || pclose(p) != 0 || isnan(fp32)) {
        printf("PyTorch: %s failed\n", cmd);
        return;
    }
    char shape_s[64];
    snprintf(shape_s, sizeof shape_s, "%lld-%lld-%lld-%lld b%lld", (long long)shape->in,
             (long long)shape->hidden, (long long)shape->hidden, (long long)shape->out,
             (long long)shape->batch);
    printf("PyTorch %s (%s), MLP %s, no observation: fp32 %.1f ms, autocast bfloat16 %.1f ms\n",
           version, python, shape_s, fp32, bf16);
    fprintf(md,
            "PyTorch %s, MLP %s, no observation: fp32 %.1f ms, autocast bfloat16 %.1f ms (the "
            "fastest step after the first).\n\n"
            "| variant | ampscope observed ms | / PyTorch fp32 | / PyTorch autocast bf16 |\n"
            "|---|---:|---:|---:|\n",
            version, shape_s, fp32, bf16);
    for (int i = 0; i < n; i++) {
        const bench_case *c = &cases[i];
        if (!ran[i] || c->conv || c->in != shape->in || c->hidden != shape->hidden ||
            c->out != shape->out || c->batch != shape->batch || strcmp(c->group, shape->group))
            continue;
        double t = rows[i].step_ms;
        printf("  ampscope %-22s observed %.1f ms = %.2f x PyTorch fp32, %.2f x autocast bf16\n",
               c->variant, t, t / fp32, t / bf16);
        fprintf(md, "| %s | %.1f | %.2f | %.2f |\n", c->variant, t, t / fp32, t / bf16);
    }
    fprintf(md, "\n");
}


/* a graph-model row: a case file with --set overrides (up to 2), steps per run */
typedef struct graph_case {
    const char *label, *path, *sets[2];
    int steps;
} graph_case;

/* dir/r's case folder (a run of one case) into sub; "" when none */
static void first_case_dir(const char *dir, char *sub, size_t len)
{
    char top[1024];
    snprintf(top, sizeof top, "%s/r", dir);
    sub[0] = 0;
    DIR *d = opendir(top);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.' && e->d_type == DT_DIR &&
            snprintf(sub, len, "%s/%s", top, e->d_name) >= (int)len)
            sub[0] = 0; /* too long a path: no folder */
    if (d)
        closedir(d);
}

/* the fastest step after the first of DIR/r/<case>/steps.csv, and config.csv's GEMM counts;
 * false when the run left no such files */
static bool run_figures(const char *dir, double *ms, long long *sgemm, long long *bf16)
{
    char err[256], sub[1200];
    csv_table t = {0};
    first_case_dir(dir, sub, sizeof sub);
    if (!sub[0] || csv_table_read_in(&t, sub, "steps.csv", false, NULL, NULL, err, sizeof err))
        return false;
    int c = -1;
    for (int k = 0; k < t.n_cols; k++)
        c = strcmp(t.header[k], "step_ms") == 0 ? k : c;
    *ms = INFINITY;
    for (int r = 1; c >= 0 && r < t.n_rows; r++)
        *ms = fmin(*ms, atof(t.rows[r][c]));
    csv_table_free(&t);
    if (csv_table_read_in(&t, sub, "config.csv", false, NULL, NULL, err, sizeof err))
        return false;
    *sgemm = *bf16 = -1;
    for (int k = 0; k < t.n_cols && t.n_rows; k++) {
        if (strcmp(t.header[k], "gemm_sgemm") == 0)
            *sgemm = atoll(t.rows[0][k]);
        if (strcmp(t.header[k], "gemm_bf16") == 0)
            *bf16 = atoll(t.rows[0][k]);
    }
    csv_table_free(&t);
    return isfinite(*ms);
}

/* `BIN run` of the case into dir (extra: more options); false when it failed */
static bool run_case(const char *ampscope, const graph_case *g, const char *dir, const char *extra)
{
    char cmd[4096];
    int n = snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && %s run %s --device cpu --steps %d "
                     "--out %s/r --quiet %s", dir, dir, ampscope, g->path, g->steps, dir, extra);
    for (int k = 0; k < 2 && g->sets[k]; k++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --set %s", g->sets[k]);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " >/dev/null");
    fflush(stdout);
    return system(cmd) == 0;
}

/* PyTorch's fastest step of the case after the first (dump: the observe-off run's --dump);
 * NAN with the reason printed when it could not run */
static double torch_case_ms(const char *python, const char *ampscope, const graph_case *g,
                            const char *dump, char *version, size_t vlen)
{
    char cmd[4096], line[512];
    int n = snprintf(cmd, sizeof cmd, "%s tools/bench_torch.py --case %s %s %d %s", python,
                     g->path, dump, g->steps, ampscope);
    for (int k = 0; k < 2 && g->sets[k]; k++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s", g->sets[k]);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " 2>&1");
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    double ms = NAN;
    while (p && fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "pytorch ", 8) == 0) {
            if (snprintf(version, vlen, "%s", line + 8) >= (int)vlen)
                version[vlen - 1] = 0;
        } else if (sscanf(line, "case %lf", &ms) != 1)
            printf("  PyTorch: %s\n", line);
    }
    if (p)
        pclose(p);
    return ms;
}

/*
 * The graph models' rows: each case run observed, then with --observe off (which also dumps
 * its initial parameters and batch), then by PyTorch from that dump, one after the other, so
 * that each ratio is measured in one stretch of the machine's load.
 */
static void graph_rows(const char *python, const char *ampscope, FILE *md)
{
    static const graph_case cases[] = {
        {"GPT-2 block fp32", "cases/gpt2-block-fp32.case", {NULL, NULL}, 3},
        {"GPT-2 block autocast bf16", "cases/gpt2-block-autocast-bf16.case", {NULL, NULL}, 3},
        {"ResNet block fp32", "cases/resnet-block-fp32.case", {"train.steps=3", NULL}, 3},
        {"ResNet block autocast bf16", "cases/resnet-block-autocast-fp16-scaler.case",
         {"precision.autocast=bfloat16", "scaler.enabled=no"}, 3},
        {"Llama block fp32", "cases/llama-block-fp32.case", {NULL, NULL}, 3},
        {"Llama block autocast bf16", "cases/llama-block-autocast-bf16.case", {NULL, NULL}, 3},
    };
    char cmd[512], version[256] = "?";
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", python);
    bool torch_ok = system(cmd) == 0;
    if (!torch_ok)
        printf("graph models: PyTorch skipped: %s cannot import torch\n", python);
    fprintf(md,
            "Graph models, CPU, each row's three runs one after the other (fastest step after "
            "the first; PyTorch from the same parameters and batch, its defaults):\n\n"
            "| case | ampscope observed ms | observe off ms | PyTorch ms | PyTorch / observed | "
            "GEMMs sgemm / bf16 |\n|---|---:|---:|---:|---:|---:|\n");
    printf("%-28s %12s %12s %12s %9s %14s\n", "graph model", "observed ms", "obs off ms",
           "PyTorch ms", "PT/obs", "GEMMs sg/bf16");
    const char *tmp = "build/bench-graph";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const graph_case *g = &cases[i];
        char obs[256], off[256], dump[300];
        snprintf(obs, sizeof obs, "%s/observed", tmp);
        snprintf(off, sizeof off, "%s/off", tmp);
        snprintf(dump, sizeof dump, "%s/dump", off);
        char extra[400];
        snprintf(extra, sizeof extra, "--observe off --dump %s --dump-only input", dump);
        double t_obs, t_off, t_pt = NAN;
        long long sg, bf, sg2, bf2;
        if (!run_case(ampscope, g, obs, "") || !run_figures(obs, &t_obs, &sg, &bf) ||
            !run_case(ampscope, g, off, extra) || !run_figures(off, &t_off, &sg2, &bf2)) {
            printf("%-28s could not run (%s)\n", g->label, g->path);
            continue;
        }
        if (torch_ok)
            t_pt = torch_case_ms(python, ampscope, g, dump, version, sizeof version);
        printf("%-28s %12.1f %12.1f %12.1f %9.2f %7lld/%-6lld\n", g->label, t_obs, t_off, t_pt,
               t_pt / t_obs, sg, bf);
        fprintf(md, "| %s | %.1f | %.1f | %.1f | %.2f | %lld / %lld |\n", g->label, t_obs, t_off,
                t_pt, t_pt / t_obs, sg, bf);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
        printf("bench: could not remove %s\n", tmp);
    fprintf(md, "\nPyTorch %s.\n\n", version);
}

/* which GEMM paths bfloat16 operands may take here (ops/cpu/gemm_bf16.c) */
static const char *gemm_line(void)
{
    if (cpu_gemm_bf16_available())
        return "bfloat16 GEMMs: on avx512_bf16 through oneDNN where exact, else widened for sgemm";
    return cpu_gemm_bf16_library()
               ? "bfloat16 GEMMs: widened for sgemm (no avx512_bf16 here, or the ISA level is "
                 "below avx512)"
               : "bfloat16 GEMMs: widened for sgemm (built without oneDNN)";
}

/* The ISA level the run is at (cpu.h: the processor's best, or AMPSCOPE_CPU_ISA's), in a
 * line that says when it emulates a processor without the levels above. */
static void isa_line(char *buf, size_t len)
{
    static const char *const processors[CPU_ISA_COUNT] = {
        [CPU_ISA_X86_64] = "a processor with plain x86-64 (SSE2) only",
        [CPU_ISA_AVX2] = "an AVX2-only processor",
        [CPU_ISA_AVX512] = "an AVX-512 processor",
    };
    cpu_isa at = cpu_isa_best(), best = cpu_isa_processor();
    if (at == best)
        snprintf(buf, len, "ISA level %s (this processor's best)", cpu_isa_name(at));
    else
        snprintf(buf, len,
                 "ISA level %s, set by " CPU_ISA_ENV ": an emulation of %s on this %s processor "
                 "(the same cores; the counting, the float16 and bfloat16 conversions and the "
                 "optimizer's update at %s)",
                 cpu_isa_name(at), processors[at], cpu_isa_name(best), cpu_isa_name(at));
}

/* fn(arg, out) run in a child process, its len bytes of out sent back through a pipe: the
 * parent starts no threads, so that the children it forks can (libgomp's and OpenBLAS's
 * thread pools do not survive a fork), and each configuration starts with a fresh heap.
 * False when the child failed. */
static bool in_child(void (*fn)(const void *arg, void *out), const void *arg, void *out, size_t len)
{
    int fd[2];
    if (pipe(fd))
        return false;
    pid_t pid = fork();
    if (pid == -1) {
        close(fd[0]);
        close(fd[1]);
        return false;
    }
    if (pid == 0) {
        close(fd[0]);
        memset(out, 0, len);
        fn(arg, out);
        _exit(write(fd[1], out, len) == (ssize_t)len ? 0 : 1);
    }
    close(fd[1]);
    bool ok = read(fd[0], out, len) == (ssize_t)len;
    close(fd[0]);
    int st;
    return waitpid(pid, &st, 0) == pid && ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
    if (libenv_prepare()) { /* as bin/ampscope does: the same OpenMP and OpenBLAS settings */
        execv("/proc/self/exe", argv);
        perror("bench: cannot restart with OpenMP's and OpenBLAS's settings");
    }
    bool quick = false, counting_only = false, graph_only = false;
    const char *python = "python3", *ampscope = "bin/ampscope";
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "quick") == 0 || strcmp(argv[a], "all") == 0)
            quick = strcmp(argv[a], "quick") == 0;
        else if (strcmp(argv[a], "counting") == 0)
            counting_only = true;
        else if (strcmp(argv[a], "graph") == 0)
            graph_only = true;
        else if (strcmp(argv[a], "--python") == 0 && a + 1 < argc)
            python = argv[++a];
        else if (strcmp(argv[a], "--ampscope") == 0 && a + 1 < argc)
            ampscope = argv[++a];
        else {
            fprintf(stderr, "usage: %s [quick|all|counting|graph] [--python PY] [--ampscope BIN]\n",
                    argv[0]);
            return 2;
        }
    }
    static const char *const variants[] = {"fp32", "autocast-fp16-scaler", "fp16-master-scaler"};
    bench_case cases[32];
    int n = 0;
    for (int v = 0; v < 3; v++)
        cases[n++] = (bench_case){"mlp", variants[v], 1024, 4096, 1000, 256, false, 6};
    if (!quick) {
        for (int v = 0; v < 3; v++)
            cases[n++] = (bench_case){"q000", variants[v], 1024, 16000, 2000, 64, false, 4};
        cases[n++] = (bench_case){"q003", "autocast-fp16", 0, 0, 0, 40, true, 2};
    }
    for (int64_t h = 1024; h <= (quick ? 4096 : 16384); h *= 2) /* fewer steps as they grow */
        cases[n++] = (bench_case){"scaling", "autocast-fp16-scaler", 1024, h, 1000, 256,
                                  false,     h >= 8192 ? 3 : 4};

    double bw, count_ns[2];
    count_levels levels;
    char isa[512];
    isa_line(isa, sizeof isa);
    if (graph_only) {
        FILE *md = fopen("results/bench-graph.md", "w");
        if (!md) {
            fprintf(stderr, "bench: cannot write results/bench-graph.md\n");
            return 2;
        }
        printf("%s; OpenBLAS kernels %s; %s\n", isa, libenv_blas_core(), gemm_line());
        fprintf(md, "%s; OpenBLAS kernels %s; %s.\n\n", isa, libenv_blas_core(), gemm_line());
        graph_rows(python, ampscope, md);
        fclose(md);
        printf("wrote results/bench-graph.md\n");
        return 0;
    }
    if (counting_only) {
        printf("%s; OpenBLAS kernels %s\n", isa, libenv_blas_core());
        if (!in_child(counting_cost, NULL, count_ns, sizeof count_ns) ||
            !in_child(counting_levels, NULL, &levels, sizeof levels)) {
            fprintf(stderr, "bench: could not measure the counting cost\n");
            return 2;
        }
        printf("counting (one thread, in cache): cast of %d float32 to float16 %.2f ns/value "
               "with counts and histogram, %.2f without\n",
               CPU_COUNT_N, count_ns[0], count_ns[1]);
        print_levels(&levels, NULL);
        return 0;
    }
    if (!in_child(copy_bandwidth_into, NULL, &bw, sizeof bw) || bw <= 0 ||
        !in_child(counting_cost, NULL, count_ns, sizeof count_ns) ||
        !in_child(counting_levels, NULL, &levels, sizeof levels)) {
        fprintf(stderr, "bench: could not measure the copy bandwidth or the counting cost\n");
        return 2;
    }
    char host[256] = "?";
    gethostname(host, sizeof host);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    FILE *csv = fopen("results/bench.csv", "w"), *md = fopen("results/bench.md", "w");
    if (!csv || !md) {
        fprintf(stderr, "bench: cannot write results/bench.csv or results/bench.md\n");
        return 2;
    }
    fprintf(csv, "%s\n", csv_bench.header);
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(md, "Run on %s, %d cores, %s; %s; copy bandwidth %.1f GB/s; OpenBLAS kernels %s.\n\n",
            host, threads, date, isa, bw / 1e6, libenv_blas_core());
    fprintf(md,
            "Counting on one thread, in cache: a float32 -> float16 cast of %d values takes %.2f "
            "ns per value with its counts and histogram, %.2f ns without.\n\n",
            CPU_COUNT_N, count_ns[0], count_ns[1]);
    printf("%s; OpenBLAS kernels %s\ncopy bandwidth %.1f GB/s, %d cores\n", isa, libenv_blas_core(),
           bw / 1e6, threads);
    printf("counting (one thread, in cache): cast of %d float32 to float16 %.2f ns/value with "
           "counts and histogram, %.2f without\n",
           CPU_COUNT_N, count_ns[0], count_ns[1]);
    print_levels(&levels, md);
    instruction_counts(quick, ampscope, md);
    fprintf(md, "| group | variant | shape | step ms (median) | floor ms (GEMM + bytes) | "
                "step/floor | "
                "observe off ms | overhead | peak RSS MiB | account MiB (+workspace) |\n"
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    static bench_row rows[32];
    static bool ran[32];
    printf("%-8s %-22s %-22s %9s %9s %7s %9s %8s %9s %9s\n", "group", "variant", "shape", "step ms",
           "floor ms", "ratio", "obs off", "overhead", "RSS MiB", "acct MiB");
    for (int i = 0; i < n; i++) {
        const bench_case *b = &cases[i];
        bench_row r;
        char shape[64];
        if (b->conv)
            snprintf(shape, sizeof shape, "conv 40x3x555x555");
        else
            snprintf(shape, sizeof shape, "%lld-%lld-%lld-%lld b%lld", (long long)b->in,
                     (long long)b->hidden, (long long)b->hidden, (long long)b->out,
                     (long long)b->batch);
        fflush(stdout);
        fflush(csv);
        fflush(md);
        if (!in_child(measure_rounds, b, &r, sizeof r)) {
            printf("%-8s %-22s %-22s could not run (see above)\n", b->group, b->variant, shape);
            continue;
        }
        ran[i] = true;
        r.bytes_ms = floor_bytes(b) / bw;
        double floor = r.gemm_ms + r.bytes_ms;
        double overhead = r.step_ms / r.step_off_ms - 1.0;
        printf("%-8s %-22s %-22s %9.1f %9.1f %7.2f %9.1f %7.1f%% %9.0f %9.0f\n", b->group,
               b->variant, shape, r.step_ms, floor, r.step_ms / floor, r.step_off_ms,
               100 * overhead, r.rss_mib, r.account_mib);
        fprintf(
            csv,
            "%s,%s,%lld,%lld,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.1f,%.1f,%.1f\n",
            b->group, b->variant, (long long)b->in, (long long)b->hidden, (long long)b->out,
            (long long)b->batch, r.step_ms, r.step_median_ms, r.step_off_ms, r.gemm_ms, r.bytes_ms,
            floor, r.step_ms / floor, overhead, r.rss_mib, r.account_mib, r.workspace_mib);
        fprintf(md,
                "| %s | %s | %s | %.1f (%.1f) | %.1f (%.1f + %.1f) | %.2f | %.1f | %.1f%% | %.0f | "
                "%.0f "
                "(+%.0f) |\n",
                b->group, b->variant, shape, r.step_ms, r.step_median_ms, floor, r.gemm_ms,
                r.bytes_ms, r.step_ms / floor, r.step_off_ms, 100 * overhead, r.rss_mib,
                r.account_mib, r.workspace_mib);
        rows[i] = r;
    }
    fprintf(md, "\n");
    /* PyTorch on each MLP shape of the tables but the scaling one's, after that shape's rows */
    for (int i = 0; i < n; i++)
        if (!cases[i].conv && strcmp(cases[i].group, "scaling") &&
            (i == 0 || strcmp(cases[i - 1].group, cases[i].group)))
            pytorch_rows(python, &cases[i], cases, rows, ran, n, md);
    if (!quick) {
        fprintf(md, "%s.\n\n", gemm_line());
        graph_rows(python, ampscope, md);
    }
    fclose(csv);
    fclose(md);
    printf("wrote results/bench.csv and results/bench.md\n");
    return 0;
}
