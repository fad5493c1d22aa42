/*
 * cuda.cuh: what the CUDA backend's .cu files in kernels/ share.
 *
 *  - the check macros: CUDA_CHECK, CUBLAS_CHECK (cuBLAS and cuBLASLt, which share
 *    cublasStatus_t), CUDNN_CHECK (one generic macro: evaluates
 *    the call once; on failure prints the statement, file, line and the library's own error
 *    text, then aborts; with AMPSCOPE_CUDA_SYNC=1 it also synchronises the device after the
 *    call and checks that) and LAUNCH_CHECK() after every kernel launch;
 *  - the backend's context (cuda_ctx: library handles, stream, device and its compute
 *    capability, scratch);
 *  - a dtype's cuBLAS and cuDNN data types (cuda_data_type, cudnn_data_type: format.h's
 *    FORMAT_<NAME>_CUBLAS / _CUDNN);
 *  - the rounding store with counting, as device code every kernel that writes a rounded
 *    output calls in the same pass (tally_begin / tally_store / tally_flush), the generic
 *    elementwise store kernel built on it (store_kernel, launch_store), and the host side
 *    of the device counters (cuda_stats_begin / cuda_stats_end);
 *  - the entry points of the ops: cuda_<op> for every op of backend.h's list.
 *
 * Counting: each thread tallies its elements in registers (half.h's round_counts) and adds
 * log2|pre| bins to a per-block histogram in shared memory (one shared atomic per bin a warp's
 * lanes hit together, not one per element: neighbouring values mostly share a bin); at the end of
 * the kernel the block merges the threads' counts in shared memory, then merges the block
 * into the device-side dev_stats once (64-bit atomicAdd for counts and bins, atomicMax /
 * atomicMin on the bit patterns of the non-negative amax / amin_nonzero). The host copies
 * dev_stats back into the caller's round_stats when the op ends. A NULL dev_stats pointer
 * (the op was given NULL round_stats) skips all of it.
 *
 * Numerics: built with -fmad=false (no contraction of a*b+c into an FMA, as on the CPU),
 * IEEE division and square root (nvcc's defaults), no flush to zero.
 */
#ifndef AMPSCOPE_CUDA_CUH
#define AMPSCOPE_CUDA_CUH

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "ops/backend.h"

/* ---- checks ---- */
[[noreturn]] static inline void amp_check_failed(const char *lib, const char *stmt,
                                                 const char *file, int line, const char *msg)
{
    fprintf(stderr, "ampscope: %s failed: %s\n  at %s:%d: %s\n", lib, stmt, file, line, msg);
    abort();
}

/* AMPSCOPE_CUDA_SYNC=1: every checked call and launch is followed by a device
 * synchronisation, checked, so that an asynchronous fault is reported at the file and line
 * of the launch that caused it (slow: for finding a fault, not for measuring) */
static inline bool amp_sync_each(void)
{
    static int mode = -1; /* not read yet */
    if (mode < 0) {
        const char *v = getenv("AMPSCOPE_CUDA_SYNC");
        mode = v && strcmp(v, "1") == 0;
    }
    return mode == 1;
}

static inline void amp_sync_check(const char *stmt, const char *file, int line)
{
    if (!amp_sync_each())
        return;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        amp_check_failed("CUDA (AMPSCOPE_CUDA_SYNC=1: synchronised after)", stmt, file, line,
                         cudaGetErrorString(e));
}

