/*
 * main.c: the ampscope command line.
 *   ampscope run CASE... [--device cpu|cuda|auto] [--out DIR] [--steps N] [--dump DIR]
 *                        [--dump-only PATTERN] [--set SECTION.KEY=VALUE]... [--observe off]
 *                        [--quiet | --progress] [--sweep SECTION.KEY=V1,V2,...]...
 *                        [--dump-ranks] [--hostfile FILE]
 *   ampscope matrix CASE... [--device ...] [--out DIR] [--set SECTION.KEY=VALUE]...
 *   ampscope check CASE... [--json] [--set SECTION.KEY=VALUE]...
 *   ampscope compare CASE... [--out DIR]
 *   ampscope report DIR
 *   ampscope selftest [--device cpu|cuda|auto]
 *   ampscope ops
 *   ampscope import SCRIPT.py [--out DIR] [--name NAME] [--params float32|float16|bfloat16]
 *   ampscope formats [--json]
 * Exit status: 0 every case passed, 1 a case did not, 2 bad input (case files, options).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "case/load.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "core/libenv.h"
#include "layers/fp8_linear.h"
#include "distributed/distributed.h"
#include "import.h"
#include "matrix.h"
#include "ops.h"
#include "ops/selftest.h"
#include "report/report.h"
#include "results/compare.h"
#include "results/read.h"
#include "results/results.h"
#include "sweep.h"

#define AMPSCOPE_VERSION "0.1.0"
#define MAX_SETS 32

static const char usage[] =
    "usage: ampscope run CASE... [options]   run cases, write results\n"
    "       ampscope matrix CASE... [run options]   the precision matrix: the case in 8\n"
    "                                        configurations, errors against fp32\n"
    "       ampscope check CASE... [--json] [--set S.K=V]...   validate case files\n"
    "       ampscope compare CASE... [--out DIR]   memory by category against baselines\n"
    "       ampscope report DIR              rebuild DIR's report.md files and REPORT.md\n"
    "                                        from its CSV files\n"
    "       ampscope selftest [--device cuda]   every op on the device against the CPU\n"
    "       ampscope ops [--json]            print every op with its ATen ops and autocast policy\n"
    "       ampscope formats [--json]        print the number formats' table\n"
    "       ampscope import SCRIPT.py [--out DIR] [--name NAME] [--params DTYPE]\n"
    "                                        a PyTorch model (SCRIPT's model() and inputs())\n"
    "                                        as DIR/NAME.case and its .npy files (needs torch)\n"
    "       ampscope --help | --version\n"
    "run options:\n"
    "  --device cpu|cuda|auto   where to run (default auto: CUDA when usable, else CPU)\n"
    "  --out DIR                results folder (default results)\n"
    "  --steps N                override every case's steps\n"
    "  --set SECTION.KEY=VALUE  override a case key (repeatable); the run is named\n"
    "                           <case>+SECTION.KEY=VALUE and its expectations do not fail it\n"
    "  --sweep SECTION.KEY=V1,V2,...  run every value as --set does (repeatable: every\n"
    "                           combination); 2^A..2^B: the powers of two from 2^A to 2^B;\n"
    "                           the table in OUT/<case>.sweep/ (sweep.csv, report.md)\n"
    "  --dump DIR               write initial parameters, input, target and observed\n"
    "                           tensors as .npy files under DIR\n"
    "  --dump-only PATTERN      only tensors whose name matches PATTERN (shell glob)\n"
    "  --dump-ranks             with --dump, world_size > 1: every rank's own gradients,\n"
    "                           before the all-reduce, under DIR/rank-R/\n"
    "  --hostfile FILE          run distributed cases on the hosts of an Open MPI hostfile\n"
    "                           (instead of [distributed] hosts, or this host)\n"
    "  --observe off            record dtypes only: no counts, no histograms\n"
    "  --gpu-math exact|native  exact (default): GEMMs accumulate into float32 and the\n"
    "                           harness rounds and counts; native: half outputs straight\n"
    "                           from cuBLAS as PyTorch gets them (underflow, overflow unseen)\n"
    "  --quiet                  no progress display\n"
    "  --progress               progress from the first step (default: once a case has\n"
    "                           run 2 s; on a terminal one updated line, else a line\n"
    "                           every 5 s and at the end)\n";

typedef struct cli {
    const char *cmd;
    const char **cases;
    int n_cases;
    const char *sets[MAX_SETS];
    int n_sets;
    const char *device, *out;
    const char *hostfile; /* --hostfile: the hosts of every distributed case */
    bool native_math;
    int64_t steps; /* --steps N, applied as train.steps=N; 0 when not given */
    train_options train;
    bool json;
    sweep_axis axes[SWEEP_MAX_AXES]; /* --sweep */
    int n_axes;
} cli;

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "ampscope: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

