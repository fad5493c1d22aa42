/*
 * columns.h: the columns of every CSV file a run writes, in their order, one list per file.
 *
 * Each list is an X-macro: X(ID, "name") once per column. From it come an enum of the
 * file's column ids (TENSORS_COL_STEP, ...; *_N_COLS last) and, in columns.c, a
 * csv_columns entry: the file's name, its header line ("case,step,...", what the writer
 * prints) and the column names by id (what readers look up: csv_table_find in
 * csv_table.h). A writer prints its rows in the list's order; a reader never counts
 * positions, it finds each column it needs by its name here.
 *
 * Every file of a case's folder is a view of the run's record (record/record.h), written by
 * results/write.c and read back into a record by results/read.c:
 *   OUT/<case>/tensors.csv  one row per observed tensor (record_tensor)
 *   OUT/<case>/hist.csv     its log2|x| histogram, one row per non-empty bin (record_bin)
 *   OUT/<case>/steps.csv    one row per completed step (record_step)
 *   OUT/<case>/memory.csv   peak and final bytes by category (record_memory)
 *   OUT/<case>/fp8.csv      one row per float8 quantization, with [fp8] (record_fp8)
 *   OUT/<case>/allreduce.csv  per parameter and observed step, what the all-reduce lost
 *   OUT/<case>/ranks.csv    per rank, parameter and observed step, its own gradient's counts
 *   OUT/<case>/config.csv   the configuration the reports give (record_config)
 *   OUT/<case>/expect.csv   one row per [expect] line, and whether it held (record_expect)
 *   OUT/summary.csv         one row per case (case_result; results.c)
 *   results/bench.csv       `make bench`'s figures (tools/bench.c)
 *   OUT/<case>.sweep/sweep.csv  one row per variant of `run --sweep` (sweep.c)
 */
#ifndef AMPSCOPE_COLUMNS_H
#define AMPSCOPE_COLUMNS_H

typedef struct csv_columns {
    const char *file;         /* "tensors.csv" */
    const char *header;       /* the header line, without its newline */
    int n;                    /* number of columns */
    const char *const *names; /* names[id] for the file's column ids */
} csv_columns;

#define TENSORS_CSV_COLUMNS(X)                                                                     \
    X(TENSORS_COL_CASE, "case")                                                                    \
    X(TENSORS_COL_STEP, "step")                                                                    \
    X(TENSORS_COL_PASS, "pass")                                                                    \
    X(TENSORS_COL_ORDER, "order")                                                                  \
    X(TENSORS_COL_TENSOR, "tensor")                                                                \
    X(TENSORS_COL_ROLE, "role")                                                                    \
    X(TENSORS_COL_DTYPE, "dtype")                                                                  \
    X(TENSORS_COL_SHAPE, "shape")                                                                  \
    X(TENSORS_COL_NUMEL, "numel")                                                                  \
    X(TENSORS_COL_BYTES, "bytes")                                                                  \
    X(TENSORS_COL_ZEROS, "zeros")                                                                  \
    X(TENSORS_COL_UNDERFLOW, "underflow")                                                          \
    X(TENSORS_COL_SUBNORMAL, "subnormal")                                                          \
    X(TENSORS_COL_OVERFLOW, "overflow")                                                            \
    X(TENSORS_COL_NAN, "nan")                                                                      \
    X(TENSORS_COL_AMAX, "amax")                                                                    \
    X(TENSORS_COL_AMIN_NONZERO, "amin_nonzero")                                                    \
    /* appended (results/README.md): why it has its dtype (ops/dtype_reason.h) */                  \
    X(TENSORS_COL_DTYPE_REASON, "dtype_reason")                                                    \
    X(TENSORS_COL_OP, "op")                                                                        \
    X(TENSORS_COL_DTYPE_FROM, "dtype_from")

#define HIST_CSV_COLUMNS(X)                                                                        \
    X(HIST_COL_CASE, "case")                                                                       \
    X(HIST_COL_STEP, "step")                                                                       \
    X(HIST_COL_PASS, "pass")                                                                       \
    X(HIST_COL_TENSOR, "tensor")                                                                   \
    X(HIST_COL_BIN, "bin")                                                                         \
    X(HIST_COL_COUNT, "count")

