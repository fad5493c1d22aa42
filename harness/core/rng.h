/*
 * rng.h: the harness's deterministic random numbers (xoshiro256** seeded by splitmix64;
 * normals by Box-Muller in double for single draws). Large buffers are filled by
 * rng_fill_normal / rng_fill_uniform (rng.c): on every core, in blocks with their own
 * generators, so the values depend on the seed and the stream, not on the thread count.
 * A case's seed fixes every draw; each parameter, the input, the target and the labels are
 * a stream of their own (model.c). These are not PyTorch's streams: comparisons with
 * PyTorch go through `run --dump` files.
 */
#ifndef AMPSCOPE_RNG_H
#define AMPSCOPE_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
    double spare;
    int has_spare;
} rng;

static inline uint64_t rng_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix(&seed);
    r->has_spare = 0;
}

static inline uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* uniform in [0, 1) with 53 random bits */
static inline double rng_uniform(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static inline double rng_normal(rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1, u2;
    do
        u1 = rng_uniform(r);
    while (u1 <= 0.0);
    u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    r->spare = rad * sin(2.0 * M_PI * u2);
    r->has_spare = 1;
    return rad * cos(2.0 * M_PI * u2);
}

/* uniform integer in [0, n) */
static inline int64_t rng_below(rng *r, int64_t n) { return (int64_t)(rng_uniform(r) * (double)n); }

void rng_fill_normal(uint64_t seed, uint64_t stream, float *out, int64_t n);
void rng_fill_uniform(uint64_t seed, uint64_t stream, float *out, int64_t n, double lo,
                      double hi);

#endif
