/*
 * backend_cpu.c: the CPU backend's table and its memory (host malloc). The ops live in the
 * files named after their concern (round.c, linear.c, conv2d.c, ...), twins of kernels/;
 * the table takes cpu_<op> for every op of backend.h's list.
 */
#include <errno.h>
#include <malloc.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static void *cpu_alloc(backend *be, int64_t bytes)
{
    void *p = malloc((size_t)bytes);
    if (!p)
        snprintf(be->err, sizeof be->err, "out of host memory: %lld bytes needed, %lld available",
                 (long long)bytes, (long long)be->mem_available(be));
    return p;
}

static void cpu_free(backend *be, void *p)
{
    (void)be;
    free(p);
}

static void cpu_copy(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be;
    memcpy(dst, src, (size_t)bytes);
}

static void cpu_upload_values(backend *be, void *dst, int64_t bytes, backend_values_fn make,
                              void *ctx)
{
    void *host = make(ctx);
    cpu_copy(be, dst, host, bytes);
    free(host);
}

/* MemAvailable from /proc/meminfo, in bytes; -1 when it cannot be read. */
static int64_t cpu_mem_available(backend *be)
{
    (void)be;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static void cpu_close(backend *be) { free(be); }

static void cpu_synchronize(backend *be) { (void)be; }

float *cpu_scratch(backend *be, int64_t n)
{
    float *p = cpu_alloc(be, n * (int64_t)sizeof(float));
    if (p)
        mem_account_add(be->account, MEM_WORKSPACE, n * (int64_t)sizeof(float));
    return p;
}

void cpu_scratch_free(backend *be, float *p, int64_t n)
{
    if (!p)
        return;
    free(p);
    mem_account_add(be->account, MEM_WORKSPACE, -n * (int64_t)sizeof(float));
}

/* float16 widened by F16C, 8 at a time (exact; a signalling NaN comes out quiet, which only
 * GEMM operands see) */
__attribute__((target("avx,f16c"))) static void widen_half_f16c(const uint16_t *src, float *dst,
                                                                int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = float_from_half(src[i]);
}

void cpu_load(const tensor *t, int64_t off, int64_t n, float *dst)
{
    if (t->dtype == DTYPE_FLOAT32)
        memcpy(dst, (const float *)t->data + off, sizeof(float) * (size_t)n);
    else if (t->dtype == DTYPE_FLOAT16 && cpu_has_f16c())
        widen_half_f16c((const uint16_t *)t->data + off, dst, n);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = load_as_float(t->data, t->dtype, off + i);
}

const float *cpu_view(const tensor *t, int64_t off, int64_t n, float *buf)
{
    if (t->dtype == DTYPE_FLOAT32)
        return (const float *)t->data + off;
    cpu_load(t, off, n, buf);
    return buf;
}

const float *cpu_as_f32(backend *be, const tensor *t, float **owned)
{
    *owned = NULL;
    if (t->dtype == DTYPE_FLOAT32)
        return t->data;
    float *p = cpu_scratch(be, t->numel);
    if (!p)
        return NULL;
    int64_t chunks = (t->numel + CPU_CHUNK - 1) / CPU_CHUNK;
#pragma omp parallel for schedule(static) if (t->numel >= (1 << 16))
    for (int64_t c = 0; c < chunks; c++) {
        int64_t off = c * CPU_CHUNK;
        cpu_load(t, off, t->numel - off < CPU_CHUNK ? t->numel - off : CPU_CHUNK, p + off);
    }
    *owned = p;
    return p;
}

backend *backend_cpu_open(mem_account *account)
{
    /* Tensors of the same sizes come and go every step: keep freed memory in the heap for
     * the next step instead of returning it to the kernel and faulting it in again (the
     * kernel zeroes every new page: a sixth of question 000's step). No block is mapped on
     * its own (M_MMAP_MAX 0) and the heap is never trimmed (-1, mallopt(3)). */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    backend *be = calloc(1, sizeof *be);
    if (!be)
        return NULL;
    *be = (backend){
        .name = "cpu",
        .device = "cpu",
        .account = account,
        .alloc = cpu_alloc,
        .free = cpu_free,
        .upload = cpu_copy,
        .upload_values = cpu_upload_values,
        .download = cpu_copy,
        .mem_available = cpu_mem_available,
        .synchronize = cpu_synchronize,
        .close = cpu_close,
#define CPU_ENTRY(name, params) .name = cpu_##name,
        BACKEND_OPS(CPU_ENTRY)
#undef CPU_ENTRY
    };
    char err[512];
    if (backend_check(be, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        free(be);
        return NULL;
    }
    return be;
}
