/*
 * nccl_abi.h: the NCCL side of a distributed case's all-reduce, built as its own
 * library (lib/libampscope_nccl.so, linked against NCCL and the CUDA runtime) that
 * harness/distributed/nccl.c dlopens only when a distributed case runs on the CUDA backend:
 * bin/ampscope and libampscope_cuda.so never load NCCL otherwise. Rank r uses GPU r; the
 * values travel from the host into a device buffer, through ncclAllReduce(ncclSum) in
 * ncclFloat32, ncclFloat16 or ncclBfloat16, and back. Every call returns 0, or -1 with
 * the library's message in err.
 */
#ifndef AMPSCOPE_NCCL_ALLREDUCE_H
#define AMPSCOPE_NCCL_ALLREDUCE_H

#include <stdint.h>

#define AMPSCOPE_NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

/* dtype: a harness dtype (DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16) */
typedef int (*nccl_unique_id_fn)(void *id, char *err, int len);
typedef int (*nccl_init_fn)(int rank, int nranks, const void *id, char *err, int len);
typedef int (*nccl_allreduce_fn)(void *host, int64_t n, int dtype, char *err, int len);
typedef void (*nccl_close_fn)(void);

#endif
