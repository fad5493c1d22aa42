/*
 * cli/launch.c: a distributed case's two sides (distributed.h).
 *
 * `ampscope run` (the launcher) starts `mpirun -np N bin/ampscope run CASE ...` with
 * AMPSCOPE_RANK=1 exported to every rank, on the hosts of the case's `hosts = FILE` or
 * `--hostfile FILE` (an Open MPI hostfile; else this host), as root with
 * --allow-run-as-root, always with --oversubscribe and --bind-to none (more ranks than cores
 * is this harness's usual case), and with one OpenMP and OpenBLAS thread per rank when the
 * ranks outnumber this host's cores. A case that pins allreduce_algorithm passes it as Open
 * MPI's coll_tuned_use_dynamic_rules=1 and coll_tuned_allreduce_algorithm=K. The program,
 * the case file and its data files must be at the same paths on every host, as mpirun needs
 * of the program; no folder is shared between hosts.
 *
 * Each rank (distributed_rank_main) runs the case with seed + rank into its record; every
 * rank's gradient counts reach rank 0's record over MPI (distributed.c). Rank 0 writes its
 * record's files into a folder of its own host's and sends them, then its case_result, to
 * the launcher on its standard output, which mpirun forwards from whichever host it runs on:
 * each file a frame "\n" FRAME_TAG " NAME BYTES\n" and its bytes. The launcher writes them
 * into the case's temporary folder and reads them into its record (results/read.h: rank
 * 0's record is another process's, perhaps on another host). A failure on any rank prints
 * "ampscope: rank K: MESSAGE" on its standard error and aborts every rank (MPI_Abort);
 * mpirun forwards that line into the launcher's log (.mpirun.log in the case's temporary
 * folder), the launcher reports the lowest rank's message, or what mpirun said (a rank killed by a
 * signal, a host where Open MPI could not start its daemon), and the folder is discarded,
 * so OUT keeps what it had.
 *
 * Signals: Open MPI 4.1's mpirun answers SIGINT and SIGTERM by sending the ranks SIGTERM and
 * then SIGKILL about a second later (odls_base_sigkill_timeout), and each rank sits in its
 * own process group. So mpirun runs in a process group of its own, out of the terminal's
 * reach (its standard input /dev/null), and the launcher takes Ctrl-C itself: a first SIGINT
 * or SIGTERM is sent on to mpirun as SIGUSR1 or SIGUSR2, which mpirun forwards to every
 * rank (core/interrupt.h); the ranks agree to stop after the same step and rank 0 sends the
 * completed steps' files as usual. A second signal sends mpirun SIGTERM, which ends the
 * ranks at once; nothing of the case is kept.
 */
#include "distributed/distributed.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/interrupt.h"
#include "distributed/state.h"
#include "results/read.h"
#include "results/results.h"
#include "train/train.h"

#define FRAME_TAG "@ampscope-file"
#define RESULT_FRAME ".result" /* rank 0's case_result, as this build lays it out */
#define LOG_FILE ".mpirun.log"
#define RANK_ERROR "ampscope: rank "

/* ---- the rank's side ---- */

/* the message on one line, then every rank ends */
_Noreturn static void rank_failed(const char *msg)
{
    char line[1024];
    snprintf(line, sizeof line, "%s", msg);
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, RANK_ERROR "%d: %s\n", dist.rank, line);
    distributed_abort(2);
}

/* folder/name as a frame on standard output; non-zero when it cannot be read */
static int send_file(const char *folder, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%.3800s/%s", folder, name);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st)) {
        if (f)
            fclose(f);
        return -1;
    }
    printf("\n" FRAME_TAG " %s %lld\n", name, (long long)st.st_size);
    char buf[65536];
    size_t n;
    long long sent = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sent += (long long)fwrite(buf, 1, n, stdout);
    fclose(f);
    return sent == (long long)st.st_size ? 0 : -1;
}