#define AMP_LIB_CHECK(lib, call, ok, errstr)                                                     \
    do {                                                                                         \
        auto amp_status_ = (call);                                                               \
        if (amp_status_ != (ok))                                                                 \
            amp_check_failed(lib, #call, __FILE__, __LINE__, errstr(amp_status_));               \
        amp_sync_check(#call, __FILE__, __LINE__);                                               \
    } while (0)
#define CUDA_CHECK(call) AMP_LIB_CHECK("CUDA", call, cudaSuccess, cudaGetErrorString)
#define CUBLAS_CHECK(call)                                                                       \
    AMP_LIB_CHECK("cuBLAS", call, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)
#define CUDNN_CHECK(call) AMP_LIB_CHECK("cuDNN", call, CUDNN_STATUS_SUCCESS, cudnnGetErrorString)
/* after every kernel launch: the launch itself, and with AMPSCOPE_CUDA_SYNC=1 its run */
#define LAUNCH_CHECK()                                                                           \
    do {                                                                                         \
        cudaError_t amp_launch_ = cudaGetLastError();                                            \
        if (amp_launch_ != cudaSuccess)                                                          \
            amp_check_failed("CUDA", "the kernel launch before this line", __FILE__, __LINE__,   \
                             cudaGetErrorString(amp_launch_));                                   \
        amp_sync_check("the kernel launch before this line", __FILE__, __LINE__);                \
    } while (0)

/* ---- a number format's data type in cuBLAS and cuDNN (format.h); int64 is none ---- */
[[noreturn]] static inline void no_library_type(const char *lib, dtype dt)
{
    fprintf(stderr, "ampscope: dtype %s has no %s data type here (not a number format)\n",
            dtype_name(dt), lib);
    abort();
}

static inline cudaDataType_t cuda_data_type(dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return FORMAT_FLOAT32_CUBLAS;
    case DTYPE_FLOAT16:
        return FORMAT_FLOAT16_CUBLAS;
    case DTYPE_BFLOAT16:
        return FORMAT_BFLOAT16_CUBLAS;
    case DTYPE_FLOAT8_E4M3FN:
        return FORMAT_FLOAT8_E4M3FN_CUBLAS;
    case DTYPE_FLOAT8_E5M2:
        return FORMAT_FLOAT8_E5M2_CUBLAS;
    case DTYPE_FLOAT4_E2M1FN:
        return FORMAT_FLOAT4_E2M1FN_CUBLAS;
    case DTYPE_FLOAT8_E8M0FNU:
        return FORMAT_FLOAT8_E8M0FNU_CUBLAS;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    no_library_type("cuBLAS", dt);
}

static inline cudnnDataType_t cudnn_data_type(dtype dt)
{
    switch (dt) {
    case DTYPE_FLOAT32:
        return FORMAT_FLOAT32_CUDNN;
    case DTYPE_FLOAT16:
        return FORMAT_FLOAT16_CUDNN;
    case DTYPE_BFLOAT16:
        return FORMAT_BFLOAT16_CUDNN;
    case DTYPE_FLOAT8_E4M3FN:
        return FORMAT_FLOAT8_E4M3FN_CUDNN;
    case DTYPE_FLOAT8_E5M2:
        return FORMAT_FLOAT8_E5M2_CUDNN;
    case DTYPE_FLOAT4_E2M1FN:
        return FORMAT_FLOAT4_E2M1FN_CUDNN;
    case DTYPE_FLOAT8_E8M0FNU:
        return FORMAT_FLOAT8_E8M0FNU_CUDNN;
    case DTYPE_INT64:
    case DTYPE_COUNT:
        break;
    }
    no_library_type("cuDNN", dt);
}

#define CUDA_THREADS 256 /* threads per block of every kernel */

/* ---- device-side counters of one rounding (merged from every block) ---- */
enum { TALLY_ZEROS, TALLY_UNDERFLOW, TALLY_SUBNORMAL, TALLY_OVERFLOW, TALLY_NAN, TALLY_COUNTS };

typedef struct dev_stats {
    unsigned long long counts[TALLY_COUNTS];
    unsigned int amax_bits; /* max |post| as bits: non-negative floats order as unsigned ints */
    unsigned int amin_bits; /* min non-zero |post|; 0x7f800000 (inf) when none */
    unsigned long long hist[HIST_BINS];
} dev_stats;

/* the backend's small device state: one dev_stats per output an op writes (an optimizer
 * step writes the parameter and up to OPTIM_MAX_STATE state tensors) and an op's counter
 * (found_inf, lost updates) */
#define CUDA_STATS_SLOTS (1 + OPTIM_MAX_STATE)
typedef struct cuda_scratch {
    dev_stats stats[CUDA_STATS_SLOTS];
    unsigned long long counter;
} cuda_scratch;

typedef struct cuda_ctx {
    int device;
    char device_name[256];
    int max_blocks; /* grid size cap of grid-stride kernels: a few blocks per SM */
    cudaStream_t stream;
    cudaMemPool_t pool; /* the device's default pool: every tensor and scratch buffer */
    int cc;             /* compute capability, major * 10 + minor (89: Ada, 90: Hopper) */
    cublasHandle_t cublas;
    cublasLtHandle_t cublaslt; /* the float8 GEMMs (fp8.cu) */
    cudnnHandle_t cudnn;
    cuda_scratch *scratch; /* device */
    cuda_scratch *host;    /* pinned host mirror the counters are copied back into */
} cuda_ctx;

static inline cuda_ctx *cuda_ctx_of(backend *be) { return (cuda_ctx *)be->ctx; }

static inline int cuda_grid(const cuda_ctx *x, int64_t n)
{
    int64_t blocks = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    if (blocks > x->max_blocks)
        blocks = x->max_blocks;
    return blocks < 1 ? 1 : (int)blocks;
}

/* ---- per-block counting (device) ---- */
typedef struct block_tally { /* in shared memory */
    unsigned long long counts[TALLY_COUNTS];
    unsigned int amax_bits, amin_bits;
    unsigned int hist[HIST_BINS];
} block_tally;

typedef struct tally { /* per thread */
    round_counts c;
    float min_normal;
    block_tally *sh;
    dev_stats *out; /* NULL: no bookkeeping */
} tally;

/* Every thread of the block calls it (it synchronises the block) with the same out. */
static __device__ inline void tally_begin(tally *t, block_tally *sh, dev_stats *out, dtype dt)
{
    t->sh = sh;
    t->out = out;
    t->min_normal = dtype_min_normal(dt);
    round_counts_init(&t->c);
    if (!out)
        return;
    for (int b = threadIdx.x; b < HIST_BINS; b += blockDim.x)
        sh->hist[b] = 0;
    if (threadIdx.x == 0) {
        for (int k = 0; k < TALLY_COUNTS; k++)
            sh->counts[k] = 0;
        sh->amax_bits = 0;
        sh->amin_bits = 0x7f800000u;
    }
    __syncthreads();
}

/* Rounds pre into element i of dst (dtype dt) and tallies the rounding; returns the
 * stored value as float32. */
static __device__ inline float tally_store(tally *t, void *dst, dtype dt, int64_t i, float pre)
{
    float post = store_from_float(dst, dt, i, pre);
    if (t->out) {
        round_tally(&t->c, pre, post, t->min_normal);
        /* warp-aggregated: the lanes here now that share a bin add once, by their first */
        int bin = hist_bin(pre);
        unsigned same = __match_any_sync(__activemask(), bin);
        if ((int)(threadIdx.x & 31) == __ffs(same) - 1)
            atomicAdd(&t->sh->hist[bin], (unsigned)__popc(same));
    }
    return post;
}

/* Every thread of the block calls it once, after its last tally_store: the threads' counts
 * are merged in shared memory, then the block's into t->out. */
static __device__ inline void tally_flush(tally *t)
{
    if (!t->out)
        return;
    block_tally *sh = t->sh;
    const int64_t v[TALLY_COUNTS] = {t->c.zeros, t->c.underflow, t->c.subnormal, t->c.overflow,
                                     t->c.nan};
    for (int k = 0; k < TALLY_COUNTS; k++)
        if (v[k])
            atomicAdd(&sh->counts[k], (unsigned long long)v[k]);
    if (t->c.amax > 0.0f)
        atomicMax(&sh->amax_bits, float_bits(t->c.amax));
    if (float_bits(t->c.amin_nonzero) < 0x7f800000u)
        atomicMin(&sh->amin_bits, float_bits(t->c.amin_nonzero));
    __syncthreads();
    dev_stats *out = t->out;
    for (int b = threadIdx.x; b < HIST_BINS; b += blockDim.x)
        if (sh->hist[b])
            atomicAdd(&out->hist[b], (unsigned long long)sh->hist[b]);
    if (threadIdx.x == 0) {
        for (int k = 0; k < TALLY_COUNTS; k++)
            if (sh->counts[k])
                atomicAdd(&out->counts[k], sh->counts[k]);
        if (sh->amax_bits)
            atomicMax(&out->amax_bits, sh->amax_bits);
        if (sh->amin_bits < 0x7f800000u)
            atomicMin(&out->amin_bits, sh->amin_bits);
    }
}

/* ---- the generic elementwise store: dst[i] = round(op(i)), counted ---- */
#define GRID_STRIDE(i, n)                                                                        \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                    \
         i += (int64_t)gridDim.x * blockDim.x)

template <class Op>
__global__ void store_kernel(Op op, void *dst, dtype dt, int64_t n, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, dt);
    GRID_STRIDE(i, n)
    tally_store(&t, dst, dt, i, op(i));
    tally_flush(&t);
}

