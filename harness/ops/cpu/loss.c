/*
 * loss.c: log_softmax, nll_loss and mse on the CPU (twin of kernels/loss.cu; the mean of a
 * loss is the mean row's, reduce.c).
 * Rows are over the last dim: x [B, C]. Reductions accumulate in double, in a fixed order
 * whatever the number of threads (PyTorch's CUDA kernels accumulate in float32 in tree
 * order; the difference is summation-order noise), and round once into the output dtype.
 * mse rounds after every operation in its dtype, as PyTorch's kernels do (loss_math.h).
 */
#include <math.h>

#include "ops/loss_math.h"
#include "cpu.h"

/* rows in parallel; each row's stores go through cpu_store with the thread's stats */
typedef void (*row_fn)(const void *ctx, int64_t row, int64_t cols, round_stats *st);

static void for_rows(int64_t rows, int64_t cols, row_fn fn, const void *ctx, round_stats *st)
{
#pragma omp parallel if (rows * cols >= (1 << 16))
    {
        round_stats local;
        round_stats *lp = NULL;
        if (st) {
            round_stats_init(&local);
            lp = &local;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            fn(ctx, r, cols, lp);
        if (st) {
#pragma omp critical(cpu_stats_merge)
            round_stats_merge(st, &local);
        }
    }
}

typedef struct row_ctx {
    const tensor *x, *dy, *y, *target, *dloss;
    tensor *out;
    float g; /* nll backward: the value at the target */
} row_ctx;

static void log_softmax_row(const void *p, int64_t r, int64_t cols, round_stats *st)
{
    const row_ctx *c = p;
    const tensor *x = c->x;
    int64_t base = r * cols;
    float mx = -INFINITY;
    for (int64_t j = 0; j < cols; j++) {
        float v = load_as_float(x->data, x->dtype, base + j);
        mx = v > mx ? v : mx;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < cols; j++)
        sum += expf(load_as_float(x->data, x->dtype, base + j) - mx);
    float lse = mx + (float)log(sum);
    float buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = 0; j < n; j++)
            buf[j] = load_as_float(x->data, x->dtype, base + j0 + j) - lse;
        cpu_store(buf, c->out->data, c->out->dtype, base + j0, n, st);
    }
}

int cpu_log_softmax_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    int64_t cols = x->shape[x->ndim - 1];
    row_ctx c = {.x = x, .out = y};
    for_rows(x->numel / cols, cols, log_softmax_row, &c, st);
    return 0;
}

static void log_softmax_backward_row(const void *p, int64_t r, int64_t cols, round_stats *st)
{
    const row_ctx *c = p;
    int64_t base = r * cols;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; j++)
        sum += load_as_float(c->dy->data, c->dy->dtype, base + j);
    float buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = 0; j < n; j++) {
            int64_t i = base + j0 + j;
            buf[j] = load_as_float(c->dy->data, c->dy->dtype, i) -
                     expf(load_as_float(c->y->data, c->y->dtype, i)) * (float)sum;
        }
        cpu_store(buf, c->out->data, c->out->dtype, base + j0, n, st);
    }
}

int cpu_log_softmax_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                             round_stats *st)
{
    (void)be;
    int64_t cols = y->shape[y->ndim - 1];
    row_ctx c = {.dy = dy, .y = y, .out = dx};
    for_rows(y->numel / cols, cols, log_softmax_backward_row, &c, st);
    return 0;
}

int cpu_nll_loss_forward(backend *be, const tensor *logp, const tensor *target, tensor *loss,
                         round_stats *st)
{
    (void)be;
    int64_t cols = logp->shape[logp->ndim - 1], rows = logp->numel / cols;
    const int64_t *t = target->data;
    double sum = 0.0;
    for (int64_t r = 0; r < rows; r++)
        sum += load_as_float(logp->data, logp->dtype, r * cols + t[r]);
    float v = (float)(-sum / (double)rows);
    cpu_store(&v, loss->data, loss->dtype, 0, 1, st);
    return 0;
}