/* rank 0: the case run into a folder of this host's, its files and result sent */
static int rank0_run(case_config *cfg, backend *be, const train_options *opt, run_record *rec,
                     char *err, int errlen)
{
    const char *tmpdir = getenv("TMPDIR");
    char folder[4096];
    snprintf(folder, sizeof folder, "%s/ampscope-rank0-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(folder)) {
        snprintf(err, (size_t)errlen, "cannot create a folder for rank 0's results: %s",
                 strerror(errno));
        return -1;
    }
    int rc = results_run_case(cfg, be, opt, folder, rec);
    if (rc || !rec->result.ok) {
        snprintf(err, (size_t)errlen, "%s", rec->result.error);
        results_discard(folder);
        return -1;
    }
    static const csv_columns *const files[] = {&csv_tensors, &csv_hist,   &csv_steps,
                                               &csv_memory,  &csv_config, &csv_expect,
                                               &csv_fp8,     &csv_allreduce, &csv_ranks};
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0] && rc == 0; i++) {
        snprintf(path, sizeof path, "%.3800s/%s", folder, files[i]->file);
        if (access(path, F_OK) == 0 && send_file(folder, files[i]->file))
            rc = -1;
    }
    results_discard(folder);
    if (rc == 0) {
        printf("\n" FRAME_TAG " " RESULT_FRAME " %zu\n", sizeof rec->result);
        fwrite(&rec->result, sizeof rec->result, 1, stdout);
    }
    if (rc || fflush(stdout)) {
        snprintf(err, (size_t)errlen, "cannot send rank 0's results to the launcher");
        return -1;
    }
    return 0;
}

int distributed_rank_main(case_config *cfg, backend *be, const train_options *opt)
{
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
        rank_failed(err);
    }
    if (strcmp(be->name, "cuda") == 0 && distributed_nccl_open(err, sizeof err))
        rank_failed(err);
    /* --dump: rank 0's tensors as a one-process run's; with --dump-ranks every rank's own
     * gradients, before the all-reduce, under DIR/rank-R/ (on the rank's host) */
    train_options mine = *opt;
    if (opt->dump_dir && opt->dump_ranks)
        snprintf(dist.dump_dir, sizeof dist.dump_dir, "%s/rank-%d", opt->dump_dir, dist.rank);
    dist.dump_only = opt->dump_only;
    if (dist.rank != 0)
        mine.dump_dir = NULL;
    cfg->seed += (uint64_t)dist.rank; /* each rank's own data; parameters from rank 0 */
    dist.active = true;
    run_record *rec = record_new();
    if (!rec)
        rank_failed("out of host memory");
    /* rank 0 sends the case's files; the others' records hold their rows, unsent */
    int rc = dist.rank == 0 ? rank0_run(cfg, be, &mine, rec, err, sizeof err)
                            : train_case(cfg, be, &mine, rec);
    cfg->seed -= (uint64_t)dist.rank;
    if (dist.rank != 0 && (rc || !rec->result.ok))
        snprintf(err, sizeof err, "%s", rec->result.error);
    if (rc || !rec->result.ok)
        rank_failed(err);
    record_free(rec);
    distributed_nccl_close();
    distributed_mpi_finalize();
    return 0;
}

/* ---- the launcher's side ---- */

/* A line of the log, trimmed of its newline, into out; false at its end. */
static bool next_line(FILE *f, char *out, int len)
{
    if (!fgets(out, len, f))
        return false;
    out[strcspn(out, "\n")] = '\0';
    return true;
}

/* Why mpirun ended without rank 0's results, from its log: the lowest rank's own message;
 * a host Open MPI could not start its daemon on; a rank ended by a signal, as mpirun names
 * it; else the status and the log's last words. */
