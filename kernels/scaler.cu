/* scaler.cu: GradScaler's unscale with its inf/NaN check (twin of harness/ops/cpu/scaler.c).
 * As _amp_foreach_non_finite_check_and_unscale_: found_inf is set when any value is inf or
 * NaN, and every value is multiplied by inv_scale in float32 and rounded back in place. */
#include "cuda.cuh"

__global__ void unscale_kernel(void *g, dtype dt, float inv_scale, int64_t n,
                               unsigned long long *found, dev_stats *out)
{
    __shared__ block_tally sh;
    tally t;
    tally_begin(&t, &sh, out, dt);
    int nonfinite = 0;
    GRID_STRIDE(i, n)
    {
        float v = load_as_float(g, dt, i);
        if ((float_bits(v) & 0x7f800000u) == 0x7f800000u)
            nonfinite = 1;
        tally_store(&t, g, dt, i, v * inv_scale);
    }
    tally_flush(&t);
    if (__syncthreads_or(nonfinite) && threadIdx.x == 0)
        *found = 1;
}

int cuda_unscale(backend *be, tensor *g, float inv_scale, int *found_inf, round_stats *st)
{
    cuda_ctx *x = cuda_ctx_of(be);
    unsigned long long *found = cuda_counter_begin(be);
    dev_stats *ds = cuda_stats_begin(be, 0, st);
    unscale_kernel<<<cuda_grid(x, g->numel), CUDA_THREADS, 0, x->stream>>>(
        g->data, g->dtype, inv_scale, g->numel, found, ds);
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, st, g->numel);
    if (cuda_counter_end(be))
        *found_inf = 1;
    return 0;
}
