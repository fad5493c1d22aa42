/*
 * backend_dry.c: the counting backend behind the memory preflight. It allocates nothing
 * (every buffer is one shared dummy address, never read or written), never makes a
 * tensor's values (upload_values does not call its producer) and its ops do nothing, so a
 * dry pass of the real training code through it counts, in the run's memory account, every
 * byte the case will hold, by the same allocations as the real run. Runs through it observe
 * every step: the peak it measures is that of an observed step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static char dry_dummy[64];

static void *dry_alloc(backend *be, int64_t bytes) { return (void)be, (void)bytes, dry_dummy; }
static void dry_free(backend *be, void *p) { (void)be, (void)p; }
static void dry_upload(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be, (void)dst, (void)src, (void)bytes;
}
static void dry_upload_values(backend *be, void *dst, int64_t bytes, backend_values_fn make,
                              void *ctx)
{
    (void)be, (void)dst, (void)bytes, (void)make, (void)ctx;
}
static void dry_download(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be, (void)src;
    memset(dst, 0, (size_t)bytes);
}
static int64_t dry_mem_available(backend *be) { return (void)be, INT64_MAX; }
static void dry_synchronize(backend *be) { (void)be; }
static void dry_close(backend *be) { free(be); }

/* every op: nothing to compute, nothing that can fail */
#define DRY_OP(name, params)                                                                     \
    static int dry_##name params { return 0; }
BACKEND_OPS(DRY_OP)
#undef DRY_OP

backend *backend_dry_open(mem_account *account)
{
    backend *be = calloc(1, sizeof *be);
    if (!be)
        return NULL;
    *be = (backend){
        .name = "dry",
        .device = "dry",
        .observe_every_step = true,
        .account = account,
        .alloc = dry_alloc,
        .free = dry_free,
        .upload = dry_upload,
        .upload_values = dry_upload_values,
        .download = dry_download,
        .mem_available = dry_mem_available,
        .synchronize = dry_synchronize,
        .close = dry_close,
#define DRY_ENTRY(name, params) .name = dry_##name,
        BACKEND_OPS(DRY_ENTRY)
#undef DRY_ENTRY
    };
    char err[512];
    if (backend_check(be, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        free(be);
        return NULL;
    }
    return be;
}
