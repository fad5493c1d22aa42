/* helpers.c: shared test helpers (see helpers.h). */
#include "helpers.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "autograd/run.h"
#include "case/load.h"
#include "report/report.h"
#include "results/results.h"

void env_open(test_env *e)
{
    memset(e, 0, sizeof *e);
    e->be = backend_cpu_open(&e->account);
    cr_assert_not_null(e->be);
    e->be->account = &e->account;
    e->pool = (tensor_pool){.be = e->be, .account = &e->account};
}

void env_close(test_env *e)
{
    tensor_pool_clear(&e->pool);
    e->be->close(e->be);
}

tensor *env_tensor(test_env *e, const char *name, dtype dt, int ndim, const int64_t *shape,
                   const float *v)
{
    char err[256];
    tensor *t = tensor_new(&e->pool, name, dt, ndim, shape, MEM_ACTIVATIONS, err, sizeof err);
    cr_assert_not_null(t, "%s", err);
    for (int64_t i = 0; i < t->numel; i++)
        if (format_of(dt))
            store_from_float(t->data, dt, i, v ? v[i] : 0.0f);
        else /* int64 class labels */
            ((int64_t *)t->data)[i] = v ? (int64_t)v[i] : 0;
    return t;
}

tensor *env_zeros(test_env *e, const char *name, dtype dt, int ndim, const int64_t *shape)
{
    return env_tensor(e, name, dt, ndim, shape, NULL);
}

float tensor_at(const tensor *t, int64_t i) { return load_as_float(t->data, t->dtype, i); }

dtype dtype_named(const char *s)
{
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (strcmp(dtype_name((dtype)d), s) == 0)
            return (dtype)d;
    cr_assert_fail("no dtype %s", s);
    return DTYPE_FLOAT32;
}

int64_t parse_floats(const char *text, float *v, int64_t max)
{
    int64_t n = 0;
    for (char *end; *text && n < max; text = end) {
        v[n++] = strtof(text, &end);
        if (end == text)
            break;
    }
    return n;
}

bool reference_agrees(float got, float want, float pre, dtype dt, float rel, float noise)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (dt == DTYPE_FLOAT32)
        return fabsf(got - want) <= rel * fabsf(want) + 1e-6f;
    if (got == want)
        return true;
    const format_info *f = format_of(dt);
    int e;
    frexpf(fmaxf(fabsf(pre), f->smallest_normal), &e);
    float ulp = ldexpf(1.0f, e - 1 - f->mantissa_bits);
    return fabsf(got - pre) <= 0.5f * ulp + noise;
}

