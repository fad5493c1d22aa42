/*
 * optim.c: one parameter's optimizer step on the CPU (twin of kernels/optim.cu). The
 * arithmetic is optim_math.h's, shared with the GPU. Lost updates: elements whose visible
 * value (the parameter as the model sees it, t->visible) did not change although the
 * increment the step applied (to the parameter or to its master) was non-zero.
 */
#include "cpu.h"

void cpu_optimizer_step(backend *be, const optim_config *cfg, const optim_hyper *h,
                        optim_tensors *t, optim_result *out)
{
    (void)be;
    int ns = optim_state_count(cfg);
    tensor *p = t->param;
    dtype dt = p->dtype;
    float pbuf[CPU_CHUNK], sbuf[OPTIM_MAX_STATE][CPU_CHUNK];
    int64_t lost = 0;
    for (int64_t off = 0; off < p->numel; off += CPU_CHUNK) {
        int64_t n = p->numel - off < CPU_CHUNK ? p->numel - off : CPU_CHUNK;
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
            if (u != 0.0f && round_to(round_to(old + u, dt), t->visible) ==
                                 round_to(old, t->visible))
                lost++;
        }
        cpu_store(pbuf, p->data, dt, off, n, &out->param);
        for (int k = 0; k < ns; k++)
            cpu_store(sbuf[k], t->state[k]->data, dt, off, n, &out->state[k]);
    }
    out->lost_updates += lost;
}
