/*
 * gemm_bf16.c: bfloat16 x bfloat16 -> float32 GEMMs on the processor's bfloat16 dot-product
 * instructions (vdpbf16ps, avx512_bf16) through oneDNN's matmul, where, and only where, the
 * result cannot differ from the exact path's (both operands widened to float32, exact, and
 * multiplied by OpenBLAS's sgemm) other than by the order of the float32 sums. Built with
 * oneDNN when the Makefile finds it (AMPSCOPE_DNNL); without it, or on a processor without
 * avx512_bf16, or at AMPSCOPE_CPU_ISA below avx512, cpu_gemm_bf16 declines every GEMM.
 *
 * Why a guard: vdpbf16ps treats subnormal inputs and results as zero (DAZ and FTZ, whatever
 * MXCSR says), where the exact path keeps them. The guard reads both operands' exponent
 * fields in one pass and runs the fast path only when
 *   (1) no operand is subnormal, infinite or NaN;
 *   (2) emin_a + emin_b >= 142, emin the smallest exponent field (biased, 1..254) among an
 *       operand's non-zero values;
 *   (3) emax_a + emax_b - 252 + ceil(log2 k) <= 126, emax the largest exponent field, and
 *       k <= 2^22.
 * The argument. A normal bfloat16 of exponent field e is M 2^(e-134) with M an integer
 * (128..255), so every product a_i b_i of two non-zero operands is an integer multiple of
 * Q = 2^(emin_a + emin_b - 268), and exact in float32 (16 significant bits). The sum of two
 * multiples of Q is one; float32 rounding keeps it one: where the sum's ulp is at least Q the
 * rounded value is a multiple of that ulp, and where the ulp is below Q the sum (a multiple of
 * Q, hence of the ulp, and within the exponent range) is representable and not changed. So
 * in any order and association, with or without fused multiply-adds, every partial sum is
 * 0 or at least Q in magnitude, and (2) makes Q >= 2^-126, float32's smallest normal: no
 * partial sum, product or output is subnormal, and flushing to zero never happens. (1)
 * leaves no input to flush. (3) bounds every partial sum: |a_i b_i| < 2^(emax_a + emax_b
 * - 252), so k of them sum below 2^126, and the relative rounding error of at most
 * (1 + 2^-24)^k < 2 (k at most 2^22) keeps
 * every rounded partial sum below 2^127: no order overflows where another does not. The fast
 * path thus computes float32 arithmetic on the exact products, as the exact path does, in
 * another order: outputs may differ in their last bits (docs/PERFORMANCE.md gives the
 * measured differences), never by a flushed value. Every counted rounding of such an output
 * sees a normal or zero float32 value in either path.
 *
 * The fast path makes no widened copies, but counts the workspace the exact path would
 * (cpu_scratch's float32 copies of both operands, while the GEMM runs), so that a run's memory
 * figures do not depend on the path. Shapes: c [batch, m, n] = op(a) [batch, m, k] op(b)
 * [batch, k, n], each matrix contiguous (ta: a's matrices are [k, m]; tb: b's are [n, k]).
 */
#include <stdatomic.h>

#include "cpu.h"

static _Atomic int64_t gemm_path_counts[CPU_GEMM_PATH_COUNT];

void cpu_gemm_path_count(cpu_gemm_path path) { atomic_fetch_add(&gemm_path_counts[path], 1); }

int64_t cpu_gemm_path_total(cpu_gemm_path path) { return atomic_load(&gemm_path_counts[path]); }

backend_gemm_paths backend_cpu_gemm_paths(void)
{
    return (backend_gemm_paths){cpu_gemm_path_total(CPU_GEMM_SGEMM),
                                cpu_gemm_path_total(CPU_GEMM_BF16)};
}

/* the smallest exponent field among x's non-zero values (255 when all are zero; 0 when one
 * is subnormal) and the largest (255 when one is infinite or NaN) */
static void bf16_exponents(const uint16_t *x, int64_t n, int *emin, int *emax)
{
    int lo = 255, hi = 0;
#pragma omp parallel for reduction(min : lo) reduction(max : hi) if (n >= (1 << 16))
    for (int64_t i = 0; i < n; i++) {
        int mag = x[i] & 0x7fff, e = mag >> 7;
        lo = mag && e < lo ? e : lo;
        hi = e > hi ? e : hi;
    }
    *emin = lo;
    *emax = hi;
}

static int ceil_log2(int64_t k)
{
    int l = 0;
    while (((int64_t)1 << l) < k)
        l++;
    return l;
}

