/*
 * libenv.c: the environment the two threaded libraries read once, when the program starts.
 *
 * - OMP_WAIT_POLICY=passive: OpenMP's threads otherwise spin after each parallel region and,
 *   on a machine with few cores, take the cores OpenBLAS's threads need for the next GEMM
 *   (a small model's step ran six times slower).
 * - OPENBLAS_CORETYPE: OpenBLAS 0.3.21 (Debian 12's) picks its GEMM kernels from the CPU's
 *   family and model numbers and falls back to its generic "Prescott" kernels for a model it
 *   does not know, such as a virtual machine's "Intel Xeon Processor"; on this project's
 *   AVX-512 machine an sgemm of 256x4096x4096 then ran at 30 GFLOP/s instead of 165. When
 *   OpenBLAS fell back so, the kernels are chosen from the CPU's features instead, as later
 *   OpenBLAS releases do (driver/others/dynamic.c): AVX-512 (F, BW, DQ, VL) -> SkylakeX,
 *   AVX2 and FMA -> Haswell, AVX -> Sandybridge. Under AMPSCOPE_CPU_ISA=avx2 or x86-64
 *   (harness/ops/cpu/cpu.h: the harness emulating a processor without the levels above) they are
 *   such a processor's: Zen on AMD's, else Haswell; Prescott, OpenBLAS's oldest.
 * Values the user set are kept.
 */
#include "libenv.h"

#include <stdlib.h>
#include <string.h>

char *openblas_get_corename(void); /* OpenBLAS's, not in every cblas.h */

static const char *blas_core_from_features(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
    return NULL;
}

/* the kernels of the processor AMPSCOPE_CPU_ISA emulates; NULL when it emulates none */
static const char *blas_core_of_isa(void)
{
    const char *isa = getenv("AMPSCOPE_CPU_ISA");
    __builtin_cpu_init();
    if (isa && strcmp(isa, "avx2") == 0)
        return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
    if (isa && strcmp(isa, "x86-64") == 0)
        return "Prescott";
    return NULL;
}

bool libenv_prepare(void)
{
    bool changed = false;
    if (!getenv("OMP_WAIT_POLICY"))
        changed |= setenv("OMP_WAIT_POLICY", "passive", 1) == 0;
    const char *core = blas_core_from_features(), *emulated = blas_core_of_isa();
    if (!getenv("OPENBLAS_CORETYPE") && emulated)
        changed |= setenv("OPENBLAS_CORETYPE", emulated, 1) == 0;
    else if (!getenv("OPENBLAS_CORETYPE") && core && strcmp(libenv_blas_core(), "Prescott") == 0)
        changed |= setenv("OPENBLAS_CORETYPE", core, 1) == 0;
    return changed;
}

const char *libenv_blas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "?";
}
