/*
 * helpers.h: what the Criterion tests share: a CPU backend with a tensor pool, tensors made
 * from literal values, a bare run for calling layers directly, temporary case files, running
 * a case into a temporary folder, and reading the CSV files it wrote.
 */
#ifndef AMPSCOPE_TEST_HELPERS_H
#define AMPSCOPE_TEST_HELPERS_H

#include <stdbool.h>
#include <stdint.h>

#include "ops/backend.h"
#include "config/case.h"
#include "results/csv_table.h"
#include "train/train.h"

/* Processes under mpirun run without LeakSanitizer (make test SAN=1): Open MPI keeps
 * allocations past MPI_Finalize in components it has unloaded by then, which no
 * suppression can name; the one-process runs of the other tests check ampscope's own. A
 * command's prefix, or putenv's argument in a child that execs the launcher. */
#define NO_LEAK_CHECK "LSAN_OPTIONS=detect_leaks=0"

typedef struct test_env {
    backend *be;
    mem_account account;
    tensor_pool pool;
} test_env;

void env_open(test_env *e);
void env_close(test_env *e);
/* a tensor of dtype dt holding the float values v (rounded into dt) */
tensor *env_tensor(test_env *e, const char *name, dtype dt, int ndim, const int64_t *shape,
                   const float *v);
tensor *env_zeros(test_env *e, const char *name, dtype dt, int ndim, const int64_t *shape);
/* a store's counts against `times` times want's zeros, underflow, subnormal, overflow and
 * nan (the known values of a test written `times` times into its tensor); what and level
 * name the store in a failure */
void expect_store_counts(const round_counts *got, const round_counts *want, int times,
                         const char *what, const char *level);
/* A run on a fresh CPU backend with its pool and an observer (no case, no results files),
 * for tests that call layers' forwards and the tape directly; test_run_close frees it all. */
struct run;
struct run *test_run_open(void);
void test_run_close(struct run *r);
/* Backward on such a run from y with dL/dy = dy (y->numel float values, rounded into y's
 * dtype): a consumer node of y, then the tape run from it. */
void test_backward_from(struct run *r, tensor *y, const float *dy);
/* element i of t as float */
float tensor_at(const tensor *t, int64_t i);
/* the dtype named s ("float16"); cr_asserts that there is one */
dtype dtype_named(const char *s);
/* the space-separated numbers of text into v (at most max); how many */
int64_t parse_floats(const char *text, float *v, int64_t max);
/* Whether the harness's value got of dtype dt agrees with a reference's want, which the
 * reference computed as pre (float32) before rounding it into dt: in float32 within
 * rel * |want| + 1e-6; in a half dtype bit for bit, or (a rounding of a value within the
 * two sides' float32 noise of pre, where pre lies that close to a rounding boundary of dt)
 * |got - pre| at most half a unit in the last place of dt plus `noise` */
bool reference_agrees(float got, float want, float pre, dtype dt, float rel, float noise);

/* A fresh temporary folder (removed by rm_rf). */
void make_temp_dir(char *buf, int len);
void rm_rf(const char *path);
/* Writes text to DIR/NAME; returns the path in buf. */
void write_file(const char *dir, const char *name, const char *text, char *buf, int len);
/* Runs cmd through the shell, its stdout (with stderr where cmd redirects it) into out;
 * returns its exit status (-1 when it did not exit). */
int run_command(const char *cmd, char *out, size_t len);

/* For the runs of bin/ampscope ($AMPSCOPE) at each ISA level (AMPSCOPE_CPU_ISA): the OpenBLAS
 * kernels the harness runs at `level` ("SkylakeX"), as `ampscope --version` names them. */
void isa_blas_kernels(const char *level, char *buf, size_t len);
/* Whether two runs' files are the same: CSV files field by field, their timings (columns
 * ending in _ms) aside, other files byte for byte; false with the first difference in why. */
bool same_run_file(const char *a, const char *b, char *why, size_t len);

/* Loads a case file and runs it on the CPU into OUT/<case> as `ampscope run` does (its
 * files, report.md and its summary.csv row; not REPORT.md); cr_asserts on bad input. */
void run_case_file(const char *path, const char *out, case_result *res, const train_options *opt);
/* The same with --set overrides (the case keeps its own name). */
void run_case_file_set(const char *path, const char *const *sets, int n_sets, const char *out,
                       case_result *res, const train_options *opt);

/* A CSV file read whole (harness/results/csv_table.h): n_cols, n_rows, header[k], rows[r][k]. */
typedef csv_table csv;
/* false when the file is missing, empty or malformed (the reason on stderr unless missing) */
bool csv_read(const char *path, csv *c);
void csv_free(csv *c);
/* the column's index; cr_asserts that there is one */
int csv_col(const csv *c, const char *name);
/* The first row whose columns match every (name, value) pair; NULL when none. */
char **csv_find(const csv *c, const char *col1, const char *v1, const char *col2, const char *v2,
                const char *col3, const char *v3);
/* The header line of a file, without its newline. */
void first_line(const char *path, char *buf, int len);

#endif
