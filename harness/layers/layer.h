/*
 * layer.h: the registry of layer and loss kinds. Each kind is one definition (layer_def or
 * loss_def) in its own file, harness/layers/<kind>.c; registry.c lists them in one array
 * per enum (kinds.h), indexed by kind, and checks at start-up that no entry is missing or
 * half filled. The case parser, the model, autocast's table and the trainer read kinds
 * only through this header.
 *
 * What a definition holds:
 *  - its name in case files, and the words that follow it: `signature` ("IN -> OUT": the
 *    upper-case words are numbers, read into `args` in order; the others are literal),
 *    then name=value options (`opts`), each with its type, default, allowed values and the
 *    field of the spec it fills;
 *  - its shape rule: the per-sample output shape from the input shapes;
 *  - its parameters, in model.parameters() order, with their shapes and PyTorch's default
 *    initialisation;
 *  - autocast's policy for each op it runs (the table `ampscope ops` prints);
 *  - its forward, which applies that policy, runs the ops through the backend table,
 *    records each op's backward on the tape and returns a new reference to its output;
 *  - the one-line description reports print;
 *  - whether [fp8] may run it as te.Linear (te_linear: the parser reads the flag, and no
 *    code outside the kind's file asks which kind a layer is).
 * Inputs and parameters reach a forward as arrays (in[0..n_inputs), params in the order
 * the params rule gives), so kinds with several inputs or a shared parameter need no other
 * signature. A one-input kind reads the previous layer's output or `from=NAME`; a kind of
 * n_inputs > 1 takes that many layer names after its signature's numbers (`add a b`), or
 * from min_inputs to n_inputs of them (`cat a b c dim=-1`); a
 * kind whose first parameter is "weight" takes `weight=LAYER.weight` (a tied weight: the
 * forward receives that layer's tensor). The case parser resolves the names
 * (layer_spec.inputs).
 *
 * A new kind takes: its file here (its definition, with its forward and backward), its
 * value in kinds.h's enum and its line in registry.c's array, its ops in the backend table
 * (backend.h, cpu/, kernels/), and its tests. An option whose value has no field in
 * layer_spec yet adds that field to case.h. A pointwise op is no such kind: it is a row of
 * ops/pointwise.h, and layers/pointwise.c makes its kind.
 */
#ifndef AMPSCOPE_LAYER_H
#define AMPSCOPE_LAYER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/autocast.h"
#include "autograd/run.h"

#define LAYER_MAX_PARAMS 4 /* parameters and buffers of one layer */
#define LAYER_MAX_OPTS 8   /* options of one kind */
#define COUNT_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- options ---- */

typedef enum kind_opt_type {
    KIND_OPT_INT,    /* an int64_t >= min */
    KIND_OPT_REAL,   /* a double in range (eps=1e-5, p=0.1) */
    KIND_OPT_BOOL,   /* a bool: yes/no, true/false, on/off, 1/0 */
    KIND_OPT_CHOICE, /* an int: the index of the value in choices */
    KIND_OPT_DIMS,   /* dims of the whole tensor, D or D1,D2,... (negative from the end), as
                      * a mask in an int64_t (kind_dims_mask); 0: none given */
    KIND_OPT_INTS,   /* integers D1,D2,... >= min, one per dim of the whole tensor (at most
                      * LAYER_MAX_RANK + 1), in order, into an int_list (config/case.h) */
    KIND_OPT_REFUSED /* accepted by PyTorch, not by the harness: any value is refused */
} kind_opt_type;

/* KIND_OPT_DIMS's mask: bit d for a dim d >= 0, bit KIND_DIMS_NEG - 1 - d for d < 0 */
#define KIND_DIMS_NEG 16
#define KIND_DIMS_MAX 8 /* dims from -KIND_DIMS_MAX to KIND_DIMS_MAX - 1 */

/* The values a real option (and the case parser's numbers) may take. */
typedef enum real_range { ANY, NONNEG, POSITIVE, ABOVE_ONE, UNIT_OPEN, UNIT_HALF } real_range;

