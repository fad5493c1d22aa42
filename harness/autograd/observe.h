/*
 * observe.h: the observer sees every tensor a step produces or casts, when it is made: for
 * the steps the case observes, one row in the run's record (its dtype and why, shape, and
 * what the rounding that made it lost; record.h's tensors.csv row) with its log2|x|
 * histogram; on every step, the name's dtype (for [expect] and summary.csv), the gradients'
 * dtypes and underflow, and the step's first non-finite tensor. With --dump it writes the
 * observed tensors as .npy files.
 */
#ifndef AMPSCOPE_OBSERVE_H
#define AMPSCOPE_OBSERVE_H

#include <stdbool.h>

#include "core/stats.h"
#include "ops/tensor.h"
#include "record/record.h"

typedef struct observer {
    run_record *rec; /* NULL: nothing is kept (the memory preflight's dry pass) */
    int64_t step;
    pass_kind pass;
    int order;
    bool recording;                        /* this step's rows are kept */
    unsigned grad_dtypes[ROLE_COUNT];      /* bit per dtype, backward and optimizer passes */
    int64_t grad_underflow, grad_numel;    /* backward-pass gradient rows kept */
    char first_nonfinite[TENSOR_NAME_MAX]; /* this step's; "" when none */
    bool write_failed;                     /* a --dump file could not be written */
    /* --dump: observed tensors go to DUMP_DIR/<step>/<tensor>.npy (matching dump_only) */
    struct backend *be;
    const char *dump_dir, *dump_only;
    bool dump_dry; /* count the bytes a dump would write instead of writing them */
    int64_t dump_bytes;
    char dump_error[512];
} observer;

/* Sets the step and whether it is recorded; resets order and first_nonfinite. */
void observe_begin_step(observer *o, int64_t step, bool recording);
void observe_begin_pass(observer *o, pass_kind p);
/* st NULL: counting is off; the row has no counts. */
void observe_tensor(observer *o, const tensor *t, tensor_role role, const round_stats *st);
/* "float16|float32" for one role's gradient dtypes */
void observe_dtype_set(const observer *o, tensor_role role, char *buf, int len);

#endif
