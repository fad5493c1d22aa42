/*
 * rng.c: filling large buffers with random numbers on every core, reproducibly: the buffer
 * is cut into blocks of RNG_BLOCK values, and block k of stream s draws from its own
 * xoshiro256** generator seeded from (seed, s, k), so the values do not depend on the
 * number of threads. Normals come from the Marsaglia polar method in double (no sin/cos).
 */
#include "rng.h"

#define RNG_BLOCK (1 << 16)

static void block_seed(rng *g, uint64_t seed, uint64_t stream, int64_t block)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull) ^ ((uint64_t)block * 0x8cb92ba72f3d8dd7ull);
    rng_seed(g, rng_splitmix(&x));
}

void rng_fill_normal(uint64_t seed, uint64_t stream, float *out, int64_t n)
{
    int64_t blocks = (n + RNG_BLOCK - 1) / RNG_BLOCK;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        rng g;
        block_seed(&g, seed, stream, b);
        int64_t end = (b + 1) * RNG_BLOCK < n ? (b + 1) * RNG_BLOCK : n;
        for (int64_t i = b * RNG_BLOCK; i < end;) {
            double u, v, s;
            do {
                u = 2.0 * rng_uniform(&g) - 1.0;
                v = 2.0 * rng_uniform(&g) - 1.0;
                s = u * u + v * v;
            } while (s >= 1.0 || s == 0.0);
            double f = sqrt(-2.0 * log(s) / s);
            out[i++] = (float)(u * f);
            if (i < end)
                out[i++] = (float)(v * f);
        }
    }
}

void rng_fill_uniform(uint64_t seed, uint64_t stream, float *out, int64_t n, double lo,
                      double hi)
{
    int64_t blocks = (n + RNG_BLOCK - 1) / RNG_BLOCK;
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; b++) {
        rng g;
        block_seed(&g, seed, stream, b);
        int64_t end = (b + 1) * RNG_BLOCK < n ? (b + 1) * RNG_BLOCK : n;
        for (int64_t i = b * RNG_BLOCK; i < end; i++)
            out[i] = (float)(lo + (hi - lo) * rng_uniform(&g));
    }
}
