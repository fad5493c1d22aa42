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
 * Beside: the copy bandwidth and what counting costs per value (counting_cost).
 * Output: tables on stdout, results/bench.csv, results/bench.md (the tables in Markdown).
 *
 * Usage: bin/ampscope-bench [quick|all]   (quick: the scaled-down MLP and the scaling table)
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "case.h"
#include "csv_table.h"
#include "libenv.h"
#include "results.h"
#include "train.h"

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
static void step_times(const char *dir, double *fastest, double *median)
{
    csv_table t;
    char err[CSV_PATH_LEN + 256];
    double v[64];
    int n = 0, k = -1;
    if (csv_table_read_in(&t, dir, csv_steps.file, false, NULL, NULL, err, sizeof err) == 0) {
        k = csv_table_col(&t, csv_steps.names[STEPS_COL_STEP_MS]);
        for (int r = 1; k >= 0 && r < t.n_rows && n < 64; r++) /* after the warm-up step */
            v[n++] = atof(t.rows[r][k]);
        csv_table_free(&t);
    }
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
    char dir[] = "/tmp/ampscope-bench-XXXXXX", path[4096], text[2048], err[1024];
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
    case_result res;
    char out[4096];
    snprintf(out, sizeof out, "%s/out", dir);
    if (results_begin(out, "bench", path, sizeof path, err, sizeof err) ||
        train_case(&cfg, be, &opt, path, &res) || !res.ok) {
        fprintf(stderr, "bench: %s\n", res.error[0] ? res.error : err);
        exit(2);
    }
    double fastest, median;
    step_times(path, &fastest, &median);
    if (observe_off) {
        row->step_off_ms = fmin(row->step_off_ms, fastest);
    } else {
        row->step_ms = fmin(row->step_ms, fastest);
        row->step_median_ms = fmin(row->step_median_ms, median);
        row->account_mib = (double)res.peak_bytes / 1048576.0;
        row->workspace_mib = (double)res.workspace_peak_bytes / 1048576.0;
    }
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

/* fn(arg, out) run in a child process, its len bytes of out sent back through a pipe: the
 * parent starts no threads, so that the children it forks can (libgomp's and OpenBLAS's
 * thread pools do not survive a fork), and each configuration starts with a fresh heap.
 * False when the child failed. */
static bool in_child(void (*fn)(const void *arg, void *out), const void *arg, void *out,
                     size_t len)
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
    bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
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
    if (!in_child(copy_bandwidth_into, NULL, &bw, sizeof bw) || bw <= 0 ||
        !in_child(counting_cost, NULL, count_ns, sizeof count_ns)) {
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
    fprintf(md, "Run on %s, %d cores, %s; copy bandwidth %.1f GB/s; OpenBLAS kernels %s.\n\n", host,
            threads, date, bw / 1e6, libenv_blas_core());
    fprintf(md,
            "Counting on one thread, in cache: a float32 -> float16 cast of %d values takes %.2f "
            "ns per value with its counts and histogram, %.2f ns without.\n\n",
            CPU_COUNT_N, count_ns[0], count_ns[1]);
    fprintf(md, "| group | variant | shape | step ms (median) | floor ms (GEMM + bytes) | "
                "step/floor | "
                "observe off ms | overhead | peak RSS MiB | account MiB (+workspace) |\n"
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("copy bandwidth %.1f GB/s, %d cores, OpenBLAS kernels %s\n", bw / 1e6, threads,
           libenv_blas_core());
    printf("counting (one thread, in cache): cast of %d float32 to float16 %.2f ns/value with "
           "counts and histogram, %.2f without\n",
           CPU_COUNT_N, count_ns[0], count_ns[1]);
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
    }
    fclose(csv);
    fclose(md);
    printf("wrote results/bench.csv and results/bench.md\n");
    return 0;
}