#define STEPS_CSV_COLUMNS(X)                                                                       \
    X(STEPS_COL_CASE, "case")                                                                      \
    X(STEPS_COL_STEP, "step")                                                                      \
    X(STEPS_COL_LOSS, "loss")                                                                      \
    X(STEPS_COL_LOSS_SCALE, "loss_scale")                                                          \
    X(STEPS_COL_FOUND_INF, "found_inf")                                                            \
    X(STEPS_COL_SKIPPED, "skipped")                                                                \
    X(STEPS_COL_STEP_MS, "step_ms")                                                                \
    X(STEPS_COL_LR, "lr")                                                                          \
    X(STEPS_COL_LOST_UPDATES, "lost_updates")                                                      \
    X(STEPS_COL_FIRST_NONFINITE, "first_nonfinite")                                                \
    /* appended (results/README.md): empty where the case does not accumulate, clip, skip */         \
    X(STEPS_COL_LOST_ACCUMULATIONS, "lost_accumulations")                                          \
    X(STEPS_COL_TOTAL_NORM, "total_norm")                                                          \
    X(STEPS_COL_CLIP_COEF, "clip_coef")                                                            \
    X(STEPS_COL_FIRST_NONFINITE_OP, "first_nonfinite_op")                                          \
    X(STEPS_COL_FIRST_NONFINITE_INPUT, "first_nonfinite_input")

#define MEMORY_CSV_COLUMNS(X)                                                                      \
    X(MEMORY_COL_CASE, "case")                                                                     \
    X(MEMORY_COL_CATEGORY, "category")                                                             \
    X(MEMORY_COL_PEAK_BYTES, "peak_bytes")                                                         \
    X(MEMORY_COL_END_BYTES, "end_bytes")                                                           \
    /* appended: saved_for_backward's bytes by dtype, "float16:4096|float32:512" */                 \
    X(MEMORY_COL_BY_DTYPE, "by_dtype")

#define FP8_CSV_COLUMNS(X)                                                                         \
    X(FP8_COL_CASE, "case")                                                                        \
    X(FP8_COL_STEP, "step")                                                                        \
    X(FP8_COL_TENSOR, "tensor")                                                                    \
    X(FP8_COL_FORMAT, "format")                                                                    \
    X(FP8_COL_AMAX, "amax")                                                                        \
    X(FP8_COL_SCALE, "scale")                                                                      \
    X(FP8_COL_SATURATED, "saturated")                                                              \
    X(FP8_COL_UNDERFLOW, "underflow")

#define CONFIG_CSV_COLUMNS(X)                                                                      \
    X(CONFIG_COL_CASE, "case")                                                                     \
    X(CONFIG_COL_DESCRIPTION, "description")                                                       \
    X(CONFIG_COL_BASELINE, "baseline")                                                             \
    X(CONFIG_COL_PARAMS, "params")                                                                 \
    X(CONFIG_COL_AUTOCAST, "autocast")                                                             \
    X(CONFIG_COL_LOSS_IN_AUTOCAST, "loss_in_autocast")                                             \
    X(CONFIG_COL_MASTER_WEIGHTS, "master_weights")                                                 \
    X(CONFIG_COL_SCALER, "scaler")                                                                 \
    X(CONFIG_COL_INIT_SCALE, "init_scale")                                                         \
    X(CONFIG_COL_GROWTH_FACTOR, "growth_factor")                                                   \
    X(CONFIG_COL_BACKOFF_FACTOR, "backoff_factor")                                                 \
    X(CONFIG_COL_GROWTH_INTERVAL, "growth_interval")                                               \
    X(CONFIG_COL_OPTIMIZER, "optimizer")                                                           \
    X(CONFIG_COL_LOSS, "loss")                                                                     \
    X(CONFIG_COL_BATCH, "batch")                                                                   \
    X(CONFIG_COL_STEPS, "steps")                                                                   \
    X(CONFIG_COL_SEED, "seed")                                                                     \
    /* appended: the rest of what report.md tells */                                               \
    X(CONFIG_COL_PATH, "path")                                                                     \
    X(CONFIG_COL_INPUT_DTYPE, "input_dtype")                                                       \
    X(CONFIG_COL_MODEL, "model")                                                                   \
    X(CONFIG_COL_ACCUMULATE, "accumulate")                                                         \
    X(CONFIG_COL_DELAY_UNSCALE, "delay_unscale")                                                   \
    X(CONFIG_COL_CLIP_GRAD_NORM, "clip_grad_norm")                                                 \
    X(CONFIG_COL_NORM_TYPE, "norm_type")                                                           \
    X(CONFIG_COL_CLIP_GRAD_VALUE, "clip_grad_value")                                               \
    X(CONFIG_COL_CLIP_BEFORE_UNSCALE, "clip_before_unscale")                                       \
    X(CONFIG_COL_FP8, "fp8")                                                                       \
    X(CONFIG_COL_WORLD_SIZE, "world_size")                                                         \
    X(CONFIG_COL_COMM, "comm")                                                                     \
    X(CONFIG_COL_REDUCE_DTYPE, "reduce_dtype")                                                     \
    X(CONFIG_COL_ALLREDUCE_ALGORITHM, "allreduce_algorithm")                                       \
    /* the CPU's GEMMs by path: they depend on the processor and the build */                     \
    X(CONFIG_COL_GEMM_SGEMM, "gemm_sgemm")                                                         \
    X(CONFIG_COL_GEMM_BF16, "gemm_bf16")

