/*
 * test_round.c: the CPU's rounding store (harness/ops/cpu/round.c: F16C stores, vectorized
 * counts from bit patterns, histograms by bit-sliced counters, vector compares or tables) against
 * the scalar definitions of half.h (half_from_float, round_tally, hist_bin, themselves checked
 * exhaustively in test_half.c), for each destination dtype, on random bit patterns of every
 * kind (normals, subnormals, zeros, inf, NaN: exponents too spread for the vector
 * histogram) and on values spread as a tensor's usually are (a few octaves, zeros among
 * them: the vector histogram), with lengths that are not multiples of the vector width;
 * each ISA level's build of the counting (cpu_store_at) on the same edge patterns and on
 * every shape of the histogram's windows; and bin/ampscope at each level (AMPSCOPE_CPU_ISA)
 * against its best.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ops/cpu/cpu.h"
#include "core/rng.h"
#include "helpers.h"

enum { N = 10007 };

/* cpu_store_at(isa, ...) of pre[0..n) into dt against half.h, element by element; n <= N */
static void check_store_at(cpu_isa isa, dtype dt, const float *pre, int n, const char *what)
{
    static uint8_t got[4 * N], want[4 * N];
    round_stats st, ref;
    round_stats_init(&st);
    round_stats_init(&ref);
    memset(got, 0xa5, sizeof got); /* no bits left from an earlier call's store */
    cpu_store_at(isa, pre, got, dt, 0, n, &st);
    float min_normal = dtype_min_normal(dt);
    for (int i = 0; i < n; i++) {
        float post = store_from_float(want, dt, i, pre[i]);
        round_tally(&ref.counts, pre[i], post, min_normal);
        ref.hist[hist_bin(pre[i])]++;
    }
    ref.numel = n;
    const char *d = dtype_name(dt), *l = cpu_isa_name(isa);
    cr_expect_eq(memcmp(got, want, (size_t)n * dtype_size(dt)), 0, "%s %s %s: stored bits differ",
                 what, l, d);
    const round_counts *a = &st.counts, *b = &ref.counts;
    cr_expect_eq(a->zeros, b->zeros, "%s %s %s zeros", what, l, d);
    cr_expect_eq(a->underflow, b->underflow, "%s %s %s underflow", what, l, d);
    cr_expect_eq(a->subnormal, b->subnormal, "%s %s %s subnormal", what, l, d);
    cr_expect_eq(a->overflow, b->overflow, "%s %s %s overflow", what, l, d);
    cr_expect_eq(a->nan, b->nan, "%s %s %s nan", what, l, d);
    cr_expect_eq(float_bits(a->amax), float_bits(b->amax), "%s %s %s amax %g %g", what, l, d,
                 (double)a->amax, (double)b->amax);
    cr_expect_eq(float_bits(a->amin_nonzero), float_bits(b->amin_nonzero), "%s %s %s amin %g %g",
                 what, l, d, (double)a->amin_nonzero, (double)b->amin_nonzero);
    cr_expect_eq(st.numel, ref.numel);
    cr_expect_eq(memcmp(st.hist, ref.hist, sizeof st.hist), 0, "%s %s %s histogram", what, l, d);
}

/* cpu_store (the best level this processor runs) of pre[0..N) against half.h */
static void check_store(dtype dt, const float *pre)
{
    check_store_at(cpu_isa_best(), dt, pre, N, "cpu_store");
}

