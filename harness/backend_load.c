/*
 * backend_load.c: finds and opens the CUDA backend, a shared library next to the binary
 * (bin/../lib/libampscope_cuda.so), with dlopen, so bin/ampscope starts on machines without
 * CUDA libraries. The table the library fills is checked (backend_check) before it is
 * used.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

backend *backend_cuda_load(mem_account *account, const char *lib_dir, char *err, int errlen)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    if (lib_dir) {
        snprintf(path, sizeof path, "%s/libampscope_cuda.so", lib_dir);
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n < 0) {
            snprintf(err, (size_t)errlen, "no usable CUDA device: cannot locate the binary: %m");
            return NULL;
        }
        exe[n] = '\0';
        snprintf(path, sizeof path, "%s/../lib/libampscope_cuda.so", dirname(exe));
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, (size_t)errlen, "no usable CUDA device: %s", dlerror());
        return NULL;
    }
    /* The library stays loaded even when no GPU is usable: unloading it would unload the
     * C++ runtime it brought in, with memory that runtime still owns. */
    backend_cuda_open_fn open_fn = (backend_cuda_open_fn)dlsym(lib, BACKEND_CUDA_OPEN_SYMBOL);
    if (!open_fn) {
        snprintf(err, (size_t)errlen, "no usable CUDA device: %s has no %s", path,
                 BACKEND_CUDA_OPEN_SYMBOL);
        return NULL;
    }
    backend *be = open_fn(account, err, errlen); /* NULL with err filled by the library */
    if (be && backend_check(be, err, errlen)) {
        if (be->close)
            be->close(be);
        return NULL;
    }
    return be;
}
