/*
 * backend_cpu.c: the CPU backend's table and its memory (host malloc). The ops live in the
 * files named after their concern (round.c, linear.c, conv2d.c, ...), twins of kernels/;
 * the table takes cpu_<op> for every op of backend.h's list.
 *
 * Memory: a freed block (a tensor's data, a scratch buffer) is kept for the next request of
 * its size instead of going back to malloc, so that a step after the first, whose requests
 * are those of the step before, calls neither malloc nor free (cpu_heap_calls counts the
 * calls that reached the heap); the kept blocks go back to the heap when no block is out
 * (between two cases of a run). Widened copies of half weights are held from the forward
 * GEMM to the backward's (cpu_hold, cpu_take below); neither the kept blocks nor the held
 * copies are in the memory account, which counts what PyTorch would hold.
 */
#include <errno.h>
#include <malloc.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Every block handed out starts CPU_BLOCK_HEAD bytes into its allocation, after the size it
 * was asked for (malloc's alignment kept): a freed block is kept with that size, and serves
 * the next request of exactly that size. (Matched by the heap's own size classes instead, a
 * block of a neighbouring size could serve a request and leave its own size short a step
 * later: the kept blocks would drift from the step's needs.) */
#define CPU_BLOCK_HEAD 16

typedef struct cpu_block {
    char *base; /* the allocation; the block's data is base + CPU_BLOCK_HEAD */
    int64_t bytes;
} cpu_block;

/* a widened float32 copy of src (its data, dtype and numel when it was made) */
typedef struct cpu_held {
    const tensor *src;
    const void *data;
    dtype dt;
    int64_t numel;
    float *f32;
} cpu_held;

/* the backend's state beside its table, which comes first: a backend * points at both */
typedef struct cpu_backend {
    backend be;
    cpu_block *kept;
    int n_kept, cap_kept;
    cpu_held *held;
    int n_held, cap_held;
    int64_t out; /* the blocks handed out */
    int64_t heap_calls;
} cpu_backend;

static cpu_backend *cpu_of(backend *be) { return (cpu_backend *)be; }

/* grows an array of n elements of size each to at least n + 1; false when out of memory */
static bool grow(cpu_backend *c, void **array, int *cap, int n, size_t size)
{
    if (n < *cap)
        return true;
    int want = *cap ? 2 * *cap : 64;
    void *p = realloc(*array, size * (size_t)want);
    c->heap_calls++;
    if (!p)
        return false;
    *array = p;
    *cap = want;
    return true;
}

/* every kept block back to the heap */
static void blocks_release(cpu_backend *c)
{
    for (int i = 0; i < c->n_kept; i++)
        free(c->kept[i].base);
    c->heap_calls += c->n_kept;
    c->n_kept = 0;
}

/* p (handed out) kept for the next request of its size; freed when it cannot be kept. When
 * no block is out any more (a case has ended: its parameters are freed), the kept ones go
 * back to the heap, for the next case's sizes. */
static void block_keep(cpu_backend *c, void *p)
{
    char *base = (char *)p - CPU_BLOCK_HEAD;
    int64_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    c->out--;
    if (!grow(c, (void **)&c->kept, &c->cap_kept, c->n_kept, sizeof *c->kept)) {
        free(base);
        c->heap_calls++;
    } else {
        c->kept[c->n_kept++] = (cpu_block){base, bytes};
    }
    if (c->out == 0)
        blocks_release(c);
}

static void *cpu_alloc(backend *be, int64_t bytes)
{
    cpu_backend *c = cpu_of(be);
    for (int i = c->n_kept - 1; i >= 0; i--) /* the latest kept first: it is likely in cache */
        if (c->kept[i].bytes == bytes) {
            char *base = c->kept[i].base;
            c->kept[i] = c->kept[--c->n_kept];
            c->out++;
            return base + CPU_BLOCK_HEAD;
        }
    char *base = malloc((size_t)bytes + CPU_BLOCK_HEAD);
    c->heap_calls++;
    if (!base && c->n_kept) { /* the kept blocks may be what the heap lacks */
        blocks_release(c);
        base = malloc((size_t)bytes + CPU_BLOCK_HEAD);
        c->heap_calls++;
    }
    if (!base) {
        snprintf(be->err, sizeof be->err, "out of host memory: %lld bytes needed, %lld available",
                 (long long)bytes, (long long)be->mem_available(be));
        return NULL;
    }
    memcpy(base, &bytes, sizeof bytes);
    c->out++;
    return base + CPU_BLOCK_HEAD;
}

/* the held copies of tensors whose data is `data` given up (data is written or freed) */
static void held_drop_data(cpu_backend *c, const void *data)
{
    for (int i = 0; i < c->n_held;)
        if (c->held[i].data == data) {
            block_keep(c, c->held[i].f32);
            c->held[i] = c->held[--c->n_held];
        } else {
            i++;
        }
}

static void cpu_free(backend *be, void *p)
{
    if (!p)
        return;
    held_drop_data(cpu_of(be), p);
    block_keep(cpu_of(be), p);
}

void cpu_hold(backend *be, const tensor *t, float *f32)
{
    cpu_backend *c = cpu_of(be);
    mem_account_add(be->account, MEM_WORKSPACE, -t->numel * (int64_t)sizeof(float));
    held_drop_data(c, t->data); /* a copy made again replaces the one before */
    if (!grow(c, (void **)&c->held, &c->cap_held, c->n_held, sizeof *c->held)) {
        block_keep(c, f32);
        return;
    }
    c->held[c->n_held++] = (cpu_held){t, t->data, t->dtype, t->numel, f32};
}

float *cpu_take(backend *be, const tensor *t)
{
    cpu_backend *c = cpu_of(be);
    for (int i = 0; i < c->n_held; i++) {
        cpu_held h = c->held[i];
        if (h.src == t && h.data == t->data && h.dt == t->dtype && h.numel == t->numel) {
            c->held[i] = c->held[--c->n_held];
            mem_account_add(be->account, MEM_WORKSPACE, t->numel * (int64_t)sizeof(float));
            return h.f32;
        }
    }
    return NULL;
}

void cpu_hold_drop(backend *be, const void *data) { held_drop_data(cpu_of(be), data); }

void cpu_hold_drop_all(backend *be)
{
    cpu_backend *c = cpu_of(be);
    for (int i = 0; i < c->n_held; i++)
        block_keep(c, c->held[i].f32);
    c->n_held = 0;
}

int64_t cpu_heap_calls(backend *be) { return cpu_of(be)->heap_calls; }

static void cpu_copy(backend *be, void *dst, const void *src, int64_t bytes)
{
    (void)be;
    memcpy(dst, src, (size_t)bytes);
}

/* an upload may rewrite a weight whose widened copy is held */
static void cpu_upload(backend *be, void *dst, const void *src, int64_t bytes)
{
    cpu_hold_drop(be, dst);
    memcpy(dst, src, (size_t)bytes);
}

static void cpu_upload_values(backend *be, void *dst, int64_t bytes, backend_values_fn make,
                              void *ctx)
{
    void *host = make(ctx);
    cpu_upload(be, dst, host, bytes);
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

static void cpu_close(backend *be)
{
    cpu_backend *c = cpu_of(be);
    cpu_hold_drop_all(be);
    blocks_release(c);
    free(c->kept);
    free(c->held);
    free(c);
}

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
    block_keep(cpu_of(be), p);
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
    else if (t->dtype == DTYPE_BFLOAT16) /* a shift: the loop the compiler vectorises */
        for (int64_t i = 0; i < n; i++)
            dst[i] = float_from_bf16(((const uint16_t *)t->data)[off + i]);
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

/* The ops that may write a weight (its values copied back from the master weights, a
 * parameter's update, a fill, a scaling in place) give up a held copy of it first. */
static int held_cast(backend *be, const tensor *src, tensor *dst, round_stats *st)
{
    cpu_hold_drop(be, dst->data);
    return cpu_cast(be, src, dst, st);
}

static int held_mul_scalar(backend *be, const tensor *src, float s, tensor *dst, round_stats *st)
{
    cpu_hold_drop(be, dst->data);
    return cpu_mul_scalar(be, src, s, dst, st);
}

static int held_fill(backend *be, tensor *dst, float value)
{
    cpu_hold_drop(be, dst->data);
    return cpu_fill(be, dst, value);
}

static int held_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h,
                               optim_tensors *t, optim_result *out)
{
    cpu_hold_drop_all(be); /* a step's end: every weight may change */
    return cpu_optimizer_step(be, cfg, h, t, out);
}

backend *backend_cpu_open(mem_account *account)
{
    /* Tensors of the same sizes come and go every step: keep freed memory in the heap for
     * the next step instead of returning it to the kernel and faulting it in again (the
     * kernel zeroes every new page: a sixth of question 000's step). No block is mapped on
     * its own (M_MMAP_MAX 0) and the heap is never trimmed (-1, mallopt(3)). */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    backend *be = &c->be;
    *be = (backend){.name = "cpu",
                    .device = "cpu",
                    .account = account,
                    .alloc = cpu_alloc,
                    .free = cpu_free,
                    .upload = cpu_upload,
                    .upload_values = cpu_upload_values,
                    .download = cpu_copy,
                    .mem_available = cpu_mem_available,
                    .synchronize = cpu_synchronize,
                    .close = cpu_close,
#define CPU_ENTRY(name, params) .name = cpu_##name,
                    BACKEND_OPS(CPU_ENTRY)
#undef CPU_ENTRY
    };
    be->cast = held_cast;
    be->mul_scalar = held_mul_scalar;
    be->fill = held_fill;
    be->optimizer_step = held_optimizer_step;
    char err[512];
    if (backend_check(be, err, sizeof err)) {
        fprintf(stderr, "ampscope: %s\n", err);
        free(c);
        return NULL;
    }
    return be;
}
