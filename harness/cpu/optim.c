/*
 * optim.c: one parameter's optimizer step on the CPU (twin of kernels/optim.cu). The
 * arithmetic is optim_math.h's, shared with the GPU. Lost updates: elements whose visible
 * value (the parameter as the model sees it, t->visible) did not change although the
 * increment the step applied (to the parameter or to its master) was non-zero.
 */
#include "cpu.h"

/* one chunk of the step; the stats and lost count of the calling thread */
static void optim_chunk(const optim_config *cfg, const optim_hyper *h, optim_tensors *t,
                        int64_t off, int64_t n, optim_result *out)
{
    int ns = optim_state_count(cfg);
    tensor *p = t->param;
    dtype dt = p->dtype;
    float pbuf[CPU_CHUNK], sbuf[OPTIM_MAX_STATE][CPU_CHUNK];
    for (int64_t i = 0; i < n; i++) {
        float s[OPTIM_MAX_STATE];
        for (int k = 0; k < ns; k++)
            s[k] = load_as_float(t->state[k]->data, dt, off + i);
        float old = load_as_float(p->data, dt, off + i);
        float g = load_as_float(t->grad->data, dt, off + i);
        float u = optim_update(cfg, h, dt, old, g, s);
        pbuf[i] = old + u;
        for (int k = 0; k < ns; k++)
            sbuf[k][i] = s[k];
        if (u != 0.0f && round_to(round_to(old + u, dt), t->visible) == round_to(old, t->visible))
            out->lost_updates++;
    }
    cpu_store(pbuf, p->data, dt, off, n, out->counting ? &out->param : NULL);
    for (int k = 0; k < ns; k++)
        cpu_store(sbuf[k], t->state[k]->data, dt, off, n, out->counting ? &out->state[k] : NULL);
}

void cpu_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h,
                        optim_tensors *t, optim_result *out)
{
    (void)be;
    int64_t total = t->param->numel, chunks = (total + CPU_CHUNK - 1) / CPU_CHUNK;
#pragma omp parallel if (total >= (1 << 16))
    {
        optim_result local = {.counting = out->counting};
        round_stats_init(&local.param);
        for (int k = 0; k < OPTIM_MAX_STATE; k++)
            round_stats_init(&local.state[k]);
#pragma omp for schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t off = c * CPU_CHUNK;
            optim_chunk(cfg, h, t, off, total - off < CPU_CHUNK ? total - off : CPU_CHUNK, &local);
        }
#pragma omp critical(cpu_stats_merge)
        {
            round_stats_merge(&out->param, &local.param);
            for (int k = 0; k < OPTIM_MAX_STATE; k++)
                round_stats_merge(&out->state[k], &local.state[k]);
            out->lost_updates += local.lost_updates;
        }
    }
}
