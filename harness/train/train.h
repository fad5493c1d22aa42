/*
 * train.h: runs one case: builds its model and data, runs its steps (forward, backward,
 * GradScaler, optimizer, schedule), writes tensors.csv, hist.csv, steps.csv and memory.csv
 * into a folder, and checks the case's expectations.
 */
#ifndef AMPSCOPE_TRAIN_H
#define AMPSCOPE_TRAIN_H

#include "ops/backend.h"
#include "config/case.h"

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
    bool observe_off;      /* --observe off: dtypes only, no counts or histograms */
    bool quiet;            /* no progress display */
    bool progress;         /* progress from the first step (default: once a case has run 2 s) */
    train_capture *capture; /* not NULL: step 0's gradients are copied here */
} train_options;

typedef struct case_result {
    char name[CASE_NAME_MAX + 512]; /* the case's name, with "+key=value" for --set runs */
    char device[128];
    bool ok;          /* the run finished without an error */
    bool interrupted; /* ended by SIGINT or SIGTERM: its results are not kept */
    char error[1024];
    char params[16], autocast[16], input_dtype[16], output_dtype[16], loss_dtype[16];
    char param_grad_dtypes[64], cast_grad_dtypes[64], activation_grad_dtypes[64];
    int64_t grad_underflow, grad_numel;
    double final_loss;
    int64_t peak_bytes, workspace_peak_bytes;
    int64_t saved_by_dtype[DTYPE_COUNT]; /* memory.csv's saved_for_backward, by dtype */
    double step_ms; /* median over the steps */
    int expect_passed, expect_total;
    bool passed;         /* every expectation held (and no unexpected error) */
    char failures[8192]; /* the expectations that did not hold, one per line */
} case_result;

/* Runs cfg on be, writing its CSVs into dir. Returns non-zero when the results could not be
 * written (the message in res->error); a case that fails the way PyTorch would is a
 * successful run with res->ok false. */
int train_case(const case_config *cfg, backend *be, const train_options *opt, const char *dir,
               case_result *res);

/* The memory preflight: a dry pass of the same code through the counting backend
 * (backend_dry.c) for min(steps, 2) steps. *bytes: the peak of every category but
 * workspace; *dump_bytes: what --dump would write. Returns non-zero (message in err) when
 * the case fails in the dry pass itself. */
int train_preflight(const case_config *cfg, const train_options *opt, int64_t *bytes,
                    int64_t *dump_bytes, char *err, int errlen);

#endif
