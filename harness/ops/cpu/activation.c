/* activation.c: gelu, silu, sigmoid and tanh, forward and backward, on the CPU (twin of
 * kernels/activation.cu). Each element is computed by activation_math.h's formula, in
 * float32 (PyTorch's CUDA kernels' opmath) but for sigmoid's and tanh's backward, which
 * round every operation into the output's dtype as PyTorch's kernels do, and is stored
 * (rounded, counted) once into the output's dtype. */
#include "cpu.h"

/* which formula a chunk applies */
typedef enum act_fn {
    ACT_GELU,
    ACT_GELU_GRAD,
    ACT_SILU,
    ACT_SILU_GRAD,
    ACT_SIGMOID,
    ACT_SIGMOID_GRAD,
    ACT_TANH,
    ACT_TANH_GRAD
} act_fn;

typedef struct act_ctx {
    act_fn fn;
    const tensor *a;  /* x, or the saved x or y of a backward */
    const tensor *dy; /* backward only */
    gelu_approximate approx;
    tensor *out;
} act_ctx;

static void act_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const act_ctx *c = p;
    float a[CPU_CHUNK], g[CPU_CHUNK];
    cpu_load(c->a, off, n, a);
    if (c->dy)
        cpu_load(c->dy, off, n, g);
    switch (c->fn) {
    case ACT_GELU:
        for (int64_t i = 0; i < n; i++)
            a[i] = gelu_elem(a[i], c->approx);
        break;
    case ACT_GELU_GRAD:
        for (int64_t i = 0; i < n; i++)
            a[i] = gelu_grad_elem(g[i], a[i], c->approx);
        break;
    case ACT_SILU:
        for (int64_t i = 0; i < n; i++)
            a[i] = silu_elem(a[i]);
        break;
    case ACT_SILU_GRAD:
        for (int64_t i = 0; i < n; i++)
            a[i] = silu_grad_elem(g[i], a[i]);
        break;
    case ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            a[i] = sigmoid_elem(a[i]);
        break;
    case ACT_SIGMOID_GRAD:
        for (int64_t i = 0; i < n; i++)
            a[i] = sigmoid_grad_elem(g[i], a[i], c->out->dtype);
        break;
    case ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            a[i] = act_tanh(a[i]);
        break;
    case ACT_TANH_GRAD:
        for (int64_t i = 0; i < n; i++)
            a[i] = tanh_grad_elem(g[i], a[i], c->out->dtype);
        break;
    }
    cpu_store(a, c->out->data, c->out->dtype, off, n, st);
}

static int run_act(act_fn fn, const tensor *a, const tensor *dy, gelu_approximate approx,
                   tensor *out, round_stats *st)
{
    act_ctx c = {.fn = fn, .a = a, .dy = dy, .approx = approx, .out = out};
    cpu_parallel_chunks(out->numel, act_chunk, &c, st);
    return 0;
}

int cpu_gelu_forward(backend *be, const tensor *x, gelu_approximate a, tensor *y, round_stats *st)
{
    return run_act(ACT_GELU, x, NULL, a, y, st);
}

int cpu_gelu_backward(backend *be, const tensor *dy, const tensor *x, gelu_approximate a,
                      tensor *dx, round_stats *st)
{
    return run_act(ACT_GELU_GRAD, x, dy, a, dx, st);
}

int cpu_silu_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    return run_act(ACT_SILU, x, NULL, GELU_NONE, y, st);
}

int cpu_silu_backward(backend *be, const tensor *dy, const tensor *x, tensor *dx, round_stats *st)
{
    return run_act(ACT_SILU_GRAD, x, dy, GELU_NONE, dx, st);
}

int cpu_sigmoid_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    return run_act(ACT_SIGMOID, x, NULL, GELU_NONE, y, st);
}

int cpu_sigmoid_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                         round_stats *st)
{
    return run_act(ACT_SIGMOID_GRAD, y, dy, GELU_NONE, dx, st);
}

int cpu_tanh_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    return run_act(ACT_TANH, x, NULL, GELU_NONE, y, st);
}

int cpu_tanh_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx, round_stats *st)
{
    return run_act(ACT_TANH_GRAD, y, dy, GELU_NONE, dx, st);
}