static void nll_backward_row(const void *p, int64_t r, int64_t cols, round_stats *st)
{
    const row_ctx *c = p;
    int64_t target = ((const int64_t *)c->target->data)[r];
    float buf[CPU_CHUNK];
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
        int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
        for (int64_t j = 0; j < n; j++)
            buf[j] = j0 + j == target ? c->g : 0.0f;
        cpu_store(buf, c->out->data, c->out->dtype, r * cols + j0, n, st);
    }
}

int cpu_nll_loss_backward(backend *be, const tensor *dloss, const tensor *target, tensor *dlogp,
                          round_stats *st)
{
    (void)be;
    int64_t cols = dlogp->shape[dlogp->ndim - 1], rows = dlogp->numel / cols;
    /* -(grad_output / total_weight), in the gradient's own dtype (LossNLL.cu) */
    row_ctx c = {.target = target, .out = dlogp};
    c.g = -round_to(load_as_float(dloss->data, dloss->dtype, 0) / (float)rows, dlogp->dtype);
    for_rows(rows, cols, nll_backward_row, &c, st);
    return 0;
}

typedef struct mse_ctx {
    const tensor *a, *b, *dy;
    tensor *out;
    float alpha; /* rounded to out's dtype */
} mse_ctx;

/* mse_elem (loss_math.h) a chunk at a time: d = round(a - b), then d * d */
static void mse_forward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const mse_ctx *c = p;
    float buf[CPU_CHUNK], ab[CPU_CHUNK], bb[CPU_CHUNK];
    const float *a = cpu_view(c->a, off, n, ab), *b = cpu_view(c->b, off, n, bb);
    for (int64_t i = 0; i < n; i++)
        buf[i] = a[i] - b[i];
    cpu_round(buf, n, c->out->dtype);
    for (int64_t i = 0; i < n; i++)
        buf[i] *= buf[i];
    cpu_store(buf, c->out->data, c->out->dtype, off, n, st);
}

int cpu_mse_forward(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    (void)be;
    mse_ctx c = {.a = a, .b = b, .out = y};
    cpu_parallel_chunks(a->numel, mse_forward_chunk, &c, st);
    return 0;
}

/* mse_grad_elem (loss_math.h) a chunk at a time: d = round(a - b), t = round(alpha * d),
 * then t * dy */
static void mse_backward_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const mse_ctx *c = p;
    dtype dt = c->out->dtype;
    float buf[CPU_CHUNK], ab[CPU_CHUNK], bb[CPU_CHUNK], db[CPU_CHUNK];
    const float *a = cpu_view(c->a, off, n, ab), *b = cpu_view(c->b, off, n, bb);
    for (int64_t i = 0; i < n; i++)
        buf[i] = a[i] - b[i];
    cpu_round(buf, n, dt);
    for (int64_t i = 0; i < n; i++)
        buf[i] *= c->alpha;
    cpu_round(buf, n, dt);
    if (c->dy->numel == 1) {
        float dy = load_as_float(c->dy->data, c->dy->dtype, 0);
        for (int64_t i = 0; i < n; i++)
            buf[i] *= dy;
    } else {
        const float *dy = cpu_view(c->dy, off, n, db);
        for (int64_t i = 0; i < n; i++)
            buf[i] *= dy[i];
    }
    cpu_store(buf, c->out->data, dt, off, n, st);
}

int cpu_mse_backward(backend *be, const tensor *dy, const tensor *a, const tensor *b, double alpha,
                     tensor *da, round_stats *st)
{
    (void)be;
    mse_ctx c = {.a = a, .b = b, .dy = dy, .out = da, .alpha = round_to((float)alpha, da->dtype)};
    cpu_parallel_chunks(a->numel, mse_backward_chunk, &c, st);
    return 0;
}
