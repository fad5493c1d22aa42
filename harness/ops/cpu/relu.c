/* relu.c: relu forward and backward on the CPU (twin of kernels/relu.cu). Both run in
 * their input's dtype; neither loses a value, but both are counted like any other store. */
#include "cpu.h"

typedef struct relu_ctx {
    const tensor *x, *dy, *y;
    tensor *out;
} relu_ctx;

static void relu_forward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const relu_ctx *c = p;
    float buf[CPU_CHUNK];
    cpu_load(c->x, off, n, buf);
    for (int64_t i = 0; i < n; i++) { /* NaN propagates, as torch.relu */
        float v = buf[i];
        buf[i] = v > 0.0f ? v : (v != v ? v : 0.0f);
    }
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

static void relu_backward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const relu_ctx *c = p;
    float buf[CPU_CHUNK], out[CPU_CHUNK];
    cpu_load(c->y, off, n, out);
    cpu_load(c->dy, off, n, buf);
    for (int64_t i = 0; i < n; i++)
        buf[i] = out[i] <= 0.0f ? 0.0f : buf[i];
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_relu_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    relu_ctx c = {.x = x, .out = y};
    cpu_parallel_chunks(x->numel, relu_forward_chunk, &c, st);
    return 0;
}

int cpu_relu_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx, round_stats *st)
{
    (void)be;
    relu_ctx c = {.dy = dy, .y = y, .out = dx};
    cpu_parallel_chunks(dy->numel, relu_backward_chunk, &c, st);
    return 0;
}
