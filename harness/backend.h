/*
 * backend.h: the backend table. Layers, losses, the GradScaler and the optimizers never
 * ask which device they run on: they call through this table, filled by the CPU backend
 * (harness/cpu/, always built) or the CUDA backend (kernels/, a shared library loaded with
 * dlopen only when a GPU is asked for or found).
 *
 * Contract of every op:
 *  - tensors' data live in the backend's memory; shapes have been checked by the caller.
 *  - an op computes in float32 ("opmath") from its inputs' exact float32 values and rounds
 *    once, into the output tensor's dtype, when it stores; ops whose PyTorch CUDA kernel
 *    rounds after every operation say so and do the same (see loss_math.h, optim_math.h).
 *  - `st`, when not NULL, receives the counts and histogram of that final rounding
 *    (stats.h); when NULL, no bookkeeping is done (observation off).
 *  - GEMMs take operands of any float dtype, multiply exactly in float32 (half products
 *    are exact there), accumulate in float32 and round the output once.
 *  - every op returns 0, or non-zero with a message in be->err for failures that the user
 *    can cause (out of memory); library failures are reported where they happen (the
 *    CHECK macros print the statement, file, line and library error) and abort.
 *
 * The ops are listed once, in BACKEND_OPS below. The list makes the table's fields, the
 * backend_op enum, the names backend_check() reports, the counting backend's stubs, and the
 * CPU and CUDA backends' declarations and tables (cpu_<op> in harness/cpu/, cuda_<op> in
 * kernels/): adding an op is one line there plus its cpu_<op> and cuda_<op>. Every open
 * path (CPU, counting, CUDA) runs backend_check(), which names each op or memory function
 * a table leaves NULL.
 *
 * ABI: the CUDA backend is a shared library built from these sources; backend_cuda_load()
 * refuses one whose BACKEND_ABI_VERSION or sizeof(struct backend) differs from the
 * binary's, before anything in it runs. Bump BACKEND_ABI_VERSION with every change to
 * struct backend or to a type its functions take (tensor, round_stats, conv2d_geom,
 * optim_*, mem_account, backend_values_fn): a field or op added, removed, reordered,
 * retyped or given another meaning. The size catches only some of these; the version all.
 */
#ifndef AMPSCOPE_BACKEND_H
#define AMPSCOPE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "memory.h"
#include "stats.h"
#include "tensor.h"
#include "optim_math.h"

typedef struct conv2d_geom {
    int64_t n, c_in, h_in, w_in; /* input  [N, C_in, H_in, W_in] */
    int64_t c_out, h_out, w_out; /* output [N, C_out, H_out, W_out] */
    int64_t kh, kw, stride, padding, dilation;
} conv2d_geom;

/* One parameter's optimizer step: param (and master when master weights are on), grad,
 * state tensors as optim_math.h lists them for the optimizer kind. */
typedef struct optim_tensors {
    tensor *param; /* the tensor the step writes: the master when there is one */
    tensor *grad;  /* same dtype as param */
    tensor *state[OPTIM_MAX_STATE];
    dtype visible; /* dtype of the parameter the model sees (for lost updates) */
} optim_tensors;

typedef struct optim_result {
    bool counting; /* false (observation off): param and state are left alone */
    round_stats param;
    round_stats state[OPTIM_MAX_STATE];
    int64_t lost_updates;
} optim_result;

typedef struct backend backend;

/* Host values for upload_values: a malloc'd buffer of the requested bytes, in the tensor's
 * dtype, that the backend copies and frees. It may end the run instead of returning (it is
 * called before the backend holds anything); it never returns NULL. */
typedef void *(*backend_values_fn)(void *ctx);

/* X(return type, name, parameters): the backend's memory and lifetime. */
#define BACKEND_MEMORY_FNS(X)                                                                    \
    /* NULL (and be->err) when out of memory */                                                  \
    X(void *, alloc, (backend *be, int64_t bytes))                                               \
    X(void, free, (backend *be, void *p))                                                        \
    X(void, upload, (backend *be, void *dst, const void *src, int64_t bytes))                    \
    /* dst (bytes) = what make(ctx) returns; a backend whose tensors hold no values (the         \
     * counting backend) never calls make */                                                     \
    X(void, upload_values, (backend *be, void *dst, int64_t bytes, backend_values_fn make,       \
                            void *ctx))                                                          \
    X(void, download, (backend *be, void *dst, const void *src, int64_t bytes))                  \
    X(int64_t, mem_available, (backend *be))                                                     \
    /* waits for queued work (timing) */                                                         \
    X(void, synchronize, (backend *be))                                                          \
    X(void, close, (backend *be))