static void check_dtype(dtype dt)
{
    static float pre[N];
    rng g;
    rng_seed(&g, 7);
    for (int i = 0; i < N; i++) {
        uint32_t bits = (uint32_t)rng_next(&g);
        switch (i % 4) { /* bias towards the places where roundings lose values */
        case 0:
            bits = (bits & 0x807fffffu) | (uint32_t)(100 + rng_below(&g, 20)) << 23;
            break;
        case 1:
            bits = (bits & 0x807fffffu) | (uint32_t)(130 + rng_below(&g, 30)) << 23;
            break;
        case 2:
            bits = i % 40 == 2 ? 0x7f800000u | (bits & 0x80000001u) : bits;
            break;
        default:
            bits = i % 20 == 3 ? bits & 0x80000000u : bits >> (bits & 7);
            break;
        }
        memcpy(&pre[i], &bits, 4);
    }
    /* every boundary of the three formats, both signs */
    static const float edges[] = {0x1p-14f,
                                  0x1.ff8p-15f,
                                  0x1p-24f,
                                  0x1p-25f,
                                  0x1.000002p-25f,
                                  65504.0f,
                                  65519.0f,
                                  65520.0f,
                                  0x1p-126f,
                                  0x1.fcp-127f,
                                  0x1p-133f,
                                  0x1p-134f,
                                  0x1.fffffep127f,
                                  0x1p-149f,
                                  0x1.fffffcp-127f,
                                  3.3895313892515355e38f,
                                  0.0f};
    int ne = (int)(sizeof edges / sizeof edges[0]);
    for (int k = 0; k < ne; k++) {
        pre[2 * k] = edges[k];
        pre[2 * k + 1] = -edges[k];
    }
    check_store(dt, pre);
    round_counts c;
    round_counts_init(&c);
    for (int i = 0; i < N; i++)
        round_tally(&c, pre[i], round_to(pre[i], dt), dtype_min_normal(dt));
    cr_expect_gt(c.underflow + c.overflow + c.subnormal, 0, "the inputs exercise the counts");
}

Test(round, float16_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT16); }
Test(round, bfloat16_store_and_counts_match_half_h) { check_dtype(DTYPE_BFLOAT16); }
Test(round, float32_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT32); }

/* Values spread as a weight's or a gradient's: magnitudes 2^-30 to 2^-5 (float16 loses the
 * lowest to zero or keeps them subnormal), a tenth of them zeros, a float32 subnormal, an
 * infinity and a NaN in the first chunk of 4096; 2^-140 to 2^3 in the second (too wide for
 * the vector histogram), so that both ways of counting and their special bins are checked. */
static void check_spread(dtype dt)
{
    static float pre[N];
    rng g;
    rng_seed(&g, 13);
    for (int i = 0; i < N; i++) {
        int wide = i >= 4096 && i < 8192;
        float m = 1.0f + (float)rng_below(&g, 1 << 20) * 0x1p-20f;
        int e = wide ? -140 + (int)rng_below(&g, 144) : -30 + (int)rng_below(&g, 26);
        pre[i] = i % 10 == 0 ? 0.0f : (i % 2 ? -1.0f : 1.0f) * ldexpf(m, e);
    }
    pre[101] = 0x1p-140f;
    pre[103] = bits_float(0x7f800000u);
    pre[105] = bits_float(0x7fc00001u);
    check_store(dt, pre);
}

Test(round, float16_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT16); }
Test(round, bfloat16_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_BFLOAT16); }
Test(round, float32_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT32); }

/* A float16 GEMM on the CPU: operands widened (F16C where available), multiplied and summed
 * in float32, rounded once. With 5-bit significands and K = 16 every product and partial sum
 * is exact in float32, so the result must be the float64 sum rounded to float16 once. */
Test(round, float16_gemm_is_the_exact_sum_rounded_once)
{
    enum { B = 9, K = 16, O = 37 };
    float x[B * K], w[O * K];
    rng g;
    rng_seed(&g, 11);
    for (int i = 0; i < B * K; i++)
        x[i] = (float)((int)rng_below(&g, 63) - 31) * 0x1p-3f;
    for (int i = 0; i < O * K; i++)
        w[i] = (float)((int)rng_below(&g, 63) - 31) * 0x1p-9f;
    mem_account acct = {0};
    backend *be = backend_cpu_open(&acct);
    be->account = &acct;
    tensor_pool pool = {.be = be, .account = &acct};
    char err[256];
    int64_t xs[2] = {B, K}, ws[2] = {O, K}, ys[2] = {B, O};
    tensor *tx = tensor_new(&pool, "x", DTYPE_FLOAT16, 2, xs, MEM_ACTIVATIONS, err, sizeof err);
    tensor *tw = tensor_new(&pool, "w", DTYPE_FLOAT16, 2, ws, MEM_PARAMS, err, sizeof err);
    tensor *ty = tensor_new(&pool, "y", DTYPE_FLOAT16, 2, ys, MEM_ACTIVATIONS, err, sizeof err);
    for (int i = 0; i < B * K; i++)
        store_from_float(tx->data, DTYPE_FLOAT16, i, x[i]);
    for (int i = 0; i < O * K; i++)
        store_from_float(tw->data, DTYPE_FLOAT16, i, w[i]);
    cr_assert_eq(be->linear_forward(be, tx, tw, NULL, ty, NULL), 0);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++) {
            double sum = 0;
            for (int k = 0; k < K; k++)
                sum += (double)x[b * K + k] * (double)w[o * K + k];
            float want = round_to((float)sum, DTYPE_FLOAT16); /* sum is exact in float32 */
            cr_expect_eq(load_as_float(ty->data, DTYPE_FLOAT16, b * O + o), want, "y[%d,%d]", b, o);
        }
    cr_expect_eq(acct.current[MEM_WORKSPACE], 0, "workspace returned");
    tensor_pool_clear(&pool);
    be->close(be);
}