bool cpu_gemm_bf16_exact(const uint16_t *a, int64_t na, const uint16_t *b, int64_t nb, int64_t k)
{
    int amin, amax, bmin, bmax;
    bf16_exponents(a, na, &amin, &amax);
    bf16_exponents(b, nb, &bmin, &bmax);
    if (amin == 0 || bmin == 0 || amax == 255 || bmax == 255) /* (1) */
        return false;
    if (amin == 255 || bmin == 255) /* an operand of zeros: every product is 0 */
        return true;
    return amin + bmin >= 142 && amax + bmax - 252 + ceil_log2(k) <= 126 && /* (2), (3) */
           k <= ((int64_t)1 << 22);
}

#ifdef AMPSCOPE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;
static bool dnnl_ready;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;

/* oneDNN's engine and stream, once, where its kernels may use avx512_bf16 */
static void dnnl_open(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if ((isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16)
        return;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        return;
    if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_engine_destroy(engine);
        return;
    }
    dnnl_ready = true;
}

bool cpu_gemm_bf16_available(void)
{
    if (cpu_isa_best() < CPU_ISA_AVX512)
        return false;
    pthread_once(&dnnl_once, dnnl_open);
    return dnnl_ready;
}

const char *cpu_gemm_bf16_library(void) { return "oneDNN"; }

/* a [batch, rows, cols] matrix stack, each matrix contiguous, stored transposed when t */
static dnnl_status_t desc_of(dnnl_memory_desc_t *md, int64_t batch, int64_t rows, int64_t cols,
                             bool t, dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {batch, rows, cols};
    dnnl_dims_t strides = {rows * cols, t ? 1 : cols, t ? rows : 1};
    return dnnl_memory_desc_init_by_strides(md, 3, dims, dt, strides);
}

#define DNNL_TRY(call)                                                                             \
    do {                                                                                           \
        dnnl_status_t s_ = (call);                                                                 \
        if (s_ != dnnl_success) {                                                                  \
            snprintf(be->err, sizeof be->err, "oneDNN: %s failed (status %d) at %s:%d", #call,  \
                     (int)s_, __FILE__, __LINE__);                                                 \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

int cpu_gemm_bf16(backend *be, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                  const tensor *a, const tensor *b, float *c)
{
    int rc = -1;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_memory_desc_t da, db, dc;
    dnnl_matmul_desc_t mm;
    /* the exact path's widened copies, counted while the GEMM runs */
    int64_t copies = (a->numel + b->numel) * (int64_t)sizeof(float);
    mem_account_add(be->account, MEM_WORKSPACE, copies);
    DNNL_TRY(desc_of(&da, batch, m, k, ta, dnnl_bf16));
    DNNL_TRY(desc_of(&db, batch, k, n, tb, dnnl_bf16));
    DNNL_TRY(desc_of(&dc, batch, m, n, false, dnnl_f32));
    DNNL_TRY(dnnl_matmul_desc_init(&mm, &da, &db, NULL, &dc));
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &mm, NULL, engine, NULL));
    DNNL_TRY(dnnl_primitive_create(&prim, pd));
    DNNL_TRY(dnnl_memory_create(&ma, &da, engine, a->data));
    DNNL_TRY(dnnl_memory_create(&mb, &db, engine, b->data));
    DNNL_TRY(dnnl_memory_create(&mc, &dc, engine, c));
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    DNNL_TRY(dnnl_primitive_execute(prim, stream, 3, args));
    DNNL_TRY(dnnl_stream_wait(stream));
    rc = 0;
done:
    mem_account_add(be->account, MEM_WORKSPACE, -copies);
    if (ma)
        dnnl_memory_destroy(ma);
    if (mb)
        dnnl_memory_destroy(mb);
    if (mc)
        dnnl_memory_destroy(mc);
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc;
}
#else
bool cpu_gemm_bf16_available(void) { return false; }

const char *cpu_gemm_bf16_library(void) { return NULL; }

int cpu_gemm_bf16(backend *be, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                  const tensor *a, const tensor *b, float *c)
{
    snprintf(be->err, sizeof be->err, "the bfloat16 GEMM needs a build with oneDNN");
    return -1;
}
#endif

bool cpu_gemm_bf16_runs(const tensor *a, const tensor *b, int64_t k)
{
    return a->dtype == DTYPE_BFLOAT16 && b->dtype == DTYPE_BFLOAT16 &&
           cpu_gemm_bf16_available() &&
           cpu_gemm_bf16_exact(a->data, a->numel, b->data, b->numel, k);
}
