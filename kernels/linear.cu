/*
 * linear.cu: the linear layer's products through cuBLAS (twin of harness/ops/cpu/linear.c;
 * its bias's gradient is the sum row's, reduce.cu). Shapes are row-major: x [M,I], w [O,I], b [O],
 * y [M,O], M = numel / I.
 *
 * GEMMs: cublasGemmEx with both operands in their own dtype (operands of different dtypes
 * are first widened to float32 scratch, exactly), compute type CUBLAS_COMPUTE_32F_PEDANTIC
 * (float32 products and float32 accumulation, no TF32 nor reduced-precision tensor-core
 * reductions, whatever the operand dtype), C in float32: the output itself when it is
 * float32, else float32 scratch that the rounding store then rounds, once, into the
 * output's dtype with its counts. With a bias, C starts as the bias broadcast over the rows
 * and beta = 1, as addmm (and the CPU) do.
 *
 * With --gpu-math native (be->native_math) and one half dtype for both operands and the
 * output, the GEMM is PyTorch's instead: half in, half out straight from cuBLAS (float32
 * accumulation, tensor cores allowed), bias pre-stored in the output with beta = 1. The
 * float32 values before cuBLAS rounded them are never seen, so the output is counted as it
 * stands (round_stats.unseen: no underflow or overflow count, a histogram of the stored
 * values).
 *
 * cuBLAS is column-major: a row-major [r, c] matrix is its transpose, column-major with
 * leading dimension c. So row-major C[m,n] = op(A) op(B) is computed as column-major
 * C^T[n,m] = op(B)^T op(A)^T, which is cuBLAS's gemm with the operands swapped, the same
 * transpose flags and each operand's row-major row length as its leading dimension.
 */
#include "cuda.cuh"

/* c[r, j] = bias[j] for every row r of c [total / n, n] */
__global__ void bias_rows_kernel(const void *bias, dtype dt, float *c, int64_t n, int64_t total)
{
    GRID_STRIDE(i, total)
    c[i] = load_as_float(bias, dt, i % n);
}

/* bias[i % n]: the bias broadcast over the rows of a [m, n] output */
struct bias_row_op {
    const void *bias;
    dtype dt;
    int64_t n;
    __device__ float operator()(int64_t i) const { return load_as_float(bias, dt, i % n); }
};

/* --gpu-math native: out = op(a) op(b) (+ bias) in out's half dtype, as PyTorch gets it */
static int gemm_native(backend *be, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       const tensor *a, const tensor *b, const tensor *bias, tensor *out,
                       round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    if (bias)
        launch_store(be, bias_row_op{bias->data, bias->dtype, n}, out, NULL);
    const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
    cudaDataType_t t = cuda_data_type(out->dtype);
    CUBLAS_CHECK(cublasGemmEx(x->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, b->data,
                              t, (int)(tb ? k : n), a->data, t, (int)(ta ? m : k), &beta, out->data,
                              t, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (st) {
        cuda_observe(be, out, st);
        st->unseen = true;
    }
    return 0;
}

/* out[m,n] = op(a) op(b) (+ bias) in float32, rounded once into out's dtype */
static int gemm_round(backend *be, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const tensor *a, const tensor *b, const tensor *bias, tensor *out,
                      round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    if (be->native_math && a->dtype == out->dtype && b->dtype == out->dtype &&
        (!bias || bias->dtype == out->dtype) && dtype_is_half(out->dtype))
        return gemm_native(be, ta, tb, m, n, k, a, b, bias, out, st);
    const void *ap = a->data, *bp = b->data;
    dtype at = a->dtype, bt = b->dtype;
    float *a_own = NULL, *b_own = NULL, *c_own = NULL;
    if (at != bt) { /* cublasGemmEx takes one operand type */
        ap = cuda_as_f32(be, a, &a_own);
        bp = ap ? cuda_as_f32(be, b, &b_own) : NULL;
        at = bt = DTYPE_FLOAT32;
    }
    float *c = NULL;
    if (ap && bp)
        c = out->dtype == DTYPE_FLOAT32
                ? (float *)out->data
                : (c_own = (float *)cuda_scratch_alloc(be, m * n * (int64_t)sizeof(float)));
    if (c) {
        if (bias) {
            bias_rows_kernel<<<cuda_grid(x, m * n), CUDA_THREADS, 0, x->stream>>>(
                bias->data, bias->dtype, c, n, m * n);
            LAUNCH_CHECK();
        }
        const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
        CUBLAS_CHECK(cublasGemmEx(x->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, bp,
                                  cuda_data_type(bt), (int)(tb ? k : n), ap, cuda_data_type(at),
                                  (int)(ta ? m : k), &beta, c, CUDA_R_32F, (int)n,
                                  CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT));
        if (c_own || st) /* a float32 output is already stored; it is only counted */
            launch_store(be, f32_op{c}, out, st);
    }
    cuda_scratch_free(be, c_own, m * n * (int64_t)sizeof(float));
    cuda_scratch_free(be, b_own, b->numel * (int64_t)sizeof(float));
    cuda_scratch_free(be, a_own, a->numel * (int64_t)sizeof(float));
    return c ? 0 : -1;
}

int cuda_linear_forward(backend *be, const tensor *x, const tensor *w, const tensor *b, tensor *y,
                        round_stats *st)
{
    return gemm_round(be, false, true, x->numel / w->shape[1], w->shape[0], w->shape[1], x, w, b, y,
                      st);
}

int cuda_linear_backward_input(backend *be, const tensor *dy, const tensor *w, tensor *dx,
                               round_stats *st)
{
    return gemm_round(be, false, false, dy->numel / w->shape[0], w->shape[1], w->shape[0], dy, w,
                      NULL, dx, st);
}

int cuda_linear_backward_weight(backend *be, const tensor *dy, const tensor *x, tensor *dw,
                                round_stats *st)
{
    return gemm_round(be, true, false, dw->shape[0], dw->shape[1], dy->numel / dw->shape[0], dy, x,
                      NULL, dw, st);
}