static bool is_value_option(const char *a)
{
    static const char *const names[] = {"--device",    "--out",     "--steps", "--dump",
                                        "--dump-only", "--observe", "--set",   "--gpu-math",
                                        "--sweep",   "--hostfile"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(a, names[i]) == 0)
            return true;
    return false;
}

/* returns 0, or the exit status for bad usage */
static int parse_cli(int argc, char **argv, cli *c)
{
    c->cmd = argv[1];
    c->device = "auto";
    c->out = "results";
    c->cases = calloc((size_t)argc, sizeof *c->cases);
    if (!c->cases)
        return bad_usage("%s", "out of memory");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            c->cases[c->n_cases++] = a;
        } else if (strcmp(a, "--json") == 0) {
            c->json = true;
        } else if (strcmp(a, "--quiet") == 0) {
            c->train.quiet = true;
        } else if (strcmp(a, "--progress") == 0) {
            c->train.progress = true;
        } else if (strcmp(a, "--dump-ranks") == 0) {
            c->train.dump_ranks = true;
        } else if (!is_value_option(a)) {
            return bad_usage("unknown option %s", a);
        } else if (!has_value) {
            return bad_usage("option %s needs a value", a);
        } else if (strcmp(a, "--device") == 0) {
            c->device = argv[++i];
            if (strcmp(c->device, "cpu") && strcmp(c->device, "cuda") && strcmp(c->device, "auto"))
                return bad_usage("--device takes cpu, cuda or auto, not '%s'", c->device);
        } else if (strcmp(a, "--out") == 0) {
            c->out = argv[++i];
        } else if (strcmp(a, "--steps") == 0) {
            char *end;
            c->steps = strtoll(argv[++i], &end, 10);
            if (*end || c->steps <= 0)
                return bad_usage("--steps takes a positive integer, not '%s'", argv[i]);
        } else if (strcmp(a, "--dump") == 0) {
            c->train.dump_dir = argv[++i];
        } else if (strcmp(a, "--hostfile") == 0) {
            c->hostfile = argv[++i];
        } else if (strcmp(a, "--dump-only") == 0) {
            c->train.dump_only = argv[++i];
        } else if (strcmp(a, "--observe") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "off") && strcmp(v, "on"))
                return bad_usage("--observe takes on or off, not '%s'", v);
            c->train.observe_off = strcmp(v, "off") == 0;
        } else if (strcmp(a, "--gpu-math") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "exact") && strcmp(v, "native"))
                return bad_usage("--gpu-math takes exact or native, not '%s'", v);
            c->native_math = strcmp(v, "native") == 0;
        } else if (strcmp(a, "--sweep") == 0) {
            char err[512];
            if (c->n_axes == SWEEP_MAX_AXES)
                return bad_usage("at most %s --sweep options", "4");
            if (sweep_parse(argv[++i], &c->axes[c->n_axes++], err, sizeof err))
                return bad_usage("%s", err);
        } else if (strcmp(a, "--set") == 0) {
            if (c->n_sets == MAX_SETS)
                return bad_usage("at most %s --set options", "32");
            c->sets[c->n_sets++] = argv[++i];
        } else {
            return bad_usage("unknown option %s", a);
        }
    }
    if (c->n_cases == 0 && strcmp(c->cmd, "selftest") != 0)
        return bad_usage("%s needs at least one case file", c->cmd);
    if (c->train.quiet && c->train.progress)
        return bad_usage("%s", "--quiet and --progress contradict each other");
    if (c->train.dump_ranks && !c->train.dump_dir)
        return bad_usage("%s", "--dump-ranks needs --dump DIR");
    return 0;
}

