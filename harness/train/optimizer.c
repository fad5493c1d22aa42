/* optimizer.c: optimizer steps, state, master weights and the lr schedule (see
 * optimizer.h). */
#include "optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autocast.h"
#include "autograd/host_values.h"
#include "optimizers.h"

void optimizer_init(run *r, optimizer *o, model *m)
{
    const case_config *cfg = r->cfg;
    memset(o, 0, sizeof *o);
    o->cfg = cfg->optim;
    o->master_weights = cfg->master_weights;
    o->n = m->n_params;
    o->schedule = cfg->schedule;
    o->base_lr = o->lr = cfg->optim.lr;
    o->eta_min = cfg->eta_min;
    o->t_max = cfg->t_max;
    for (int i = 0; i < o->n; i++) {
        o->param[i] = m->params[i];
        if (!o->master_weights)
            continue;
        char name[TENSOR_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s@float32", o->param[i]->name);
        tensor *mp = run_tensor_like(r, o->param[i], name, DTYPE_FLOAT32, MEM_MASTER_PARAMS);
        tensor_why(mp, DTYPE_REASON_CAST, "master weights", (const tensor *const *)&o->param[i], 1);
        run_check(r, r->be->cast(r->be, o->param[i], mp, NULL)); /* exact: half values widen */
        o->master[i] = mp;
    }
}

/* parameter i's half gradient g copied up into a new float32 one (*out); g released */
static void optimizer_collect_grads_one(run *r, optimizer *o, int i, tensor *g, tensor **out)
{
    char name[TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s@float32", g->name);
    tensor *g32 = run_tensor_like(r, g, name, DTYPE_FLOAT32, MEM_GRADS);
    const tensor *from = g;
    tensor_why(g32, DTYPE_REASON_CAST, "master weights", &from, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->cast(r->be, g, g32, stp));
    observe_tensor(r->obs, g32, ROLE_GRAD_MASTER, stp);
    *out = g32;
    /* the model's half gradient is no longer needed: Apex zeroes it after the copy */
    tensor_release(&r->pool, g);
    o->param[i]->grad = NULL;
}

void optimizer_collect_grads(run *r, optimizer *o, tensor **grads)
{
    for (int i = 0; i < o->n; i++) {
        tensor *g = o->param[i]->grad;
        grads[i] = g;
        if (g && o->master_weights)
            optimizer_collect_grads_one(r, o, i, g, &grads[i]);
    }
}

int64_t grad_accumulate_add(run *r, tensor *acc, const tensor *g, tensor_role role)
{
    if (host_values_dry(r)) { /* the preflight: no values to add, no host buffers to hold */
        observe_tensor(r->obs, acc, role, NULL);
        return 0;
    }
    float *a = host_values_get(r, acc), *b = host_values_get(r, g);
    int64_t lost = 0;
    for (int64_t i = 0; i < acc->numel; i++) {
        float before = a[i];
        a[i] = before + b[i]; /* float32 opmath; host_values_put rounds it into acc's dtype */
        if (b[i] != 0.0f && round_to(a[i], acc->dtype) == before)
            lost++;
    }
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    host_values_put(r, acc, a, stp);
    free(a), free(b);
    observe_tensor(r->obs, acc, role, stp);
    return lost;
}

int64_t optimizer_accumulate(run *r, optimizer *o, const grad_scaler *s, int64_t k,
                             int *found_inf)
{
    bool into_master = o->master_weights && !r->cfg->delay_unscale;
    o->acc_unscaled = into_master;
    int64_t lost = 0;
    for (int i = 0; i < o->n; i++) {
        tensor *g = o->param[i]->grad;
        if (!g)
            continue;
        o->param[i]->grad = NULL;
        if (into_master) { /* copy up, unscale, add into the master gradient */
            tensor *one[1];
            optimizer_collect_grads_one(r, o, i, g, one);
            if (s->enabled)
                *found_inf |= scaler_unscale(r, s, one, 1, true);
            g = one[0];
        }
        if (k == 0 || !o->acc[i]) {
            o->acc[i] = g;
            continue;
        }
        lost += grad_accumulate_add(r, o->acc[i], g, into_master ? ROLE_GRAD_MASTER : ROLE_GRAD_PARAM);
        tensor_release(&r->pool, g);
    }
    return lost;
}

bool optimizer_accumulated(optimizer *o, tensor **grads)
{
    for (int i = 0; i < o->n; i++) {
        if (o->acc_unscaled)
            grads[i] = o->acc[i];
        else
            o->param[i]->grad = o->acc[i];
        o->acc[i] = NULL;
    }
    return o->acc_unscaled;
}

int64_t optimizer_step(run *r, optimizer *o, tensor *const *grads)
{
    o->steps_taken++;
    optim_hyper h = optim_hyper_at(&o->cfg, o->lr, o->steps_taken);
    int ns = optim_state_count(&o->cfg);
    int64_t lost = 0;
    for (int i = 0; i < o->n; i++) {
        if (!grads[i])
            continue;
        tensor *p = o->master[i] ? o->master[i] : o->param[i];
        for (int k = 0; k < ns; k++) {
            if (o->state[i][k])
                continue;
            char name[TENSOR_NAME_MAX + 32];
            snprintf(name, sizeof name, "%s.%s", o->param[i]->name, optim_state_name(&o->cfg, k));
            o->state[i][k] = run_tensor_like(r, p, name, p->dtype, MEM_OPTIMIZER_STATE);
            const tensor *like = p; /* zeros_like(p) */
            tensor_why(o->state[i][k], DTYPE_REASON_PARAM, NULL, &like, 1);
            run_check(r, r->be->fill(r->be, o->state[i][k], 0.0f));
        }
        optim_tensors t = {.param = p, .grad = grads[i], .visible = o->param[i]->dtype};
        for (int k = 0; k < ns; k++)
            t.state[k] = o->state[i][k];
        optim_result res;
        memset(&res, 0, sizeof res);
        res.counting = r->counting;
        round_stats_init(&res.param);
        for (int k = 0; k < ns; k++)
            round_stats_init(&res.state[k]);
        run_check(r, r->be->optimizer_step(r->be, &o->cfg, &h, &t, &res));
        lost += res.lost_updates;
        observe_tensor(r->obs, p, o->master[i] ? ROLE_MASTER_PARAM : ROLE_PARAM,
                       res.counting ? &res.param : NULL);
        for (int k = 0; k < ns; k++)
            observe_tensor(r->obs, t.state[k], ROLE_OPTIMIZER_STATE,
                           res.counting ? &res.state[k] : NULL);
        if (o->master[i]) { /* refresh the half parameter from its master */
            round_stats st;
            round_stats *stp = run_stats(r, &st);
            run_check(r, r->be->cast(r->be, o->master[i], o->param[i], stp));
            observe_tensor(r->obs, o->param[i], ROLE_PARAM, stp);
        }
    }
    return lost;
}

void optimizer_zero_grad(run *r, optimizer *o, tensor **grads)
{
    for (int i = 0; i < o->n; i++) {
        if (grads[i] && grads[i] != o->param[i]->grad)
            tensor_release(&r->pool, grads[i]);
        tensor_release(&r->pool, o->param[i]->grad);
        o->param[i]->grad = NULL;
        grads[i] = NULL;
    }
}

/* CosineAnnealingLR.get_lr() of PyTorch 2.x: the recursive (chainable) form, in double */
void scheduler_step(optimizer *o)
{
    o->last_epoch++;
    if (o->schedule != SCHEDULE_COSINE)
        return;
    double e = (double)o->last_epoch, T = (double)o->t_max;
    if (((o->last_epoch - 1 - o->t_max) % (2 * o->t_max)) == 0)
        o->lr = o->lr + (o->base_lr - o->eta_min) * (1.0 - cos(M_PI / T)) / 2.0;
    else
        o->lr =
            (1.0 + cos(M_PI * e / T)) / (1.0 + cos(M_PI * (e - 1.0) / T)) * (o->lr - o->eta_min) +
            o->eta_min;
}
