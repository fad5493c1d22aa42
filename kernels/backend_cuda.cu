/*
 * backend_cuda.cu: the CUDA backend's table, its context (stream, cuBLAS and cuDNN
 * handles, the small device scratch of counters) and its memory: tensors and per-op scratch
 * (counted as workspace) from one stream-ordered pool, so that freed scratch serves tensors
 * and a free does not stop the host. The entry point
 * ampscope_backend_cuda_open, looked up with dlsym by harness/ops/backend_load.c, returns NULL
 * with a message, never aborts, when no GPU is usable. Ops live in the files named after
 * their concern (round.cu, linear.cu, conv2d.cu, ...), twins of harness/ops/cpu/.
 */
#include <dlfcn.h>
#include <unistd.h>

#include "cuda.cuh"

/* the sources this library was built from, checked by backend_load.c before it opens it */
extern "C" backend_abi ampscope_backend_abi(void)
{
    return backend_abi{BACKEND_ABI_VERSION, (int64_t)sizeof(struct backend)};
}

extern "C" const char *ampscope_backend_rows(void) { return BACKEND_ROW_NAMES; }

int64_t cuda_free_bytes(void)
{
    size_t fr = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &total));
    return (int64_t)fr;
}

/* bytes the pool holds that no allocation uses (free for this process, not in
 * cudaMemGetInfo's count) */
static int64_t pool_idle_bytes(const cuda_ctx *x)
{
    uint64_t reserved = 0, used = 0;
    CUDA_CHECK(cudaMemPoolGetAttribute(x->pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    CUDA_CHECK(cudaMemPoolGetAttribute(x->pool, cudaMemPoolAttrUsedMemCurrent, &used));
    return (int64_t)(reserved - used);
}

/* One allocator for tensors and scratch: the device's stream-ordered pool, in the order of
 * the backend's one stream (a free waits for the ops queued before it, without stopping
 * the host). When the pool cannot grow, the stream is synchronised (memory freed
 * asynchronously comes back), the pool trimmed to what is in use, and the allocation
 * retried once; still out of memory is the user's (too big a case), cleared and reported
 * in be->err (NULL); any other failure is reported and aborts, as CUDA_CHECK does. */
static void *pool_alloc(backend *be, int64_t bytes)
{
    cuda_ctx *x = cuda_ctx_of(be);
    void *p = NULL;
    size_t size = bytes > 0 ? (size_t)bytes : 1; /* an empty tensor still gets a pointer */
    cudaError_t e = cudaMallocAsync(&p, size, x->stream);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        CUDA_CHECK(cudaStreamSynchronize(x->stream));
        CUDA_CHECK(cudaMemPoolTrimTo(x->pool, 0));
        e = cudaMallocAsync(&p, size, x->stream);
    }
    if (e == cudaSuccess)
        return p;
    if (e != cudaErrorMemoryAllocation)
        amp_check_failed("CUDA", "cudaMallocAsync(&p, size, x->stream)", __FILE__, __LINE__,
                         cudaGetErrorString(e));
    (void)cudaGetLastError();
    snprintf(be->err, sizeof be->err, "out of GPU memory: %lld bytes needed, %lld free",
             (long long)bytes, (long long)(cuda_free_bytes() + pool_idle_bytes(x)));
    return NULL;
}

static void pool_free(backend *be, void *p)
{
    CUDA_CHECK(cudaFreeAsync(p, cuda_ctx_of(be)->stream));
}

static void *cuda_alloc(backend *be, int64_t bytes) { return pool_alloc(be, bytes); }

static void cuda_free(backend *be, void *p) { pool_free(be, p); }

void *cuda_scratch_alloc(backend *be, int64_t bytes)
{
    void *p = pool_alloc(be, bytes);
    if (p)
        mem_account_add(be->account, MEM_WORKSPACE, bytes);
    return p;
}

void cuda_scratch_free(backend *be, void *p, int64_t bytes)
{
    if (!p)
        return;
    pool_free(be, p);
    mem_account_add(be->account, MEM_WORKSPACE, -bytes);
}

unsigned long long *cuda_counter_begin(backend *be)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaMemsetAsync(&x->scratch->counter, 0, sizeof x->scratch->counter, x->stream));
    return &x->scratch->counter;
}

unsigned long long cuda_counter_end(backend *be)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaMemcpyAsync(&x->host->counter, &x->scratch->counter, sizeof x->host->counter,
                               cudaMemcpyDeviceToHost, x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
    return x->host->counter;
}