/* Loads every case, and with --sweep every variant of each (case-major, sweep_variant's
 * order); prints every error; returns the configs (*n of them) or NULL (exit 2). */
static case_config *load_cases(const cli *c, int *n_out)
{
    int64_t n_var = sweep_count(c->axes, c->n_axes);
    if (n_var * c->n_cases > 100000) {
        fprintf(stderr, "ampscope: --sweep makes %lld runs; at most 100000\n",
                (long long)(n_var * c->n_cases));
        return NULL;
    }
    int n = (int)(n_var * c->n_cases);
    case_config *cfgs = calloc((size_t)n, sizeof *cfgs);
    if (!cfgs) {
        fprintf(stderr, "ampscope: out of memory\n");
        return NULL;
    }
    /* --steps N is applied as train.steps=N, and only so (the observed steps follow it),
     * without renaming the run as --set does; a variant's --sweep values are --set ones */
    const char *sets[MAX_SETS + SWEEP_MAX_AXES + 1];
    char steps_set[64], variant[SWEEP_MAX_AXES][192];
    memcpy(sets, c->sets, sizeof(char *) * (size_t)c->n_sets);
    for (int a = 0; a < c->n_axes; a++)
        sets[c->n_sets + a] = variant[a];
    int n_named = c->n_sets + c->n_axes, n_sets = n_named;
    if (c->steps > 0) {
        snprintf(steps_set, sizeof steps_set, "train.steps=%lld", (long long)c->steps);
        sets[n_sets++] = steps_set;
    }
    int errors = 0;
    for (int k = 0; k < n; k++) {
        int i = (int)(k / n_var);
        sweep_variant(c->axes, c->n_axes, k % n_var, variant);
        err_list errs = {0};
        errors += case_load(c->cases[i], sets, n_sets, &cfgs[k], &errs);
        for (int e = 0; e < errs.n; e++)
            fprintf(stderr, "%s\n", errs.msgs[e]);
        err_list_free(&errs);
        if (n_named) {
            char base[CASE_NAME_MAX];
            snprintf(base, sizeof base, "%s", cfgs[k].name);
            results_variant_name(base, sets, n_named, cfgs[k].name, sizeof cfgs[k].name);
        }
    }
    for (int i = 0; i < n && !errors; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(cfgs[i].name, cfgs[j].name) == 0) {
                fprintf(stderr, "%s:0: case name '%s' is also the name of %s\n", cfgs[i].path,
                        cfgs[i].name, cfgs[j].path);
                errors++;
            }
    if (errors) {
        fprintf(stderr, "ampscope: %d error%s in case files; nothing was run\n", errors,
                errors == 1 ? "" : "s");
        free(cfgs);
        return NULL;
    }
    *n_out = n;
    return cfgs;
}

static backend *open_backend(const char *device, mem_account *account)
{
    char err[1024];
    if (strcmp(device, "cpu") == 0)
        return backend_cpu_open(account);
    backend *be = backend_cuda_load(account, getenv("AMPSCOPE_LIB_DIR"), err, sizeof err);
    if (be)
        return be;
    if (strcmp(device, "cuda") == 0) {
        fprintf(stderr, "ampscope: %s\n", err);
        return NULL;
    }
    fprintf(stderr, "ampscope: %s; running on the CPU\n", err);
    return backend_cpu_open(account);
}

static int cmd_check(const cli *c)
{
    int n;
    case_config *cfgs = load_cases(c, &n);
    if (!cfgs)
        return 2;
    for (int i = 0; i < n; i++) {
        if (c->json)
            case_write_json(&cfgs[i], stdout);
        else
            printf("%s: ok (%s)\n", cfgs[i].path, cfgs[i].name);
    }
    free(cfgs);
    return 0;
}

static int cmd_compare(const cli *c)
{
    int n;
    case_config *cfgs = load_cases(c, &n);
    if (!cfgs)
        return 2;
    int rc = compare_cases(cfgs, n, c->out, stdout);
    free(cfgs);
    return rc;
}

