/* relu.c: relu forward and backward on the CPU (twin of kernels/relu.cu). Both run in
 * their input's dtype; neither loses a value, but both are counted like any other store. */
#include "cpu.h"

void cpu_relu_forward(backend *be, const tensor *x, tensor *y, round_stats *st)
{
    (void)be;
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < x->numel; off += CPU_CHUNK) {
        int64_t n = x->numel - off < CPU_CHUNK ? x->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++) {
            float v = load_as_float(x->data, x->dtype, off + i);
            buf[i] = v > 0.0f ? v : (v != v ? v : 0.0f); /* NaN propagates, as torch.relu */
        }
        cpu_store(buf, y->data, y->dtype, off, n, st);
    }
}

void cpu_relu_backward(backend *be, const tensor *dy, const tensor *y, tensor *dx,
                       round_stats *st)
{
    (void)be;
    float buf[CPU_CHUNK];
    for (int64_t off = 0; off < dy->numel; off += CPU_CHUNK) {
        int64_t n = dy->numel - off < CPU_CHUNK ? dy->numel - off : CPU_CHUNK;
        for (int64_t i = 0; i < n; i++) {
            float out = load_as_float(y->data, y->dtype, off + i);
            buf[i] = out <= 0.0f ? 0.0f : load_as_float(dy->data, dy->dtype, off + i);
        }
        cpu_store(buf, dx->data, dx->dtype, off, n, st);
    }
}
