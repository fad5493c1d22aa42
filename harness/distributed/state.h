/*
 * distributed/state.h: this process's state as a rank, shared by distributed.c (the
 * trainer's hooks) and cli/launch.c (the rank's run, which sets it).
 */
#ifndef AMPSCOPE_DISTRIBUTED_STATE_H
#define AMPSCOPE_DISTRIBUTED_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DIST_MAX_ROWS 256 /* report.md's table: one row per parameter */

typedef struct dist_row {
    char tensor[160];
    int64_t underflow, overflow, nonfinite, step;
    double rel_error, sqnr_db;
} dist_row;

typedef struct distributed_state {
    bool active; /* this process is a rank of a distributed case */
    int rank, world_size;
    FILE *allreduce_csv, *ranks_csv; /* rank 0's; NULL elsewhere */
    dist_row rows[DIST_MAX_ROWS];    /* rank 0: the last observed step's, for report.md */
    int n_rows;
} distributed_state;

extern distributed_state dist;

/* rank 0: one parameter's figures at an observed step (a later step replaces the table) */
void distributed_note_row(const char *tensor, int64_t underflow, int64_t overflow,
                          int64_t nonfinite, double rel_error, double sqnr_db, int64_t step);

#define DIST_ALLREDUCE_HEADER                                                                 \
    "case,step,tensor,dtype,comm,wire_dtype,world_size,algorithm,numel,underflow,overflow,"   \
    "nonfinite,rel_error,sqnr_db"
#define DIST_RANKS_HEADER "case,step,rank,tensor,dtype,numel,zeros,subnormal,inf,nan,amax"

#endif
