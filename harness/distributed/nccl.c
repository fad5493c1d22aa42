/*
 * distributed/nccl.c: a rank's all-reduce through NCCL when the case runs on the CUDA
 * backend (distributed.h). lib/libampscope_nccl.so (kernels/nccl.c) is dlopened
 * here, from AMPSCOPE_LIB_DIR or the lib/ folder beside bin/, as the CUDA library is
 * (backend_load.c): NCCL is loaded only by a distributed case on GPUs. Rank 0 makes the
 * communicator's unique id and MPI broadcasts it; MPI still carries the float64 reference
 * sum and the gathers.
 */
#include "distributed.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nccl_abi.h"

static struct {
    bool active;
    nccl_allreduce_fn allreduce;
    nccl_close_fn close;
} nccl;

int distributed_nccl_open(char *err, int len)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    const char *dir = getenv("AMPSCOPE_LIB_DIR");
    if (dir) {
        snprintf(path, sizeof path, "%s/libampscope_nccl.so", dir);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0) {
            snprintf(err, (size_t)len, "NCCL: cannot locate the binary: %m");
            return -1;
        }
        exe[n] = '\0';
        snprintf(path, sizeof path, "%s/../lib/libampscope_nccl.so", dirname(exe));
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, (size_t)len,
                 "a distributed case on the CUDA backend reduces with NCCL: %s\n"
                 "---> HINT: make builds lib/libampscope_nccl.so where the CUDA toolkit has "
                 "NCCL; or run with --device cpu",
                 dlerror());
        return -1;
    }
    nccl_unique_id_fn unique_id = (nccl_unique_id_fn)dlsym(lib, "ampscope_nccl_unique_id");
    nccl_init_fn init = (nccl_init_fn)dlsym(lib, "ampscope_nccl_init");
    nccl.allreduce = (nccl_allreduce_fn)dlsym(lib, "ampscope_nccl_allreduce");
    nccl.close = (nccl_close_fn)dlsym(lib, "ampscope_nccl_close");
    if (!unique_id || !init || !nccl.allreduce || !nccl.close) {
        snprintf(err, (size_t)len, "%s lacks the ampscope_nccl_ functions: rebuild with make",
                 path);
        return -1;
    }
    unsigned char id[AMPSCOPE_NCCL_ID_BYTES] = {0};
    /* every rank checks its GPUs first, so none waits in the broadcast for a rank that
     * refused; rank 0 alone makes the id */
    int rc = distributed_rank() == 0 ? unique_id(id, err, len) : 0;
    distributed_bcast(id, sizeof id);
    if (rc || init(distributed_rank(), distributed_world_size(), id, err, len))
        return -1;
    nccl.active = true;
    return 0;
}

bool distributed_nccl_active(void) { return nccl.active; }

int distributed_nccl_allreduce(void *buf, int64_t n, dtype dt, char *err, int len)
{
    return nccl.allreduce(buf, n, (int)dt, err, len);
}

void distributed_nccl_close(void)
{
    if (nccl.active)
        nccl.close();
    nccl.active = false;
}