typedef struct kind_opt {
    const char *name; /* as written: bias=no */
    kind_opt_type type;
    size_t offset;              /* the field it fills in the kind's spec */
    int64_t min;                /* INT: the smallest value (0 or 1) */
    int64_t def;                /* the default: INT's value, BOOL's 0/1, CHOICE's index */
    real_range range;           /* REAL: the values allowed */
    double real_def;            /* REAL: the default */
    const char *const *choices; /* CHOICE */
    int n_choices;              /* CHOICE */
    const char *required;       /* non-NULL: a layer's option that must be
                                 * given; the form, "kernel=K" */
    const char *refusal;        /* REFUSED: the message */
} kind_opt;

/* The args and opts columns of a row (ops/pointwise.h, ops/reduce.h) as kind_arg and
 * kind_opt, each followed by a comma: their slots are layer_spec's opt_real and opt_choice,
 * which the layer hands on as op_params (layers/pointwise.c, layers/reduce.c) */
#define PW_EXPAND(...) __VA_ARGS__
#define PW_ARG_REAL(name, slot) {#name, #name, offsetof(layer_spec, opt_real[slot]), KIND_ARG_REAL},
#define PW_OPT_REAL(name, slot, range_, def)                                                       \
    {#name, KIND_OPT_REAL, offsetof(layer_spec, opt_real[slot]), .range = range_, .real_def = def},
#define PW_OPT_CHOICE(name, slot, def_, words)                                                     \
    {#name,                                                                                        \
     KIND_OPT_CHOICE,                                                                              \
     offsetof(layer_spec, opt_choice[slot]),                                                       \
     .def = def_,                                                                                  \
     .choices = (const char *const[]){PW_EXPAND words},                                            \
     .n_choices = COUNT_OF(((const char *const[]){PW_EXPAND words}))},

/* A number of the signature: "in_features" names it in messages, "in" in JSON. */
typedef struct kind_arg {
    const char *name, *json;
    size_t offset; /* an int64_t of the layer_spec; a double for KIND_ARG_REAL */
    int64_t min;   /* the smallest value, or KIND_ARG_REAL */
} kind_arg;
/* kind_arg.min of a number that is a Python float (`scale 0.125`): any finite double */
#define KIND_ARG_REAL INT64_MIN
/* kind_arg.min of a number that is a dtype (`to float16`): a float dtype's name, or
 * `OTHER.dtype`, the dtype of layer OTHER's output, which the case parser appends to the
 * layer's inputs (read for its dtype only) and writes as KIND_DTYPE_OF_INPUT */
#define KIND_ARG_DTYPE (INT64_MIN + 2)
#define KIND_DTYPE_OF_INPUT (-1)

/* ---- shapes ---- */

typedef struct layer_shape {
    int ndim; /* per sample: the batch dim is not counted; of an input that has none
               * (layer_spec.whole_inputs), the whole tensor's */
    int64_t dim[LAYER_MAX_RANK];
} layer_shape;

/* Who a shape rule's message is about: the layer's input (the data shape, for the first
 * layer when one is given) or the layer's own numbers. */
typedef enum shape_blame { SHAPE_INPUT, SHAPE_LAYER } shape_blame;

/* The caller's sink for a shape rule's messages ("input has 3 features"); the caller
 * prefixes them with the layer's line. */
typedef struct shape_check {
    void (*fail)(struct shape_check *sc, shape_blame who, const char *msg);
} shape_check;
void shape_fail(shape_check *sc, shape_blame who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "3x32x32" into buf */
void shape_text(const layer_shape *s, char *buf, size_t len);
/* a * b and a + b of sizes >= 0, saturating at INT64_MAX instead of overflowing */
int64_t size_mul(int64_t a, int64_t b);
int64_t size_add(int64_t a, int64_t b);

/* ---- parameters ---- */

typedef enum param_init {
    /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): kaiming_uniform_(a=sqrt(5)) for nn.Linear's and
     * nn.Conv2d's weight, and their bias's init */
    PARAM_INIT_UNIFORM_FAN_IN,
    /* normalization */
    PARAM_INIT_ONES,  /* init.ones_: a norm's weight */
    PARAM_INIT_ZEROS, /* init.zeros_: a norm's bias */
    /* buffers (register_buffer): no gradient, no optimizer step, memory category buffers */
    PARAM_BUFFER_ZEROS, /* batch_norm's running_mean */
    PARAM_BUFFER_ONES,  /* batch_norm's running_var */
    /* N(0, 1): nn.Embedding's init (normal_), the padding_idx row zeroed */
    PARAM_INIT_NORMAL,
    /* `parameter ... init=normal|trunc_normal`: init.normal_(mean, std), and
     * init.trunc_normal_(mean, std, a=-2, b=2) (layer_spec's init_mean and init_std) */
    PARAM_INIT_NORMAL_STD,
    PARAM_INIT_TRUNC_NORMAL,
    /* a constant: a buffer whose values are its file's (an [init] entry), in its file's
     * dtype (layer_spec.file_dtype) unless the case's params dtype is a half one
     * (module.half() casts buffers) */
    PARAM_BUFFER_FILE
} param_init;

typedef struct layer_param {
    const char *name; /* "weight": the tensor is "<layer>.weight" */
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    param_init init;
    /* PARAM_INIT_UNIFORM_FAN_IN: the fan in; PARAM_INIT_NORMAL: the row zeroed
     * (padding_idx), -1 for none (one field, so the kinds' initializers stay positional) */
    int64_t fan_in;
} layer_param;

/* whether p is a buffer: its init says so */
static inline bool param_is_buffer(const layer_param *p)
{
    return p->init == PARAM_BUFFER_ZEROS || p->init == PARAM_BUFFER_ONES ||
           p->init == PARAM_BUFFER_FILE;
}

/* ---- definitions ---- */

typedef struct layer_def {
    const char *name;
    const char *signature; /* the words after the name, "IN -> OUT"; "" for none */
    const kind_arg *args;  /* one per upper-case word of the signature */
    int n_args;
    const kind_opt *opts; /* offsets into layer_spec */
    int n_opts;
    /* in[0..n_inputs) to *out; false when the shape walk cannot go on */
    bool (*shape)(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc);
    /* the input it implies as the first layer of a case whose [data] has no shape; false:
     * it implies none, and [data] shape is required */
    bool (*input_shape)(const layer_spec *l, layer_shape *in);
    bool reads_tokens; /* its input is int64 token ids (embedding): the case's input only */
    /* fills out[0..LAYER_MAX_PARAMS), returns how many */
    int (*params)(const layer_spec *l, layer_param *out);
    const autocast_op *autocast; /* the ops its forward runs */
    int n_autocast;
    tensor *(*forward)(run *r, const layer_spec *l, tensor *const *in, tensor *const *params);
    /* "linear 4 → 8 (no bias)": snprintf's contract */
    int (*describe)(const layer_spec *l, char *buf, size_t len);
    int n_inputs; /* inputs the forward takes; 0 means 1 */
    /* of n_inputs > 1: one of them may be written as a number, a Python scalar
     * (layer_spec.scalar_operands); the forward then receives one input fewer */
    bool scalar_inputs;
    /* a kind of several inputs that takes min_inputs..n_inputs of them (cat): as many names as
     * the line gives, in layer_spec.n_inputs; 0: exactly n_inputs */
    int min_inputs;
    /* how many of the last of those a line may leave out (sdpa's attn_mask): the spec's
     * n_inputs says how many it names */
    int n_optional_inputs;
    /* [fp8] may choose it to run as te.Linear (fp8_linear.h): its spec's `in` and `out` are
     * the GEMM's in_features and out_features, and its forward runs fp8_linear_forward for
     * the layers [fp8] chose */
    bool te_linear;
    /* how its words read: KIND_WORDS_SIGNATURE (the signature's), KIND_WORDS_DIMS (a shape,
     * one to LAYER_MAX_RANK sizes into layer_spec.dims: `parameter 1 197 768`) or
     * KIND_WORDS_PATH (an .npy file's path, resolved against the case file's folder, its
     * header read into layer_spec.dims and file_dtype and the file made the [init] entry of
     * its first parameter: `constant data/cos.npy`), those two without an input; or
     * KIND_WORDS_SHAPE: a sample's sizes into layer_spec.dims, one of them -1 (inferred),
     * of its one input (`reshape 4 -1 from=x`) */
    int words;
    /* it takes inputs without a batch dim (a constant's, a parameter's: the shape walk sets
     * layer_spec.whole_inputs before its shape rule runs), else the walk refuses them; its
     * output has none when none of its inputs has one */
    bool whole_inputs;
    /* its one tensor is the layer's value itself (a `parameter`, a `constant`): with
     * params=NAME it is named NAME, not NAME.weight (a state_dict name such as cls_token) */
    bool named_by_params;
} layer_def;

enum { KIND_WORDS_SIGNATURE = 0, KIND_WORDS_DIMS, KIND_WORDS_PATH, KIND_WORDS_SHAPE };

typedef struct loss_def {
    const char *name;
    const kind_opt *opts; /* offsets into case_config */
    int n_opts;
    bool class_target;           /* the target is int64 class labels [B] */
    const autocast_op *autocast; /* the ops its forward runs */
    int n_autocast;
    /* the loss (a new reference) of the model's output against the target */
    tensor *(*forward)(run *r, const case_config *cfg, tensor *out, tensor *target);
} loss_def;

/* The kinds' definitions (each in its layers/<kind>.c; the pointwise rows' in
 * layers/pointwise.c, made from the rows, pointwise_defs[op] the kind LAYER_POINTWISE + op). */
extern const layer_def linear_def, conv2d_def, flatten_def;
extern const layer_def pointwise_defs[PW_OP_COUNT];
/* the reduction rows' kinds (layers/reduce.c), reduce_defs[op] the kind LAYER_REDUCE + op */
extern const layer_def reduce_defs[RD_OP_COUNT];
/* softmax and the causal mask */
extern const layer_def softmax_def, log_softmax_def, causal_mask_def;
/* scaled_dot_product_attention */
extern const layer_def scaled_dot_product_attention_def;
/* normalization and pooling */
extern const layer_def layer_norm_def, group_norm_def, rms_norm_def, batch_norm2d_def,
    max_pool2d_def, avg_pool2d_def, adaptive_avg_pool2d_def;
/* upsampling */
extern const layer_def interpolate_def;
/* graph models */
extern const layer_def embedding_def, position_embedding_def, matmul_def, transpose_def,
    split_heads_def, merge_heads_def;
/* explicit casts */
extern const layer_def to_def;
/* shape ops (shape.c) */
extern const layer_def slice_def, cat_def, unsqueeze_def, squeeze_def, pad_def, select_def,
    stack_def;
/* strided copies: permute.c, expand.c (expand and repeat_interleave) */
extern const layer_def permute_def, expand_def, repeat_interleave_def;
/* tensors without a batch dim: constant.c, parameter.c */
extern const layer_def constant_def, parameter_def;
/* views and copies of other shapes */
extern const layer_def reshape_def;
extern const loss_def cross_entropy_def, mse_def;
/* losses bce_with_logits and l1 */
extern const loss_def bce_with_logits_def, l1_def;

/* ---- the registry ---- */

const layer_def *layer_def_of(layer_kind k);
/* The name of layer l's parameter or buffer p into buf: "<layer>.<p>" (fc1.weight), or
 * with params=PREFIX "PREFIX.<p>" (model.fc1.weight), or PREFIX itself for a kind
 * named_by_params (cls_token) */
void layer_param_name(const layer_spec *l, const layer_param *p, char *buf, size_t len);
const loss_def *loss_def_of(loss_kind k);
/* The kind a case file calls name ("linear", "mse"), or -1 */
int layer_kind_of_name(const char *name);
int loss_kind_of_name(const char *name);
extern const char *const reduction_names[REDUCTION_COUNT];
/* "fc1 = linear 4 → 8" (what report.md's **Model:** line lists); snprintf's contract */
int layer_describe(const layer_spec *l, char *buf, size_t len);
/* the same for layer i of a case, with what it reads when that is not the previous layer's
 * output and its tied weight: "res = add (pos, o)", "k = linear 8 → 8 (from pos)",
 * "head = linear 8 → 16 (no bias) (weight: tok.weight)" */
int layer_describe_at(const case_config *cfg, int i, char *buf, size_t len);
/* 0 when the definitions are complete and their names unique; else -1 and a message
 * naming the kind and what it lacks. Run on the registry at start-up (registry.c). */
int layer_defs_check(const layer_def *const *defs, int n, char *err, size_t len);
int loss_defs_check(const loss_def *const *defs, int n, char *err, size_t len);

/* ---- for the kinds' files ---- */

/* the rules of a kind that keeps its input's shape, implies no input, has no parameters */
bool shape_same(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc);
bool no_input_shape(const layer_spec *l, layer_shape *in);
int no_params(const layer_spec *l, layer_param *out);
/* the rules of a kind that takes no input and gives its parameter (constant, parameter): its
 * shape is layer_spec.dims (the whole tensor's), its forward returns params[0] itself */
bool shape_of_dims(const layer_spec *l, const layer_shape *in, layer_shape *out, shape_check *sc);
tensor *forward_param_itself(run *r, const layer_spec *l, tensor *const *in,
                             tensor *const *params);
/* "<layer>.out" into buf */
void layer_out_name(const layer_spec *l, char *buf, size_t len);
/* Inside a backward: hands g, the gradient of an op whose input i receives it unchanged
 * (add, a view's inverse), to that input: a view of g when the dtypes agree (no memory,
 * observed as it is), else g cast into the input's dtype, as autograd's engine casts each
 * gradient to its input's dtype (validate_outputs in torch/csrc/autograd/engine.cpp). */
void give_grad_as_is(run *r, node *n, int i, tensor *g);
/* A reduction row's node: y = row op of x over the dims `dims` sets, a new tensor `name` of
 * shape [ndim, shape] (the kept dims' values) in x's dtype, observed with `role`; its
 * backward is the row's (reduce_backward), saving what the row reads. */
tensor *reduce_record(run *r, rd_op op, tensor *x, unsigned dims, const char *name, int ndim,
                      const int64_t *shape, tensor_role role);
/* The same with the call's parameters p, the output's dtype dt and the autocast entry ac
 * that says why y has it (layers/reduce.c: sum's fp32_set_opt_dtype) */
tensor *reduce_record_as(run *r, rd_op op, const op_params *p, const autocast_op *ac, tensor *x,
                         unsigned dims, const char *name, int ndim, const int64_t *shape, dtype dt,
                         tensor_role role);
/* t's metadata with another shape of the same numel (no memory: a stack copy) */
tensor reshaped(const tensor *t, int ndim, const int64_t *shape);
/* a new tensor `name`: x with dims d1 and d2 swapped, copied (transpose.c) */
tensor *swap_copy(run *r, const tensor *x, int d1, int d2, const char *name, mem_category cat,
                  round_stats *st);
/* A dim D of a tensor of `rank` dims (negative: from the end, as PyTorch's wrap_dim) into
 * [0, rank), or -1 when out of range (transpose.c) */
int dim_index(int64_t d, int rank);
/* In a shape rule: dim D of a tensor of `rank` dims (the batch dim counted) into [1, rank)
 * in *out; false after PyTorch's message when it is out of range, or a refusal of the batch
 * dim, which `op` does not move (shape.c) */
bool shape_dim(shape_check *sc, int64_t d, int rank, const char *op, int *out);
/* The forward of a view layer: y = x with another shape, the same storage, no rounding,
 * observed as the layer's output; its backward views the gradient back (shape.c) */
tensor *view_layer(run *r, const layer_spec *l, tensor *x, int ndim, const int64_t *shape,
                   const char *op);
/* The forward of a kind that copies its input (permute, expand, repeat_interleave): y, of
 * shape [ndim, shape], is x read through g, named as the layer's output, its dtype's reason
 * recorded, observed; *n is its node for `backward` on the tape, NULL when none is recorded
 * (shape.c) */
tensor *strided_copy_layer(run *r, const layer_spec *l, tensor *x, const strided_geom *g, int ndim,
                           const int64_t *shape, const char *op, backward_fn backward, node **n);
/* A view of base with another name and shape, or the run ends */
tensor *view_or_fail(run *r, tensor *base, const char *name, int ndim, const int64_t *shape);
/* "[2, -1, 3]": v[0..n) as PyTorch prints a list of sizes or dims (expand.c) */
void list_text(const int64_t *v, int n, char *buf, size_t len);
/* PyTorch's names of a dtype in its error texts (linear.c) */
const char *scalar_type_name(dtype dt);      /* "Half" */
const char *type_meta_name(dtype dt);        /* "c10::Half" */
const char *cuda_tensor_type_name(dtype dt); /* "torch.cuda.HalfTensor" */

#endif
