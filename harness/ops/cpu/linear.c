/*
 * linear.c: the linear layer's products on the CPU through OpenBLAS (twin of
 * kernels/linear.cu, which uses cuBLAS). Operands of any float dtype are widened to exact
 * float32 (cpu_as_f32), multiplied and accumulated in float32 by cblas_sgemm, and the
 * output is rounded once into its dtype (cpu_store), as cuBLAS does for half operands with
 * float32 compute. A half weight's widened copy is made once per step: the forward holds it
 * for the input gradient's GEMM (cpu_hold, cpu_take: cpu.h).
 *
 * The rounding reads the whole float32 output after one cblas_sgemm, not block by block
 * after GEMMs of row or column blocks (which would keep each block in cache): OpenBLAS
 * 0.3.21 does not give an element the same bits in a block as in the whole product. Measured
 * with its Haswell kernels, one thread: y[256, 1024] = x[256, 1024] w^T in blocks of 64 and
 * 128 rows changed 15432 and 10803 of 262144 outputs, 256 x 1000 x 4096 in blocks of 96 rows
 * 26816 of 256000; a [64, 27] x [27, 40200] product in blocks of 1536 to 6144 columns about
 * 2.7% (the last columns of each block, which its edge kernels sum in another order). Shapes: x
 * [M,I], w [O,I], b [O], y [M,O], M the rows of the leading dims flattened (numel / I).
 */
#include <cblas.h>
#include <string.h>

#include "cpu.h"

/* what a GEMM does with b's widened copy: makes and frees it, makes and holds it for a
 * later GEMM (the forward's weight, for the input gradient), or takes the held one */
typedef enum gemm_b_copy { GEMM_B_OWN, GEMM_B_HOLD, GEMM_B_TAKE } gemm_b_copy;

/* gemm_round's bfloat16 fast path (gemm_bf16.c): the same float32 products, the bias added
 * after the sums (the sgemm path starts them from it: another order of the same float32
 * additions), one counted rounding into out. A copy of b held for this GEMM is given up. */
static int gemm_bf16_round(backend *be, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                           const tensor *a, const tensor *b, gemm_b_copy b_copy,
                           const tensor *bias, tensor *out, round_stats *st)
{
    if (b_copy == GEMM_B_TAKE)
        cpu_scratch_free(be, cpu_take(be, b), b->numel);
    float *c_own = NULL;
    float *c = out->dtype == DTYPE_FLOAT32 ? out->data : (c_own = cpu_scratch(be, m * n));
    if (!c)
        return -1;
    int rc = cpu_gemm_bf16(be, ta, tb, 1, m, n, k, a, b, c);
    if (rc == 0) {
        if (bias) {
#pragma omp parallel for schedule(static) if (m * n >= (1 << 16))
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++)
                    c[i * n + j] += load_as_float(bias->data, bias->dtype, j);
        }
        cpu_store_parallel(c, out->data, out->dtype, 0, m * n, st);
        cpu_gemm_path_count(CPU_GEMM_BF16);
    }
    cpu_scratch_free(be, c_own, m * n);
    return rc;
}

/* c[m,n] (+)= op(a) op(b) in float32, then rounded into out; a and b of any float dtype */
static int gemm_round(backend *be, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      const tensor *a, const tensor *b, gemm_b_copy b_copy, const tensor *bias,
                      tensor *out, round_stats *st)
{
    if (cpu_gemm_bf16_runs(a, b, k))
        return gemm_bf16_round(be, ta, tb, m, n, k, a, b, b_copy, bias, out, st);
    float *a_own, *b_own = NULL;
    const float *af = cpu_as_f32(be, a, &a_own), *bf = NULL;
    if (af && b_copy == GEMM_B_TAKE)
        bf = b_own = cpu_take(be, b);
    if (af && !bf)
        bf = cpu_as_f32(be, b, &b_own);
    float *c_own = NULL;
    float *c = out->dtype == DTYPE_FLOAT32 ? out->data : (c_own = cpu_scratch(be, m * n));
    if (!af || !bf || !c) {
        cpu_scratch_free(be, a_own, a->numel);
        if (af)
            cpu_scratch_free(be, b_own, b->numel);
        return -1;
    }
    float beta = 0.0f;
    if (bias) { /* every row starts from the bias, as addmm's beta = 1 */
        for (int64_t j = 0; j < n; j++)
            c[j] = load_as_float(bias->data, bias->dtype, j);
        for (int64_t i = 1; i < m; i++)
            memcpy(c + i * n, c, sizeof(float) * (size_t)n);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, 1.0f, af, (blasint)(ta ? m : k), bf,
                (blasint)(tb ? k : n), beta, c, (blasint)n);
    cpu_store_parallel(c, out->data, out->dtype, 0, m * n, st);
    cpu_gemm_path_count(CPU_GEMM_SGEMM);
    cpu_scratch_free(be, c_own, m * n);
    cpu_scratch_free(be, a_own, a->numel);
    if (b_own && b_copy == GEMM_B_HOLD)
        cpu_hold(be, b, b_own);
    else
        cpu_scratch_free(be, b_own, b->numel);
    return 0;
}

/* The forward holds a half weight's widened copy when the input gradient's GEMM will read
 * it (x requires grad; the tape runs that GEMM only then), and that GEMM takes it. */
int cpu_linear_forward(backend *be, const tensor *x, const tensor *w, const tensor *b, tensor *y,
                       round_stats *st)
{
    return gemm_round(be, false, true, x->numel / w->shape[1], w->shape[0], w->shape[1], x, w,
                      x->requires_grad ? GEMM_B_HOLD : GEMM_B_OWN, b, y, st);
}

int cpu_linear_backward_input(backend *be, const tensor *dy, const tensor *w, tensor *dx,
                              round_stats *st)
{
    return gemm_round(be, false, false, dy->numel / w->shape[0], w->shape[1], w->shape[0], dy, w,
                      GEMM_B_TAKE, NULL, dx, st);
}

int cpu_linear_backward_weight(backend *be, const tensor *dy, const tensor *x, tensor *dw,
                               round_stats *st)
{
    return gemm_round(be, true, false, dw->shape[0], dw->shape[1], dy->numel / dw->shape[0], dy, x,
                      GEMM_B_OWN, NULL, dw, st);
}
