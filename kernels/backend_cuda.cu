/*
 * backend_cuda.cu: the CUDA backend's table, its context (stream, cuBLAS and cuDNN
 * handles, the small device scratch of counters) and its memory: tensors with cudaMalloc,
 * per-op scratch with the stream-ordered allocator (counted as workspace). The entry point
 * ampscope_backend_cuda_open, looked up with dlsym by harness/backend_load.c, returns NULL
 * with a message, never aborts, when no GPU is usable. Ops live in the files named after
 * their concern (round.cu, linear.cu, conv2d.cu, ...), twins of harness/cpu/.
 */
#include "cuda.cuh"

/* the sources this library was built from, checked by backend_load.c before it opens it */
extern "C" backend_abi ampscope_backend_abi(void)
{
    return backend_abi{BACKEND_ABI_VERSION, (int64_t)sizeof(struct backend)};
}

static int64_t free_bytes(void)
{
    size_t fr = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&fr, &total));
    return (int64_t)fr;
}

/* An allocation: out of memory is the user's (too big a case), cleared and reported in
 * be->err (false); any other failure is reported and aborts, as CUDA_CHECK does. */
#define CUDA_ALLOC(be, call, bytes) allocated(be, (call), bytes, #call, __FILE__, __LINE__)
static bool allocated(backend *be, cudaError_t e, int64_t bytes, const char *stmt,
                      const char *file, int line)
{
    if (e == cudaSuccess)
        return true;
    if (e != cudaErrorMemoryAllocation)
        amp_check_failed("CUDA", stmt, file, line, cudaGetErrorString(e));
    (void)cudaGetLastError();
    snprintf(be->err, sizeof be->err, "out of GPU memory: %lld bytes needed, %lld free",
             (long long)bytes, (long long)free_bytes());
    return false;
}

static void *cuda_alloc(backend *be, int64_t bytes)
{
    void *p = NULL;
    return CUDA_ALLOC(be, cudaMalloc(&p, (size_t)bytes), bytes) ? p : NULL;
}

static void cuda_free(backend *be, void *p)
{
    /* queued ops may still read the tensor: the stream is not the legacy default stream */
    CUDA_CHECK(cudaStreamSynchronize(cuda_ctx_of(be)->stream));
    CUDA_CHECK(cudaFree(p));
}

void *cuda_scratch_alloc(backend *be, int64_t bytes)
{
    void *p = NULL;
    size_t size = bytes > 0 ? (size_t)bytes : 1; /* an empty tensor's copy still gets a pointer */
    if (!CUDA_ALLOC(be, cudaMallocAsync(&p, size, cuda_ctx_of(be)->stream), bytes))
        return NULL;
    mem_account_add(be->account, MEM_WORKSPACE, bytes);
    return p;
}

void cuda_scratch_free(backend *be, void *p, int64_t bytes)
{
    if (!p)
        return;
    CUDA_CHECK(cudaFreeAsync(p, cuda_ctx_of(be)->stream));
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
    (void)be;
    return free_bytes();
}

static void cuda_synchronize(backend *be)
{
    CUDA_CHECK(cudaStreamSynchronize(cuda_ctx_of(be)->stream));
}

static void cuda_close(backend *be)
{
    cuda_ctx *x = cuda_ctx_of(be);
    CUDA_CHECK(cudaStreamSynchronize(x->stream));
    CUDNN_CHECK(cudnnDestroy(x->cudnn));
    CUBLAS_CHECK(cublasDestroy(x->cublas));
    CUDA_CHECK(cudaFree(x->scratch));
    CUDA_CHECK(cudaFreeHost(x->host));
    CUDA_CHECK(cudaStreamDestroy(x->stream));
    free(x);
    free(be);
}

/* What stops the GPU from being used, or NULL: no device, a driver too old for this
 * runtime, no kernel image for the device's architecture, no memory for the context. */
static const char *device_problem(cuda_ctx *x)
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
        return cudaGetErrorString(e);
    }
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
    const char *problem = device_problem(x);
    if (problem) {
        snprintf(err, (size_t)errlen, "no usable CUDA device: %s", problem);
        free(x);
        free(be);
        return NULL;
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, x->device));
    snprintf(x->device_name, sizeof x->device_name, "%s", prop.name);
    x->max_blocks = prop.multiProcessorCount * 8;
    CUDA_CHECK(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&x->cublas));
    CUBLAS_CHECK(cublasSetStream(x->cublas, x->stream));
    CUDNN_CHECK(cudnnCreate(&x->cudnn));
    CUDNN_CHECK(cudnnSetStream(x->cudnn, x->stream));
    CUDA_CHECK(cudaMalloc((void **)&x->scratch, sizeof *x->scratch));
    CUDA_CHECK(cudaMallocHost((void **)&x->host, sizeof *x->host));

    be->name = "cuda";
    be->has_native_math = true;
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
    /* cuda_<op> for every op of backend.h's list (declared in cuda.cuh) */
#define CUDA_ENTRY(name, params) be->name = cuda_##name;
    BACKEND_OPS(CUDA_ENTRY)
#undef CUDA_ENTRY
    return be;
}
