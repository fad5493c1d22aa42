/*
 * test_fp8_gemm.c: the CPU's float8 GEMM (harness/fp8_gemm.h) on operands quantized with
 * known scales, against sums worked out by hand; E5M2 x E5M2 refused.
 */
#include <criterion/criterion.h>

#include "../harness/fp8_gemm.h"
#include "../harness/fp8_quantize.h"

/*
 * x = [[1, 2, 3, 4], [0.5, -1, 0, 448]] scaled by 0.5 (scale_inv 2): [[0.5, 1, 1.5, 2],
 * [0.25, -0.5, 0, 224]], all exact in E4M3. w = [[1, 1, 1, 1], [1, 0, -1, 0], [0, 0, 0, 3]]
 * scaled by 4 (scale_inv 0.25): [[4, 4, 4, 4], [4, 0, -4, 0], [0, 0, 0, 12]] exact. out =
 * (xq wq^T) * 2 * 0.25 = x w^T: [[10, -2, 12], [447.5, 0.5, 1344]].
 */
Test(fp8_gemm, scaled_operands_give_x_w_transposed)
{
    const float x[8] = {1, 2, 3, 4, 0.5f, -1, 0, 448};
    const float w[12] = {1, 1, 1, 1, 1, 0, -1, 0, 0, 0, 0, 3};
    uint8_t xq[8], wq[12];
    cr_expect_eq(fp8_quantize(x, 8, 0.5f, DTYPE_FLOAT8_E4M3FN, FP8_SATURATE, xq, NULL), 0);
    cr_expect_eq(fp8_quantize(w, 12, 4.0f, DTYPE_FLOAT8_E4M3FN, FP8_SATURATE, wq, NULL), 0);
    float out[6];
    cr_assert(fp8_gemm_cpu(xq, DTYPE_FLOAT8_E4M3FN, wq, DTYPE_FLOAT8_E4M3FN, 2.0f, 0.25f, 2, 3,
                           4, out));
    const float want[6] = {10, -2, 12, 447.5f, 0.5f, 1344};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
}

/* E4M3 x E5M2 (a gradient GEMM under hybrid) runs; E5M2 x E5M2 does not */
Test(fp8_gemm, e5m2_times_e5m2_refused)
{
    const float g[2] = {3, -0.75f}; /* both exact in E5M2 (3 = 1.1b x 2, 0.75 = 1.1b / 2) */
    const float v[2] = {2, 4};
    uint8_t gq[2], vq[2];
    fp8_quantize(g, 2, 1.0f, DTYPE_FLOAT8_E5M2, FP8_SATURATE, gq, NULL);
    fp8_quantize(v, 2, 1.0f, DTYPE_FLOAT8_E4M3FN, FP8_SATURATE, vq, NULL);
    float out = -1;
    cr_expect(fp8_gemm_cpu(vq, DTYPE_FLOAT8_E4M3FN, gq, DTYPE_FLOAT8_E5M2, 1, 1, 1, 1, 2, &out));
    cr_expect_eq(out, 3.0f, "2 * 3 + 4 * -0.75");
    out = -1;
    cr_expect(!fp8_gemm_cpu(gq, DTYPE_FLOAT8_E5M2, gq, DTYPE_FLOAT8_E5M2, 1, 1, 1, 1, 2, &out));
    cr_expect_eq(out, -1.0f, "nothing written");
}
