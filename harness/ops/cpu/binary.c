/*
 * binary.c: the elementwise ops of two tensors on the CPU, add and mul (twin of
 * kernels/binary.cu): y[i] = round(a[i] op b[i % numel(b)]) in float32 opmath, rounded once
 * into y's dtype, as PyTorch's TensorIterator kernels compute half operands in float and
 * store once. b repeats over a's leading dims (a broadcast of a trailing-shaped b).
 */
#include "cpu.h"

typedef struct binary_ctx {
    const tensor *a, *b;
    tensor *y;
    bool mul;
} binary_ctx;

static void binary_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const binary_ctx *c = p;
    float av[CPU_CHUNK], bv[CPU_CHUNK];
    cpu_load(c->a, off, n, av);
    int64_t nb = c->b->numel;
    for (int64_t i = 0, j = off % nb; i < n; i++, j = j + 1 == nb ? 0 : j + 1)
        bv[i] = load_as_float(c->b->data, c->b->dtype, j);
    for (int64_t i = 0; i < n; i++)
        av[i] = c->mul ? av[i] * bv[i] : av[i] + bv[i];
    cpu_store(av, c->y->data, c->y->dtype, off, n, st);
}

int cpu_add(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    (void)be;
    binary_ctx c = {a, b, y, false};
    cpu_parallel_chunks(y->numel, binary_chunk, &c, st);
    return 0;
}

int cpu_mul(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    (void)be;
    binary_ctx c = {a, b, y, true};
    cpu_parallel_chunks(y->numel, binary_chunk, &c, st);
    return 0;
}
