/*
 * observe.h: the observer records every tensor a step produces or casts, when it is made:
 * one row in tensors.csv (its dtype, shape, and what the rounding that made it lost) and its
 * log2|x| histogram in hist.csv, for the steps the case observes. It also remembers every
 * tensor name's dtype and role (for [expect] and summary.csv) on every step.
 *
 * Roles: input, target, param, activation, loss, cast, grad_activation, grad_cast,
 * grad_param, optimizer_state, master_param, grad_master (a half gradient copied up to
 * float32 for the master weights).
 */
#ifndef AMPSCOPE_OBSERVE_H
#define AMPSCOPE_OBSERVE_H

#include <stdbool.h>
#include <stdio.h>

#include "core/stats.h"
#include "ops/tensor.h"

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

typedef enum pass_kind { PASS_FORWARD = 0, PASS_BACKWARD, PASS_OPTIMIZER } pass_kind;

typedef struct seen_tensor {
    char name[TENSOR_NAME_MAX];
    dtype dt;
    tensor_role role;
} seen_tensor;

typedef struct observer {
    const char *case_name;
    FILE *tensors, *hist; /* NULL: rows are not written (dry runs) */
    int64_t step;
    pass_kind pass;
    int order;
    bool recording; /* this step's rows are written */
    seen_tensor *seen;
    int n_seen, cap_seen;
    unsigned grad_dtypes[ROLE_COUNT];      /* bit per dtype, backward and optimizer passes */
    int64_t grad_underflow, grad_numel;    /* backward-pass gradient rows written */
    char first_nonfinite[TENSOR_NAME_MAX]; /* this step's; "" when none */
    bool write_failed;
    /* --dump: observed tensors go to DUMP_DIR/<step>/<tensor>.npy (matching dump_only) */
    struct backend *be;
    const char *dump_dir, *dump_only;
    bool dump_dry; /* count the bytes a dump would write instead of writing them */
    int64_t dump_bytes;
    char dump_error[512];
} observer;

const char *tensor_role_name(tensor_role r);
const char *pass_name(pass_kind p);
/* Sets the step and whether it is recorded; resets order and first_nonfinite. */
void observe_begin_step(observer *o, int64_t step, bool recording);
void observe_begin_pass(observer *o, pass_kind p);
/* st NULL: counting is off; the row is written with empty counts. */
void observe_tensor(observer *o, const tensor *t, tensor_role role, const round_stats *st);
/* The dtype a name was seen with; false when the run never made such a tensor. */
bool observe_find(const observer *o, const char *name, dtype *dt);
/* "float16|float32" for one role's gradient dtypes */
void observe_dtype_set(const observer *o, tensor_role role, char *buf, int len);
void observe_free(observer *o);

#endif
