/*
 * cli/launch.c: a distributed case's two sides (distributed.h).
 *
 * `ampscope run` (the launcher) starts `mpirun -np N bin/ampscope run CASE ...` with
 * AMPSCOPE_RANK_DIR naming the case's temporary results folder, as root with
 * --allow-run-as-root, always with --oversubscribe and --bind-to none (more ranks than
 * cores is this harness's usual case), and with one OpenMP and OpenBLAS thread per rank
 * when the ranks outnumber the cores. A case that pins allreduce_algorithm passes it as
 * Open MPI's coll_tuned_use_dynamic_rules=1 and coll_tuned_allreduce_algorithm=K.
 *
 * Each rank (distributed_rank_main) runs the case with seed + rank; rank 0 writes the CSVs
 * into that folder, plus allreduce.csv and ranks.csv, and hands its case_result back in a
 * file the launcher reads and removes. A failure on any rank writes rank-error.K there and
 * aborts every rank (MPI_Abort); the launcher then reports that rank's message and the
 * folder is discarded, so OUT keeps what it had.
 */
#include "distributed/distributed.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/state.h"
#include "results/results.h"
#include "train/train.h"

#define RESULT_FILE ".rank0-result"
#define REPORT_FILE ".allreduce.md"
#define LOG_FILE ".mpirun.log"

void distributed_note_row(const char *tensor, int64_t underflow, int64_t overflow,
                          int64_t nonfinite, double rel_error, double sqnr_db, int64_t step)
{
    if (dist.n_rows && dist.rows[0].step != step) /* a later step: a new table */
        dist.n_rows = 0;
    if (dist.n_rows == DIST_MAX_ROWS)
        return;
    dist_row *w = &dist.rows[dist.n_rows++];
    snprintf(w->tensor, sizeof w->tensor, "%s", tensor);
    w->underflow = underflow, w->overflow = overflow, w->nonfinite = nonfinite;
    w->rel_error = rel_error, w->sqnr_db = sqnr_db, w->step = step;
}

/* ---- the rank's side ---- */

static FILE *open_in(const char *dir, const char *file, const char *header)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (f && header)
        fprintf(f, "%s\n", header);
    return f;
}

_Noreturn static void rank_failed(const char *dir, const char *msg)
{
    char name[64];
    snprintf(name, sizeof name, "rank-error.%d", dist.rank);
    FILE *f = open_in(dir, name, NULL);
    if (f) {
        fputs(msg, f);
        fclose(f);
    }
    distributed_abort(2);
}

static void write_report_section(const case_config *cfg, const char *dir)
{
    FILE *f = open_in(dir, REPORT_FILE, NULL);
    if (!f)
        return;
    comm_plan p = distributed_plan((comm_policy)cfg->comm, cfg->params, cfg->reduce_dtype,
                                   cfg->world_size);
    fprintf(f, "\n## All-reduce\n\n%lld ranks over MPI, comm = %s", (long long)cfg->world_size,
            comm_policy_names[cfg->comm]);
    if (cfg->comm == COMM_FSDP || cfg->comm == COMM_FSDP2)
        fprintf(f, " reduce_dtype=%s", dtype_name(cfg->reduce_dtype));
    fprintf(f, ": gradients travel in %s", cfg->comm == COMM_DDP ? ".grad's dtype" : dtype_name(p.wire));
    if (p.premul != 1)
        fprintf(f, ", multiplied by 1/%lld before the sum", (long long)cfg->world_size);
    if (p.prediv > 1)
        fprintf(f, ", divided by %g before the sum", p.prediv);
    if (p.postdiv > 1)
        fprintf(f, ", divided by %g after it", p.postdiv);
    fprintf(f, "; one all-reduce per parameter; Open MPI's allreduce algorithm: %s.\n\n",
            cfg->allreduce_algorithm ? allreduce_algorithm_names[cfg->allreduce_algorithm]
                                     : "default (its tuned decision rules, by message size "
                                       "and ranks; not pinned)");
    if (dist.n_rows) {
        fprintf(f, "What the all-reduce lost at step %lld, against the exact mean of the "
                   "ranks' gradients (allreduce.csv has every observed step):\n\n",
                (long long)dist.rows[0].step);
        fputs("| gradient | underflow | overflow | non-finite | relative error | SQNR (dB) |\n"
              "|---|---:|---:|---:|---:|---:|\n", f);
        for (int i = 0; i < dist.n_rows; i++) {
            const dist_row *w = &dist.rows[i];
            fprintf(f, "| %s | %lld | %lld | %lld | %.3g | %.1f |\n", w->tensor,
                    (long long)w->underflow, (long long)w->overflow, (long long)w->nonfinite,
                    w->rel_error, w->sqnr_db);
        }
    }
    fclose(f);
}

