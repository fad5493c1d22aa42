/*
 * cpu.h: helpers shared by the CPU backend's op files (harness/ops/cpu/). Not for the rest
 * of the harness, which calls the backend table.
 *
 * The CPU computes every op in float32 and rounds once with cpu_store(), which writes the
 * destination dtype and does the op's bookkeeping in the same pass. Half operands of GEMMs
 * and convolutions are widened into float32 scratch buffers (counted as workspace), which
 * is exact, then OpenBLAS's cblas_sgemm multiplies them.
 */
#ifndef AMPSCOPE_CPU_H
#define AMPSCOPE_CPU_H

#include "ops/backend.h"

#define CPU_CHUNK 4096

/* Rounds pre[0..n) into dst[off..off+n) of dtype dt; tallies into st when not NULL.
 * pre may alias dst when dt is float32. */
void cpu_store(const float *pre, void *dst, dtype dt, int64_t off, int64_t n, round_stats *st);

/*
 * The ISA levels the counting of cpu_store and the float16 and bfloat16 conversions are built
 * for, each at its own vector width (AVX2's includes F16C). The harness runs at the best the
 * processor runs, or at the level the environment variable AMPSCOPE_CPU_ISA names (avx512,
 * avx2, x86-64): a lower level emulates a processor without the levels above (the same cores,
 * those instructions only; harness/core/libenv.c gives OpenBLAS such a processor's kernels too). A
 * name that is not a level, or a level the processor cannot run, stops the program before
 * main with a message (exit 2).
 */
typedef enum cpu_isa { CPU_ISA_X86_64, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_COUNT } cpu_isa;
#define CPU_ISA_ENV "AMPSCOPE_CPU_ISA"
const char *cpu_isa_name(cpu_isa isa); /* "x86-64", "avx2", "avx512" */
bool cpu_isa_runs(cpu_isa isa);  /* the processor runs it, and it is not above cpu_isa_best() */
cpu_isa cpu_isa_best(void);      /* the level the harness runs at */
cpu_isa cpu_isa_processor(void); /* the best level the processor runs */

/* F16C's 8-wide conversions may be used: the level run at is AVX2 or above, or the processor
 * has F16C without AVX2 (Ivy Bridge) and AMPSCOPE_CPU_ISA did not lower its level */
static inline bool cpu_has_f16c(void)
{
    return cpu_isa_best() >= CPU_ISA_AVX2 ||
           (cpu_isa_best() == cpu_isa_processor() && __builtin_cpu_supports("f16c") &&
            __builtin_cpu_supports("avx"));
}
/* cpu_store counted by level isa's code, which the processor must run (tests and the
 * benchmark compare the levels) */
void cpu_store_at(cpu_isa isa, const float *pre, void *dst, dtype dt, int64_t off, int64_t n,
                  round_stats *st);
/* the counts and histogram of a store already made: pre[0..n) rounded into dst[off..] of dt
 * (a format narrower than float32) by the caller's own rule (fp4_block.c's stochastic
 * rounding), classified as cpu_store classifies its own */
void cpu_count(const float *pre, const void *dst, dtype dt, int64_t off, int64_t n,
               round_stats *st);

/* v[i] = round_to(v[i], dt) for i < n: the value a store into dt would keep, uncounted */
void cpu_round(float *v, int64_t n, dtype dt);

/* cpu_store over all threads, for large buffers */
void cpu_store_parallel(const float *pre, void *dst, dtype dt, int64_t off, int64_t n,
                        round_stats *st);

/* dst[i] = round(value) for every i, counted into st (may be NULL) */
void cpu_fill_counted(tensor *dst, float value, round_stats *st);

/* One chunk of an elementwise op: elements [off, off + n), stats into st (may be NULL). */
typedef void (*cpu_chunk_fn)(void *ctx, int64_t off, int64_t n, round_stats *st);
/* Runs fn over [0, total) in CPU_CHUNK pieces on every OpenMP thread, each thread with its
 * own stats, merged into st at the end (sums, max and min: the result does not depend on
 * the order). */