static void failure_text(const char *log, const char *hosts, int status, char *out, int len)
{
    FILE *f = fopen(log, "r");
    char line[1024], rank_msg[1024] = "", signal_msg[1024] = "", last[1024] = "", host[256] = "";
    int lowest = -1;
    bool daemons = false;
    while (f && next_line(f, line, sizeof line)) {
        if (strncmp(line, RANK_ERROR, strlen(RANK_ERROR)) == 0) {
            int k = atoi(line + strlen(RANK_ERROR));
            if (lowest < 0 || k < lowest) {
                lowest = k;
                snprintf(rank_msg, sizeof rank_msg, "%s", line + strlen("ampscope: "));
            }
        } else if (strstr(line, "unable to reliably start one or more daemons")) {
            daemons = true;
        } else if (strncmp(line, "ssh: ", 5) == 0 && !host[0]) { /* ssh's words, or the agent's */
            snprintf(host, sizeof host, "%.250s", line);
        } else if (strstr(line, "exited on signal") && !signal_msg[0]) {
            snprintf(signal_msg, sizeof signal_msg, "%s", line);
        } else if (line[0] && line[0] != '-') {
            snprintf(last, sizeof last, "%s", line);
        }
    }
    if (f)
        fclose(f);
    if (lowest >= 0)
        snprintf(out, (size_t)len, "%s", rank_msg);
    else if (daemons)
        snprintf(out, (size_t)len,
                 "Open MPI could not start its daemon on a host of %.300s (mpirun: \"unable to "
                 "reliably start one or more daemons\", status %d)%s%s\n"
                 "---> HINT: each host must be reachable by ssh (or Open MPI's "
                 "plm_rsh_agent) and have Open MPI and this program at the same paths",
                 hosts[0] ? hosts : "this host", status, host[0] ? ": " : "", host);
    else
        snprintf(out, (size_t)len, "mpirun ended with status %d%s%s", status,
                 signal_msg[0] || last[0] ? ": " : "", signal_msg[0] ? signal_msg : last);
}

/* mpirun's standard output so far */
typedef struct byte_buf {
    char *s;
    size_t n, cap;
    bool failed;
} byte_buf;

static void buf_add(byte_buf *b, const char *s, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = 2 * (b->n + n) + 65536;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
}

/* The signals the launcher received, passed on to mpirun (see the top of this file) */
static void pass_signals(pid_t mpirun, int *passed)
{
    if (interrupt_stop_now() && *passed < 2) {
        kill(mpirun, SIGTERM);
        *passed = 2;
    } else if (interrupt_signal() && *passed < 1) {
        kill(mpirun, interrupt_signal() == SIGINT ? SIGUSR1 : SIGUSR2);
        *passed = 1;
    }
}

/* Reads mpirun's output until it closes it, then waits for it, passing signals on; its
 * wait status, or -1 */
static int wait_mpirun(pid_t pid, int fd, byte_buf *out)
{
    int passed = 0;
    for (;;) {
        pass_signals(pid, &passed);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 100); /* a signal between the check and poll waits 0.1 s */
        if (ready < 0 && errno != EINTR)
            break;
        if (ready <= 0)
            continue;
        char chunk[65536];
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n > 0)
            buf_add(out, chunk, (size_t)n);
        else if (n == 0 || errno != EINTR)
            break;
    }
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
        pass_signals(pid, &passed);
    }
    return status;
}

static int frames_fail(char *err, int errlen, const char *why)
{
    snprintf(err, (size_t)errlen, "%s", why);
    return -1;
}

/* The frames of rank 0's output written into dir, its result into *got; non-zero (message
 * in err) when they are not all there */
