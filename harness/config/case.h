/*
 * case.h: a case as data: the precision configuration one case file describes, after
 * case_load() (case/load.h) has parsed and validated it. Everything that runs a case reads
 * this struct; nothing here parses or runs. A case file (cases/NAME.case) is INI-style text;
 * docs/CASES.md documents every section and key. The kinds of layers and losses, and what
 * each reads from its line, are the registry's (layers/layer.h).
 */
#ifndef AMPSCOPE_CASE_H
#define AMPSCOPE_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "kinds.h"
#include "ops/optim_math.h"
#include "ops/tensor.h"

#define CASE_NAME_MAX 128
#define CASE_PATH_MAX 1024
#define CASE_TEXT_MAX 512
#define CASE_MAX_LAYERS 512
#define CASE_MAX_INITS 512
#define CASE_MAX_EXPECTS 128
#define CASE_MAX_OBSERVE 256
#define CASE_MAX_ACCUMULATE 1024 /* [train] accumulate: micro-batches per step */
#define LAYER_NAME_MAX 64
#define LAYER_SPEC_SLOTS 4 /* option slots of each type in a layer_spec */

/* dims of a per-sample shape (the batch dim excluded), and of a tensor without a batch dim (a
 * constant's, a parameter's) */
#define LAYER_MAX_RANK (TENSOR_MAX_DIMS - 1)
#define LAYER_MAX_INPUTS 4 /* inputs of one layer (sdpa's q, k, v and attn_mask) */
#define LAYER_INPUT (-1)   /* in layer_spec.inputs: the model's input (`from=input`) */

/* A list of integers as a line writes it, the whole tensor's (`dims=0,2,1,3`,
 * `sizes=-1,4,-1,-1`): a KIND_OPT_INTS option's value (layers/layer.h) */
typedef struct int_list {
    int n; /* 0: none given */
    int64_t v[LAYER_MAX_RANK + 1];
} int_list;

/* One [model] line. The kind's definition (layers/layer.h) says which of the fields below
 * its numbers and options fill, and their defaults. */
typedef struct layer_spec {
    char name[LAYER_NAME_MAX]; /* [A-Za-z_][A-Za-z0-9_]* */
    layer_kind kind;
    int line;                                  /* line in the case file, for later error messages */
    int64_t in, out;                           /* linear: features; conv2d: channels */
    bool bias;                                 /* linear, conv2d: bias=yes|no, default yes */
    int64_t kernel, stride, padding, dilation; /* conv2d: defaults -, 1, 0, 1 */
    /* options of kinds that have no named field above: a kind's file names the slots it
     * uses (layer.h's kind_opt points at them), so a new kind needs no field here */
    int64_t opt_int[LAYER_SPEC_SLOTS];
    double opt_real[LAYER_SPEC_SLOTS];
    int opt_choice[LAYER_SPEC_SLOTS];
    bool opt_bool[LAYER_SPEC_SLOTS];
    int_list opt_list; /* permute's dims, expand's sizes */
    /* the graph: the layers whose outputs it reads, in its forward's order (indices into
     * case_config.layers, all before it, or LAYER_INPUT): the previous layer's output unless
     * the line names them (`from=NAME`, or a multi-input kind's positional names) */
    int n_inputs;
    int inputs[LAYER_MAX_INPUTS];
    /* a binary pointwise row's operand written as a number (PyTorch's wrapped Python
     * scalar, docs/GRAPH-MODELS.md): bit k set when operand k is `scalar`; inputs[] then
     * holds only the operands that are layers, in order */
    unsigned scalar_operands;
    double scalar;
    int tied; /* weight=LAYER.weight: the layer whose weight it shares; -1: its own */
    /* params=PREFIX, any kind with parameters: its tensors are PREFIX.weight, PREFIX.bias, ...
     * (a module's state_dict names) instead of NAME.weight; "" when not given */
    char params_prefix[CASE_NAME_MAX];
    /* autocast=no, any kind: its ops run as under torch.autocast(device_type, enabled=False),
     * in the dtypes their inputs have (train/model.c) */
    bool autocast_disabled;
    /* a kind whose words are a shape (`parameter 1 197 768`): its dims, as written; a
     * constant's: its file's shape and dtype (its file is an [init] entry of its value) */
    int n_dims;
    int64_t dims[LAYER_MAX_RANK];
    dtype file_dtype;
    double init_mean, init_std; /* a parameter's init=normal|trunc_normal: mean=, std= */
    /* filled by validation: per-sample output shape (batch dim excluded), or with out_whole
     * (a constant's or a parameter's output, and what reads only those) the whole tensor's
     * shape: it has no batch dim; bit k of whole_inputs: input k has none */
    int out_ndim;
    int64_t out_shape[LAYER_MAX_RANK];
    bool out_whole;
    unsigned whole_inputs;
} layer_spec;

