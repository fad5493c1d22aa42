/*
 * kernels/nccl.c: ncclAllReduce for a distributed case on GPUs, the library side of
 * harness/distributed/nccl.c (its interface: harness/distributed/nccl_abi.h).
 * Plain C against NCCL's and the CUDA runtime's APIs: no kernels of its own.
 */
#include "distributed/nccl_abi.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"

static ncclComm_t comm;
static void *dev_buf;
static size_t dev_bytes;
static cudaStream_t stream;

#define LIB_CHECK(lib, call, ok, errstr)                                                         \
    do {                                                                                         \
        int rc_ = (int)(call);                                                                   \
        if (rc_ != (int)(ok)) {                                                                  \
            snprintf(err, (size_t)len, "%s: %s failed: %s", lib, #call, errstr(rc_));            \
            return -1;                                                                           \
        }                                                                                        \
    } while (0)
static const char *cuda_text(int rc) { return cudaGetErrorString((cudaError_t)rc); }
static const char *nccl_text(int rc) { return ncclGetErrorString((ncclResult_t)rc); }
#define CUDA_CHECK(call) LIB_CHECK("CUDA", call, cudaSuccess, cuda_text)
#define NCCL_CHECK(call) LIB_CHECK("NCCL", call, ncclSuccess, nccl_text)

int ampscope_nccl_unique_id(void *id, char *err, int len)
{
    _Static_assert(sizeof(ncclUniqueId) == AMPSCOPE_NCCL_ID_BYTES, "ncclUniqueId's size");
    ncclUniqueId u;
    NCCL_CHECK(ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return 0;
}

int ampscope_nccl_init(int rank, int nranks, const void *id, char *err, int len)
{
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess)
        gpus = 0;
    if (gpus < nranks) {
        snprintf(err, (size_t)len,
                 "world_size = %d needs %d GPUs for NCCL (one per rank), this machine has %d; "
                 "run the case with --device cpu (the all-reduce over MPI)",
                 nranks, nranks, gpus);
        return -1;
    }
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    CUDA_CHECK(cudaSetDevice(rank));
    CUDA_CHECK(cudaStreamCreate(&stream));
    NCCL_CHECK(ncclCommInitRank(&comm, nranks, u, rank));
    return 0;
}

int ampscope_nccl_allreduce(void *host, int64_t n, int dtype, char *err, int len)
{
    /* indexed by dtype; int64 gradients do not exist */
    static const int types[DTYPE_COUNT] = {ncclFloat32, ncclFloat16, ncclBfloat16, -1};
    static const size_t sizes[DTYPE_COUNT] = {4, 2, 2, 8};
    if (dtype < 0 || dtype >= DTYPE_COUNT || types[dtype] < 0) {
        snprintf(err, (size_t)len, "NCCL: no all-reduce for dtype %d", dtype);
        return -1;
    }
    ncclDataType_t t = (ncclDataType_t)types[dtype];
    size_t bytes = (size_t)n * sizes[dtype];
    if (bytes > dev_bytes) {
        if (dev_buf)
            CUDA_CHECK(cudaFree(dev_buf));
        dev_buf = NULL;
        CUDA_CHECK(cudaMalloc(&dev_buf, bytes));
        dev_bytes = bytes;
    }
    CUDA_CHECK(cudaMemcpyAsync(dev_buf, host, bytes, cudaMemcpyHostToDevice, stream));
    NCCL_CHECK(ncclAllReduce(dev_buf, dev_buf, (size_t)n, t, ncclSum, comm, stream));
    CUDA_CHECK(cudaMemcpyAsync(host, dev_buf, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return 0;
}

void ampscope_nccl_close(void)
{
    if (comm)
        ncclCommDestroy(comm);
    if (dev_buf)
        cudaFree(dev_buf);
    if (stream)
        cudaStreamDestroy(stream);
    comm = NULL, dev_buf = NULL, dev_bytes = 0, stream = NULL;
}
