/*
 * record.h: one run of a case, in memory. The run fills it as it goes (the observer its
 * tensor rows and histograms, the trainer its steps and memory account, the fp8 layers
 * their quantizations, the data-parallel hooks the all-reduce and every rank's counts; the
 * case's [expect] and its result at the end), and everything that tells about the run reads
 * it: the CSV writers (results/write.c), `[expect]` (results/expect.c), the reports
 * (report/), the sweep and the matrix (cli/). Nothing a run writes is read back by the same
 * run; results/read.c fills a record from a results folder's CSV files (`ampscope report`,
 * the mpirun launcher's rank 0), the one place CSV files become a record.
 *
 * The record holds a value the reports read as its CSV file holds it: floats as float (the
 * files print them with %.9g, which reads back to the same float), doubles the files print
 * with %.9g passed through that text (record_g9), so that a report written from a run's own
 * record and one written from the record read back from its files are the same bytes (the
 * per-step times and learning rates, which no report reads, are kept as measured).
 *
 * Memory: a row per observed tensor of the observed steps (case_observes_step), its
 * histogram's non-empty bins, a row per step and per float8 quantization; names are kept
 * once each (record_intern), so a long run costs a few dozen bytes per step beyond the
 * observed steps' rows.
 *
 * Roles: input, target, param, activation, loss, cast, grad_activation, grad_cast,
 * grad_param, optimizer_state, master_param, grad_master (a half gradient copied up to
 * float32 for the master weights), buffer.
 */
#ifndef AMPSCOPE_RECORD_H
#define AMPSCOPE_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "config/case.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/stats.h"
#include "ops/dtype_reason.h"

typedef enum tensor_role {
    ROLE_INPUT = 0,
    ROLE_TARGET,
    ROLE_PARAM,
    ROLE_ACTIVATION,
    ROLE_LOSS,
    ROLE_CAST,
    ROLE_GRAD_ACTIVATION,
    ROLE_GRAD_CAST,
    ROLE_GRAD_PARAM,
    ROLE_OPTIMIZER_STATE,
    ROLE_MASTER_PARAM,
    ROLE_GRAD_MASTER,
    ROLE_BUFFER, /* a module's buffer, as its forward updates it (batch_norm's running stats) */
    ROLE_COUNT
} tensor_role;

typedef enum pass_kind { PASS_FORWARD = 0, PASS_BACKWARD, PASS_OPTIMIZER, PASS_COUNT } pass_kind;

const char *tensor_role_name(tensor_role r);
const char *pass_name(pass_kind p);
/* the role or pass whose name is s; false when none is */
bool tensor_role_parse(const char *s, tensor_role *r);
bool pass_parse(const char *s, pass_kind *p);
/* a gradient's role: of an activation, of an autocast copy, of a parameter, of a master */
bool tensor_role_is_grad(tensor_role r);

/* tensors.csv: one observed tensor of an observed step */
typedef struct record_tensor {
    int64_t step;
    int order; /* its place in the step, from 1 */
    pass_kind pass;
    tensor_role role;
    dtype dtype;
    const char *name, *shape; /* shape as tensors.csv writes it: "64x16000", "scalar" */
    int64_t numel, bytes;
    bool counted; /* counts present (absent for int64 labels and with --observe off) */
    bool unseen;  /* underflow and overflow not seen (--gpu-math native): empty fields */
    int64_t zeros, underflow, subnormal, overflow, nan;
    float amax, amin_nonzero; /* amin_nonzero: +inf when no value is non-zero (empty field) */
    dtype_reason reason;      /* why it has its dtype, with the op and operands it names */
    const char *op, *from;    /* "" for none */
    int64_t first_bin;        /* its histogram: bins[first_bin .. first_bin + n_bins) */
    int n_bins;
} record_tensor;

/* hist.csv: one non-empty bin of a row's log2|x| histogram (stats.h's bin index) */
typedef struct record_bin {
    int bin;
    int64_t count;
} record_bin;