typedef enum input_source { INPUT_RANDN = 0, INPUT_FILE, INPUT_TOKENS } input_source;
typedef enum target_kind {
    TARGET_CLASSES = 0, /* int64 labels in [0, classes), drawn uniformly */
    TARGET_RANDN,       /* float32 randn, the model output's shape */
    TARGET_RANDN_LIKE,  /* randn in the model output's dtype (torch.randn_like) */
    TARGET_FILE
} target_kind;
typedef enum schedule_kind { SCHEDULE_CONSTANT = 0, SCHEDULE_COSINE } schedule_kind;
/* [expect]: `dtype TENSOR = DTYPE`, `error = TEXT|none`, `saturated OPERAND = yes|no` (an
 * fp8 layer's GEMM operand, fp8.csv's tensor: some quantization of it clamped values) */
typedef enum expect_kind { EXPECT_DTYPE = 0, EXPECT_ERROR, EXPECT_SATURATED } expect_kind;
/* [fp8] format: e4m3 everywhere, or hybrid (E4M3 forward, E5M2 output gradients) */
typedef enum fp8_format_kind { FP8_FORMAT_E4M3 = 0, FP8_FORMAT_HYBRID } fp8_format_kind;
/* [fp8] recipe: delayed and current scaling, and MXFP8, NVFP4 and MXFP4 on the CPU only
 * (fp8_linear.h; the 4-bit ones docs/FP4.md) */
typedef enum fp8_recipe_kind {
    FP8_RECIPE_DELAYED = 0,
    FP8_RECIPE_CURRENT,
    FP8_RECIPE_MXFP8,
    FP8_RECIPE_NVFP4,
    FP8_RECIPE_MXFP4
} fp8_recipe_kind;
#define FP8_RECIPE_COUNT 5
/* NVFP4 and MXFP4: values in float4_e2m1fn */
#define FP8_RECIPE_IS_FP4(r) ((r) == FP8_RECIPE_NVFP4 || (r) == FP8_RECIPE_MXFP4)

typedef struct init_spec {
    char tensor[CASE_NAME_MAX]; /* "fc1.weight" */
    char path[CASE_PATH_MAX];   /* resolved against the case file's folder */
    int line;
} init_spec;

typedef struct expect_spec {
    expect_kind kind;
    char tensor[CASE_NAME_MAX]; /* "fc1.weight.grad"; EXPECT_SATURATED: "fc2.weight" */
    dtype dt;                   /* EXPECT_DTYPE */
    bool saturated;             /* EXPECT_SATURATED: yes (some value saturated) or no */
    char text[CASE_TEXT_MAX];   /* EXPECT_ERROR: substring, or "" for `error = none` */
    int line;
} expect_spec;

