/* fp8_quantize.c: the quantized float8 copy of a float32 buffer (see fp8_quantize.h), on the
 * CPU's counting store. */
#include "fp8_quantize.h"

#include "cpu.h"
#include "core/format.h"

int64_t fp8_quantize(const float *x, int64_t n, float scale, dtype dt, fp8_overflow ov,
                     uint8_t *dst, round_stats *st)
{
    const format_info *f = format_of(dt);
    if (!f || f->bits != 8)
        not_a_format("fp8_quantize", dt);
    float buf[CPU_CHUNK];
    int64_t saturated = 0;
    for (int64_t off = 0; off < n; off += CPU_CHUNK) {
        int64_t m = n - off < CPU_CHUNK ? n - off : CPU_CHUNK;
        for (int64_t i = 0; i < m; i++) {
            float v = x[off + i] * scale;
            if (ov == FP8_SATURATE && (v > f->largest || v < -f->largest)) {
                v = v > 0 ? f->largest : -f->largest; /* NaN compares false: stays NaN */
                saturated++;
            }
            buf[i] = v;
        }
        cpu_store(buf, dst, dt, off, m, st);
    }
    return saturated;
}
