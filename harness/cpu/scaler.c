/* scaler.c: GradScaler's unscale with its inf/NaN check on the CPU (twin of
 * kernels/scaler.cu). As _amp_foreach_non_finite_check_and_unscale_: found_inf is set when
 * any value is inf or NaN, and every value is multiplied by inv_scale in float32. */
#include "cpu.h"

void cpu_unscale(backend *be, tensor *g, float inv_scale, int *found_inf, round_stats *st)
{
    (void)be;
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < g->numel; off += CPU_CHUNK) {
        int64_t n = g->numel - off < CPU_CHUNK ? g->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++) {
            float v = load_as_float(g->data, g->dtype, off + i);
            if ((float_bits(v) & 0x7f800000u) == 0x7f800000u)
                *found_inf = 1;
            buf[i] = v * inv_scale;
        }
        cpu_store(buf, g->data, g->dtype, off, n, st);
    }
}
