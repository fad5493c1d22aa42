/*
 * loss.c: log_softmax, nll_loss, mse and mean on the CPU (twin of kernels/loss.cu).
 * Rows are over the last dim: x [B, C]. Reductions accumulate in double here (PyTorch's
 * CUDA kernels accumulate in float32 in tree order; the difference is summation-order
 * noise) and round once into the output dtype. mse rounds after every operation in its
 * dtype, as PyTorch's kernels do (loss_math.h).
 */
#include <math.h>

#include "../loss_math.h"
#include "cpu.h"

void cpu_log_softmax_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
    float buf[CPU_CHUNK];
    for (int64_t r = 0; r < rows; r++) {
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
        for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
            int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
            for (int64_t j = 0; j < n; j++)
                buf[j] = load_as_float(x->data, x->dtype, base + j0 + j) - lse;
            cpu_store(buf, y->data, y->dtype, base + j0, n, st);
        }
    }
}

void cpu_log_softmax_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                              round_stats *st)
{
    (void)be;
    int64_t cols = y->shape[y->ndim - 1], rows = y->numel / cols;
    float buf[CPU_CHUNK];
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = r * cols;
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++)
            sum += load_as_float(dy->data, dy->dtype, base + j);
        for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
            int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
            for (int64_t j = 0; j < n; j++) {
                int64_t i = base + j0 + j;
                buf[j] = load_as_float(dy->data, dy->dtype, i) -
                         expf(load_as_float(y->data, y->dtype, i)) * (float)sum;
            }
            cpu_store(buf, dx->data, dx->dtype, base + j0, n, st);
        }
    }
}

void cpu_nll_loss_forward(backend *be, const tensor *logp, const tensor *target, tensor *loss,
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
}

void cpu_nll_loss_backward(backend *be, const tensor *dloss, const tensor *target, tensor *dlogp,
                           round_stats *st)
{
    (void)be;
    int64_t cols = dlogp->shape[dlogp->ndim - 1], rows = dlogp->numel / cols;
    const int64_t *t = target->data;
    /* -(grad_output / total_weight), in the gradient's own dtype (NLLLoss2d/LossNLL.cu) */
    float g = -round_to(load_as_float(dloss->data, dloss->dtype, 0) / (float)rows, dlogp->dtype);
    float buf[CPU_CHUNK];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j0 = 0; j0 < cols; j0 += CPU_CHUNK) {
            int64_t n = cols - j0 < CPU_CHUNK ? cols - j0 : CPU_CHUNK;
            for (int64_t j = 0; j < n; j++)
                buf[j] = j0 + j == t[r] ? g : 0.0f;
            cpu_store(buf, dlogp->data, dlogp->dtype, r * cols + j0, n, st);
        }
}

void cpu_mse_forward(backend *be, const tensor *a, const tensor *b, tensor *y, round_stats *st)
{
    (void)be;
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < a->numel; off += CPU_CHUNK) {
        int64_t n = a->numel - off < CPU_CHUNK ? a->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++)
            buf[i] = mse_elem(load_as_float(a->data, a->dtype, off + i),
                              load_as_float(b->data, b->dtype, off + i), y->dtype);
        cpu_store(buf, y->data, y->dtype, off, n, st);
    }
}

void cpu_mse_backward(backend *be, const tensor *dy, const tensor *a, const tensor *b,
                      double alpha, tensor *da, round_stats *st)
{
    (void)be;
    float alpha_r = round_to((float)alpha, da->dtype);
    bool scalar = dy->numel == 1;
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < a->numel; off += CPU_CHUNK) {
        int64_t n = a->numel - off < CPU_CHUNK ? a->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++)
            buf[i] = mse_grad_elem(load_as_float(a->data, a->dtype, off + i),
                                   load_as_float(b->data, b->dtype, off + i),
                                   load_as_float(dy->data, dy->dtype, scalar ? 0 : off + i),
                                   alpha_r, da->dtype);
        cpu_store(buf, da->data, da->dtype, off, n, st);
    }
}

void cpu_mean_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    double sum = 0.0;
    for (int64_t i = 0; i < x->numel; i++)
        sum += load_as_float(x->data, x->dtype, i);
    /* Reduce.cuh's MeanOps: acc * factor, factor = float(1) / float(numel) */
    float v = (float)sum * (1.0f / (float)x->numel);
    cpu_store(&v, y->data, y->dtype, 0, 1, st);
}

void cpu_mean_backward(backend *be, const tensor *dy, tensor *dx, round_stats *st)
{
    (void)be;
    /* MeanBackward: grad.expand(sizes) / numel; dividing by a scalar multiplies by its
     * float32 reciprocal (BinaryDivTrueKernel.cu) */
    float v = load_as_float(dy->data, dy->dtype, 0) * (1.0f / (float)dx->numel);
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < CPU_CHUNK; i++)
        buf[i] = v;
    for (int64_t off = 0; off < dx->numel; off += CPU_CHUNK) {
        int64_t n = dx->numel - off < CPU_CHUNK ? dx->numel - off : CPU_CHUNK;
        cpu_store(buf, dx->data, dx->dtype, off, n, st);
    }
}
