/* fp8_gemm.c: the CPU's float8 GEMM with per-tensor scale inverses (see fp8_gemm.h). */
#include "fp8_gemm.h"

#include "half.h"

bool fp8_gemm_cpu(const uint8_t *a, dtype da, const uint8_t *b, dtype db, float scale_inv_a,
                  float scale_inv_b, int m, int n, int k, float *out)
{
    if (!dtype_is_float8(da) || !dtype_is_float8(db) ||
        (da == DTYPE_FLOAT8_E5M2 && db == DTYPE_FLOAT8_E5M2))
        return false;
    float s = scale_inv_a * scale_inv_b;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += load_as_float(a, da, (int64_t)i * k + p) *
                       load_as_float(b, db, (int64_t)j * k + p);
            out[(int64_t)i * n + j] = acc * s;
        }
    return true;
}
