/*
 * fp8.cu: the float8 ops of te.Linear under fp8_autocast on the GPU (twin of
 * harness/ops/cpu/fp8.c): amax, the quantized copy with its transposed copy, and the scaled
 * float8 GEMM through cuBLASLt.
 *
 * amax: fmaxf(fabsf(v), m) from 0 per thread and per block (NaNs ignored, as TE's
 * amax_kernel in transformer_engine/common/recipe/current_scaling.cu), the blocks merged by
 * atomicMax on the bit patterns (non-negative floats order as unsigned ints).
 * quantize: each value times the scale, clamped when saturating (counted), then the rounding
 * store (cuda.cuh's tally_store: the CPU's counts, half.h's codecs); the transposed copy
 * takes the stored byte.
 * GEMM: cuBLASLt with A and B in CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2, CUBLAS_COMPUTE_32F, the
 * scale inverses through CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER, D in float32
 * scratch, which the rounding store then rounds once into y's dtype with the bias added and
 * the counts taken (so the values before rounding are seen, as for every GEMM here). The
 * FP8 kernels take the TN layout only: row-major y[M,N] = a[M,K] b[N,K]^T is column-major
 * y^T = b a^T, cuBLASLt's A = b transposed (ld K), B = a not (ld K), D [N, M] (ld N). They
 * need compute capability 8.9 (Ada) or newer and dims that are multiples of 16.
 * fast_accum: CUBLASLT_MATMUL_DESC_FAST_ACCUM (TE sets it for the forward GEMM only; Hopper
 * then keeps the partial sums of the tensor cores in fewer bits: selftest measures it).
 * MXFP8 (fp8_block_quantize, fp8_block_gemm): the CPU only; this backend leaves both out
 * (cuda.cuh's cuda_leaves_out: supports() says no, their slots stay empty), since cuBLASLt's
 * MXFP8 GEMMs (CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) need compute capability 10.0.
 */
#include "cuda.cuh"
#include "core/format.h"

#define FP8_MIN_CC 89
#define FP8_GEMM_WORKSPACE (32 << 20) /* bytes of workspace offered to cuBLASLt's heuristic */

bool cuda_supports(const backend *be, backend_op op, dtype dt)
{
    const cuda_ctx *x = (const cuda_ctx *)be->ctx;
    if (cuda_leaves_out(op))
        return false;
    return !(op == BACKEND_OP_fp8_gemm && dtype_is_float8(dt) && x->cc < FP8_MIN_CC);
}

__global__ void amax_kernel(const void *src, dtype dt, int64_t n, unsigned long long *out)
{
    float m = 0.0f;
    GRID_STRIDE(i, n)
    m = fmaxf(fabsf(load_as_float(src, dt, i)), m);
    m = block_reduce(m, [](float a, float b) { return fmaxf(a, b); });
    if (threadIdx.x == 0)
        atomicMax(out, (unsigned long long)float_bits(m));
}

int cuda_amax(backend *be, const tensor *x, float *amax)
{
    cuda_ctx *c = cuda_ctx_of(be);
    unsigned long long *out = cuda_counter_begin(be);
    amax_kernel<<<cuda_grid(c, x->numel), CUDA_THREADS, 0, c->stream>>>(x->data, x->dtype,
                                                                       x->numel, out);
    LAUNCH_CHECK();
    *amax = bits_float((uint32_t)cuda_counter_end(be));
    return 0;
}

__global__ void quantize_kernel(const void *src, dtype st, float scale, bool saturate,
                                float largest, uint8_t *q, dtype qdt, uint8_t *qt, int64_t rows,
                                int64_t cols, int64_t n, unsigned long long *saturated,
                                dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, qdt);
    unsigned long long clamped = 0;
    GRID_STRIDE(i, n)
    {
        float v = load_as_float(src, st, i) * scale;
        if (saturate && (v > largest || v < -largest)) { /* NaN compares false: stays NaN */
            v = v > 0 ? largest : -largest;
            clamped++;
        }
        tally_store(&t, q, qdt, i, v);
        if (qt)
            qt[(i % cols) * rows + i / cols] = q[i];
    }
    tally_flush(&t);
    if (clamped)
        atomicAdd(saturated, clamped);
}

int cuda_fp8_quantize(backend *be, const tensor *x, float scale, bool saturate, tensor *q,
                      tensor *qt, int64_t *saturated, round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    const format_info *f = format_of(q->dtype);
    if (!f || f->bits != 8)
        not_a_format("cuda_fp8_quantize", q->dtype);
    int64_t cols = x->shape[x->ndim - 1];
    unsigned long long *count = cuda_counter_begin(be);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    quantize_kernel<<<cuda_grid(c, x->numel), CUDA_THREADS, 0, c->stream>>>(
        x->data, x->dtype, scale, saturate, f->largest, (uint8_t *)q->data, q->dtype,
        qt ? (uint8_t *)qt->data : NULL, x->numel / cols, cols, x->numel, count, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, q->numel);
    *saturated = (int64_t)cuda_counter_end(be);
    return 0;
}

