/*
 * matmul.cu: the batched matrix product through cuBLAS and the dim swap (twins of
 * harness/ops/cpu/matmul.c). matmul is cublasGemmStridedBatchedEx with compute type
 * CUBLAS_COMPUTE_32F_PEDANTIC (float32 products and sums, no TF32 nor reduced-precision
 * reductions), C in float32 (the output, or scratch the rounding store rounds once into
 * the output's dtype), operands of two dtypes widened to float32 first; column-major as
 * linear.cu explains (C^T = op(B)^T op(A)^T). --gpu-math native does not apply to it.
 * transpose copies x into y with two dims swapped through the counted store (exact).
 */
#include "cuda.cuh"

int cuda_matmul(backend *be, const tensor *a, const tensor *b, bool ta, bool tb, tensor *y,
                round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    int64_t m = y->shape[y->ndim - 2], n = y->shape[y->ndim - 1];
    int64_t k = ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
    int64_t batch = y->numel / (m * n);
    const void *ap = a->data, *bp = b->data;
    dtype at = a->dtype, bt = b->dtype;
    float *a_own = NULL, *b_own = NULL, *c_own = NULL;
    if (at != bt) { /* cublasGemmStridedBatchedEx takes one operand type */
        ap = cuda_as_f32(be, a, &a_own);
        bp = ap ? cuda_as_f32(be, b, &b_own) : NULL;
        at = bt = DTYPE_FLOAT32;
    }
    float *c = NULL;
    if (ap && bp)
        c = y->dtype == DTYPE_FLOAT32
                ? (float *)y->data
                : (c_own = (float *)cuda_scratch_alloc(be, y->numel * (int64_t)sizeof(float)));
    if (c) {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            x->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
            (int)m, (int)k, &one, bp, cuda_data_type(bt), (int)(tb ? k : n), (long long)(k * n), ap,
            cuda_data_type(at), (int)(ta ? m : k), (long long)(m * k), &zero, c, CUDA_R_32F, (int)n,
            (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
        if (c_own || st) /* a float32 output is already stored; it is only counted */
            launch_store(be, f32_op{c}, y, st);
    }
    cuda_scratch_free(be, c_own, y->numel * (int64_t)sizeof(float));
    cuda_scratch_free(be, b_own, b->numel * (int64_t)sizeof(float));
    cuda_scratch_free(be, a_own, a->numel * (int64_t)sizeof(float));
    return c ? 0 : -1;
}

struct transpose_op {
    const void *x;
    dtype dt;
    int ndim;
    int64_t ystride[TENSOR_MAX_DIMS], xstride[TENSOR_MAX_DIMS]; /* x's, by y's dim */
    __device__ float operator()(int64_t i) const
    {
        int64_t src = 0;
        for (int d = 0; d < ndim; d++) {
            src += i / ystride[d] * xstride[d];
            i %= ystride[d];
        }
        return load_as_float(x, dt, src);
    }
};

int cuda_transpose(backend *be, const tensor *x, int d1, int d2, tensor *y, round_stats *st)
{
    transpose_op op = {x->data, x->dtype, y->ndim, {0}, {0}};
    int64_t xs[TENSOR_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->shape[d];
    }
    s = 1;
    for (int d = y->ndim - 1; d >= 0; d--) {
        op.ystride[d] = s;
        s *= y->shape[d];
        op.xstride[d] = xs[d == d1 ? d2 : d == d2 ? d1 : d];
    }
    launch_store(be, op, y, st);
    return 0;
}
