/*
 * embedding.cu: the embedding lookup and its weight gradient (twin of
 * harness/ops/cpu/embedding.c). Shapes: idx int64 [N], w [V, C], y and dy [N, C]. The forward
 * copies rows through the counted store (exact: y has w's dtype). The backward sums each
 * row's contributions in float32 and rounds once into dw's dtype, as PyTorch's
 * embedding_dense_backward on CUDA does; the sums here are atomicAdds, so their order (and
 * so the last bit of a float32 sum of three or more contributions) may differ from the
 * CPU's token order, which PyTorch's sorted segments follow.
 */
#include "cuda.cuh"

struct embedding_op {
    const int64_t *idx;
    const void *w;
    dtype dt;
    int64_t ch;
    __device__ float operator()(int64_t i) const
    {
        return load_as_float(w, dt, idx[i / ch] * ch + i % ch);
    }
};

int cuda_embedding_forward(backend *be, const tensor *idx, const tensor *w, tensor *y,
                           round_stats *st)
{
    launch_store(be, embedding_op{(const int64_t *)idx->data, w->data, w->dtype, w->shape[1]}, y,
                 st);
    return 0;
}

__global__ void embedding_grad_kernel(const void *dy, dtype dt, const int64_t *idx, int64_t ch,
                                      int64_t padding_idx, int64_t n, float *acc)
{
    GRID_STRIDE(i, n)
    {
        int64_t t = idx[i / ch];
        if (t != padding_idx)
            atomicAdd(&acc[t * ch + i % ch], load_as_float(dy, dt, i));
    }
}

int cuda_embedding_backward(backend *be, const tensor *dy, const tensor *idx, int64_t padding_idx,
                            tensor *dw, round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    int64_t bytes = dw->numel * (int64_t)sizeof(float);
    float *acc = (float *)cuda_scratch_alloc(be, bytes);
    if (!acc)
        return -1;
    CUDA_CHECK(cudaMemsetAsync(acc, 0, (size_t)bytes, x->stream));
    embedding_grad_kernel<<<cuda_grid(x, dy->numel), CUDA_THREADS, 0, x->stream>>>(
        dy->data, dy->dtype, (const int64_t *)idx->data, dw->shape[1], padding_idx, dy->numel, acc);
    LAUNCH_CHECK();
    launch_store(be, f32_op{acc}, dw, st);
    cuda_scratch_free(be, acc, bytes);
    return 0;
}