/* The preflight of every case: what the backend cannot run (fp8_refusal) and the memory
 * (train_preflight); returns the number of cases refused. */
static int preflight(const cli *c, const case_config *cfgs, int n_cfgs, backend *be)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    int64_t avail = be->mem_available(be), disk = -1;
    struct statvfs fs;
    if (c->train.dump_dir) { /* the folder, or the nearest one above it that exists */
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", c->train.dump_dir);
        while (statvfs(dir, &fs) != 0 && strcmp(dir, ".") && strcmp(dir, "/"))
            snprintf(dir, sizeof dir, "%s", dirname(dir));
        if (statvfs(dir, &fs) == 0)
            disk = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
    }
    int refused = 0;
    for (int i = 0; i < n_cfgs; i++) {
        int64_t need = 0, dump = 0;
        char err[1024];
        if (fp8_refusal(&cfgs[i], be, err, sizeof err)) {
            fprintf(stderr, "%s:%d: %s\n", cfgs[i].path, cfgs[i].fp8_line, err);
            refused++;
            continue;
        }
        /* a case that ends in an error still counted what it held until then */
        train_preflight(&cfgs[i], &c->train, &need, &dump, err, sizeof err);
        if (avail >= 0 && need > avail) {
            fprintf(stderr,
                    "%s:0: case %s needs %.2f GiB, %.2f GiB available on %s\n"
                    "---> HINT: lower [data] batch or the layer sizes, or run it on a larger "
                    "machine\n",
                    cfgs[i].path, cfgs[i].name, (double)need / gib, (double)avail / gib,
                    be->device);
            refused++;
        }
        if (disk >= 0 && dump > disk) {
            fprintf(stderr,
                    "%s:0: --dump of case %s needs %.2f GiB, %.2f GiB free in %s\n"
                    "---> HINT: --dump-only PATTERN writes fewer tensors\n",
                    cfgs[i].path, cfgs[i].name, (double)dump / gib, (double)disk / gib,
                    c->train.dump_dir);
            refused++;
        }
    }
    return refused;
}

static int cmd_selftest(const cli *c)
{
    backend *ref = backend_cpu_open(NULL);
    backend *dut = open_backend(c->device, NULL);
    if (!ref || !dut) {
        if (ref)
            ref->close(ref);
        return 2;
    }
    int failed = selftest_run(ref, dut, stdout);
    dut->close(dut);
    ref->close(ref);
    return failed ? 1 : 0;
}

/* --sweep: each case's table from its variants' rows (all of them ran; sweep_collect filled
 * rows[k] from variant k's record) */
static int write_sweeps(const cli *c, const case_config *cfgs, sweep_row *all)
{
    int64_t n_var = sweep_count(c->axes, c->n_axes);
    char err[1024], variant[SWEEP_MAX_AXES][192];
    int status = 0;
    for (int i = 0; i < c->n_cases && !status; i++) {
        case_config *base = calloc(1, sizeof *base);
        err_list errs = {0};
        if (!base || case_load(c->cases[i], c->sets, c->n_sets, base, &errs)) {
            fprintf(stderr, "ampscope: cannot load %s again\n", c->cases[i]);
            status = 2;
        }
        err_list_free(&errs);
        char name[CASE_NAME_MAX + 512];
        if (base && !status)
            results_variant_name(base->name, c->sets, c->n_sets, name, sizeof name);
        free(base);
        sweep_row *rows = all + i * n_var;
        for (int64_t v = 0; v < n_var && !status; v++) {
            sweep_row *r = &rows[v];
            snprintf(r->variant, sizeof r->variant, "%s", cfgs[i * n_var + v].name);
            sweep_variant(c->axes, c->n_axes, v, variant);
            for (int a = 0, off = 0; a < c->n_axes; a++)
                off += snprintf(r->settings + off, sizeof r->settings - (size_t)off, "%s%s",
                                a ? " " : "", variant[a]);
        }
        if (!status && sweep_write(c->out, name, c->axes, c->n_axes, rows, (int)n_var, err,
                                   sizeof err))
            status = 2;
        if (status)
            fprintf(stderr, "ampscope: sweep of %s: %s\n", c->cases[i], err);
        else
            printf("sweep of %s: %lld variants, the table in %s/%s.sweep/\n", name,
                   (long long)n_var, c->out, name);
    }
    return status;
}