/* ---- block reductions (every thread calls them; the result is in every thread) ---- */
template <class T, class Combine>
static __device__ inline T block_reduce(T v, Combine combine)
{
    __shared__ T warp_part[CUDA_THREADS / 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1)
        v = combine(v, __shfl_down_sync(0xffffffffu, v, off));
    __syncthreads(); /* warp_part may still be read by a previous call */
    if (lane == 0)
        warp_part[warp] = v;
    __syncthreads();
    v = warp_part[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
        v = combine(v, warp_part[w]);
    return v;
}

struct sum_op {
    template <class T>
    __device__ T operator()(T a, T b) const { return a + b; }
};

struct max_skip_nan_op { /* the CPU's `v > mx ? v : mx`: NaNs never win */
    __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

/* The block's row x[base .. base + cols): its largest value (*mx; NaNs never win, -inf for
 * none) and the sum in double of (float)exp((double)(x - *mx)), block-reduced: the first
 * two passes of softmax and log_softmax (every thread calls it; results in every thread) */
static __device__ inline double row_max_expsum(const void *x, dtype x_dt, int64_t base,
                                               int64_t cols, float *mx)
{
    float m = bits_float(0xff800000u); /* -inf */
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = load_as_float(x, x_dt, base + j);
        m = v > m ? v : m;
    }
    m = block_reduce(m, max_skip_nan_op());
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        sum += (float)exp((double)(load_as_float(x, x_dt, base + j) - m));
    *mx = m;
    return block_reduce(sum, sum_op());
}

/* ---- host side (round.cu, backend_cuda.cu) ---- */
/* Device counters for the op's output `slot` (0 for single-output ops), reset; NULL when
 * st is NULL. */
dev_stats *cuda_stats_begin(backend *be, int slot, const round_stats *st);
/* Waits for the op, then adds the counters of `slot` and numel to st (nothing when NULL). */
void cuda_stats_end(backend *be, int slot, round_stats *st, int64_t numel);
/* The op's counter (found_inf, lost updates), zeroed; cuda_counter_end waits and reads it. */
unsigned long long *cuda_counter_begin(backend *be);
unsigned long long cuda_counter_end(backend *be);

/* Scratch device memory for one op, counted as workspace, from the pool tensors come from;
 * NULL with be->err set when the GPU is out of memory. cuda_scratch_free(be, NULL, ...)
 * does nothing. */
void *cuda_scratch_alloc(backend *be, int64_t bytes);
void cuda_scratch_free(backend *be, void *p, int64_t bytes);
/* the device's free memory, as cudaMemGetInfo counts it */
int64_t cuda_free_bytes(void);

/* be->supports: float8 GEMMs need compute capability 8.9 or newer; no op this backend leaves
 * out (fp8.cu) */
bool cuda_supports(const backend *be, backend_op op, dtype dt);
/* The ops this backend leaves out: MXFP8's and FP4's block-scaled ones, which run on the CPU
 * only (fp8.cu). Their slots stay empty and cuda_supports says no in every dtype, as backend.h's
 * contract asks of an empty slot; no cuda_<op> is defined for them. */
static constexpr bool cuda_leaves_out(backend_op op)
{
    return op == BACKEND_OP_fp8_block_quantize || op == BACKEND_OP_fp8_block_gemm ||
           op == BACKEND_OP_fp4_block_quantize || op == BACKEND_OP_fp4_block_gemm;
}

/* t's values as float32: t's own buffer when it is float32, else a widened scratch copy
 * (exact; *owned set to it, to give to cuda_scratch_free). NULL when out of memory. */
const float *cuda_as_f32(backend *be, const tensor *t, float **owned);

template <class Op>
void launch_store(backend *be, const Op &op, tensor *dst, round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    store_kernel<<<cuda_grid(x, dst->numel), CUDA_THREADS, 0, x->stream>>>(
        op, dst->data, dst->dtype, dst->numel, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, dst->numel);
}

/* element i of a float32 buffer (a GEMM's or convolution's accumulator) */
struct f32_op {
    const float *src;
    __device__ float operator()(int64_t i) const { return src[i]; }
};

/* ---- the ops: cuda_<op> for every op of backend.h's list but those cuda_leaves_out names,
 * each in the file named after its concern (round.cu, pointwise.cu, reduce.cu, linear.cu,
 * conv2d.cu, loss.cu, scaler.cu, optim.cu) ---- */
#define CUDA_OP_DECL(name, params) int cuda_##name params;
BACKEND_OPS(CUDA_OP_DECL)
#undef CUDA_OP_DECL

#endif