/* steps.csv: one completed step */
typedef struct record_step {
    int64_t step;
    float loss, loss_scale; /* loss_scale: 1 without a scaler */
    bool found_inf, skipped;
    double step_ms, lr; /* as measured and set (steps.csv prints %.6f and %.9g) */
    int64_t lost_updates;
    const char *first_nonfinite; /* "" unless found_inf */
    bool accumulates;            /* the case accumulates: lost_accumulations is written */
    int64_t lost_accumulations;
    bool clips; /* clip_grad_norm: total_norm and clip_coef are written (record_g9) */
    double total_norm, clip_coef;
    const char *nonfinite_op, *nonfinite_input; /* "" unless found_inf */
} record_step;

/* memory.csv: peak and final bytes of a category ("total", "saved_for_backward" too) */
typedef struct record_memory {
    const char *category;
    int64_t peak, end;
    /* saved_for_backward: its bytes by the storages' dtypes (memory.csv's by_dtype) */
    int64_t by_dtype[DTYPE_COUNT];
} record_memory;

/* fp8.csv: one float8 quantization */
typedef struct record_fp8 {
    int64_t step;
    const char *tensor; /* "fc1.input", "fc1.input.colwise" */
    dtype format;
    float amax, scale;
    int64_t saturated, underflow;
} record_fp8;

/* allreduce.csv: one parameter's gradient after the all-reduce, at an observed step */
typedef struct record_allreduce {
    int64_t step;
    const char *tensor, *comm, *algorithm;
    dtype dtype, wire;
    int64_t world_size, numel, underflow, overflow, nonfinite;
    double rel_error, sqnr_db; /* record_g9 */
} record_allreduce;

/* ranks.csv: one rank's own gradient, at an observed step */
typedef struct record_rank {
    int64_t step;
    int rank;
    const char *tensor;
    dtype dtype;
    int64_t numel, zeros, subnormal, inf, nan;
    double amax; /* record_g9 */
} record_rank;

/* expect.csv: one [expect] line and whether it held; line -1 (an empty field): the run
 * ended in an error no expectation names */
typedef struct record_expect {
    int line;
    const char *expectation; /* "dtype fc1.weight.grad = float32"; "" for line -1 */
    bool held;
    const char *failure; /* what the run showed instead; "" when it held */
} record_expect;

#define RECORD_TEXT_MAX 16384 /* the model line: CASE_MAX_LAYERS descriptions */

/* config.csv: the configuration as the reports give it */
typedef struct record_config {
    char name[CASE_NAME_MAX + 512]; /* the case's name, with "+key=value" for --set runs */
    char path[CASE_PATH_MAX];       /* the case file, as given */
    char description[CASE_TEXT_MAX], baseline[CASE_NAME_MAX];
    dtype params, input_dtype;
    bool autocast;
    dtype autocast_dtype;
    bool loss_in_autocast, master_weights, scaler;
    double init_scale, growth_factor, backoff_factor; /* record_g9 */
    int64_t growth_interval;
    char optimizer[128]; /* "adam lr=0.001" */
    char loss[32];       /* the loss kind's name */
    int64_t batch, steps;
    uint64_t seed;
    char model[RECORD_TEXT_MAX]; /* report.md's Model line: "fc1 = linear 4 → 8, ..." */
    int64_t accumulate;
    bool delay_unscale, clip_before_unscale;
    double clip_grad_norm, norm_type, clip_grad_value; /* record_g9; 0: none */
    bool fp8;
    int fp8_recipe; /* an fp8_recipe_kind, with fp8 */
    int64_t world_size;
    char comm[32], allreduce_algorithm[64]; /* the policy's and the algorithm's names */
    dtype reduce_dtype;
    int64_t gemm_sgemm, gemm_bf16; /* the run's CPU GEMMs by path (backend_gemm_paths; 0 on a GPU) */
} record_config;