void cpu_parallel_chunks(int64_t total, cpu_chunk_fn fn, void *ctx, round_stats *st);

/* float32 scratch of n elements, counted as workspace; NULL with be->err set when out of memory */
float *cpu_scratch(backend *be, int64_t n);
void cpu_scratch_free(backend *be, float *p, int64_t n);

/* The calls this backend made to malloc, realloc and free since it opened: a step after the
 * first, which reuses the blocks the step before freed, adds none (tests/test_alloc.c). */
int64_t cpu_heap_calls(backend *be);

/*
 * A widened copy of a half weight held from the forward GEMM to the backward's input-gradient
 * GEMM, instead of widening it twice. cpu_hold takes f32 (a cpu_as_f32 copy of t) and takes it
 * out of the workspace account; cpu_take gives back the copy of t, counted as workspace again
 * (free it with cpu_scratch_free), or NULL when none is held. The account thus counts the copy
 * only while a GEMM reads it, where the harness has always counted it (PyTorch holds no such
 * copy: cuBLAS reads half operands). A held copy is given up when t's data is freed or
 * written by an op that may write a weight (cast, mul_scalar, fill, the optimizer step, an
 * upload: cpu_hold_drop, cpu_hold_drop_all), and when the backend closes.
 */
void cpu_hold(backend *be, const tensor *t, float *f32);
float *cpu_take(backend *be, const tensor *t);
void cpu_hold_drop(backend *be, const void *data);
void cpu_hold_drop_all(backend *be);

/* elements [off, off + n) of t as float32 (exact) into dst */
void cpu_load(const tensor *t, int64_t off, int64_t n, float *dst);

/* elements [off, off + n) of t as float32: t's own memory when t is float32, else widened
 * into buf (n floats) */
const float *cpu_view(const tensor *t, int64_t off, int64_t n, float *buf);

/* t's values as float32: t's own buffer when it is float32, else a widened scratch copy
 * (*owned set to it, to give to cpu_scratch_free). NULL when out of memory. */
const float *cpu_as_f32(backend *be, const tensor *t, float **owned);

/*
 * bfloat16 GEMMs on bfloat16 instructions (gemm_bf16.c, which gives the argument): the fast
 * path runs where the processor has avx512_bf16 (and the harness runs at avx512), the build
 * has oneDNN, both operands are bfloat16 and their values pass cpu_gemm_bf16_exact, under
 * which its float32 outputs are those of float32 arithmetic on the exact products, as the
 * sgemm path's are, summed in another order. Every GEMM of linear and matmul is counted by
 * the path it ran on.
 */
typedef enum cpu_gemm_path { CPU_GEMM_SGEMM, CPU_GEMM_BF16, CPU_GEMM_PATH_COUNT } cpu_gemm_path;
void cpu_gemm_path_count(cpu_gemm_path path);
int64_t cpu_gemm_path_total(cpu_gemm_path path); /* GEMMs run on path since the process began */
bool cpu_gemm_bf16_available(void);   /* the processor, the ISA level and the build allow it */
const char *cpu_gemm_bf16_library(void); /* "oneDNN", or NULL in a build without it */
/* a [na] and b [nb] (bfloat16 bits) meet the guard for a GEMM summing k products */
bool cpu_gemm_bf16_exact(const uint16_t *a, int64_t na, const uint16_t *b, int64_t nb, int64_t k);
/* available, both bfloat16, and the guard holds for a and b's values */
bool cpu_gemm_bf16_runs(const tensor *a, const tensor *b, int64_t k);
/* c[batch, m, n] = op(a) op(b) in float32 (shapes as gemm_bf16.c says); 0, or -1 with be->err */
int cpu_gemm_bf16(backend *be, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                  const tensor *a, const tensor *b, float *c);

/* the ops, cpu_<op> for every op of backend.h's list (the table in backend_cpu.c) */
#define CPU_OP_DECL(name, params) int cpu_##name params;
BACKEND_OPS(CPU_OP_DECL)
#undef CPU_OP_DECL

#endif
