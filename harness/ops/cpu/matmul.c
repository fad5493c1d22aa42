/*
 * matmul.c: the batched matrix product and the dim swap on the CPU (twins of
 * kernels/matmul.cu). matmul widens half operands to exact float32 (cpu_as_f32), runs one
 * cblas_sgemm per matrix of the batch (float32 products and sums) and rounds each matrix's
 * output once (cpu_store_parallel) right after its GEMM, as cuBLAS does with float32 compute.
 * bfloat16 operands run on bfloat16 instructions where that is exact (gemm_bf16.c).
 * transpose copies x into y with two dims swapped: every value is kept, and counted like any store.
 */
#include <cblas.h>

#include "cpu.h"

int cpu_matmul(backend *be, const tensor *a, const tensor *b, bool ta, bool tb, tensor *y,
               round_stats *st)
{
    int64_t m = y->shape[y->ndim - 2], n = y->shape[y->ndim - 1];
    int64_t k = ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
    int64_t batch = y->numel / (m * n);
    float *a_own, *b_own, *c_own = NULL;
    if (cpu_gemm_bf16_runs(a, b, k)) { /* one oneDNN matmul over the batch, then one rounding */
        float *c = y->dtype == DTYPE_FLOAT32 ? y->data : (c_own = cpu_scratch(be, y->numel));
        int rc = c ? cpu_gemm_bf16(be, ta, tb, batch, m, n, k, a, b, c) : -1;
        if (rc == 0) {
            cpu_store_parallel(c, y->data, y->dtype, 0, y->numel, st);
            cpu_gemm_path_count(CPU_GEMM_BF16);
        }
        cpu_scratch_free(be, c_own, y->numel);
        return rc;
    }
    const float *af = cpu_as_f32(be, a, &a_own);
    const float *bf = af ? cpu_as_f32(be, b, &b_own) : NULL;
    float *c = y->dtype == DTYPE_FLOAT32 ? y->data : (c_own = cpu_scratch(be, y->numel));
    if (!af || !bf || !c) {
        cpu_scratch_free(be, a_own, a->numel);
        if (af)
            cpu_scratch_free(be, b_own, b->numel);
        return -1;
    }
    /* each matrix rounded and counted right after its GEMM, while its sums are in cache */
    for (int64_t i = 0; i < batch; i++) {
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (blasint)m, (blasint)n, (blasint)k, 1.0f, af + i * m * k, (blasint)(ta ? m : k),
                    bf + i * k * n, (blasint)(tb ? k : n), 0.0f, c + i * m * n, (blasint)n);
        cpu_store_parallel(c + i * m * n, y->data, y->dtype, i * m * n, m * n, st);
    }
    cpu_gemm_path_count(CPU_GEMM_SGEMM);
    cpu_scratch_free(be, c_own, y->numel);
    cpu_scratch_free(be, a_own, a->numel);
    cpu_scratch_free(be, b_own, b->numel);
    return 0;
}

typedef struct transpose_ctx {
    const tensor *x;
    tensor *y;
    int64_t ystride[TENSOR_MAX_DIMS], xstride[TENSOR_MAX_DIMS]; /* x's, by y's dim */
} transpose_ctx;

static void transpose_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    const transpose_ctx *c = p;
    float buf[CPU_CHUNK];
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = off + i, src = 0;
        for (int d = 0; d < c->y->ndim; d++) {
            src += rest / c->ystride[d] * c->xstride[d];
            rest %= c->ystride[d];
        }
        buf[i] = load_as_float(c->x->data, c->x->dtype, src);
    }
    cpu_store(buf, c->y->data, c->y->dtype, off, n, st);
}

int cpu_transpose(backend *be, const tensor *x, int d1, int d2, tensor *y, round_stats *st)
{
    (void)be;
    transpose_ctx c = {.x = x, .y = y};
    int64_t xs[TENSOR_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->shape[d];
    }
    s = 1;
    for (int d = y->ndim - 1; d >= 0; d--) {
        c.ystride[d] = s;
        s *= y->shape[d];
        c.xstride[d] = xs[d == d1 ? d2 : d == d2 ? d1 : d];
    }
    cpu_parallel_chunks(y->numel, transpose_chunk, &c, st);
    return 0;
}
