/*
 * run.h: the state of one case's run: its backend, tensors and memory account, the autograd
 * tape, the autocast state and the observer. Layers, losses, the GradScaler and the
 * optimizer receive a run and work through it.
 *
 * Errors that end a case (a dtype mismatch PyTorch refuses, out of memory, the GradScaler's
 * errors) go through run_fail(), which records the message and jumps back to the case's
 * driver (train.c); every tensor is owned by the run's pool, so nothing leaks. A failure
 * inside a node's backward (run_fail, run_check, out of memory) reads "conv2d backward: ...".
 *
 * The tape: every op that has an input requiring grad appends a node. backward() replays the
 * nodes in reverse; a node's backward receives the gradient of its output and hands the
 * gradients of its inputs to the nodes that made them (tensor.grad_fn), or to a
 * parameter's .grad (AccumulateGrad). A node keeps copies of its inputs' and output's
 * metadata, so forward tensors that nothing saved are freed as in PyTorch. A tensor read by
 * several nodes (a residual, a tied weight) receives several gradients, summed as autograd
 * sums them (tape.c): each contribution is named "<x>.grad_k" in the order they arrive,
 * the sum "<x>.grad".
 */
#ifndef AMPSCOPE_RUN_H
#define AMPSCOPE_RUN_H

#include <setjmp.h>
#include <stdbool.h>

#include "ops/backend.h"
#include "config/case.h"
#include "observe.h"

#define NODE_MAX_INPUTS 4 /* inputs and saved tensors (a norm saves x, mean, rstd, w) */
#define RUN_MAX_NODES 512
#define RUN_MAX_CACHE 256

struct run;
struct node;
typedef void (*backward_fn)(struct run *r, struct node *n);

typedef struct node {
    const char *op; /* "conv2d": names the node's failures in backward */
    backward_fn backward;
    int n_in;
    tensor in[NODE_MAX_INPUTS];     /* metadata copies (data not owned) */
    tensor *leaf[NODE_MAX_INPUTS];  /* the input itself when it is a parameter (retained) */
    tensor *saved[NODE_MAX_INPUTS]; /* tensors kept for backward (retained) */
    tensor out;                     /* metadata copy of the output */
    tensor *grad;                   /* gradient of the output while backward holds it */
    conv2d_geom geom;
    double scalar; /* the GradScaler's scale; mse: alpha */
    pw_op row;     /* a pointwise row's node (layers/pointwise.c): the row and its parameters */
    op_params pw;
    rd_op reduction; /* a reduction's node (reduce_record, layers/layer.h): the row and the */
    unsigned dims;   /* dims of its input it reduces */
    int64_t index; /* embedding: padding_idx (-1: none) */
    /* gradients of its output: how many consumers record one, how many have arrived */
    int uses, arrived;
} node;

typedef struct run {
    const case_config *cfg;
    backend *be;
    tensor_pool pool;
    mem_account account;
    observer *obs;
    bool counting; /* false with --observe off: ops get NULL stats */
    /* tape */
    node nodes[RUN_MAX_NODES];
    int n_nodes;
    /* autocast */
    bool autocast;
    dtype autocast_dtype;
    tensor *cache_src[RUN_MAX_CACHE], *cache_copy[RUN_MAX_CACHE];
    int n_cache;
    /* the activations autocast has cast in this region, by name, and how many times (each
     * consumer's cast is a new node: "x@float16", "x@float16_2", ...) */
    char cast_of[RUN_MAX_CACHE][TENSOR_NAME_MAX];
    int cast_count[RUN_MAX_CACHE];
    int n_cast_of;
    /* the parameters the tape's nodes read, with their uses and gradients arrived (a tied
     * or twice-read parameter sums its gradients into .grad) */
    tensor *leaf[RUN_MAX_CACHE];
    int leaf_uses[RUN_MAX_CACHE], leaf_arrived[RUN_MAX_CACHE];
    int n_leaves;
    /* errors */
    jmp_buf fail;
    char error[1024];
    const char *backward_op; /* the op whose backward runs (its failures start "op backward: ") */
    bool interrupted; /* ended by SIGINT or SIGTERM */
    struct fp8_state *fp8; /* [fp8]'s scaling state across steps (fp8_linear.h); NULL: off */
} run;

/* Ends the case with a message (PyTorch's text where PyTorch raises); does not return. */
_Noreturn void run_fail(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A new tensor; fails the run when memory runs out. */
tensor *run_tensor(run *r, const char *name, dtype dt, int ndim, const int64_t *shape,
                   mem_category cat);
/* A tensor shaped like `like`, with another name, dtype and category. */
tensor *run_tensor_like(run *r, const tensor *like, const char *name, dtype dt, mem_category cat);
/* Stats to hand to an op: initialised `st`, or NULL when counting is off. */
round_stats *run_stats(run *r, round_stats *st);
/* Fails the run with be->err when a backend op returned non-zero. */
void run_check(run *r, int rc);

/* Appends a node for an op whose output `out` was just made from inputs in[0..n_in);
 * returns NULL (and records nothing) when no input requires grad. */
node *tape_record(run *r, const char *op, backward_fn backward, tensor *out, tensor *const *in,
                  int n_in);
void tape_save(node *n, int i, tensor *t);
/* Runs backward from `root` (a one-element tensor) with gradient value `seed`. */
void tape_backward(run *r, tensor *root, float seed);
/* Bytes of the distinct storages the nodes keep for backward, parameters and autocast's
 * copies left out (what saved_tensors_hooks would count as activations), also split by the
 * storages' dtypes into by_dtype (report.md's memory table). */
int64_t tape_saved_bytes_by_dtype(const run *r, int64_t by_dtype[DTYPE_COUNT]);
/* Releases every node's saved tensors and pending gradients. */
void tape_clear(run *r);
/* Inside a node's backward: whether input i needs a gradient, and hands it over. */
bool node_needs_grad(const node *n, int i);
tensor *node_grad_tensor(run *r, const node *n, int i);
/* The name of the gradient node n hands to its input i: "<x>.grad", or "<x>.grad_k" when x
 * receives several (the k-th to arrive). */
void node_grad_name(const run *r, const node *n, int i, char *buf, size_t len);
void node_give_grad(run *r, node *n, int i, tensor *g, round_stats *st);

#endif