static void cuda_upload(backend *be, void *dst, const void *src, int64_t bytes)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyHostToDevice, x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
}

static void cuda_upload_values(backend *be, void *dst, int64_t bytes, backend_values_fn make,
                               void *ctx)
{
    void *host = make(ctx);
    cuda_upload(be, dst, host, bytes);
    free(host);
}

static void cuda_download(backend *be, void *dst, const void *src, int64_t bytes)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost, x->stream));
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
}

static int64_t cuda_mem_available(backend *be)
{
    return cuda_free_bytes() + pool_idle_bytes(cuda_ctx_of(be));
}

static void cuda_synchronize(backend *be)
{
    CUDA_CHECK(cudaStreamSynchronize(cuda_ctx_of(be)->stream));
}

/* Gives up what ctx_open made (the handles not made are NULL); errors are ignored, as the
 * context is being given up after a failure. */
static void ctx_release(cuda_ctx *x)
{
    if (x->cudnn)
        (void)cudnnDestroy(x->cudnn);
    if (x->cublaslt)
        (void)cublasLtDestroy(x->cublaslt);
    if (x->cublas)
        (void)cublasDestroy(x->cublas);
    if (x->scratch)
        (void)cudaFree(x->scratch);
    if (x->host)
        (void)cudaFreeHost(x->host);
    if (x->stream)
        (void)cudaStreamDestroy(x->stream);
    (void)cudaGetLastError();
}

static void cuda_close(backend *be)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
    CUDNN_CHECK(cudnnDestroy(x->cudnn));
    CUBLAS_CHECK(cublasLtDestroy(x->cublaslt));
    CUBLAS_CHECK(cublasDestroy(x->cublas));
    CUDA_CHECK(cudaFree(x->scratch));
    CUDA_CHECK(cudaFreeHost(x->host));
    CUDA_CHECK(cudaStreamDestroy(x->stream));
    free(x);
    free(be);
}

/* The runtime's cudaErrorInsufficientDriver in words: it is also what the runtime returns
 * when no NVIDIA driver is installed at all, where its text ("CUDA driver version is
 * insufficient for CUDA runtime version") would send the reader after a driver update. No
 * driver: its library, libcuda.so.1, cannot be loaded. A driver too old: the runtime's text
 * with both CUDA versions. Into buf; returns buf. */
static const char *insufficient_driver(char *buf, size_t len)
{
    void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!libcuda) {
        snprintf(buf, len,
                 "no NVIDIA driver found (libcuda.so.1, the driver's library, cannot "
                 "be loaded%s)",
                 access("/proc/driver/nvidia", F_OK) ? "; /proc/driver/nvidia does not exist" : "");
        return buf;
    }
    dlclose(libcuda);
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess ||
        cudaRuntimeGetVersion(&runtime) != cudaSuccess)
        driver = runtime = 0;
    snprintf(buf, len, "%s (the driver runs CUDA %d.%d, this build's runtime is CUDA %d.%d)",
             cudaGetErrorString(cudaErrorInsufficientDriver), driver / 1000, driver % 1000 / 10,
             runtime / 1000, runtime % 1000 / 10);
    return buf;
}

/* What stops the GPU from being used, or NULL: no device, no driver or one too old for this
 * runtime, no kernel image for the device's architecture, no memory for the context. buf
 * holds the words when the runtime's own would mislead. */
static const char *device_problem(cuda_ctx *x, char *buf, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0)
        e = cudaErrorNoDevice;
    if (e == cudaSuccess)
        e = cudaSetDevice(x->device);
    if (e == cudaSuccess)
        e = cudaFree(0); /* creates the context */
    cudaFuncAttributes fa;
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&fa, store_kernel<f32_op>);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return e == cudaErrorInsufficientDriver ? insufficient_driver(buf, len)
                                                : cudaGetErrorString(e);
    }
    return NULL;
}

/* Fills err with "no usable CUDA device: <what failed>: <the library's text>"; returns err. */
static const char *open_failed(char *err, int errlen, const char *what, const char *why)
{
    snprintf(err, (size_t)errlen, "no usable CUDA device: %s: %s", what, why);
    return err;
}

/* The context's handles, stream, counters and pool on a device device_problem found
 * usable: NULL, or err filled (the start-up failures are messages, so that --device auto
 * falls back to the CPU: a missing cuDNN sub-library is a realistic cause). */
