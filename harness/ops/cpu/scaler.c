/* scaler.c: GradScaler's unscale with its inf/NaN check on the CPU (twin of
 * kernels/scaler.cu). As _amp_foreach_non_finite_check_and_unscale_: found_inf is set when
 * any value is inf or NaN, and every value is multiplied by inv_scale in float32. */
#include "cpu.h"

typedef struct unscale_ctx {
    tensor *g;
    float inv_scale;
    int found_inf; /* written by any thread that finds one: only ever set to 1 */
} unscale_ctx;

static void unscale_chunk(void *p, int64_t off, int64_t n, round_stats *st)
{
    unscale_ctx *c = p;
    float buf[CPU_CHUNK];
    int found = 0;
    /* a float32 gradient is scaled in place; the store below then only counts */
    float *v = (float *)cpu_view(c->g, off, n, buf);
    for (int64_t i = 0; i < n; i++) {
        found |= (float_bits(v[i]) & 0x7f800000u) == 0x7f800000u;
        v[i] *= c->inv_scale;
    }
    if (found) {
#pragma omp atomic write
        c->found_inf = 1;
    }
    cpu_store(v, c->g->data, c->g->dtype, off, n, st);
}

int cpu_unscale(backend *be, tensor *g, float inv_scale, int *found_inf, round_stats *st)
{
    (void)be;
    unscale_ctx c = {g, inv_scale, 0};
    cpu_parallel_chunks(g->numel, unscale_chunk, &c, st);
    if (c.found_inf)
        *found_inf = 1;
    return 0;
}
