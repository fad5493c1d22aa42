/* dropout.c: dropout forward and backward on the CPU (twin of kernels/dropout.cu). The mask
 * is a function of (seed, element index) (activation_math.h), so the backward draws it
 * again instead of reading a saved one; the product is taken in float32 and rounded once. */
#include "cpu.h"

typedef struct dropout_ctx {
    const tensor *src;
    uint64_t seed;
    uint32_t threshold;
    float scale;
    tensor *out;
} dropout_ctx;

static void dropout_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const dropout_ctx *c = p;
    float buf[CPU_CHUNK];
    cpu_load(c->src, off, n, buf);
    for (int64_t i = 0; i < n; i++)
        /* src * mask * scale, as PyTorch's kernel: a dropped inf is NaN there too */
        buf[i] = buf[i] * (dropout_keeps(c->seed, off + i, c->threshold) ? 1.0f : 0.0f) * c->scale;
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

static int run_dropout(const tensor *src, double p, uint64_t seed, tensor *out, round_stats *st)
{
    dropout_ctx c = {.src = src,
                     .seed = seed,
                     .threshold = dropout_threshold(p),
                     .scale = dropout_scale(p),
                     .out = out};
    cpu_parallel_chunks(out->numel, dropout_chunk, &c, st);
    return 0;
}

int cpu_dropout_forward(backend *be, const tensor *x, double p, uint64_t seed, tensor *y,
                        round_stats *st)
{
    return run_dropout(x, p, seed, y, st);
}

int cpu_dropout_backward(backend *be, const tensor *dy, double p, uint64_t seed, tensor *dx,
                         round_stats *st)
{
    return run_dropout(dy, p, seed, dx, st);
}