static int cmd_matrix(const cli *c)
{
    if (c->n_axes || c->steps) {
        fprintf(stderr, "ampscope: matrix takes --set, not --sweep or --steps (--set "
                        "train.steps=N)\n");
        return 2;
    }
    backend *be = open_backend(c->device, NULL);
    if (!be)
        return 2;
    if (c->native_math)
        be->native_math = be->has_native_math;
    interrupt_install(false);
    int status = 0;
    for (int i = 0; i < c->n_cases && !status; i++)
        status = matrix_run(c->cases[i], c->sets, c->n_sets, be, &c->train, c->out, stdout);
    be->close(be);
    return status;
}

/* A rank of a distributed case, as mpirun started it (cli/launch.c) */
static int cmd_rank(const cli *c)
{
    interrupt_install(true); /* before anything: SIGUSR1's default would end the rank */
    int n_cfgs;
    case_config *cfgs = load_cases(c, &n_cfgs);
    backend *be = cfgs && n_cfgs == 1 ? open_backend(c->device, NULL) : NULL;
    int rc = be ? distributed_rank_main(&cfgs[0], be, &c->train) : 2;
    if (be)
        be->close(be);
    free(cfgs);
    return rc;
}

/* a distributed case's run over mpirun: the ranks' command line is this one's for it, with
 * its --sweep variant's values as --set ones (the ranks name it as load_cases did) */
static int run_ranks(const cli *c, const case_config *cfg, int64_t variant, const char *dir,
                     run_record *r)
{
    const char *argv[16 + 2 * (MAX_SETS + SWEEP_MAX_AXES)];
    char steps[32], values[SWEEP_MAX_AXES][192];
    int n = 0;
    argv[n++] = "run", argv[n++] = cfg->path, argv[n++] = "--device", argv[n++] = c->device;
    argv[n++] = "--quiet";
    for (int i = 0; i < c->n_sets; i++)
        argv[n++] = "--set", argv[n++] = c->sets[i];
    sweep_variant(c->axes, c->n_axes, variant, values);
    for (int a = 0; a < c->n_axes; a++)
        argv[n++] = "--set", argv[n++] = values[a];
    if (c->steps) {
        snprintf(steps, sizeof steps, "%lld", (long long)c->steps);
        argv[n++] = "--steps", argv[n++] = steps;
    }
    if (c->train.observe_off)
        argv[n++] = "--observe", argv[n++] = "off";
    if (c->train.dump_dir)
        argv[n++] = "--dump", argv[n++] = c->train.dump_dir;
    if (c->train.dump_only)
        argv[n++] = "--dump-only", argv[n++] = c->train.dump_only;
    if (c->train.dump_ranks)
        argv[n++] = "--dump-ranks";
    return distributed_train_case(cfg, argv, n, dir, r);
}