/* d[i] (+ bias[i % n]): the GEMM's float32 result, scaled by cuBLASLt, with the bias added
 * before the one rounding */
struct bias_add_op {
    const float *d;
    const void *bias;
    dtype dt;
    int64_t n;
    __device__ float operator()(int64_t i) const
    {
        return bias ? d[i] + load_as_float(bias, dt, i % n) : d[i];
    }
};

int cuda_fp8_gemm(backend *be, const tensor *a, const tensor *b, float scale_inv_a,
                  float scale_inv_b, const tensor *bias, bool fast_accum, tensor *y,
                  round_stats *st)
{
    cuda_ctx *c = cuda_ctx_of(be);
    if (a->dtype == DTYPE_FLOAT8_E5M2 && b->dtype == DTYPE_FLOAT8_E5M2) {
        snprintf(be->err, sizeof be->err,
                 "fp8_gemm: float8_e5m2 x float8_e5m2 is not a float8 GEMM cuBLASLt runs (one "
                 "operand must be float8_e4m3fn)");
        return -1;
    }
    if (c->cc < FP8_MIN_CC) {
        snprintf(be->err, sizeof be->err,
                 "fp8_gemm: cuBLASLt's float8 GEMMs need compute capability 8.9 or newer (Ada, "
                 "Hopper); this GPU (%s) is sm_%d\n---> HINT: run the case with --device cpu",
                 c->device_name, c->cc);
        return -1;
    }
    int64_t k = a->shape[a->ndim - 1], m = a->numel / k, n = b->numel / k;
    if (m % 16 || n % 16 || k % 16) {
        snprintf(be->err, sizeof be->err,
                 "fp8_gemm: cuBLASLt's float8 GEMMs take dims that are multiples of 16; this "
                 "one is [%lld, %lld] x [%lld, %lld]^T",
                 (long long)m, (long long)k, (long long)n, (long long)k);
        return -1;
    }
    int64_t d_bytes = m * n * (int64_t)sizeof(float);
    float *d = (float *)cuda_scratch_alloc(be, d_bytes);
    float *scales = d ? (float *)cuda_scratch_alloc(be, 2 * sizeof(float)) : NULL;
    void *work = scales ? cuda_scratch_alloc(be, FP8_GEMM_WORKSPACE) : NULL;
    if (!work) {
        cuda_scratch_free(be, scales, 2 * sizeof(float));
        cuda_scratch_free(be, d, d_bytes);
        return -1;
    }
    /* cuBLASLt's A is our b, its B our a */
    const float host_scales[2] = {scale_inv_b, scale_inv_a};
    CUDA_CHECK(cudaMemcpyAsync(scales, host_scales, sizeof host_scales, cudaMemcpyHostToDevice,
                               c->stream));
    cublasLtMatmulDesc_t op;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    const int8_t fast = fast_accum ? 1 : 0;
    const float *scale_a = &scales[0], *scale_b = &scales[1];
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                                sizeof fast));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                &scale_a, sizeof scale_a));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                &scale_b, sizeof scale_b));
    cublasLtMatrixLayout_t la, lb, lc;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, cuda_data_type(b->dtype), (uint64_t)k,
                                            (uint64_t)n, (int64_t)k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, cuda_data_type(a->dtype), (uint64_t)k,
                                            (uint64_t)m, (int64_t)k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)n, (uint64_t)m,
                                            (int64_t)n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t work_bytes = FP8_GEMM_WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &work_bytes, sizeof work_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(c->cublaslt, op, la, lb, lc, lc, pref, 1, &heur,
                                                &found));
    int rc = 0;
    if (found == 0) {
        snprintf(be->err, sizeof be->err,
                 "fp8_gemm: cuBLASLt has no algorithm for %s x %s -> float32, [%lld, %lld] x "
                 "[%lld, %lld]^T on this GPU",
                 dtype_name(a->dtype), dtype_name(b->dtype), (long long)m, (long long)k,
                 (long long)n, (long long)k);
        rc = -1;
    } else {
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_CHECK(cublasLtMatmul(c->cublaslt, op, &one, b->data, la, a->data, lb, &zero, d, lc,
                                    d, lc, &heur.algo, work, work_bytes, c->stream));
        launch_store(be, bias_add_op{d, bias ? bias->data : NULL, bias ? bias->dtype : y->dtype, n},
                     y, st);
    }
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
    cuda_scratch_free(be, work, FP8_GEMM_WORKSPACE);
    cuda_scratch_free(be, scales, 2 * sizeof(float));
    cuda_scratch_free(be, d, d_bytes);
    return rc;
}
