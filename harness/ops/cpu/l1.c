/*
 * l1.c: the ops of l1_loss on the CPU (twin of kernels/l1.cu): sub (input - target, rounded
 * into the output's dtype), abs, and abs's backward dy * sgn(x) (loss_math.h's sgn_elem:
 * 0 at 0 and NaN). abs and its backward change no value but are counted like any store.
 */
#include <math.h>

#include "ops/loss_math.h"
#include "cpu.h"

typedef struct l1_ctx {
    const tensor *a, *b; /* sub: a - b; abs: a; abs backward: dy = a, x = b */
    tensor *out;
} l1_ctx;

static void sub_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const l1_ctx *c = p;
    float buf[CPU_CHUNK], ab[CPU_CHUNK], bb[CPU_CHUNK];
    const float *a = cpu_view(c->a, off, n, ab), *b = cpu_view(c->b, off, n, bb);
    for (int64_t i = 0; i < n; i++)
        buf[i] = a[i] - b[i];
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_sub_forward(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    (void)be;
    l1_ctx c = {.a = a, .b = b, .out = y};
    cpu_parallel_chunks(y->numel, sub_chunk, &c, st);
    return 0;
}

static void abs_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const l1_ctx *c = p;
    float buf[CPU_CHUNK];
    cpu_load(c->a, off, n, buf);
    for (int64_t i = 0; i < n; i++)
        buf[i] = fabsf(buf[i]);
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_abs_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    l1_ctx c = {.a = x, .out = y};
    cpu_parallel_chunks(y->numel, abs_chunk, &c, st);
    return 0;
}

static void abs_backward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const l1_ctx *c = p;
    float buf[CPU_CHUNK], xb[CPU_CHUNK];
    cpu_load(c->a, off, n, buf);
    const float *x = cpu_view(c->b, off, n, xb);
    for (int64_t i = 0; i < n; i++)
        buf[i] *= sgn_elem(x[i]);
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_abs_backward(backend *be, const tensor *dy, const tensor *x, tensor *dx, round_stats *st)
{
    (void)be;
    l1_ctx c = {.a = dy, .b = x, .out = dx};
    cpu_parallel_chunks(dx->numel, abs_backward_chunk, &c, st);
    return 0;
}