static int cmd_run(const cli *c)
{
    if (distributed_is_rank())
        return cmd_rank(c);
    int n_cfgs;
    case_config *cfgs = load_cases(c, &n_cfgs);
    if (!cfgs)
        return 2;
    if (c->hostfile && access(c->hostfile, R_OK) != 0) {
        fprintf(stderr, "ampscope: --hostfile %s: %s\n", c->hostfile, strerror(errno));
        free(cfgs);
        return 2;
    }
    for (int i = 0; c->hostfile && i < n_cfgs; i++)
        snprintf(cfgs[i].hosts, sizeof cfgs[i].hosts, "%s", c->hostfile);
    backend *be = open_backend(c->device, NULL);
    if (be && c->native_math && !be->has_native_math) {
        fprintf(stderr, "ampscope: --gpu-math native needs the CUDA backend (running on %s)\n",
                be->device);
        be->close(be);
        be = NULL;
    }
    if (be)
        be->native_math = c->native_math;
    /* what outlives each case's record: its summary row, its REPORT.md entry, its sweep row */
    case_result *res = calloc((size_t)n_cfgs, sizeof *res);
    report_entry *entries = calloc((size_t)n_cfgs, sizeof *entries);
    sweep_row *sweeps = c->n_axes ? calloc((size_t)n_cfgs, sizeof *sweeps) : NULL;
    run_record *rec = record_new();
    if (!be || !res || !entries || (c->n_axes && !sweeps) || !rec ||
        preflight(c, cfgs, n_cfgs, be)) {
        free(cfgs), free(res), free(entries), free(sweeps);
        record_free(rec);
        if (be)
            be->close(be);
        return 2;
    }
    interrupt_install(false);
    int status = 0, done = 0;
    bool variants = c->n_sets || c->n_axes; /* --set and --sweep runs report, never fail */
    for (int i = 0; i < n_cfgs; i++) {
        char tmp[4096], err[1024];
        case_result *r = &rec->result;
        if (results_begin(c->out, cfgs[i].name, tmp, sizeof tmp, err, sizeof err)) {
            fprintf(stderr, "ampscope: %s\n", err);
            status = 2;
            break;
        }
        int64_t variant = i % sweep_count(c->axes, c->n_axes);
        int rc = cfgs[i].world_size > 1 ? run_ranks(c, &cfgs[i], variant, tmp, rec)
                                         : results_run_case(&cfgs[i], be, &c->train, tmp, rec);
        if (rc == 0 && report_case(rec, tmp, err, sizeof err)) {
            snprintf(r->error, sizeof r->error, "%s", err);
            rc = -1;
        }
        /* a second signal (during the case or while its files were written), or a first one
         * before its first step finished: nothing of it is kept, OUT/<case> stays as it was */
        bool interrupted = rc == 0 && r->interrupted;
        if (interrupt_stop_now() || (interrupted && (!r->ok || !rec->n_steps))) {
            results_discard(tmp);
            fprintf(stderr,
                    "ampscope: interrupted by %s during case %s, which keeps its earlier "
                    "results; the %d case%s that finished keep theirs\n",
                    interrupt_name(interrupt_signal()), cfgs[i].name, done, done == 1 ? "" : "s");
            status = 128 + interrupt_signal();
            break;
        }
        if (rc || results_commit(c->out, cfgs[i].name, tmp, err, sizeof err)) {
            fprintf(stderr, "ampscope: %s: %s\n", cfgs[i].name, rc ? r->error : err);
            results_discard(tmp);
            status = 2;
            break;
        }
        res[done] = *r;
        report_entry_of(rec, &entries[done]);
        if (sweeps)
            sweep_collect(rec, &sweeps[done]);
        done++;
        if (interrupted) { /* the completed steps are kept; no case after it runs */
            printf("STOP %s on %s: %s; its %lld completed step%s kept in %s/%s\n", r->name,
                   r->device, r->error, (long long)rec->n_steps, rec->n_steps == 1 ? "" : "s",
                   c->out, cfgs[i].name);
            fflush(stdout);
            status = 128 + interrupt_signal();
            break;
        }
        bool passed = r->passed || variants;
        printf("%s %s on %s: %s%s, %d/%d expectations held%s\n",
               r->passed ? "PASS"
               : passed  ? "----"
                         : "FAIL",
               r->name, r->device, r->ok ? "ran" : "ended in error: ", r->ok ? "" : r->error,
               r->expect_passed, r->expect_total,
               variants ? " (--set run: reported, not judged)" : "");
        if (!r->passed)
            fputs(r->failures, stdout);
        fflush(stdout);
        if (!passed && status == 0)
            status = 1;
        if (interrupt_signal()) { /* during its last step: the case is whole, none after it runs */
            fprintf(stderr, "ampscope: interrupted by %s after case %s; %d case%s finished\n",
                    interrupt_name(interrupt_signal()), r->name, done, done == 1 ? "" : "s");
            status = 128 + interrupt_signal();
            break;
        }
    }
    char err[1024];
    if (done && (results_write_summary(c->out, res, done, err, sizeof err) ||
                 report_all(c->out, entries, done, err, sizeof err))) {
        fprintf(stderr, "ampscope: %s\n", err);
        status = 2;
    }
    if (c->n_axes && done == n_cfgs && status != 2) {
        int rc = write_sweeps(c, cfgs, sweeps);
        status = rc ? rc : status;
    }
    be->close(be);
    record_free(rec);
    free(res), free(entries), free(sweeps);
    free(cfgs);
    return status;
}