static int write_frames(const byte_buf *b, const char *dir, case_result *got, char *err,
                        int errlen)
{
    const char *tag = "\n" FRAME_TAG " ";
    size_t tag_len = strlen(tag), at = 0;
    bool have_result = false;
    while (at < b->n) {
        const char *p = memmem(b->s + at, b->n - at, tag, tag_len);
        if (!p)
            break;
        char name[256];
        long long bytes = -1;
        const char *head = p + tag_len, *nl = memchr(head, '\n', b->n - (size_t)(head - b->s));
        if (!nl || sscanf(head, "%255s %lld", name, &bytes) != 2 || bytes < 0 ||
            (size_t)bytes > b->n - (size_t)(nl + 1 - b->s) || strchr(name, '/'))
            return frames_fail(err, errlen, "rank 0's output is cut or garbled");
        const char *data = nl + 1;
        if (strcmp(name, RESULT_FRAME) == 0) {
            if ((size_t)bytes != sizeof *got)
                return frames_fail(err, errlen, "rank 0's result is of another build");
            memcpy(got, data, sizeof *got);
            have_result = true;
        } else {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            FILE *f = fopen(path, "wb");
            bool ok = f && fwrite(data, 1, (size_t)bytes, f) == (size_t)bytes;
            if (!f || fclose(f) || !ok) {
                snprintf(err, (size_t)errlen, "cannot write %.900s", path);
                return -1;
            }
        }
        at = (size_t)(data - b->s) + (size_t)bytes;
    }
    return have_result ? 0 : frames_fail(err, errlen, "rank 0 sent no result");
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
    snprintf(algo, sizeof algo, "%d", cfg->allreduce_algorithm);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool crowded = cfg->world_size > cores;
    const char *args[64 + 64];
    int k = 0;
    args[k++] = "mpirun";
    args[k++] = "-np", args[k++] = np;
    if (cfg->hosts[0])
        args[k++] = "--hostfile", args[k++] = cfg->hosts;
    if (geteuid() == 0)
        args[k++] = "--allow-run-as-root";
    args[k++] = "--oversubscribe";
    args[k++] = "--bind-to", args[k++] = "none";
    if (cfg->allreduce_algorithm) {
        args[k++] = "--mca", args[k++] = "coll_tuned_use_dynamic_rules", args[k++] = "1";
        args[k++] = "--mca", args[k++] = "coll_tuned_allreduce_algorithm", args[k++] = algo;
    }
    args[k++] = "-x", args[k++] = "AMPSCOPE_RANK=1";
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
    int out[2];
    if (pipe(out)) {
        snprintf(res->error, sizeof res->error, "cannot start mpirun: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* out of the terminal's Ctrl-C: the launcher passes it on */
        int in = open("/dev/null", O_RDONLY), err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (in < 0 || err < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
            dup2(err, STDERR_FILENO) < 0)
            _exit(127);
        close(out[0]), close(out[1]), close(in), close(err);
        execvp("mpirun", (char *const *)args);
        fprintf(stderr, "cannot start mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    close(out[1]);
    if (pid < 0) {
        close(out[0]);
        snprintf(res->error, sizeof res->error, "cannot start mpirun: %s", strerror(errno));
        return -1;
    }
    setpgid(pid, pid);
    byte_buf got_out = {0};
    int status = wait_mpirun(pid, out[0], &got_out);
    int rc = 0;
    case_result got;
    char err[1024];
    if (interrupt_stop_now()) { /* a second signal ended the ranks: nothing is kept */
        res->interrupted = true;
        snprintf(res->error, sizeof res->error, "interrupted by a second %s",
                 interrupt_name(interrupt_signal()));
    } else if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || got_out.failed) {
        int code = status < 0         ? -1
                   : WIFEXITED(status) ? WEXITSTATUS(status)
                                       : 128 + WTERMSIG(status);
        failure_text(log, cfg->hosts, code, res->error, sizeof res->error);
        rc = -1;
    } else if (write_frames(&got_out, dir, &got, err, sizeof err) ||
               results_read_case(dir, rec, err, sizeof err)) { /* rank 0's files, as it wrote them */
        snprintf(res->error, sizeof res->error, "%s", err);
        rc = -1;
    } else {
        rec->result = got;
        unlink(log);
    }
    free(got_out.s);
    return rc;
}