/* X(name, parameters): the ops. Each returns 0, or non-zero with a message in be->err. */
#define BACKEND_OPS(X)                                                                           \
    /* ---- elementwise ---- */                                                                  \
    /* dst = round(src) into dst->dtype (same numel) */                                          \
    X(cast, (backend *be, const tensor *src, tensor *dst, round_stats *st))                      \
    /* dst = round(float(src) * s); src and dst may be the same tensor */                        \
    X(mul_scalar, (backend *be, const tensor *src, float s, tensor *dst, round_stats *st))       \
    X(fill, (backend *be, tensor *dst, float value))                                             \
    /* counts of t as it is (a rounding of each value to itself) */                              \
    X(observe, (backend *be, const tensor *t, round_stats *st))                                  \
    X(relu_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))                  \
    /* dx = y > 0 ? dy : 0 (PyTorch's threshold_backward on the result) */                       \
    X(relu_backward, (backend *be, const tensor *dy, const tensor *y, tensor *dx,                \
                      round_stats *st))                                                          \
    /* ---- matrix products ---- */                                                              \
    /* y[B,O] = x[B,I] w[O,I]^T (+ b[O]) */                                                      \
    X(linear_forward, (backend *be, const tensor *x, const tensor *w, const tensor *b,           \
                       tensor *y, round_stats *st))                                              \
    /* dx[B,I] = dy[B,O] w[O,I] */                                                               \
    X(linear_backward_input, (backend *be, const tensor *dy, const tensor *w, tensor *dx,        \
                              round_stats *st))                                                  \
    /* dw[O,I] = dy[B,O]^T x[B,I] */                                                             \
    X(linear_backward_weight, (backend *be, const tensor *dy, const tensor *x, tensor *dw,       \
                               round_stats *st))                                                 \
    /* db[C] = sum of dy viewed as [outer, C, inner] over outer and inner */                     \
    X(channel_sum, (backend *be, const tensor *dy, int64_t outer, int64_t inner, tensor *db,     \
                    round_stats *st))                                                            \
    X(conv2d_forward, (backend *be, const conv2d_geom *g, const tensor *x, const tensor *w,      \
                       const tensor *b, tensor *y, round_stats *st))                             \
    X(conv2d_backward_input, (backend *be, const conv2d_geom *g, const tensor *dy,               \
                              const tensor *w, tensor *dx, round_stats *st))                     \
    X(conv2d_backward_weight, (backend *be, const conv2d_geom *g, const tensor *dy,              \
                               const tensor *x, tensor *dw, round_stats *st))                    \
    /* ---- losses (rows are over the last dim) ---- */                                          \
    X(log_softmax_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))           \
    /* dx = dy - exp(y) * sum(dy) per row */                                                     \
    X(log_softmax_backward, (backend *be, const tensor *dy, const tensor *y, tensor *dx,         \
                             round_stats *st))                                                   \
    /* loss = -mean_i logp[i, target[i]]; target int64 */                                        \
    X(nll_loss_forward, (backend *be, const tensor *logp, const tensor *target, tensor *loss,    \
                         round_stats *st))                                                       \
    /* dlogp[i, target[i]] = -dloss / B, 0 elsewhere */                                          \
    X(nll_loss_backward, (backend *be, const tensor *dloss, const tensor *target,                \
                          tensor *dlogp, round_stats *st))                                       \
    /* y = (a - b)^2 elementwise, in y's dtype as loss_math.h rounds it */                       \
    X(mse_forward, (backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st))  \
    /* da = alpha * (a - b) * dy; dy has a's numel or is a scalar broadcast */                   \
    X(mse_backward, (backend *be, const tensor *dy, const tensor *a, const tensor *b,            \
                     double alpha, tensor *da, round_stats *st))                                 \
    /* y (one element) = sum(x) / numel */                                                       \
    X(mean_forward, (backend *be, const tensor *x, tensor *y, round_stats *st))                  \
    /* dx = float(dy) * (1.0f / numel), every element */                                         \
    X(mean_backward, (backend *be, const tensor *dy, tensor *dx, round_stats *st))               \
    /* ---- GradScaler and optimizers ---- */                                                    \
    /* *found_inf |= any element of g is inf or NaN; then g = round(float(g) * inv_scale) */     \
    X(unscale, (backend *be, tensor *g, float inv_scale, int *found_inf, round_stats *st))       \
    X(optimizer_step, (backend *be, const optim_config *cfg, const optim_hyper *h,               \
                       optim_tensors *t, optim_result *out))                                     \
    /* ---- graph models ---- */                                                                 \
    /* y[i] = round(float(a[i]) + float(b[i % b.numel])): b repeats over a's leading dims        \
     * (b's numel divides a's); a, b, y of any float dtypes (y's the promoted one) */            \
    X(add, (backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st))         \
    /* y[i] = round(float(a[i]) * float(b[i % b.numel])), as add */                             \
    X(mul, (backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st))         \
    /* y[n, :] = w[idx[n], :]; idx int64 [N], w [V, C], y [N, C] in w's dtype */                 \
    X(embedding_forward, (backend *be, const tensor *idx, const tensor *w, tensor *y,            \
                          round_stats *st))                                                      \
    /* dw[v, :] = sum of dy[n, :] over n with idx[n] == v (none where v == padding_idx, -1:      \
     * no padding), summed in float32 and rounded once into dw's dtype */                        \
    X(embedding_backward, (backend *be, const tensor *dy, const tensor *idx,                     \
                           int64_t padding_idx, tensor *dw, round_stats *st))                    \
    /* y[..., M, N] = op(a)[..., M, K] op(b)[..., K, N] over y's leading dims (a and b have      \
     * them too): op(a) = a^T when ta (a stored [..., K, M]), op(b) = b^T when tb (b stored      \
     * [..., N, K]); float32 products and sums, rounded once into y's dtype */                   \
    X(matmul, (backend *be, const tensor *a, const tensor *b, bool ta, bool tb, tensor *y,       \
               round_stats *st))                                                                 \
    /* y = x with dims d1 and d2 swapped, as a contiguous copy (exact); y's shape is x's with    \
     * those dims swapped */                                                                     \
    X(transpose, (backend *be, const tensor *x, int d1, int d2, tensor *y, round_stats *st))

