/*
 * columns.c: the csv_columns entries of columns.h, made from its column lists: the header
 * line is the names joined by commas at compile time (each name as "," "name", the
 * string's first comma skipped).
 */
#include "columns.h"

#define CSV_COLUMN_NAME(id, name) [id] = name,
#define CSV_HEADER_FIELD(id, name) "," name
#define CSV_FILE(var, file_name, LIST, count)                                                      \
    static const char *const var##_names[count] = {LIST(CSV_COLUMN_NAME)};                         \
    const csv_columns var = {                                                                      \
        .file = file_name, .header = LIST(CSV_HEADER_FIELD) + 1, .n = count, .names = var##_names}

CSV_FILE(csv_tensors, "tensors.csv", TENSORS_CSV_COLUMNS, TENSORS_N_COLS);
CSV_FILE(csv_hist, "hist.csv", HIST_CSV_COLUMNS, HIST_N_COLS);
CSV_FILE(csv_steps, "steps.csv", STEPS_CSV_COLUMNS, STEPS_N_COLS);
CSV_FILE(csv_memory, "memory.csv", MEMORY_CSV_COLUMNS, MEMORY_N_COLS);
CSV_FILE(csv_fp8, "fp8.csv", FP8_CSV_COLUMNS, FP8_N_COLS);
CSV_FILE(csv_config, "config.csv", CONFIG_CSV_COLUMNS, CONFIG_N_COLS);
CSV_FILE(csv_allreduce, "allreduce.csv", ALLREDUCE_CSV_COLUMNS, ALLREDUCE_N_COLS);
CSV_FILE(csv_ranks, "ranks.csv", RANKS_CSV_COLUMNS, RANKS_N_COLS);
CSV_FILE(csv_expect, "expect.csv", EXPECT_CSV_COLUMNS, EXPECT_N_COLS);
CSV_FILE(csv_summary, "summary.csv", SUMMARY_CSV_COLUMNS, SUMMARY_N_COLS);
CSV_FILE(csv_bench, "bench.csv", BENCH_CSV_COLUMNS, BENCH_N_COLS);
CSV_FILE(csv_sweep, "sweep.csv", SWEEP_CSV_COLUMNS, SWEEP_N_COLS);