static const char *ctx_open(cuda_ctx *x, char *err, int errlen)
{
    cudaError_t e;
    cublasStatus_t b;
    cudnnStatus_t d;
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, x->device)) != cudaSuccess)
        return open_failed(err, errlen, "the device's properties could not be read",
                           cudaGetErrorString(e));
    snprintf(x->device_name, sizeof x->device_name, "%s", prop.name);
    x->max_blocks = prop.multiProcessorCount * 8;
    x->cc = prop.major * 10 + prop.minor;
    if ((e = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking)) != cudaSuccess)
        return open_failed(err, errlen, "no CUDA stream could be created", cudaGetErrorString(e));
    if ((b = cublasCreate(&x->cublas)) != CUBLAS_STATUS_SUCCESS ||
        (b = cublasSetStream(x->cublas, x->stream)) != CUBLAS_STATUS_SUCCESS)
        return open_failed(err, errlen, "cuBLAS could not be initialised",
                           cublasGetStatusString(b));
    if ((b = cublasLtCreate(&x->cublaslt)) != CUBLAS_STATUS_SUCCESS)
        return open_failed(err, errlen, "cuBLASLt could not be initialised",
                           cublasGetStatusString(b));
    if ((d = cudnnCreate(&x->cudnn)) != CUDNN_STATUS_SUCCESS ||
        (d = cudnnSetStream(x->cudnn, x->stream)) != CUDNN_STATUS_SUCCESS)
        return open_failed(err, errlen, "cuDNN could not be initialised", cudnnGetErrorString(d));
    if ((e = cudaMalloc((void **)&x->scratch, sizeof *x->scratch)) != cudaSuccess)
        return open_failed(err, errlen, "no device memory for the counters",
                           cudaGetErrorString(e));
    if ((e = cudaMallocHost((void **)&x->host, sizeof *x->host)) != cudaSuccess)
        return open_failed(err, errlen, "no pinned host memory for the counters",
                           cudaGetErrorString(e));
    /* the pool keeps what is freed (no release at each synchronisation); pool_alloc trims
     * it when an allocation does not fit */
    uint64_t keep = UINT64_MAX;
    if ((e = cudaDeviceGetDefaultMemPool(&x->pool, x->device)) != cudaSuccess ||
        (e = cudaMemPoolSetAttribute(x->pool, cudaMemPoolAttrReleaseThreshold, &keep)) !=
            cudaSuccess)
        return open_failed(err, errlen, "the device's memory pool could not be set up",
                           cudaGetErrorString(e));
    return NULL;
}

extern "C" backend *ampscope_backend_cuda_open(mem_account *account, char *err, int errlen)
{
    cuda_ctx *x = (cuda_ctx *)calloc(1, sizeof *x);
    backend *be = (backend *)calloc(1, sizeof *be);
    if (!x || !be) {
        snprintf(err, (size_t)errlen, "no usable CUDA device: out of host memory");
        free(x);
        free(be);
        return NULL;
    }
    char words[256];
    const char *problem = device_problem(x, words, sizeof words);
    if (problem) {
        snprintf(err, (size_t)errlen, "no usable CUDA device: %s", problem);
        free(x);
        free(be);
        return NULL;
    }
    if (ctx_open(x, err, errlen)) {
        ctx_release(x);
        free(x);
        free(be);
        return NULL;
    }

    be->name = "cuda";
    be->has_native_math = true;
    be->supports = cuda_supports;
    snprintf(be->device, sizeof be->device, "cuda:%.120s", x->device_name);
    be->account = account;
    be->ctx = x;
    be->alloc = cuda_alloc;
    be->free = cuda_free;
    be->upload = cuda_upload;
    be->upload_values = cuda_upload_values;
    be->download = cuda_download;
    be->mem_available = cuda_mem_available;
    be->synchronize = cuda_synchronize;
    be->close = cuda_close;
    /* cuda_<op> for every op of backend.h's list (declared in cuda.cuh) but those it leaves
     * out, whose slots stay empty: a discarded `if constexpr` branch needs no definition */
#define CUDA_ENTRY(name, params)                                                                   \
    if constexpr (!cuda_leaves_out(BACKEND_OP_##name))                                             \
        be->name = cuda_##name;
    BACKEND_OPS(CUDA_ENTRY)
#undef CUDA_ENTRY
    return be;
}
