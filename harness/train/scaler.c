/* scaler.c: the GradScaler (see scaler.h). */
#include "scaler.h"

#include <math.h>

void scaler_init(grad_scaler *s, const case_config *cfg)
{
    s->enabled = cfg->scaler;
    s->scale = (float)cfg->init_scale;
    s->growth_tracker = 0;
    s->growth_factor = cfg->growth_factor;
    s->backoff_factor = cfg->backoff_factor;
    s->growth_interval = cfg->growth_interval;
}

static void mul_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, n->grad, (float)n->scalar, dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

tensor *scaler_scale(run *r, const grad_scaler *s, tensor *loss)
{
    tensor *y = run_tensor(r, "loss.scaled", DTYPE_FLOAT32, 0, NULL, MEM_ACTIVATIONS);
    const tensor *from = loss; /* loss * scale, a float32 tensor: float32 either way */
    tensor_why(y, loss->dtype == DTYPE_FLOAT32 ? DTYPE_REASON_INPUT : DTYPE_REASON_PROMOTE, "mul",
               &from, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->mul_scalar(r->be, loss, s->scale, y, stp));
    node *n = tape_record(r, "mul", mul_backward, y, &loss, 1);
    if (n)
        n->scalar = s->scale;
    observe_tensor(r->obs, y, ROLE_LOSS, stp);
    return y;
}

int scaler_unscale(run *r, const grad_scaler *s, tensor *const *grads, int n, bool master)
{
    bool check_half = !master;
    for (int i = 0; check_half && i < n; i++)
        if (grads[i] && grads[i]->dtype == DTYPE_FLOAT16)
            run_fail(r, "ValueError: Attempting to unscale FP16 gradients.");
    for (int i = 0; check_half && i < n; i++)
        if (grads[i] && grads[i]->dtype == DTYPE_BFLOAT16)
            run_fail(r, "NotImplementedError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" "
                        "not implemented for 'BFloat16'");
    float inv_scale = (float)(1.0 / (double)s->scale);
    int found_inf = 0;
    for (int i = 0; i < n; i++) {
        if (!grads[i])
            continue;
        round_stats st;
        round_stats *stp = run_stats(r, &st);
        run_check(r, r->be->unscale(r->be, grads[i], inv_scale, &found_inf, stp));
        observe_tensor(r->obs, grads[i], master ? ROLE_GRAD_MASTER : ROLE_GRAD_PARAM, stp);
    }
    return found_inf;
}

void scaler_update(grad_scaler *s, int found_inf)
{
    if (found_inf) {
        s->scale = (float)((double)s->scale * s->backoff_factor);
        s->growth_tracker = 0;
        return;
    }
    int64_t successful = s->growth_tracker + 1;
    if (successful == s->growth_interval) {
        float grown = (float)((double)s->scale * s->growth_factor);
        if (isfinite(grown))
            s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker = successful;
    }
}
