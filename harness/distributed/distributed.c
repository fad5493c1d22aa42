/*
 * distributed.c: the trainer's two hooks on a rank (distributed.h): rank 0's parameters
 * broadcast once they are made, and after each backward every parameter's gradient
 * all-reduced under the case's policy and observed. The state below is this process's, as
 * a process is one rank; outside a rank (a one-process case, the memory preflight) the
 * hooks do nothing.
 *
 * What a row `NAME.grad@allreduce` counts: the gradient after the whole communication (in
 * .grad's dtype) against the exact mean of the ranks' local gradients (their float64 sum,
 * all-reduced again, divided by the world size): underflow where that is non-zero and the
 * result zero, overflow where it is finite and the result infinite (a sum that overflowed
 * before its division stays infinite). Its histogram is of the exact values.
 */
#include "distributed.h"

#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "autograd/dump.h"
#include "autograd/host_values.h"
#include "autograd/run.h"

distributed_state dist;

void distributed_broadcast_params(run *r, tensor *const *params, int n)
{
    if (!dist.active || host_values_dry(r))
        return;
    for (int i = 0; i < n; i++) {
        int64_t bytes = tensor_bytes(params[i]);
        void *buf = malloc((size_t)bytes);
        if (!buf)
            run_fail(r, "out of host memory broadcasting %s", params[i]->name);
        r->be->download(r->be, buf, params[i]->data, bytes);
        distributed_bcast(buf, bytes);
        r->be->upload(r->be, params[i]->data, buf, bytes);
        free(buf);
    }
}

/* AMPSCOPE_DISTRIBUTED_FAIL=RANK:STEP makes that rank fail there, RANK:STEP:kill kill itself
 * with SIGKILL there (the tests' ways to end a rank mid-step; tests/test_distributed.c) */
static void maybe_fail(run *r)
{
    const char *spec = getenv("AMPSCOPE_DISTRIBUTED_FAIL");
    long rank, step;
    char how[8] = "";
    if (!spec || sscanf(spec, "%ld:%ld:%7s", &rank, &step, how) < 2 || rank != dist.rank ||
        step != r->obs->step)
        return;
    if (strcmp(how, "kill") == 0)
        raise(SIGKILL);
    run_fail(r, "failing at step %ld after backward, as AMPSCOPE_DISTRIBUTED_FAIL=%s asks", step,
             spec);
}

/* the rank's own gradient as stored, gathered to rank 0's record (ranks.csv) */
enum { LOCAL_NUMEL, LOCAL_ZEROS, LOCAL_SUBNORMAL, LOCAL_INF, LOCAL_NAN, LOCAL_AMAX, LOCAL_N };

static void local_counts(run *r, const tensor *g, const float *v)
{
    round_counts c;
    round_counts_init(&c);
    float min_normal = dtype_min_normal(g->dtype);
    int64_t inf = 0;
    for (int64_t i = 0; i < g->numel; i++) {
        round_tally(&c, v[i], v[i], min_normal);
        inf += isinf(v[i]) != 0;
    }
    double amax = (double)c.amax;
    int64_t mine[LOCAL_N] = {g->numel, c.zeros, c.subnormal, inf, c.nan, 0};
    memcpy(&mine[LOCAL_AMAX], &amax, sizeof amax);
    int64_t *all = dist.rank == 0 ? calloc((size_t)dist.world_size, sizeof mine) : NULL;
    if (dist.rank == 0 && !all)
        run_fail(r, "out of host memory");
    distributed_gather_i64(mine, all, LOCAL_N);
    run_record *rec = r->obs->rec;
    for (int k = 0; all && rec && k < dist.world_size; k++) {
        const int64_t *a = &all[k * LOCAL_N];
        memcpy(&amax, &a[LOCAL_AMAX], sizeof amax);
        record_rank *row = record_add_rank(rec);
        if (row)
            *row = (record_rank){.step = r->obs->step,
                                 .rank = k,
                                 .tensor = record_intern(rec, g->name),
                                 .dtype = g->dtype,
                                 .numel = a[LOCAL_NUMEL],
                                 .zeros = a[LOCAL_ZEROS],
                                 .subnormal = a[LOCAL_SUBNORMAL],
                                 .inf = a[LOCAL_INF],
                                 .nan = a[LOCAL_NAN],
                                 .amax = record_g9(amax)};
    }
    free(all);
}

/* the exact mean of the ranks' gradients: their float64 sum over the ranks, / N */
static double *exact_mean(run *r, const float *v, int64_t n)
{
    double *e = malloc(sizeof(double) * (size_t)n);
    if (!e)
        run_fail(r, "out of host memory");
    for (int64_t i = 0; i < n; i++)
        e[i] = (double)v[i];
    distributed_allreduce_f64(e, n);
    for (int64_t i = 0; i < n; i++)
        e[i] /= (double)dist.world_size;
    return e;
}

