/* softmax.c: softmax over the last dim, forward and backward, and the causal mask's fill,
 * on the CPU (twin of kernels/softmax.cu). log_softmax is loss.c's (the cross entropy's op).
 *
 * softmax follows PyTorch's CUDA kernels (aten/src/ATen/native/cuda/SoftMax.cu and
 * PersistentSoftmax.cuh): per row, the max, the sum of exp(x - max) in float32 (accumulated
 * here in double, in a fixed order: summation-order noise), y = exp(x - max) / sum rounded
 * once into y's dtype (float32 with half_to_float). The backward is softmax_backward_cuda_out's
 * `tmp = grad * output`, a product in the gradient's dtype (rounded to it), then per row
 * dx = tmp - y * sum(tmp) in float32, rounded once into dx's dtype (the input's). */
#include <math.h>

#include "cpu.h"

typedef struct softmax_ctx {
    const tensor *x, *dy, *y;
    tensor *out;
    int64_t rows, cols;
} softmax_ctx;

static void softmax_rows(const softmax_ctx *c, int64_t r0, int64_t r1, round_stats *st)
{
    float buf[CPU_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = r * c->cols;
        float mx = -INFINITY;
        for (int64_t j = 0; j < c->cols; j++) {
            float v = load_as_float(c->x->data, c->x->dtype, base + j);
            mx = v > mx ? v : mx;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < c->cols; j++)
            sum += exp_f32(load_as_float(c->x->data, c->x->dtype, base + j) - mx);
        float s = (float)sum;
        for (int64_t j0 = 0; j0 < c->cols; j0 += CPU_CHUNK) {
            int64_t n = c->cols - j0 < CPU_CHUNK ? c->cols - j0 : CPU_CHUNK;
            for (int64_t j = 0; j < n; j++)
                buf[j] = exp_f32(load_as_float(c->x->data, c->x->dtype, base + j0 + j) - mx) / s;
            cpu_store(buf, c->out->data, c->out->dtype, base + j0, n, st);
        }
    }
}

/* tmp = grad * output, as a tensor of the gradient's dtype holds it */
static float softmax_grad_tmp(const softmax_ctx *c, int64_t i)
{
    return round_to(load_as_float(c->dy->data, c->dy->dtype, i) *
                        load_as_float(c->y->data, c->y->dtype, i),
                    c->dy->dtype);
}

static void softmax_backward_rows(const softmax_ctx *c, int64_t r0, int64_t r1, round_stats *st)
{
    float buf[CPU_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = r * c->cols;
        double sum = 0.0;
        for (int64_t j = 0; j < c->cols; j++)
            sum += softmax_grad_tmp(c, base + j);
        float s = (float)sum;
        for (int64_t j0 = 0; j0 < c->cols; j0 += CPU_CHUNK) {
            int64_t n = c->cols - j0 < CPU_CHUNK ? c->cols - j0 : CPU_CHUNK;
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j0 + j;
                buf[j] = softmax_grad_tmp(c, i) - load_as_float(c->y->data, c->y->dtype, i) * s;
            }
            cpu_store(buf, c->out->data, c->out->dtype, base + j0, n, st);
        }
    }
}

/* rows in parallel, each thread with its own stats, merged at the end */
static void for_rows(const softmax_ctx *c, bool backward, round_stats *st)
{
#pragma omp parallel if (c->rows * c->cols >= (1 << 16))
    {
        round_stats local;
        round_stats *lp = NULL;
        if (st) {
            round_stats_init(&local);
            lp = &local;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < c->rows; r++) {
            if (backward)
                softmax_backward_rows(c, r, r + 1, lp);
            else
                softmax_rows(c, r, r + 1, lp);
        }
        if (st) {
#pragma omp critical(cpu_stats_merge)
            round_stats_merge(st, &local);
        }
    }
}

int cpu_softmax_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    int64_t cols = x->shape[x->ndim - 1];
    softmax_ctx c = {.x = x, .out = y, .rows = x->numel / cols, .cols = cols};
    for_rows(&c, false, st);
    return 0;
}

int cpu_softmax_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                         round_stats *st)
{
    int64_t cols = y->shape[y->ndim - 1];
    softmax_ctx c = {.dy = dy, .y = y, .out = dx, .rows = y->numel / cols, .cols = cols};
    for_rows(&c, true, st);
    return 0;
}

/* ---- the causal mask: [.., T, S], column s > row t filled ---- */
typedef struct fill_ctx {
    const tensor *src;
    float value;
    int64_t rows, cols; /* of the last two dims */
    tensor *out;
} fill_ctx;

static void causal_fill_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const fill_ctx *c = p;
    float buf[CPU_CHUNK];
    cpu_load(c->src, off, n, buf);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = off + i, col = k % c->cols, row = (k / c->cols) % c->rows;
        if (col > row)
            buf[i] = c->value;
    }
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_causal_fill(backend *be, const tensor *src, float value, tensor *dst, round_stats *st)
{
    fill_ctx c = {.src = src,
                  .value = value,
                  .rows = src->ndim >= 2 ? src->shape[src->ndim - 2] : 1,
                  .cols = src->shape[src->ndim - 1],
                  .out = dst};
    cpu_parallel_chunks(dst->numel, causal_fill_chunk, &c, st);
    return 0;
}