/*
 * Every ISA level's counting that this processor runs (AVX-512, AVX2, plain x86-64: the same
 * loops compiled at 16, 8 and 4 lanes) on the same inputs, against half.h's scalar
 * definitions: the boundaries of each format (zeros of both signs, float32 subnormals, the
 * normal/subnormal boundary of float16, bfloat16 and float32 and the values either side,
 * the largest finite values and those that overflow, inf, quiet and signalling NaNs of both
 * signs) among values a few octaves apart, in lengths that leave tails after the vector
 * blocks (their exponents span the whole range: the histogram's tables); a chunk of zeros
 * only, one of infinities and NaNs, one of NaNs, and random bit patterns.
 */
static const uint32_t edge_bits[] = {
    0x00000000u, 0x80000000u,                           /* zeros */
    0x00000001u, 0x007fffffu, 0x00400000u, 0x80000001u, /* float32 subnormals */
    0x00800000u, 0x00800001u, 0x807fffffu, 0x00ffffffu, /* float32 / bfloat16 min normal */
    0x007f8000u, 0x007f7fffu, 0x007fc000u,              /* rounding to bfloat16's min normal */
    0x38800000u, 0x387fffffu, 0x387fe000u, 0x387ff000u, /* float16's min normal 2^-14 */
    0x33800000u, 0x33000000u, 0x33000001u, 0x32ffffffu, /* float16's least subnormal 2^-24 */
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, /* float16's largest, overflow */
    0x7f7fffffu, 0x7f7f8000u, 0xff7fffffu,              /* float32's largest, bfloat16 overflow */
    0x7f800000u, 0xff800000u,                           /* inf */
    0x7fc00000u, 0xffc00001u, 0x7f800001u, 0xff800001u, /* quiet and signalling NaNs */
};

static void check_levels(dtype dt, const float *pre, int n, const char *what)
{
    for (int l = 0; l < CPU_ISA_COUNT; l++)
        if (cpu_isa_runs((cpu_isa)l))
            check_store_at((cpu_isa)l, dt, pre, n, what);
}

static void check_levels_of(dtype dt)
{
    static float pre[N];
    int ne = (int)(sizeof edge_bits / sizeof edge_bits[0]);
    rng g;
    rng_seed(&g, 17);
    /* edges among values 2^-20 to 2^-5, in the first chunk */
    for (int i = 0; i < 4096 + 77; i++) {
        float m = 1.0f + (float)rng_below(&g, 1 << 23) * 0x1p-23f;
        pre[i] = (i % 3 ? 1.0f : -1.0f) * ldexpf(m, -20 + (int)rng_below(&g, 16));
    }
    for (int i = 0; i < ne; i++)
        pre[37 * i + 5] = bits_float(edge_bits[i]);
    pre[4096 + 70] = bits_float(0x00000001u); /* in the tail of the second chunk, */
    pre[4096 + 75] = 0x1p100f;                /* with exponents beyond those of its vector blocks */
    pre[4096 + 76] = -0x1p-100f;
    check_levels(dt, pre, 4096 + 77, "edges");
    /* the edges alone, each in every lane position */
    for (int i = 0; i < 999; i++)
        pre[i] = bits_float(edge_bits[i % ne]);
    check_levels(dt, pre, 999, "edges only");
    for (int i = 0; i < 200; i++)
        pre[i] = i % 2 ? -0.0f : 0.0f;
    check_levels(dt, pre, 200, "zeros");
    for (int i = 0; i < 130; i++)
        pre[i] = bits_float(edge_bits[ne - 6 + i % 6]);
    check_levels(dt, pre, 130, "inf and NaN");
    for (int i = 0; i < 70; i++)
        pre[i] = bits_float(edge_bits[ne - 4 + i % 4]);
    check_levels(dt, pre, 70, "NaN only"); /* no amin_nonzero: NaNs are not counted there */
    for (int i = 0; i < N; i++)
        pre[i] = bits_float((uint32_t)rng_next(&g));
    check_levels(dt, pre, N, "random patterns");
}