#define ALLREDUCE_CSV_COLUMNS(X)                                                                   \
    X(ALLREDUCE_COL_CASE, "case")                                                                  \
    X(ALLREDUCE_COL_STEP, "step")                                                                  \
    X(ALLREDUCE_COL_TENSOR, "tensor")                                                              \
    X(ALLREDUCE_COL_DTYPE, "dtype")                                                                \
    X(ALLREDUCE_COL_COMM, "comm")                                                                  \
    X(ALLREDUCE_COL_WIRE_DTYPE, "wire_dtype")                                                      \
    X(ALLREDUCE_COL_WORLD_SIZE, "world_size")                                                      \
    X(ALLREDUCE_COL_ALGORITHM, "algorithm")                                                        \
    X(ALLREDUCE_COL_NUMEL, "numel")                                                                \
    X(ALLREDUCE_COL_UNDERFLOW, "underflow")                                                        \
    X(ALLREDUCE_COL_OVERFLOW, "overflow")                                                          \
    X(ALLREDUCE_COL_NONFINITE, "nonfinite")                                                        \
    X(ALLREDUCE_COL_REL_ERROR, "rel_error")                                                        \
    X(ALLREDUCE_COL_SQNR_DB, "sqnr_db")

#define RANKS_CSV_COLUMNS(X)                                                                       \
    X(RANKS_COL_CASE, "case")                                                                      \
    X(RANKS_COL_STEP, "step")                                                                      \
    X(RANKS_COL_RANK, "rank")                                                                      \
    X(RANKS_COL_TENSOR, "tensor")                                                                  \
    X(RANKS_COL_DTYPE, "dtype")                                                                    \
    X(RANKS_COL_NUMEL, "numel")                                                                    \
    X(RANKS_COL_ZEROS, "zeros")                                                                    \
    X(RANKS_COL_SUBNORMAL, "subnormal")                                                            \
    X(RANKS_COL_INF, "inf")                                                                        \
    X(RANKS_COL_NAN, "nan")                                                                        \
    X(RANKS_COL_AMAX, "amax")

#define EXPECT_CSV_COLUMNS(X)                                                                      \
    X(EXPECT_COL_CASE, "case")                                                                     \
    X(EXPECT_COL_LINE, "line")                                                                     \
    X(EXPECT_COL_EXPECTATION, "expectation")                                                       \
    X(EXPECT_COL_HELD, "held")                                                                     \
    X(EXPECT_COL_FAILURE, "failure")

#define SUMMARY_CSV_COLUMNS(X)                                                                     \
    X(SUMMARY_COL_CASE, "case")                                                                    \
    X(SUMMARY_COL_DEVICE, "device")                                                                \
    X(SUMMARY_COL_STATUS, "status")                                                                \
    X(SUMMARY_COL_ERROR, "error")                                                                  \
    X(SUMMARY_COL_PARAMS, "params")                                                                \
    X(SUMMARY_COL_AUTOCAST, "autocast")                                                            \
    X(SUMMARY_COL_INPUT_DTYPE, "input_dtype")                                                      \
    X(SUMMARY_COL_OUTPUT_DTYPE, "output_dtype")                                                    \
    X(SUMMARY_COL_LOSS_DTYPE, "loss_dtype")                                                        \
    X(SUMMARY_COL_PARAM_GRAD_DTYPES, "param_grad_dtypes")                                          \
    X(SUMMARY_COL_CAST_GRAD_DTYPES, "cast_grad_dtypes")                                            \
    X(SUMMARY_COL_ACTIVATION_GRAD_DTYPES, "activation_grad_dtypes")                                \
    X(SUMMARY_COL_GRAD_UNDERFLOW, "grad_underflow")                                                \
    X(SUMMARY_COL_GRAD_NUMEL, "grad_numel")                                                        \
    X(SUMMARY_COL_FINAL_LOSS, "final_loss")                                                        \
    X(SUMMARY_COL_PEAK_BYTES, "peak_bytes")                                                        \
    X(SUMMARY_COL_STEP_MS, "step_ms")                                                              \
    X(SUMMARY_COL_EXPECT_PASSED, "expect_passed")                                                  \
    X(SUMMARY_COL_EXPECT_TOTAL, "expect_total")