/* `ampscope ops|formats [--json]`: the table, or the JSON list */
static int print_listing(int argc, char **argv, void (*table)(FILE *), void (*json)(FILE *))
{
    bool as_json = argc > 2 && strcmp(argv[2], "--json") == 0;
    if (argc > 2 + as_json) {
        char what[64];
        snprintf(what, sizeof what, "%s takes only --json, not '%%s'", argv[1]);
        return bad_usage(what, argv[2 + as_json]);
    }
    (as_json ? json : table)(stdout);
    return 0;
}

/* `ampscope report DIR`: every case of DIR's summary.csv re-reported from its folder's
 * files (report.md), then DIR/REPORT.md; nothing is run and no CSV file is written */
static int cmd_report(const cli *c)
{
    if (c->n_cases != 1) {
        fprintf(stderr, "ampscope: report takes one results folder\n%s", usage);
        return 2;
    }
    const char *out = c->cases[0];
    char err[1024];
    csv_table sum;
    if (results_read_summary(out, &sum, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        return 2;
    }
    report_entry *entries = calloc((size_t)sum.n_rows + 1, sizeof *entries);
    run_record *rec = record_new();
    int status = entries && rec ? 0 : 2, n = 0;
    if (status)
        fprintf(stderr, "ampscope: out of memory\n");
    for (int i = 0; i < sum.n_rows && !status; i++) {
        int rc = results_read(out, &sum, i, rec, err, sizeof err);
        char dir[CSV_PATH_LEN];
        snprintf(dir, sizeof dir, "%s/%s", out, rec->result.name);
        if (rc == 0 && report_case(rec, dir, err, sizeof err))
            rc = -1;
        if (rc < 0) {
            fprintf(stderr, "ampscope: %s\n", err);
            status = 2;
        } else if (rc == 0) {
            report_entry_of(rec, &entries[n++]);
        }
    }
    if (!status && report_all(out, entries, n, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        status = 2;
    }
    if (!status)
        printf("report: %d case%s re-reported from %s's files, and %s/REPORT.md\n", n,
               n == 1 ? "" : "s", out, out);
    record_free(rec);
    free(entries);
    csv_table_free(&sum);
    return status;
}

int main(int argc, char **argv)
{
    /* OpenMP and OpenBLAS read their settings when they load: set, then start again */
    if (libenv_prepare()) {
        execv("/proc/self/exe", argv);
        perror("ampscope: cannot restart with OpenMP's and OpenBLAS's settings"); /* go on */
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ampscope %s (OpenBLAS kernels %s)\n", AMPSCOPE_VERSION, libenv_blas_core());
        return 0;
    }
    if (strcmp(argv[1], "ops") == 0)
        return print_listing(argc, argv, ops_print_table, ops_print_json);
    if (strcmp(argv[1], "import") == 0)
        return import_exec(argc, argv);
    if (strcmp(argv[1], "formats") == 0)
        return print_listing(argc, argv, format_print_table, format_print_json);
    static const struct {
        const char *name;
        int (*fn)(const cli *c);
    } commands[] = {{"run", cmd_run},
                    {"check", cmd_check},
                    {"compare", cmd_compare},
                    {"matrix", cmd_matrix},
                    {"report", cmd_report},
                    {"selftest", cmd_selftest}};
    int which = -1;
    for (int i = 0; i < (int)(sizeof commands / sizeof commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            which = i;
    if (which < 0)
        return bad_usage("unknown command '%s'", argv[1]);
    cli c = {0};
    int rc = parse_cli(argc, argv, &c);
    if (rc == 0)
        rc = commands[which].fn(&c);
    free(c.cases);
    return rc;
}