int distributed_rank_main(case_config *cfg, backend *be, const train_options *opt)
{
    const char *dir = getenv("AMPSCOPE_RANK_DIR");
    char err[1024];
    if (distributed_mpi_init(err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        return 2;
    }
    dist.rank = distributed_rank();
    dist.world_size = distributed_world_size();
    if (dist.world_size != cfg->world_size) {
        snprintf(err, sizeof err, "%.900s: world_size = %lld, started as %d ranks", cfg->path,
                 (long long)cfg->world_size, dist.world_size);
        rank_failed(dir, err);
    }
    char own[64] = "/tmp/ampscope-rank-XXXXXX"; /* ranks > 0: their CSVs, then removed */
    const char *mine = dir;
    if (dist.rank > 0) {
        if (!mkdtemp(own)) {
            snprintf(err, sizeof err, "cannot make a folder in /tmp: %s", strerror(errno));
            rank_failed(dir, err);
        }
        mine = own;
    } else {
        dist.allreduce_csv = open_in(dir, "allreduce.csv", DIST_ALLREDUCE_HEADER);
        dist.ranks_csv = open_in(dir, "ranks.csv", DIST_RANKS_HEADER);
        if (!dist.allreduce_csv || !dist.ranks_csv) {
            snprintf(err, sizeof err, "cannot write in %s: %s", dir, strerror(errno));
            rank_failed(dir, err);
        }
    }
    if (strcmp(be->name, "cuda") == 0 && distributed_nccl_open(err, sizeof err))
        rank_failed(dir, err);
    cfg->seed += (uint64_t)dist.rank; /* each rank's own data; parameters from rank 0 */
    dist.active = true;
    case_result *res = calloc(1, sizeof *res);
    if (!res)
        rank_failed(dir, "out of host memory");
    int rc = train_case(cfg, be, opt, mine, res);
    cfg->seed -= (uint64_t)dist.rank;
    if (dist.rank > 0)
        results_discard(own);
    if (rc || !res->ok) {
        snprintf(err, sizeof err, "%s", res->error);
        rank_failed(dir, err);
    }
    if (dist.rank == 0) {
        write_report_section(cfg, dir);
        FILE *f = open_in(dir, RESULT_FILE, NULL);
        bool ok = fclose(dist.allreduce_csv) == 0 && fclose(dist.ranks_csv) == 0 && f &&
                  fwrite(res, sizeof *res, 1, f) == 1;
        if (!f || fclose(f) || !ok) {
            snprintf(err, sizeof err, "cannot write results in %s", dir);
            rank_failed(dir, err);
        }
    }
    free(res);
    distributed_nccl_close();
    distributed_mpi_finalize();
    return 0;
}

/* ---- the launcher's side ---- */

/* the lowest failed rank's message, else the log's last line */
static void failure_text(const char *dir, int status, char *out, int len)
{
    char path[4096], line[1024] = "";
    for (int k = 0; k < 1024; k++) {
        snprintf(path, sizeof path, "%s/rank-error.%d", dir, k);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(line, 1, sizeof line - 1, f);
        line[n] = '\0';
        fclose(f);
        snprintf(out, (size_t)len, "rank %d: %s", k, line);
        return;
    }
    snprintf(path, sizeof path, "%s/" LOG_FILE, dir);
    FILE *f = fopen(path, "r");
    char last[1024] = "";
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '\n')
            snprintf(last, sizeof last, "%s", line);
    if (f)
        fclose(f);
    last[strcspn(last, "\n")] = '\0';
    snprintf(out, (size_t)len, "mpirun ended with status %d%s%s", status, last[0] ? ": " : "",
             last);
}

