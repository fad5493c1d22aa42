/*
 * bce_with_logits.c: binary_cross_entropy_with_logits's elementwise loss and its gradient
 * on the CPU (twin of kernels/bce_with_logits.cu), with loss_math.h's arithmetic: every op of
 * PyTorch's composite rounds into its output's dtype (log_sigmoid into the logits', the rest
 * of the forward into the target's, the backward into the logits'). The mean is the mean row's.
 */
#include "ops/loss_math.h"
#include "cpu.h"

typedef struct bce_ctx {
    const tensor *x, *t;
    tensor *out;
    float dy, inv_n; /* backward */
} bce_ctx;

static void bce_forward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const bce_ctx *c = p;
    dtype xd = c->x->dtype, yd = c->out->dtype;
    float buf[CPU_CHUNK], xb[CPU_CHUNK], tb[CPU_CHUNK];
    const float *x = cpu_view(c->x, off, n, xb), *t = cpu_view(c->t, off, n, tb);
    for (int64_t i = 0; i < n; i++)
        buf[i] = bce_logits_elem(x[i], t[i], round_to(log_sigmoid_elem(x[i]), xd), yd);
    cpu_store(buf, c->out->data, yd, off, n, st);
}

int cpu_bce_logits_forward(backend *be, const tensor *x, const tensor *t, tensor *y,
                           round_stats *st)
{
    (void)be;
    bce_ctx c = {.x = x, .t = t, .out = y};
    cpu_parallel_chunks(x->numel, bce_forward_chunk, &c, st);
    return 0;
}

static void bce_backward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const bce_ctx *c = p;
    dtype dt = c->out->dtype;
    float buf[CPU_CHUNK], xb[CPU_CHUNK], tb[CPU_CHUNK];
    const float *x = cpu_view(c->x, off, n, xb), *t = cpu_view(c->t, off, n, tb);
    for (int64_t i = 0; i < n; i++)
        buf[i] = bce_logits_grad_elem(x[i], t[i], c->dy, c->inv_n, dt);
    cpu_store(buf, c->out->data, dt, off, n, st);
}

int cpu_bce_logits_backward(backend *be, const tensor *dy, const tensor *x, const tensor *t,
                            tensor *dx, round_stats *st)
{
    (void)be;
    bce_ctx c = {.x = x,
                 .t = t,
                 .out = dx,
                 .dy = load_as_float(dy->data, dy->dtype, 0),
                 .inv_n = 1.0f / (float)x->numel};
    cpu_parallel_chunks(x->numel, bce_backward_chunk, &c, st);
    return 0;
}
