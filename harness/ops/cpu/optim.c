/*
 * optim.c: one parameter's optimizer step on the CPU (twin of kernels/optim.cu). The
 * arithmetic is optim_math.h's, shared with the GPU. Lost updates: elements whose visible
 * value (the parameter as the model sees it, t->visible) did not change although the
 * increment the step applied (to the parameter or to its master) was non-zero.
 *
 * A chunk is read as float32 (half tensors widened into buffers), updated, then stored
 * (and counted) by cpu_store.
 * The update loop is instantiated per optimizer kind and state count (each row of
 * optim_math.h's OPTIM_KINDS, with each count of states it can keep) and per dtype (float32,
 * where the roundings are identities, float16, whose rounding half.h's half_round does
 * without a branch, and bfloat16), so that the compiler inlines optim_update and vectorises
 * the loop. (bfloat16 took a general loop with the dtype unknown, which called optim_update
 * once per element: 80% of a step of cases/llama-block-bf16-params.case went there.)
 * The update is built once per ISA level (AVX-512, AVX2, plain x86-64: cpu.h's cpu_isa) and
 * the level the harness runs at (cpu_isa_best, which AMPSCOPE_CPU_ISA may lower) chooses, as
 * round.c's counting does. Every level gives the same bits: C11 mode compiles with
 * -ffp-contract=off, so no level fuses a multiply and an add, and sqrtf and the division
 * round correctly on each (tests/test_optim.c runs each level and compares).
 */
#include <string.h>

#include "cpu.h"

/* a chunk's operands: float32 tensors in place, half ones widened into buf */
typedef struct optim_chunk_data {
    const float *p, *g;
    float *s[OPTIM_MAX_STATE];
    float u[CPU_CHUNK];    /* the increments */
    float next[CPU_CHUNK]; /* p + u, before its rounding */
    float buf[2 + OPTIM_MAX_STATE][CPU_CHUNK];
    float seen[2][CPU_CHUNK]; /* next and p as the model sees them, for lost updates */
} optim_chunk_data;

static inline __attribute__((always_inline)) void update_loop(const optim_config *cfg,
                                                              const optim_hyper *h, dtype dt,
                                                              int ns, int64_t n,
                                                              optim_chunk_data *b)
{
    for (int64_t i = 0; i < n; i++) {
        float s[OPTIM_MAX_STATE] = {0};
#pragma GCC unroll 3
        for (int k = 0; k < ns; k++)
            s[k] = b->s[k][i];
        float p = b->p[i]; /* AdamW's decay scales it: b->p keeps the value before the step */
        float u = optim_update(cfg, h, dt, &p, b->g[i], s);
#pragma GCC unroll 3
        for (int k = 0; k < ns; k++)
            b->s[k][i] = s[k];
        b->u[i] = u;
        b->next[i] = p + u;
    }
}

/* update_loop with the kind, its state count and the dtype known to the compiler, when the
 * kind can keep NS states (its STATES bit set: a constant, so the others are not built) */
#define UPDATE_NS(KIND, STATES, NS)                                                                \
    if ((((STATES) >> (NS)) & 1u) && ns == (NS)) {                                                 \
        c.kind = OPTIM_##KIND;                                                                     \
        if (dt == DTYPE_FLOAT32)                                                                   \
            update_loop(&c, &hc, DTYPE_FLOAT32, NS, n, b);                                         \
        else if (dt == DTYPE_FLOAT16)                                                              \
            update_loop(&c, &hc, DTYPE_FLOAT16, NS, n, b);                                         \
        else                                                                                       \
            update_loop(&c, &hc, DTYPE_BFLOAT16, NS, n, b);                                        \
        return;                                                                                    \
    }
#define UPDATE_KIND(KIND, NAME, STATES)                                                            \
    case OPTIM_##KIND:                                                                             \
        UPDATE_NS(KIND, STATES, 0)                                                                 \
        UPDATE_NS(KIND, STATES, 1)                                                                 \
        UPDATE_NS(KIND, STATES, 2)                                                                 \
        UPDATE_NS(KIND, STATES, 3)                                                                 \
        break;
_Static_assert(OPTIM_MAX_STATE == 3, "UPDATE_KIND instantiates state counts 0..3");