int distributed_train_case(const case_config *cfg, const char *const *argv, int argc,
                           const char *dir, case_result *res)
{
    memset(res, 0, sizeof *res);
    snprintf(res->name, sizeof res->name, "%s", cfg->name);
    if (!distributed_have_mpi()) {
        snprintf(res->error, sizeof res->error,
                 "%.800s has world_size = %lld, and this ampscope was built without MPI (make "
                 "MPI=0, or the GPU bundle): install Open MPI (scripts/install-deps.sh) and "
                 "rebuild",
                 cfg->path, (long long)cfg->world_size);
        return -1;
    }
    char self[4096], np[32], algo[64], log[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(res->error, sizeof res->error, "cannot find this program: %s", strerror(errno));
        return -1;
    }
    self[n] = '\0';
    snprintf(np, sizeof np, "%lld", (long long)cfg->world_size);
    snprintf(algo, sizeof algo, "coll_tuned_allreduce_algorithm=%d", cfg->allreduce_algorithm);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool crowded = cfg->world_size > cores;
    const char *args[64 + 64];
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-np", args[k++] = np;
    if (geteuid() == 0)
        args[k++] = "--allow-run-as-root";
    args[k++] = "--oversubscribe";
    args[k++] = "--bind-to", args[k++] = "none";
    if (cfg->allreduce_algorithm) {
        args[k++] = "--mca", args[k++] = "coll_tuned_use_dynamic_rules", args[k++] = "1";
        args[k++] = "--mca", args[k++] = "coll_tuned_allreduce_algorithm";
        args[k++] = strchr(algo, '=') + 1;
    }
    args[k++] = "-x", args[k++] = "AMPSCOPE_RANK_DIR";
    if (crowded) {
        args[k++] = "-x", args[k++] = "OMP_NUM_THREADS=1";
        args[k++] = "-x", args[k++] = "OPENBLAS_NUM_THREADS=1";
    }
    if (getenv("AMPSCOPE_DISTRIBUTED_FAIL"))
        args[k++] = "-x", args[k++] = "AMPSCOPE_DISTRIBUTED_FAIL";
    args[k++] = self;
    for (int i = 0; i < argc && k < 127; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    snprintf(log, sizeof log, "%s/" LOG_FILE, dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("AMPSCOPE_RANK_DIR", dir, 1);
        FILE *f = freopen(log, "w", stdout);
        if (f)
            dup2(fileno(stdout), STDERR_FILENO);
        execvp("mpirun", (char *const *)args);
        fprintf(stderr, "cannot start mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    int status = -1;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        snprintf(res->error, sizeof res->error, "cannot start mpirun: %s", strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/" RESULT_FILE, dir);
    FILE *f = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? fopen(path, "rb") : NULL;
    bool got = f && fread(res, sizeof *res, 1, f) == 1;
    if (f)
        fclose(f);
    if (!got) {
        char why[1024];
        failure_text(dir, WIFEXITED(status) ? WEXITSTATUS(status) : -1, why, sizeof why);
        snprintf(res->error, sizeof res->error, "%s", why);
        return -1;
    }
    unlink(path);
    unlink(log);
    return 0;
}

int distributed_report(const case_config *cfg, const char *dir, char *err, int len)
{
    char src[4096], dst[4096], buf[4096];
    snprintf(src, sizeof src, "%s/" REPORT_FILE, dir);
    snprintf(dst, sizeof dst, "%s/report.md", dir);
    FILE *in = fopen(src, "r"), *out = in ? fopen(dst, "a") : NULL;
    size_t n;
    while (out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    int rc = !in || !out || ferror(in) || fclose(out);
    if (in)
        fclose(in);
    unlink(src);
    if (rc)
        snprintf(err, (size_t)len, "cannot add the all-reduce section to %s", dst);
    return rc ? -1 : 0;
}