/* cpu_store_at without stats stores as with them (a counted float32 store is the counting's
 * own copy; an uncounted one is not): every level, every 16- and 32-bit dtype, random patterns
 * over more than two chunks */
Test(round, every_isa_level_stores_without_counting)
{
    static float pre[N];
    static uint8_t got[4 * N], want[4 * N];
    static const dtype dts[] = {DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FLOAT32};
    rng g;
    rng_seed(&g, 23);
    for (int i = 0; i < N; i++)
        pre[i] = bits_float((uint32_t)rng_next(&g));
    for (int d = 0; d < 3; d++) {
        for (int i = 0; i < N; i++)
            store_from_float(want, dts[d], i, pre[i]);
        for (int l = 0; l < CPU_ISA_COUNT; l++) {
            if (!cpu_isa_runs((cpu_isa)l))
                continue;
            memset(got, 0xa5, sizeof got);
            cpu_store_at((cpu_isa)l, pre, got, dts[d], 0, N, NULL);
            cr_expect_eq(memcmp(got, want, (size_t)N * dtype_size(dts[d])), 0,
                         "%s %s: stored bits differ", cpu_isa_name((cpu_isa)l),
                         dtype_name(dts[d]));
        }
    }
}

Test(round, every_isa_level_counts_float16_as_half_h) { check_levels_of(DTYPE_FLOAT16); }
Test(round, every_isa_level_counts_bfloat16_as_half_h) { check_levels_of(DTYPE_BFLOAT16); }
Test(round, every_isa_level_counts_float32_as_half_h) { check_levels_of(DTYPE_FLOAT32); }

/*
 * The histogram's windows (round.c's hist_bytes: bit-sliced counters of eight exponents a pass
 * on AVX2, sixteen on AVX-512; comparisons on plain x86-64): chunks whose exponents span 1 to 65
 * values (one window, several, the last one partial, at and beyond the 16 and 64 where the
 * ways of counting change), placed low, in the middle and at the top of the exponent range
 * (up to 254, next to inf's and NaN's byte 255; float16's normal range, 2^-14 to 2^15, its
 * edges and one octave beyond, where the counting keeps to the largest and least patterns
 * only within it; bfloat16's largest octave), with zeros, a float32 subnormal, inf and a NaN
 * among them, in lengths that fill the counters (a whole chunk of one exponent: 128 to
 * a byte lane on AVX2), leave vectors after the last group of 16 and bytes after the last
 * vector.
 */
