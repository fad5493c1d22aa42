/*
 * optim.cu: one parameter's optimizer step (twin of harness/ops/cpu/optim.c), one element per
 * thread-iteration with optim_math.h's optim_update, the arithmetic the CPU uses, in a kernel
 * built for each kind and state count of optim_math.h's OPTIM_KINDS (as the CPU's loops
 * are). Writes the parameter and each state tensor with its own counts (stats slots 0 and
 * 1 + k).
 * Lost updates: elements whose visible value (the parameter as the model sees it,
 * t->visible) did not change although the step meant to change it (optim_meant_change);
 * counted per thread, summed per block, added to one device counter once per block.
 */
#include "cuda.cuh"

typedef struct optim_args {
    void *param;
    const void *grad;
    void *state[OPTIM_MAX_STATE];
    dev_stats *stats[CUDA_STATS_SLOTS]; /* param, then state k at 1 + k */
} optim_args;

/* NS, the optimizer's number of state tensors, is a compile-time count so that the loops
 * over them unroll and ts[] / s[] stay in registers (indexed by a run-time count, they
 * would live in local memory); K, its kind, a compile-time one so that optim_update's
 * switches fold away */
template <optim_kind K, int NS>
__global__ void optim_kernel(optim_config cfg, optim_hyper h, dtype dt, dtype visible, int64_t n,
                             optim_args a, unsigned long long *lost)
{
    cfg.kind = K;
    __shared__ block_tally sh[CUDA_STATS_SLOTS];
    tally tp, ts[NS > 0 ? NS : 1];
    tally_begin(&tp, &sh[0], a.stats[0], dt);
#pragma unroll
    for (int k = 0; k < NS; k++)
        tally_begin(&ts[k], &sh[1 + k], a.stats[1 + k], dt);
    unsigned long long my_lost = 0;
    GRID_STRIDE(i, n)
    {
        float s[OPTIM_MAX_STATE];
#pragma unroll
        for (int k = 0; k < NS; k++)
            s[k] = load_as_float(a.state[k], dt, i);
        float old = load_as_float(a.param, dt, i);
        float g = load_as_float(a.grad, dt, i);
        float p = old; /* AdamW's decay scales it in place */
        float u = optim_update(&cfg, &h, dt, &p, g, s);
        float next = p + u;
        tally_store(&tp, a.param, dt, i, next);
#pragma unroll
        for (int k = 0; k < NS; k++)
            tally_store(&ts[k], a.state[k], dt, i, s[k]);
        if (optim_meant_change(&h, old, u) && round_to(round_to(next, dt), visible) == round_to(old, visible))
            my_lost++;
    }
    tally_flush(&tp);
#pragma unroll
    for (int k = 0; k < NS; k++)
        tally_flush(&ts[k]);
    unsigned long long block_lost = block_reduce(my_lost, sum_op());
    if (threadIdx.x == 0 && block_lost)
        atomicAdd(lost, block_lost);
}

/* what a launch takes */
typedef struct optim_launch {
    int grid;
    cudaStream_t stream;
    const optim_config *cfg;
    const optim_hyper *h;
    dtype dt, visible;
    int64_t n;
    optim_args a;
    unsigned long long *lost;
} optim_launch;

/* optim_kernel<K, NS> launched when the step keeps ns == NS states and kind K can keep NS
 * (its STATES bit set, known to the compiler: the kernels of other counts are not built) */
template <optim_kind K, unsigned STATES, int NS>
static bool launch_if(int ns, const optim_launch *l)
{
    if constexpr (((STATES >> NS) & 1u) != 0) {
        if (ns == NS) {
            optim_kernel<K, NS><<<l->grid, CUDA_THREADS, 0, l->stream>>>(
                *l->cfg, *l->h, l->dt, l->visible, l->n, l->a, l->lost);
            return true;
        }
    }
    return false;
}
static_assert(OPTIM_MAX_STATE == 3, "cuda_optimizer_step launches optim_kernel<K, 0..3>");

int cuda_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h,
                        optim_tensors *t, optim_result *out)
{
    cuda_ctx *x = cuda_ctx_of(be);
    int ns = optim_state_count(cfg);
    tensor *p = t->param;
    optim_args a = {};
    a.param = p->data;
    a.grad = t->grad->data;
    a.stats[0] = cuda_stats_begin(be, 0, out->counting ? &out->param : NULL);
    for (int k = 0; k < ns; k++) {
        a.state[k] = t->state[k]->data;
        a.stats[1 + k] = cuda_stats_begin(be, 1 + k, out->counting ? &out->state[k] : NULL);
    }
    optim_launch l = {cuda_grid(x, p->numel), x->stream, cfg, h, p->dtype, t->visible,
                      p->numel, a, cuda_counter_begin(be)};
    bool launched = false;
    switch (cfg->kind) {
#define LAUNCH_KIND(KIND, NAME, STATES)                                                            \
    case OPTIM_##KIND:                                                                             \
        launched = launch_if<OPTIM_##KIND, STATES, 0>(ns, &l) ||                                   \
                   launch_if<OPTIM_##KIND, STATES, 1>(ns, &l) ||                                   \
                   launch_if<OPTIM_##KIND, STATES, 2>(ns, &l) ||                                   \
                   launch_if<OPTIM_##KIND, STATES, 3>(ns, &l);                                     \
        break;
        OPTIM_KINDS(LAUNCH_KIND)
#undef LAUNCH_KIND
    }
    if (!launched) /* optim_registry_check stops the program at start-up before this */
        amp_check_failed("CUDA", "optim_kernel<kind, ns>", __FILE__, __LINE__,
                         "a state count outside the kind's row in OPTIM_KINDS");
    LAUNCH_CHECK();
    cuda_stats_end(be, 0, out->counting ? &out->param : NULL, p->numel);
    for (int k = 0; k < ns; k++)
        cuda_stats_end(be, 1 + k, out->counting ? &out->state[k] : NULL, p->numel);
    out->lost_updates += (int64_t)cuda_counter_end(be);
    return 0;
}
