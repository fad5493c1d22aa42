/*
 * backend_load.c: finds and opens the CUDA backend, a shared library next to the binary
 * (bin/../lib/libampscope_cuda.so), with dlopen, so bin/ampscope starts on machines without
 * CUDA libraries. A library built from other sources (another BACKEND_ABI_VERSION or size
 * of struct backend, backend.h) is refused before anything in it runs, and the table it
 * fills is checked (backend_check) before it is used.
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
    backend_abi_fn abi_fn = (backend_abi_fn)dlsym(lib, BACKEND_ABI_SYMBOL);
    if (!abi_fn) {
        snprintf(err, (size_t)errlen,
                 "%s has no %s: it was built from older sources than this binary: rebuild "
                 "with make",
                 path, BACKEND_ABI_SYMBOL);
        return NULL;
    }
    backend_abi abi = abi_fn();
    if (abi.version != BACKEND_ABI_VERSION || abi.table_bytes != (int64_t)sizeof(backend)) {
        snprintf(err, (size_t)errlen,
                 "%s was built for backend ABI %d (struct backend of %lld bytes); this binary "
                 "expects ABI %d (%zu bytes): rebuild with make",
                 path, (int)abi.version, (long long)abi.table_bytes, BACKEND_ABI_VERSION,
                 sizeof(backend));
        return NULL;
    }
    backend_rows_fn rows_fn = (backend_rows_fn)dlsym(lib, BACKEND_ROWS_SYMBOL);
    if (!rows_fn || strcmp(rows_fn(), BACKEND_ROW_NAMES) != 0) {
        snprintf(err, (size_t)errlen,
                 "%s was built with the rows \"%s\"; this binary has \"%s\": rebuild with make",
                 path, rows_fn ? rows_fn() : "(none)", BACKEND_ROW_NAMES);
        return NULL;
    }
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