static void check_windows(dtype dt)
{
    static float pre[N];
    static const int spans[] = {1, 2, 8, 9, 15, 16, 17, 29, 30, 31, 32, 33, 47, 48, 49, 63, 64, 65};
    static const int tops[] = {130, 254, 40, 141, 142, 253};
    static const int lengths[] = {4096, 4095, 4096 - 64 * 5 - 3, 1000, 63};
    rng g;
    rng_seed(&g, 23);
    char what[64];
    for (int s = 0; s < (int)(sizeof spans / sizeof spans[0]); s++)
        for (int t = 0; t < (int)(sizeof tops / sizeof tops[0]); t++)
            for (int l = 0; l < 5; l++) {
                int n = lengths[l], hi = tops[t], lo = hi - spans[s] + 1;
                for (int i = 0; i < n; i++) {
                    uint32_t e = (uint32_t)(lo + (int)rng_below(&g, (uint32_t)spans[s]));
                    uint32_t m = (uint32_t)rng_below(&g, 1u << 23);
                    pre[i] = bits_float((i % 2 ? 0x80000000u : 0u) | e << 23 | m);
                }
                if (l % 2) /* zeros: exponent byte 0, no other special */
                    pre[3] = 0.0f, pre[7] = -0.0f;
                if (l == 1) { /* inf, NaN (byte 255) and a float32 subnormal (byte 0) */
                    pre[n - 1] = bits_float(0x7f800000u), pre[n / 2] = bits_float(0xffc00000u);
                    pre[11] = bits_float(0x00000003u);
                }
                snprintf(what, sizeof what, "span %d top %d n %d", spans[s], hi, n);
                check_levels(dt, pre, n, what);
            }
}

Test(round, every_isa_level_histograms_float16_windows_as_half_h) { check_windows(DTYPE_FLOAT16); }
Test(round, every_isa_level_histograms_bfloat16_windows_as_half_h)
{
    check_windows(DTYPE_BFLOAT16);
}
Test(round, every_isa_level_histograms_float32_windows_as_half_h) { check_windows(DTYPE_FLOAT32); }

Test(round, this_processor_runs_its_best_level_and_the_baseline)
{
    cr_expect(cpu_isa_runs(CPU_ISA_X86_64));
    cr_expect(cpu_isa_runs(cpu_isa_best()));
    cr_expect(cpu_isa_best() <= cpu_isa_processor());
    cr_expect_eq(cpu_isa_processor() >= CPU_ISA_AVX2, (bool)__builtin_cpu_supports("avx2"));
    cr_expect_eq(cpu_isa_processor() >= CPU_ISA_AVX512, (bool)__builtin_cpu_supports("avx512bw"));
    for (int l = 0; l < CPU_ISA_COUNT; l++) /* none above the level run at */
        cr_expect_eq(cpu_isa_runs((cpu_isa)l), (cpu_isa)l <= cpu_isa_best());
    cr_log_info("counting levels run here: %s%s%s", cpu_isa_name(CPU_ISA_X86_64),
                cpu_isa_runs(CPU_ISA_AVX2) ? ", avx2" : "",
                cpu_isa_runs(CPU_ISA_AVX512) ? ", avx512" : "");
}

/* the float8 formats (harness/ops/cpu/round.c's count_lanes8) against half.h, the same ways */
Test(round, float8_e4m3fn_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT8_E4M3FN); }
Test(round, float8_e5m2_store_and_counts_match_half_h) { check_dtype(DTYPE_FLOAT8_E5M2); }
Test(round, float8_e4m3fn_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT8_E4M3FN); }
Test(round, float8_e5m2_counts_of_a_tensors_usual_spread) { check_spread(DTYPE_FLOAT8_E5M2); }
Test(round, every_isa_level_counts_float8_e4m3fn_as_half_h)
{
    check_levels_of(DTYPE_FLOAT8_E4M3FN);
}
Test(round, every_isa_level_counts_float8_e5m2_as_half_h) { check_levels_of(DTYPE_FLOAT8_E5M2); }

/* the whole of a file, NUL-terminated (*len its length); NULL when it cannot be read */
static char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)*len + 1)) && fread(buf, 1, (size_t)*len, f) == (size_t)*len)
        buf[*len] = 0;
    else
        free(buf), buf = NULL;
    if (f)
        fclose(f);
    return buf;
}