#define BENCH_CSV_COLUMNS(X)                                                                       \
    X(BENCH_COL_GROUP, "group")                                                                    \
    X(BENCH_COL_VARIANT, "variant")                                                                \
    X(BENCH_COL_IN, "in")                                                                          \
    X(BENCH_COL_HIDDEN, "hidden")                                                                  \
    X(BENCH_COL_OUT, "out")                                                                        \
    X(BENCH_COL_BATCH, "batch")                                                                    \
    X(BENCH_COL_STEP_MS, "step_ms")                                                                \
    X(BENCH_COL_STEP_MEDIAN_MS, "step_median_ms")                                                  \
    X(BENCH_COL_STEP_MS_OBSERVE_OFF, "step_ms_observe_off")                                        \
    X(BENCH_COL_GEMM_FLOOR_MS, "gemm_floor_ms")                                                    \
    X(BENCH_COL_BYTES_FLOOR_MS, "bytes_floor_ms")                                                  \
    X(BENCH_COL_FLOOR_MS, "floor_ms")                                                              \
    X(BENCH_COL_STEP_OVER_FLOOR, "step_over_floor")                                                \
    X(BENCH_COL_OBSERVE_OVERHEAD, "observe_overhead")                                              \
    X(BENCH_COL_PEAK_RSS_MIB, "peak_rss_mib")                                                      \
    X(BENCH_COL_ACCOUNT_PEAK_MIB, "account_peak_mib")                                              \
    X(BENCH_COL_WORKSPACE_PEAK_MIB, "workspace_peak_mib")

#define SWEEP_CSV_COLUMNS(X)                                                                       \
    X(SWEEP_COL_CASE, "case")                                                                      \
    X(SWEEP_COL_VARIANT, "variant")                                                                \
    X(SWEEP_COL_SETTINGS, "settings")                                                              \
    X(SWEEP_COL_STATUS, "status")                                                                  \
    X(SWEEP_COL_STEPS, "steps")                                                                    \
    X(SWEEP_COL_STEPS_SKIPPED, "steps_skipped")                                                    \
    X(SWEEP_COL_GRAD_UNDERFLOW, "grad_underflow")                                                  \
    X(SWEEP_COL_GRAD_SUBNORMAL, "grad_subnormal")                                                  \
    X(SWEEP_COL_GRAD_OVERFLOW, "grad_overflow")                                                    \
    X(SWEEP_COL_GRAD_NUMEL, "grad_numel")                                                          \
    X(SWEEP_COL_FINAL_LOSS, "final_loss")

#define CSV_COLUMN_ID(id, name) id,
enum tensors_csv_col { TENSORS_CSV_COLUMNS(CSV_COLUMN_ID) TENSORS_N_COLS };
enum hist_csv_col { HIST_CSV_COLUMNS(CSV_COLUMN_ID) HIST_N_COLS };
enum steps_csv_col { STEPS_CSV_COLUMNS(CSV_COLUMN_ID) STEPS_N_COLS };
enum memory_csv_col { MEMORY_CSV_COLUMNS(CSV_COLUMN_ID) MEMORY_N_COLS };
enum fp8_csv_col { FP8_CSV_COLUMNS(CSV_COLUMN_ID) FP8_N_COLS };
enum config_csv_col { CONFIG_CSV_COLUMNS(CSV_COLUMN_ID) CONFIG_N_COLS };
enum allreduce_csv_col { ALLREDUCE_CSV_COLUMNS(CSV_COLUMN_ID) ALLREDUCE_N_COLS };
enum ranks_csv_col { RANKS_CSV_COLUMNS(CSV_COLUMN_ID) RANKS_N_COLS };
enum expect_csv_col { EXPECT_CSV_COLUMNS(CSV_COLUMN_ID) EXPECT_N_COLS };
enum summary_csv_col { SUMMARY_CSV_COLUMNS(CSV_COLUMN_ID) SUMMARY_N_COLS };
enum bench_csv_col { BENCH_CSV_COLUMNS(CSV_COLUMN_ID) BENCH_N_COLS };
enum sweep_csv_col { SWEEP_CSV_COLUMNS(CSV_COLUMN_ID) SWEEP_N_COLS };
#undef CSV_COLUMN_ID

extern const csv_columns csv_tensors, csv_hist, csv_steps, csv_memory, csv_fp8, csv_config,
    csv_allreduce, csv_ranks, csv_expect, csv_summary, csv_bench, csv_sweep;

#endif