/* v = the all-reduce of every rank's v under the plan, in .grad's dtype */
static void reduce_values(run *r, const comm_plan *plan, dtype grad, float *v, int64_t n)
{
    size_t size = dtype_size(plan->wire);
    void *wire = malloc(size * (size_t)n);
    if (!wire)
        run_fail(r, "out of host memory");
    distributed_contribution(plan, v, v, n);
    for (int64_t i = 0; i < n; i++)
        store_from_float(wire, plan->wire, i, v[i]);
    char err[1024];
    if (!distributed_nccl_active())
        distributed_allreduce(wire, n, plan->wire);
    else if (distributed_nccl_allreduce(wire, n, plan->wire, err, sizeof err))
        run_fail(r, "%s", err);
    for (int64_t i = 0; i < n; i++)
        v[i] = load_as_float(wire, plan->wire, i);
    free(wire);
    distributed_finish(plan, grad, v, n);
}

/* --dump-ranks: this rank's own gradient as its backward left it, DIR/rank-R/<step>/ */
static void dump_local(run *r, const tensor *g)
{
    if (!dist.dump_dir[0] || !r->obs->recording ||
        (dist.dump_only && fnmatch(dist.dump_only, g->name, 0) != 0))
        return;
    char sub[32], err[512];
    snprintf(sub, sizeof sub, "%lld", (long long)r->obs->step);
    if (dump_tensor(r->be, dist.dump_dir, sub, g, err, sizeof err))
        run_fail(r, "%s", err);
}

static void reduce_one(run *r, tensor *g)
{
    const case_config *cfg = r->cfg;
    int64_t n = g->numel;
    dump_local(r, g);
    comm_plan plan = distributed_plan((comm_policy)cfg->comm, g->dtype, cfg->reduce_dtype,
                                      cfg->world_size);
    float *v = host_values_get(r, g);
    bool recording = r->obs->recording && r->counting;
    if (recording)
        local_counts(r, g, v);
    double *e = exact_mean(r, v, n);
    reduce_values(r, &plan, g->dtype, v, n);
    host_values_put(r, g, v, NULL); /* already in .grad's dtype: nothing rounds */

    round_stats st;
    round_stats_init(&st);
    st.numel = n;
    double err2 = 0, sig2 = 0;
    int64_t nonfinite = 0;
    float min_normal = dtype_min_normal(g->dtype);
    for (int64_t i = 0; i < n; i++) {
        float pre = (float)e[i];
        round_tally(&st.counts, pre, v[i], min_normal);
        st.hist[hist_bin(pre)]++;
        if (!isfinite(v[i])) {
            nonfinite++;
            continue;
        }
        err2 += (v[i] - e[i]) * (v[i] - e[i]);
        sig2 += e[i] * e[i];
    }
    free(e);
    tensor seen = *g; /* the same storage, under the name of the rounding point */
    snprintf(seen.name, sizeof seen.name, "%.*s@allreduce", TENSOR_NAME_MAX - 11, g->name);
    observe_tensor(r->obs, &seen, ROLE_GRAD_PARAM, r->counting ? &st : NULL);
    run_record *rec = r->obs->rec;
    record_allreduce *row = recording && dist.rank == 0 && rec ? record_add_allreduce(rec) : NULL;
    if (row) {
        double rel = sig2 > 0 ? sqrt(err2 / sig2) : (err2 > 0 ? INFINITY : 0.0);
        double sqnr = err2 > 0 ? 10.0 * log10(sig2 / err2) : INFINITY;
        *row = (record_allreduce){
            .step = r->obs->step,
            .tensor = record_intern(rec, seen.name),
            .comm = comm_policy_names[cfg->comm],
            .algorithm = allreduce_algorithm_names[cfg->allreduce_algorithm],
            .dtype = g->dtype,
            .wire = plan.wire,
            .world_size = cfg->world_size,
            .numel = n,
            .underflow = st.counts.underflow,
            .overflow = st.counts.overflow,
            .nonfinite = nonfinite,
            .rel_error = record_g9(rel),
            .sqnr_db = record_g9(sqnr),
        };
    }
    free(v);
}

void distributed_reduce_grads(run *r, tensor *const *params, int n)
{
    if (!dist.active || host_values_dry(r))
        return;
    maybe_fail(r);
    for (int i = 0; i < n; i++)
        if (params[i]->grad)
            reduce_one(r, params[i]->grad);
}

int distributed_agree_signal(int sig)
{
    return dist.active ? distributed_max_int(sig) : sig;
}
