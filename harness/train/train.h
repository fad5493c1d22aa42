/*
 * train.h: runs one case: builds its model and data, runs its steps (forward, backward,
 * GradScaler, optimizer, schedule), and keeps what they did in the run's record
 * (record/record.h: the observed tensors, the steps, the memory account, the float8
 * quantizations, the result). Whoever runs the case writes the record's files and checks
 * its expectations (results/results.h: results_run_case).
 */
#ifndef AMPSCOPE_TRAIN_H
#define AMPSCOPE_TRAIN_H

#include "config/case.h"
#include "ops/backend.h"
#include "record/record.h"

/* The gradients of step 0 as the optimizer receives them (after unscale_, before clipping:
 * the float32 master gradients where master weights are on), for the precision matrix
 * (matrix.c): names, dtypes and exact values (float32 holds every half value exactly). */
#define CAPTURE_MAX 128
typedef struct train_capture {
    int n;
    char names[CAPTURE_MAX][TENSOR_NAME_MAX + 8];
    dtype dtypes[CAPTURE_MAX];
    int64_t numel[CAPTURE_MAX];
    float *values[CAPTURE_MAX]; /* malloc'd; train_capture_free() */
    float loss;                 /* step 0's loss */
    float scale;                /* step 0's loss scale (1 without a scaler) */
    bool done;
} train_capture;
void train_capture_free(train_capture *c);

typedef struct train_options {
    const char *dump_dir;  /* --dump */
    const char *dump_only; /* --dump-only PATTERN (fnmatch on tensor names) */
    bool dump_ranks;       /* --dump-ranks: every rank's own gradients under DIR/rank-R/ */
    bool observe_off;      /* --observe off: dtypes only, no counts or histograms */
    bool quiet;            /* no progress display */
    bool progress;         /* progress from the first step (default: once a case has run 2 s) */
    train_capture *capture; /* not NULL: step 0's gradients are copied here */
} train_options;

/* Runs cfg on be into rec (an empty record): its rows and rec->result (everything but the
 * expectations'). Returns non-zero when the record could not be kept or --dump could not
 * write (the message in rec->result.error); a case that fails the way PyTorch would is a
 * successful run with rec->result.ok false. */
int train_case(const case_config *cfg, backend *be, const train_options *opt, run_record *rec);

/* The memory preflight: a dry pass of the same code through the counting backend
 * (backend_dry.c) for min(steps, 2) steps. *bytes: the peak of every category but
 * workspace; *dump_bytes: what --dump would write. Returns non-zero (message in err) when
 * the case fails in the dry pass itself. */
int train_preflight(const case_config *cfg, const train_options *opt, int64_t *bytes,
                    int64_t *dump_bytes, char *err, int errlen);

#endif