typedef struct case_config {
    char path[CASE_PATH_MAX]; /* as given */
    char dir[CASE_PATH_MAX];  /* its folder: relative paths resolve here */
    /* [case] */
    char name[CASE_NAME_MAX]; /* default: file name without .case; [A-Za-z0-9._-]+ */
    char description[CASE_TEXT_MAX];
    char baseline[CASE_NAME_MAX]; /* "" when none */
    /* observe: which steps record tensors.csv/hist.csv rows. observe_every > 0: steps
     * 0, every, 2*every, ... and the last; else the observe_steps list. Default: every step
     * when steps <= 10, else every = steps / 10 rounded up (and the last step). */
    int64_t observe_every;
    int64_t observe_steps[CASE_MAX_OBSERVE];
    int n_observe_steps;
    /* [model] */
    layer_spec layers[CASE_MAX_LAYERS];
    int n_layers;
    /* [data] */
    int64_t batch;
    int sample_ndim; /* shape = 1024 or 3x555x555; default: first layer's input */
    int64_t sample_shape[LAYER_MAX_RANK];
    input_source input;
    char input_path[CASE_PATH_MAX];
    dtype input_dtype; /* default float32; int64 for token ids */
    bool input_tokens; /* int64 token ids: `tokens vocab=V`, or a file an embedding reads */
    int64_t vocab;     /* tokens: ids drawn uniformly in [0, vocab) */
    target_kind target;
    char target_path[CASE_PATH_MAX];
    /* [precision] */
    dtype params;  /* default float32 */
    bool autocast; /* autocast = off | float16 | bfloat16; default off */
    dtype autocast_dtype;
    bool loss_in_autocast; /* default yes */
    bool master_weights;   /* default no; only with half params */
    /* export_params = DTYPE (an imported case: ampscope import): params must be it */
    bool exported;
    dtype export_params;
    /* [scaler]: no section = no scaler */
    bool scaler;
    double init_scale, growth_factor, backoff_factor; /* 65536, 2.0, 0.5 */
    int64_t growth_interval;                          /* 2000 */
    /* [train] */
    loss_kind loss;
    int loss_reduction; /* a loss_reduction; `mse reduction=none`: elementwise loss then .mean() */
    optim_config optim;
    schedule_kind schedule;
    int64_t t_max;  /* cosine: T_max (required) */
    double eta_min; /* cosine: default 0 */
    int64_t steps;  /* default 1 */
    uint64_t seed;  /* default 0 */
    /* gradient accumulation and clipping (docs/CASES.md, docs/SEMANTICS.md; train.c, clip.c) */
    int64_t accumulate;       /* micro-batches per optimizer step; default 1 */
    bool delay_unscale;       /* master weights: accumulate in the half .grad, unscale once */
    double clip_grad_norm;    /* max_norm of clip_grad_norm_; 0: no clipping */
    double norm_type;         /* default 2; INFINITY for inf */
    bool error_if_nonfinite;  /* default no */
    double clip_grad_value;   /* clip_value of clip_grad_value_; 0: none */
    bool clip_before_unscale; /* clip the scaled gradients (the common mistake) */
    /* [init] */
    init_spec inits[CASE_MAX_INITS];
    int n_inits;
    /* [expect] */
    expect_spec expects[CASE_MAX_EXPECTS];
    int n_expects;
    /* [distributed] (distributed.h): no section = one process */
    int64_t world_size;      /* default 1 */
    int comm;                /* a comm_policy; default ddp */
    dtype reduce_dtype;      /* comm = fsdp|fsdp2 reduce_dtype=...; else unused */
    int allreduce_algorithm; /* Open MPI's coll_tuned_allreduce_algorithm; 0: its own pick */
    char hosts[CASE_PATH_MAX]; /* hosts = FILE: an Open MPI hostfile, resolved; "": this host */
    /* [fp8] (fp8_linear.h): the chosen linear layers run as te.Linear under fp8_autocast */
    bool fp8;                          /* enabled; default no */
    fp8_format_kind fp8_format;        /* default hybrid (TE's DelayedScaling) */
    fp8_recipe_kind fp8_recipe;        /* default delayed */
    int64_t fp8_amax_history_len;      /* delayed: default 1024 */
    int fp8_amax_compute_algo;         /* delayed: an fp8_amax_algo (fp8_recipe.h); max */
    int64_t fp8_margin;                /* delayed: default 0 */
    /* nvfp4: TE's NVFP4BlockScaling switches (default no, or NVTE_NVFP4_DISABLE_RHT,
     * NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING, NVTE_NVFP4_DISABLE_2D_QUANTIZATION = 1) */
    bool fp4_disable_rht, fp4_disable_stochastic_rounding, fp4_disable_2d_quantization;
    bool fp8_layer[CASE_MAX_LAYERS];   /* by layer index: runs as te.Linear */
    int fp8_line;                      /* [fp8]'s recipe line, else its enabled line (0: --set) */
    /* overrides applied (for naming variants: "<case>+<key>=<value>") */
    int n_sets;
} case_config;

/* true when step s (0-based) records tensors.csv and hist.csv rows */
static inline bool case_observes_step(const case_config *cfg, int64_t s)
{
    if (s < 0 || s >= cfg->steps)
        return false;
    if (s == cfg->steps - 1)
        return true;
    if (cfg->observe_every > 0)
        return s % cfg->observe_every == 0;
    for (int i = 0; i < cfg->n_observe_steps; i++)
        if (cfg->observe_steps[i] == s)
            return true;
    return false;
}


#endif
