/*
 * optimizers.h: the optimizer registry, one row per optim_kind (the kinds are ops/
 * optim_math.h's OPTIM_KINDS list, with their names): each kind's options (name, how the
 * value is read, the optim_config field it sets), its defaults (PyTorch 2.x's), a check
 * across its options, and the names of its state tensors as PyTorch's optimizer.state[p]
 * calls them. The update rule is not here: it is optim_math.h's optim_update, shared with
 * the CUDA kernels.
 *
 * Adding an optimizer (say Adagrad) takes:
 *   - optim_math.h: its row in OPTIM_KINDS (enum value, name, state counts), its fields in
 *     optim_config if new, its constants in optim_hyper_at, its case in optim_update and in
 *     optim_state_count (switches without default: -Wswitch names each one missing);
 *   - optimizers.c: its row in optim_defs (options, defaults, states; its check if some
 *     options exclude others); the compiler checks the array's length, and
 *     optim_registry_check (at start-up and in tests/test_optim.c) that the row is filled
 *     and that its states agree with optim_state_count and with OPTIM_KINDS' state counts;
 *   - tests/test_optim.c: three steps against PyTorch's numbers.
 * Both backends' update dispatch and the selftest iterate OPTIM_KINDS; nothing else names
 * an optimizer kind.
 */
#ifndef AMPSCOPE_OPTIMIZERS_H
#define AMPSCOPE_OPTIMIZERS_H

#include <stddef.h>
#include <stdio.h>

#include "ops/optim_math.h"

/* How an option's value is read (the case file's words; ranges as case.c words them). */
typedef enum optim_opt_type {
    OPTIM_OPT_NONNEG,  /* a finite number >= 0 */
    OPTIM_OPT_ANY,     /* any finite number */
    OPTIM_OPT_BOOL,    /* yes/no */
    OPTIM_OPT_BETAS,   /* "b1,b2", each in [0, 1), into beta1 and beta2 */
    OPTIM_OPT_NO_ONLY, /* a PyTorch option accepted only as no (sets no field) */
} optim_opt_type;

typedef struct optim_opt {
    const char *name; /* PyTorch's keyword */
    optim_opt_type type;
    size_t offset; /* of the optim_config field it sets (beta1 for betas; 0 for no-only) */
} optim_opt;

/* A state tensor, present always or only under an option. */
typedef enum optim_state_when {
    OPTIM_STATE_ALWAYS,
    OPTIM_STATE_IF_MOMENTUM, /* momentum > 0 (SGD: != 0; momentum is never negative) */
    OPTIM_STATE_IF_CENTERED,
} optim_state_when;

typedef struct optim_state_def {
    const char *name;
    optim_state_when when;
} optim_state_def;

#define OPTIM_MAX_OPTS 8

typedef struct optim_def {
    int n_opts;
    optim_opt opts[OPTIM_MAX_OPTS]; /* in the order messages list them */
    optim_config defaults;
    /* NULL, or the message for options that exclude each other (NULL when fine) */
    const char *(*check)(const optim_config *o);
    int n_states;
    optim_state_def states[OPTIM_MAX_STATE]; /* in optim_update's slot order, when present */
    /* the order `check --json` writes the options in, as indices into opts (SGD's kept
     * from before the registry); NULL: opts' order */
    const int *json_order;
} optim_def;

extern const optim_def optim_defs[OPTIM_KIND_COUNT];

static inline const optim_def *optim_def_of(optim_kind kind) { return &optim_defs[kind]; }

static inline const char *optim_name(optim_kind kind) { return optim_kind_name(kind); }

/* The kind called name, or -1. */
int optim_find(const char *name);
/* The kind's defaults (PyTorch's) with kind set. */
optim_config optim_default(optim_kind kind);
/* A case without an `optimizer` key: SGD with its defaults. */
#define OPTIM_CASE_DEFAULT OPTIM_SGD
/* Name of state slot k (0 <= k < optim_state_count(c)): "exp_avg", ... */
const char *optim_state_name(const optim_config *c, int k);
/* "sgd lr=0.1 momentum=0.9": the kind, lr, and momentum and weight_decay when non-zero,
 * as config.csv and report.md show the optimizer. */
void optim_format(const optim_config *o, char *buf, size_t len);
/* {"kind": "adam", "options": {"lr": 0.001, "betas": [0.9, 0.999], ...}}: the optimizer's
 * keyword arguments in PyTorch, defaults filled in; numbers written by real. */
void optim_write_json(FILE *f, const optim_config *o, void (*real)(FILE *f, double v));
/* Every row filled, and its states agree with optim_state_count with and without momentum
 * and centered; false with the first mismatch in err. */
bool optim_registry_check(char *err, size_t len);

#endif
