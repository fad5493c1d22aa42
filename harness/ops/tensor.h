/*
 * tensor.h: a tensor is a named, typed, shaped buffer in a backend's memory, owned by a
 * tensor_pool that frees whatever is left when a run ends (also when it ends in an error).
 *
 * Shapes: row-major, at most TENSOR_MAX_DIMS = 6 dims (the batch dim and up to 5 of a sample:
 * timm's ViT attention reshapes its qkv to [B, N, 3, H, D], HF Llama's repeat_kv expands to
 * [B, KVH, n_rep, T, D]). Letters used in comments across the harness:
 *   B batch, I in_features, O out_features, C channels, H height, W width, K kernel size.
 * Names are the ones PyTorch users read: "fc1.weight", "fc1.weight@float16" (a cast copy),
 * "fc1.out", "fc1.weight@float16.grad".
 */
#ifndef AMPSCOPE_TENSOR_H
#define AMPSCOPE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/memory.h"
#include "dtype_reason.h"

#define TENSOR_NAME_MAX 160
#define TENSOR_MAX_DIMS 6
/* the longest text tensor_shape_str writes, its '\0' included: 19 digits and an 'x' a dim */
#define TENSOR_SHAPE_TEXT_MAX (TENSOR_MAX_DIMS * 20)

struct backend;

/* Why a tensor has its dtype (dtype_reason.h), set by the code that makes it. */
typedef struct dtype_why {
    dtype_reason reason;
    const char *op; /* the op whose rule gave the dtype ("layer_norm"), static text; NULL: none */
    char from[2 * TENSOR_NAME_MAX]; /* the operands whose dtypes gave it, "a|b"; "" */
} dtype_why;

typedef struct tensor {
    char name[TENSOR_NAME_MAX];
    dtype dtype;
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t numel;
    void *data; /* in the backend's memory; NULL for a counting (dry) pool */
    mem_category category;
    int refs; /* tensor_release frees it when this reaches 0 */
    /* autograd: set on parameters and on every output of an op with such an input */
    bool requires_grad;
    bool is_leaf;        /* a parameter: its gradient accumulates into .grad */
    bool is_cast;        /* made by a cast node: its gradient's role is grad_cast */
    struct tensor *grad; /* a parameter's .grad */
    int grad_fn;         /* index of the tape node that made it; -1 for leaves and data */
    struct tensor *base; /* a view (flatten): data belongs to base, which it retains */
    dtype_why why;       /* why it has its dtype: tensor_why() */
    struct tensor *next_in_pool;
    struct tensor *prev_in_pool;
} tensor;

typedef struct tensor_pool {
    struct backend *be;
    mem_account *account;
    tensor *head;
    tensor *spare; /* released tensors' structs, for the next ones (linked by next_in_pool) */
} tensor_pool;

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates a tensor with one reference; returns NULL and fills err when memory runs out. */
tensor *tensor_new(tensor_pool *pool, const char *name, dtype dt, int ndim, const int64_t *shape,
                   mem_category cat, char *err, int errlen);
/* A view of base's data with another name and shape (same numel); holds a reference to base. */
tensor *tensor_view(tensor_pool *pool, tensor *base, const char *name, int ndim,
                    const int64_t *shape, char *err, int errlen);
void tensor_retain(tensor *t);
void tensor_release(tensor_pool *pool, tensor *t);
/* Frees every tensor still in the pool, and the spare structs. */
void tensor_pool_clear(tensor_pool *pool);
/* The calls every pool of the process made to calloc and free for tensor structs: a step that
 * makes no more tensors than a step before it adds none (tests/test_alloc.c). */
int64_t tensor_heap_calls(void);
int64_t tensor_bytes(const tensor *t);
/* Says why t has its dtype (dtype_reason.h): the reason, the op whose rule gave it (static
 * text, or NULL) and the operands whose dtypes gave it (NULL entries skipped; their names
 * are copied). The one call the code that makes a tensor makes for it. */
void tensor_why(tensor *t, dtype_reason reason, const char *op, const tensor *const *from,
                int n_from);
/* "64x16000" */
void tensor_shape_str(const tensor *t, char *buf, int len);
int64_t shape_numel(int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif

#endif