static inline __attribute__((always_inline)) void update_body(const optim_config *cfg,
                                                              const optim_hyper *h, dtype dt,
                                                              int ns, int64_t n,
                                                              optim_chunk_data *b)
{
    /* copies the compiler knows the buffers' stores cannot change: hoisted out of the loop */
    optim_config c = *cfg;
    optim_hyper hc = *h;
    switch (dt) {
    case DTYPE_FLOAT32:
    case DTYPE_FLOAT16:
    case DTYPE_BFLOAT16:
        break; /* the dtypes with loops of their own, below */
    case DTYPE_FLOAT8_E4M3FN: /* never a parameter's dtype: the case parser refuses it */
    case DTYPE_FLOAT8_E5M2:
    case DTYPE_FLOAT4_E2M1FN:
    case DTYPE_FLOAT8_E8M0FNU:
    case DTYPE_INT64:
    case DTYPE_COUNT:
        not_a_format("optimizer step", dt);
        return;
    }
    switch (cfg->kind) { OPTIM_KINDS(UPDATE_KIND) }
    /* a state count outside the kind's row: optim_registry_check stops the program at
     * start-up before one can reach here; the general loop computes it all the same */
    update_loop(cfg, h, dt, ns, n, b);
}

/* update_body built for each ISA level */
#define UPDATE_ARGS                                                                                \
    const optim_config *cfg, const optim_hyper *h, dtype dt, int ns, int64_t n, optim_chunk_data *b
__attribute__((target("avx512f"))) static void update_avx512(UPDATE_ARGS)
{
    update_body(cfg, h, dt, ns, n, b);
}
__attribute__((target("avx2"))) static void update_avx2(UPDATE_ARGS)
{
    update_body(cfg, h, dt, ns, n, b);
}
static void update_x86_64(UPDATE_ARGS) { update_body(cfg, h, dt, ns, n, b); }

static void (*const update_at[CPU_ISA_COUNT])(UPDATE_ARGS) = {
    [CPU_ISA_X86_64] = update_x86_64,
    [CPU_ISA_AVX2] = update_avx2,
    [CPU_ISA_AVX512] = update_avx512,
};

static void update(UPDATE_ARGS) { update_at[cpu_isa_best()](cfg, h, dt, ns, n, b); }

/* one chunk of the step; the stats and lost count of the calling thread */
static void optim_chunk(const optim_config *cfg, const optim_hyper *h, optim_tensors *t,
                        int64_t off, int64_t n, optim_chunk_data *b, optim_result *out)
{
    int ns = optim_state_count(cfg);
    tensor *p = t->param;
    dtype dt = p->dtype;
    b->p = cpu_view(p, off, n, b->buf[0]);
    b->g = cpu_view(t->grad, off, n, b->buf[1]);
    for (int k = 0; k < ns; k++) /* the states' own memory when float32: updated in place */
        b->s[k] = (float *)cpu_view(t->state[k], off, n, b->buf[2 + k]);
    update(cfg, h, dt, ns, n, b);
    /* lost: meant to change, and round(round(p + u, dt), visible) == round(p, visible) */
    const float *seen_next = b->next, *seen_old = b->p;
    if (dt != DTYPE_FLOAT32 || t->visible != DTYPE_FLOAT32) {
        memcpy(b->seen[0], b->next, sizeof(float) * (size_t)n);
        cpu_round(b->seen[0], n, dt);
        cpu_round(b->seen[0], n, t->visible);
        memcpy(b->seen[1], b->p, sizeof(float) * (size_t)n);
        cpu_round(b->seen[1], n, t->visible);
        seen_next = b->seen[0], seen_old = b->seen[1];
    }
    int64_t lost = 0;
    for (int64_t i = 0; i < n; i++)
        lost += optim_meant_change(h, b->p[i], b->u[i]) & (seen_next[i] == seen_old[i]);
    out->lost_updates += lost;
    cpu_store(b->next, p->data, dt, off, n, out->counting ? &out->param : NULL);
    for (int k = 0; k < ns; k++)
        cpu_store(b->s[k], t->state[k]->data, dt, off, n, out->counting ? &out->state[k] : NULL);
}

int cpu_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h, optim_tensors *t,
                       optim_result *out)
{
    (void)be;
    int64_t total = t->param->numel, chunks = (total + CPU_CHUNK - 1) / CPU_CHUNK;
#pragma omp parallel if (total >= (1 << 16))
    {
        optim_result local = {.counting = out->counting};
        round_stats_init(&local.param);
        for (int k = 0; k < OPTIM_MAX_STATE; k++)
            round_stats_init(&local.state[k]);
        optim_chunk_data b; /* 144 KiB of the thread's stack */
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t off = c * CPU_CHUNK;
            optim_chunk(cfg, h, t, off, total - off < CPU_CHUNK ? total - off : CPU_CHUNK, &b,
                        &local);
        }
#pragma omp critical(cpu_stats_merge)
        {
            round_stats_merge(&out->param, &local.param);
            for (int k = 0; k < OPTIM_MAX_STATE; k++)
                round_stats_merge(&out->state[k], &local.state[k]);
            out->lost_updates += local.lost_updates;
        }
    }
    return 0;
}
