/* results.c: a case run into its record and files, and the results folder's atomic updates
 * (see results.h). */
#include "results.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "columns.h"
#include "expect.h"
#include "write.h"

int results_run_case(const case_config *cfg, backend *be, const train_options *opt,
                     const char *dir, run_record *rec)
{
    record_clear(rec);
    results_record_config(rec, cfg);
    rec->has_allreduce = cfg->world_size > 1; /* rank 0 of a data-parallel case */
    backend_gemm_paths before = backend_cpu_gemm_paths();
    int rc = train_case(cfg, be, opt, rec);
    if (rc)
        return rc;
    backend_gemm_paths after = backend_cpu_gemm_paths();
    rec->config.gemm_sgemm = after.sgemm - before.sgemm;
    rec->config.gemm_bf16 = after.bf16 - before.bf16;
    expect_check(cfg, rec);
    char err[1024];
    if (results_write_case(dir, rec, err, sizeof err)) {
        snprintf(rec->result.error, sizeof rec->result.error, "%s", err);
        return -1;
    }
    return 0;
}

int results_begin(const char *out, const char *name, char *tmp, int tmplen, char *err, int errlen)
{
    if (mkdir(out, 0777) && errno != EEXIST) {
        snprintf(err, (size_t)errlen, "cannot create %s: %s", out, strerror(errno));
        return -1;
    }
    snprintf(tmp, (size_t)tmplen, "%s/.tmp-%s-XXXXXX", out, name);
    if (!mkdtemp(tmp)) {
        snprintf(err, (size_t)errlen, "cannot create a folder in %s: %s", out, strerror(errno));
        return -1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void results_discard(const char *tmp) { nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int results_commit(const char *out, const char *name, const char *tmp, char *err, int errlen)
{
    char dst[4096];
    snprintf(dst, sizeof dst, "%s/%s", out, name);
    if (rename(tmp, dst) == 0)
        return 0;
    if (errno != ENOTEMPTY && errno != EEXIST)
        goto fail;
    /* swap the new folder with the old one in one step, then remove the old */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        results_discard(tmp);
        return 0;
    }
fail:
    snprintf(err, (size_t)errlen, "cannot move %s to %s: %s", tmp, dst, strerror(errno));
    return -1;
}

void csv_write_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

const char *results_status(const case_result *r)
{
    return !r->ok ? "error" : r->interrupted ? "interrupted" : "ok";
}

static void write_row(FILE *f, const case_result *r)
{
    csv_write_field(f, r->name);
    fprintf(f, ",%s,%s,", r->device, results_status(r));
    csv_write_field(f, r->ok && !r->interrupted ? "" : r->error);
    fprintf(f, ",%s,%s,%s,%s,%s,%s,%s,%s,%lld,%lld,%.9g,%lld,%.3f,%d,%d\n", r->params, r->autocast,
            r->input_dtype, r->output_dtype, r->loss_dtype, r->param_grad_dtypes,
            r->cast_grad_dtypes, r->activation_grad_dtypes, (long long)r->grad_underflow,
            (long long)r->grad_numel, r->final_loss, (long long)r->peak_bytes, r->step_ms,
            r->expect_passed, r->expect_total);
}

/* true when the summary line belongs to one of the cases being written */
static bool replaced(const char *line, const case_result *res, int n)
{
    size_t len = strcspn(line, ",");
    for (int i = 0; i < n; i++)
        if (strlen(res[i].name) == len && strncmp(line, res[i].name, len) == 0)
            return true;
    return false;
}

int results_write_summary(const char *out, const case_result *res, int n, char *err, int errlen)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/summary.csv", out);
    snprintf(tmp, sizeof tmp, "%s/.summary.csv.%d", out, (int)getpid());
    FILE *dst = fopen(tmp, "w");
    if (!dst) {
        snprintf(err, (size_t)errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(dst, "%s\n", csv_summary.header);
    FILE *old = fopen(path, "r");
    if (old) {
        char *line = NULL;
        size_t cap = 0;
        bool header = true;
        while (getline(&line, &cap, old) > 0) {
            if (!header && !replaced(line, res, n))
                fputs(line, dst);
            header = false;
        }
        free(line);
        fclose(old);
    }
    for (int i = 0; i < n; i++)
        write_row(dst, &res[i]);
    if (fclose(dst) || rename(tmp, path)) {
        snprintf(err, (size_t)errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

void results_variant_name(const char *name, const char *const *sets, int n_sets, char *buf, int len)
{
    int off = snprintf(buf, (size_t)len, "%s", name);
    for (int i = 0; i < n_sets && off < len; i++)
        off += snprintf(buf + off, (size_t)(len - off), "+%s", sets[i]);
    for (char *p = buf; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._=+-", *p))
            *p = '_';
}