/* summary.csv's row of a case, and what the run knows besides */
typedef struct case_result {
    char name[CASE_NAME_MAX + 512]; /* the case's name, with "+key=value" for --set runs */
    char device[128];
    bool ok;          /* the run finished without an error */
    /* ended by SIGINT or SIGTERM: with ok, after a completed step, whose results are kept
     * (summary.csv's status `interrupted`, error "interrupted after step K of N (SIGINT)");
     * without, by a second signal in the middle of a step, and nothing of it is kept */
    bool interrupted;
    char error[1024];
    char params[16], autocast[16], input_dtype[16], output_dtype[16], loss_dtype[16];
    char param_grad_dtypes[64], cast_grad_dtypes[64], activation_grad_dtypes[64];
    int64_t grad_underflow, grad_numel;
    double final_loss;
    int64_t peak_bytes, workspace_peak_bytes;
    double step_ms; /* median over the steps */
    int expect_passed, expect_total;
    bool passed;         /* every expectation held (and no unexpected error) */
    char failures[8192]; /* the expectations that did not hold, one per line */
} case_result;

/* a name the run has made, with the dtype it last had (for [expect] and summary.csv) */
typedef struct record_name {
    const char *s;
    uint64_t hash;
    bool seen; /* a tensor of this name was observed */
    dtype dt;
} record_name;

/* the record's strings, each kept once (blocks never move) */
typedef struct record_strings {
    record_name *slots; /* open addressing, a power of two */
    int64_t n_slots, n;
    char **blocks;
    int n_blocks, cap_blocks;
    size_t block_used, block_size;
} record_strings;

#define RECORD_ARRAY(type, name)                                                                   \
    type *name;                                                                                    \
    int64_t n_##name, cap_##name

typedef struct run_record {
    record_config config;
    case_result result;
    RECORD_ARRAY(record_tensor, tensors);
    RECORD_ARRAY(record_bin, bins);
    RECORD_ARRAY(record_step, steps);
    RECORD_ARRAY(record_memory, memory);
    RECORD_ARRAY(record_fp8, fp8);
    RECORD_ARRAY(record_allreduce, allreduce);
    RECORD_ARRAY(record_rank, ranks);
    RECORD_ARRAY(record_expect, expects);
    bool has_fp8, has_allreduce; /* the case quantizes to float8 / is data parallel: the
                                    files are written even when they have no rows */
    bool has_config, has_expect; /* config.csv's and expect.csv's rows are known (a record
                                    read from an older folder may lack them) */
    bool out_of_memory;          /* a row or a string could not be kept */
    record_strings strings;
} run_record;

/* An empty record (calloc'd); NULL when out of memory. */
run_record *record_new(void);
void record_free(run_record *rec);
/* Empties the record for another run, keeping nothing. */
void record_clear(run_record *rec);

/* s, kept once in the record ("" for NULL); "" with out_of_memory set when it cannot be */
const char *record_intern(run_record *rec, const char *s);
/* Notes that a tensor named name was observed with dtype dt (any step, observed or not). */
void record_seen(run_record *rec, const char *name, dtype dt);
/* The dtype the last tensor of that name had; false when the run made none. */
bool record_find(const run_record *rec, const char *name, dtype *dt);

/* A new zeroed row at the end of its array; NULL (out_of_memory set) when none fits. */
record_tensor *record_add_tensor(run_record *rec);
record_step *record_add_step(run_record *rec);
record_memory *record_add_memory(run_record *rec);
record_fp8 *record_add_fp8(run_record *rec);
record_allreduce *record_add_allreduce(run_record *rec);
record_rank *record_add_rank(run_record *rec);
record_expect *record_add_expect(run_record *rec);
/* Appends a bin to tensor row `row`: a row's bins are added one after the other, before the
 * next row's. */
void record_add_bin(run_record *rec, int64_t row, int bin, int64_t count);
/* The bins of a row. */
static inline const record_bin *record_bins_of(const run_record *rec, const record_tensor *t)
{
    return rec->bins + t->first_bin;
}

/* x as the CSV files hold a double they print with %.9g: that text read back */
double record_g9(double x);

/* The rows of [expect] into the result: expect_passed and expect_total (the lines),
 * passed (all held) and failures ("<path>:<line>: expectation failed: <failure>" per line
 * that did not hold, "<path>: <failure>" for line -1). */
void record_expect_result(run_record *rec);

#endif
