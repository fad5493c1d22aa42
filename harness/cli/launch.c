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
 * Each rank (distributed_rank_main) runs the case with seed + rank into its record; rank 0
 * writes its record's files into that folder (allreduce.csv and ranks.csv among them) and
 * hands its case_result back in a file the launcher reads and removes; the launcher reads
 * the folder's files into its record (results/read.h: rank 0's record is another process's).
 * A failure on any rank writes rank-error.K there and aborts every rank (MPI_Abort); the
 * launcher then reports that rank's message and the folder is discarded, so OUT keeps what
 * it had.
 */
#include "distributed/distributed.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/state.h"
#include "results/read.h"
#include "results/results.h"
#include "train/train.h"

#define RESULT_FILE ".rank0-result"
#define LOG_FILE ".mpirun.log"

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
    if (strcmp(be->name, "cuda") == 0 && distributed_nccl_open(err, sizeof err))
        rank_failed(dir, err);
    cfg->seed += (uint64_t)dist.rank; /* each rank's own data; parameters from rank 0 */
    dist.active = true;
    run_record *rec = record_new();
    if (!rec)
        rank_failed(dir, "out of host memory");
    /* rank 0 writes the case's files; the others' records hold their rows, unwritten */
    int rc = dist.rank == 0 ? results_run_case(cfg, be, opt, dir, rec) : train_case(cfg, be, opt, rec);
    cfg->seed -= (uint64_t)dist.rank;
    const case_result *res = &rec->result;
    if (rc || !res->ok) {
        snprintf(err, sizeof err, "%s", res->error);
        rank_failed(dir, err);
    }
    if (dist.rank == 0) {
        FILE *f = open_in(dir, RESULT_FILE, NULL);
        bool ok = f && fwrite(res, sizeof *res, 1, f) == 1;
        if (!f || fclose(f) || !ok) {
            snprintf(err, sizeof err, "cannot write results in %s", dir);
            rank_failed(dir, err);
        }
    }
    record_free(rec);
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
                           const char *dir, run_record *rec)
{
    record_clear(rec);
    case_result *res = &rec->result;
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
    case_result got;
    bool have = f && fread(&got, sizeof got, 1, f) == 1;
    if (f)
        fclose(f);
    if (!have) {
        char why[1024];
        failure_text(dir, WIFEXITED(status) ? WEXITSTATUS(status) : -1, why, sizeof why);
        snprintf(res->error, sizeof res->error, "%s", why);
        return -1;
    }
    unlink(path);
    unlink(log);
    char err[1024];
    if (results_read_case(dir, rec, err, sizeof err)) { /* rank 0's files, as it wrote them */
        snprintf(res->error, sizeof res->error, "%s", err);
        return -1;
    }
    rec->result = got;
    return 0;
}