/* BACKEND_OP_cast, ...: an op, as backend_supports() is asked about it */
typedef enum backend_op {
#define BACKEND_OP_ENUM(name, params) BACKEND_OP_##name,
    BACKEND_OPS(BACKEND_OP_ENUM)
#undef BACKEND_OP_ENUM
        BACKEND_OP_COUNT
} backend_op;

struct backend {
    const char *name;        /* "cpu" | "cuda" | "dry" */
    bool native_math;        /* --gpu-math native: library GEMMs write half outputs directly */
    bool has_native_math;    /* the backend can run with native_math on */
    bool observe_every_step; /* runs through it observe every step (the counting backend:
                              * the preflight's peak is that of an observed step) */
    char device[128];        /* summary.csv's device: "cpu", "cuda:NVIDIA H200" */
    char err[512];           /* message of the last failure an op returned */
    mem_account *account;    /* where scratch allocations are counted (as MEM_WORKSPACE) */
    void *ctx;               /* the backend's own state */

    /* Optional: whether op runs with operands of dtype dt; NULL runs every op in every
     * dtype. Ask through backend_supports(). */
    bool (*supports)(const backend *be, backend_op op, dtype dt);

#define BACKEND_MEMORY_FIELD(ret, name, params) ret(*name) params;
    BACKEND_MEMORY_FNS(BACKEND_MEMORY_FIELD)
#undef BACKEND_MEMORY_FIELD
#define BACKEND_OP_FIELD(name, params) int(*name) params;
    BACKEND_OPS(BACKEND_OP_FIELD)
#undef BACKEND_OP_FIELD
};

/* What the CUDA library says it was built for (BACKEND_ABI_SYMBOL). This struct never
 * changes: it is how two builds learn that everything else may have. */
typedef struct backend_abi {
    int32_t version;     /* BACKEND_ABI_VERSION of its sources */
    int64_t table_bytes; /* sizeof(struct backend) there */
} backend_abi;
#define BACKEND_ABI_VERSION 3

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU backend; always available. NULL when out of host memory, or (with backend_check's
 * message on stderr) when a build left a function of its table empty. */
backend *backend_cpu_open(mem_account *account);
/* The counting backend of the memory preflight (backend_dry.c); NULL as backend_cpu_open. */
backend *backend_dry_open(mem_account *account);

/* Loads lib/libampscope_cuda.so and opens the first GPU. Returns NULL with a message in
 * err when that is not possible: "no usable CUDA device: ...", a library built for another
 * ABI (both builds' numbers), or a table that fails backend_check(). */
backend *backend_cuda_load(mem_account *account, const char *lib_dir, char *err, int errlen);

/* What the CUDA library exports (looked up by name with dlsym). */
typedef backend *(*backend_cuda_open_fn)(mem_account *account, char *err, int errlen);
#define BACKEND_CUDA_OPEN_SYMBOL "ampscope_backend_cuda_open"
typedef backend_abi (*backend_abi_fn)(void);
#define BACKEND_ABI_SYMBOL "ampscope_backend_abi"

/* 0 when every memory function and op of be is filled; else -1 with a message in err
 * naming the backend and each one left NULL. */
int backend_check(const backend *be, char *err, int errlen);
/* Whether be runs op with operands of dtype dt (be->supports, or every op when it is NULL). */
bool backend_supports(const backend *be, backend_op op, dtype dt);
/* "cast", "linear_forward", ...: the op's name in the list */
const char *backend_op_name(backend_op op);

#ifdef __cplusplus
}
#endif

#endif
