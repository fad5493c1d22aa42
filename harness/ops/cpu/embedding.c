/*
 * embedding.c: the embedding lookup and its weight gradient on the CPU (twin of
 * kernels/embedding.cu). Shapes: idx int64 [N] (the tokens, batch and positions
 * flattened), w [V, C], y and dy [N, C]. The forward copies rows (exact: y has w's dtype).
 * The backward is embedding_dense_backward as CUDA runs it (embedding_backward_cuda_kernel
 * in aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu): each row's contributions summed
 * in float32 (acc_type), in token order, and rounded once into the weight's dtype.
 */
#include <string.h>

#include "cpu.h"

int cpu_embedding_forward(backend *be, const tensor *idx, const tensor *w, tensor *y,
                          round_stats *st)
{
    (void)be;
    int64_t n = idx->numel, ch = w->shape[1];
    size_t row = (size_t)(ch * dtype_size(w->dtype));
    const int64_t *t = idx->data;
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)y->data + (size_t)i * row, (const char *)w->data + (size_t)t[i] * row, row);
    if (st) /* the rows as they are: a copy rounds nothing, but is counted like any store */
        return cpu_observe(be, y, st);
    return 0;
}

int cpu_embedding_backward(backend *be, const tensor *dy, const tensor *idx, int64_t padding_idx,
                           tensor *dw, round_stats *st)
{
    int64_t n = idx->numel, ch = dw->shape[1];
    float *acc = cpu_scratch(be, dw->numel), buf[CPU_CHUNK];
    if (!acc)
        return -1;
    memset(acc, 0, sizeof(float) * (size_t)dw->numel);
    const int64_t *t = idx->data;
    for (int64_t i = 0; i < n; i++) {
        if (t[i] == padding_idx)
            continue;
        for (int64_t c0 = 0; c0 < ch; c0 += CPU_CHUNK) {
            int64_t m = ch - c0 < CPU_CHUNK ? ch - c0 : CPU_CHUNK;
            const float *v = cpu_view(dy, i * ch + c0, m, buf);
            for (int64_t c = 0; c < m; c++)
                acc[t[i] * ch + c0 + c] += v[c];
        }
    }
    cpu_store_parallel(acc, dw->data, dw->dtype, 0, dw->numel, st);
    cpu_scratch_free(be, acc, dw->numel);
    return 0;
}