/*
 * AMPSCOPE_CPU_ISA reaches the counting and the conversions: bin/ampscope run at each level
 * this processor runs, its tensors.csv, hist.csv and steps.csv (timings aside) against the
 * best level's, field by field. What this compares must come from the code a level chooses
 * (the counting, the float16 and bfloat16 stores, the optimizer's update), never from
 * OpenBLAS: at AMPSCOPE_CPU_ISA=avx2 or x86-64 the harness also runs OpenBLAS on such a
 * processor's GEMM kernels (core/libenv.c), whose float32 sums may differ from the best
 * level's in the last bits (Haswell's and SkylakeX's do on an AVX-512 machine), and every
 * value after a GEMM with them. So:
 *  - tests/fixtures/isa/, models without a GEMM (position_embedding, layer_norm, tanh, scale,
 *    mse: the harness's own loops, one build at every level) in float32 with a GradScaler,
 *    float16 under autocast, and bfloat16 with float32 master weights, are compared at every
 *    level on every machine;
 *  - cases with GEMMs (tests/cases/) are compared between levels whose runs used the same
 *    OpenBLAS kernels, as `ampscope --version` at each level names them (where the shell
 *    sets OPENBLAS_CORETYPE, which the harness keeps, or on an AVX2 machine), and only
 *    logged as not compared otherwise.
 * The test neither sets nor reads OPENBLAS_CORETYPE. A name that is not a level stops the
 * harness with exit 2 and a message naming the variable and the levels.
 */
Test(round, every_isa_level_of_the_harness_writes_the_same_results, .timeout = 180)
{
    const char *bin = getenv("AMPSCOPE") ? getenv("AMPSCOPE") : "bin/ampscope";
    static const char *const gemm_free[] = {"isa-fp32-scaler", "isa-half", "isa-bf16-master"};
    static const char *const gemm[] = {"small-autocast-fp16-scaler", "small-bce-autocast",
                                       "small-adamw"};
    static const char *const files[] = {"tensors.csv", "hist.csv", "steps.csv"};
    char dir[256], cmd[2048], a[1024], b[1024], path[1024], why[2048], best_blas[64], blas[64];
    make_temp_dir(dir, sizeof dir);
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (!cpu_isa_runs((cpu_isa)l))
            continue;
        snprintf(cmd, sizeof cmd,
                 "AMPSCOPE_CPU_ISA=%s %s run tests/fixtures/isa/%s.case tests/fixtures/isa/%s.case "
                 "tests/fixtures/isa/%s.case tests/cases/%s.case tests/cases/%s.case "
                 "tests/cases/%s.case --device cpu --out %s/%s --quiet >%s/log 2>&1",
                 cpu_isa_name((cpu_isa)l), bin, gemm_free[0], gemm_free[1], gemm_free[2], gemm[0],
                 gemm[1], gemm[2], dir, cpu_isa_name((cpu_isa)l), dir);
        cr_assert_eq(system(cmd), 0, "%s failed (see %s/log)", cmd, dir);
    }
    const char *best = cpu_isa_name(cpu_isa_best());
    isa_blas_kernels(best, best_blas, sizeof best_blas);
    for (int l = 0; l < CPU_ISA_COUNT; l++) {
        if (l == (int)cpu_isa_best() || !cpu_isa_runs((cpu_isa)l))
            continue;
        const char *level = cpu_isa_name((cpu_isa)l);
        isa_blas_kernels(level, blas, sizeof blas);
        bool same_blas = strcmp(blas, best_blas) == 0;
        if (!same_blas)
            cr_log_info("the cases with GEMMs not compared at %s: OpenBLAS's %s kernels there, "
                        "%s at %s",
                        level, blas, best_blas, best);
        for (int c = 0; c < 6; c++)
            for (int f = 0; f < 3 && (c < 3 || same_blas); f++) {
                const char *name = c < 3 ? gemm_free[c] : gemm[c - 3];
                snprintf(a, sizeof a, "%s/%s/%s/%s", dir, best, name, files[f]);
                snprintf(b, sizeof b, "%s/%s/%s/%s", dir, level, name, files[f]);
                cr_expect(same_run_file(a, b, why, sizeof why), "at %s: %s", level, why);
            }
    }
    snprintf(cmd, sizeof cmd, "AMPSCOPE_CPU_ISA=avx3 %s --version >%s/bad 2>&1", bin, dir);
    int rc = system(cmd);
    cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "an unknown level exits 2");
    long n = 0;
    snprintf(path, sizeof path, "%s/bad", dir);
    char *msg = slurp(path, &n);
    cr_expect(msg && strstr(msg, "AMPSCOPE_CPU_ISA=avx3") && strstr(msg, "avx2"),
              "the message names the variable and the levels: %s", msg ? msg : "(none)");
    free(msg);
    rm_rf(dir);
}