void make_temp_dir(char *buf, int len)
{
    snprintf(buf, (size_t)len, "/tmp/ampscope-test-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

static int rm_entry(const char *p, const struct stat *s, int f, struct FTW *w)
{
    (void)s, (void)f, (void)w;
    return remove(p);
}

void rm_rf(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

int run_command(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    /* read the rest: a command cut off by SIGPIPE would lose its exit status */
    char rest[4096];
    while (fread(rest, 1, sizeof rest, p) > 0) {
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void isa_blas_kernels(const char *level, char *buf, size_t len)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    char cmd[1024], out[256];
    snprintf(cmd, sizeof cmd, "AMPSCOPE_CPU_ISA=%s %s --version", level, bin);
    cr_assert_eq(run_command(cmd, out, sizeof out), 0, "%s: %s", cmd, out);
    const char *k = strstr(out, "(OpenBLAS kernels ");
    cr_assert_not_null(k, "%s: %s", cmd, out);
    snprintf(buf, len, "%.*s", (int)strcspn(k + 18, ")"), k + 18);
}

static bool same_bytes(const char *a, const char *b, char *why, size_t len)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    long at = 0;
    for (int ca = 0, cb = 0; same && ca != EOF; at++) {
        ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
    }
    if (!same)
        snprintf(why, len, "%s and %s differ%s (byte %ld)", a, b, fa && fb ? "" : ": one is missing",
                 at);
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

bool same_run_file(const char *a, const char *b, char *why, size_t len)
{
    size_t n = strlen(a);
    why[0] = '\0';
    if (n < 4 || strcmp(a + n - 4, ".csv") != 0)
        return same_bytes(a, b, why, len);
    csv_table ta = {0}, tb = {0};
    char err[512];
    bool same = csv_table_read(&ta, a, false, NULL, NULL, err, sizeof err) == 0 &&
                csv_table_read(&tb, b, false, NULL, NULL, err, sizeof err) == 0;
    if (!same)
        snprintf(why, len, "%s", err);
    same = same && ta.n_cols == tb.n_cols && ta.n_rows == tb.n_rows;
    if (!same && !why[0])
        snprintf(why, len, "%s and %s: other columns or rows", a, b);
    for (int k = 0; same && k < ta.n_cols; k++)
        same = strcmp(ta.header[k], tb.header[k]) == 0;
    for (int r = 0; same && r < ta.n_rows; r++)
        for (int k = 0; same && k < ta.n_cols; k++) {
            size_t hl = strlen(ta.header[k]);
            bool timing = hl > 3 && strcmp(ta.header[k] + hl - 3, "_ms") == 0;
            same = timing || strcmp(ta.rows[r][k], tb.rows[r][k]) == 0;
            if (!same)
                snprintf(why, len, "%s and %s: row %d's %s: %s and %s", a, b, r + 1, ta.header[k],
                         ta.rows[r][k], tb.rows[r][k]);
        }
    if (!same && !why[0])
        snprintf(why, len, "%s and %s: other columns", a, b);
    csv_table_free(&ta);
    csv_table_free(&tb);
    return same;
}

void write_file(const char *dir, const char *name, const char *text, char *buf, int len)
{
    snprintf(buf, (size_t)len, "%s/%s", dir, name);
    FILE *f = fopen(buf, "w");
    cr_assert_not_null(f, "cannot write %s", buf);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

void run_case_file(const char *path, const char *out, case_result *res, const train_options *opt)
{
    run_case_file_set(path, NULL, 0, out, res, opt);
}

void run_case_file_set(const char *path, const char *const *sets, int n_sets, const char *out,
                       case_result *res, const train_options *opt)
{
    static case_config cfg;
    err_list errs = {0};
    int n = case_load(path, sets, n_sets, &cfg, &errs);
    cr_assert_eq(n, 0, "%s: %s", path, errs.n ? errs.msgs[0] : "");
    err_list_free(&errs);
    mem_account account = {0};
    backend *be = backend_cpu_open(&account);
    train_options none = {.quiet = true};
    char tmp[4096], err[1024];
    run_record *rec = record_new();
    cr_assert_not_null(rec);
    cr_assert_eq(results_begin(out, cfg.name, tmp, sizeof tmp, err, sizeof err), 0, "%s", err);
    cr_assert_eq(results_run_case(&cfg, be, opt ? opt : &none, tmp, rec), 0, "%s",
                 rec->result.error);
    cr_assert_eq(report_case(rec, tmp, err, sizeof err), 0, "%s", err);
    cr_assert_eq(results_commit(out, cfg.name, tmp, err, sizeof err), 0, "%s", err);
    *res = rec->result;
    cr_assert_eq(results_write_summary(out, res, 1, err, sizeof err), 0, "%s", err);
    record_free(rec);
    be->close(be);
}

bool csv_read(const char *path, csv *c)
{
    char err[CSV_PATH_LEN + 256];
    int rc = csv_table_read(c, path, true, NULL, NULL, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "%s\n", err);
    return rc == 0;
}

void csv_free(csv *c) { csv_table_free(c); }

int csv_col(const csv *c, const char *name)
{
    int k = csv_table_col(c, name);
    if (k < 0)
        cr_assert_fail("%s has no column %s", c->path, name);
    return k;
}

char **csv_find(const csv *c, const char *col1, const char *v1, const char *col2, const char *v2,
                const char *col3, const char *v3)
{
    int k1 = csv_col(c, col1), k2 = col2 ? csv_col(c, col2) : -1, k3 = col3 ? csv_col(c, col3) : -1;
    for (int r = 0; r < c->n_rows; r++) {
        char **row = c->rows[r];
        if (strcmp(row[k1], v1) == 0 && (k2 < 0 || strcmp(row[k2], v2) == 0) &&
            (k3 < 0 || strcmp(row[k3], v3) == 0))
            return row;
    }
    return NULL;
}

void first_line(const char *path, char *buf, int len)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    cr_assert_not_null(fgets(buf, len, f));
    fclose(f);
    buf[strcspn(buf, "\r\n")] = '\0';
}

run *test_run_open(void)
{
    run *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->be = backend_cpu_open(&r->account);
    cr_assert_not_null(r->be);
    r->be->account = &r->account;
    r->pool = (tensor_pool){.be = r->be, .account = &r->account};
    r->obs = calloc(1, sizeof *r->obs);
    cr_assert_not_null(r->obs);
    r->cfg = calloc(1, sizeof *r->cfg); /* a case of defaults (seed 0) */
    cr_assert_not_null(r->cfg);
    return r;
}

void test_run_close(run *r)
{
    tape_clear(r);
    tensor_pool_clear(&r->pool);
    free(r->obs);
    free((case_config *)r->cfg);
    r->be->close(r->be);
    free(r);
}

static const float *hand_dy_values;

/* the consumer node test_backward_from records: hands dL/dy = hand_dy_values, rounded into
 * y's dtype, to y */
static void hand_dy(run *r, node *n)
{
    tensor *g = node_grad_tensor(r, n, 0);
    tensor *f = run_tensor_like(r, g, "dy", DTYPE_FLOAT32, MEM_GRADS);
    r->be->upload(r->be, f->data, hand_dy_values, (int64_t)sizeof(float) * g->numel);
    cr_assert_eq(r->be->cast(r->be, f, g, NULL), 0);
    tensor_release(&r->pool, f);
    node_give_grad(r, n, 0, g, NULL);
}

void test_backward_from(run *r, tensor *y, const float *dy)
{
    int64_t one = 1;
    tensor *root = run_tensor(r, "L", DTYPE_FLOAT32, 1, &one, MEM_ACTIVATIONS);
    hand_dy_values = dy;
    tape_record(r, "R", hand_dy, root, &y, 1);
    tape_backward(r, root, 1.0f);
}

void expect_store_counts(const round_counts *got, const round_counts *want, int times,
                         const char *what, const char *level)
{
    cr_expect_eq(got->zeros, times * want->zeros, "%s %s zeros", what, level);
    cr_expect_eq(got->underflow, times * want->underflow, "%s %s underflow", what, level);
    cr_expect_eq(got->subnormal, times * want->subnormal, "%s %s subnormal", what, level);
    cr_expect_eq(got->overflow, times * want->overflow, "%s %s overflow", what, level);
    cr_expect_eq(got->nan, times * want->nan, "%s %s nan", what, level);
}
