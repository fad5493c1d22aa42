/* train.c: one case's run into its record (see train.h). */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autograd/autocast.h"
#include "autograd/dump.h"
#include "autograd/host_values.h"
#include "core/interrupt.h"
#include "clip.h"
#include "distributed/distributed.h"
#include "layers/fp8_linear.h"
#include "layers/layer.h"
#include "microbatch.h"
#include "optimizer.h"

typedef struct trainer {
    run *r;
    model m;
    optimizer opt;
    grad_scaler scaler;
    int64_t steps;
    double *step_ms;
    int64_t steps_done;
    int stop_signal; /* SIGINT or SIGTERM asked the run to stop after steps_done steps */
    int64_t saved_bytes;     /* most bytes saved for backward at the end of a forward */
    int64_t saved_by_dtype[DTYPE_COUNT]; /* those bytes by dtype */
    int64_t init_dump_bytes; /* dry pass: what DUMP/init/ takes */
    float last_loss;
    const train_options *opt_in;
    /* accumulation: micro-batches per step, their data (index 0: the model's own) */
    int64_t n_micro;
    tensor *micro_input[CASE_MAX_ACCUMULATE], *micro_target[CASE_MAX_ACCUMULATE];
    /* the step's first non-finite tensor: the op that made it and that op's forward input
     * (steps.csv's first_nonfinite_op and first_nonfinite_input), from a copy of the tape */
    node tape_copy[RUN_MAX_NODES];
    char nonfinite_op[64], nonfinite_input[TENSOR_NAME_MAX];
} trainer;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* a tensor as it is, observed (its counts describe it; nothing was rounded) */
static void observe_as_is(run *r, tensor *t, tensor_role role)
{
    round_stats st;
    round_stats *stp = t->dtype == DTYPE_INT64 ? NULL : run_stats(r, &st); /* labels: no counts */
    if (stp && r->obs->recording)
        run_check(r, r->be->observe(r->be, t, stp));
    observe_tensor(r->obs, t, role, stp);
}

static float read_scalar(run *r, const tensor *t)
{
    uint8_t buf[8];
    r->be->download(r->be, buf, t->data, (int64_t)dtype_size(t->dtype));
    return load_as_float(buf, t->dtype, 0);
}

static void progress(const trainer *t, int64_t s, double start)
{
    static double last_print;
    double elapsed = (now_ms() - start) / 1e3;
    if (t->opt_in->quiet || (!t->opt_in->progress && elapsed < 2.0))
        return;
    double eta = elapsed / (double)(s + 1) * (double)(t->steps - s - 1);
    bool tty = isatty(STDERR_FILENO);
    if (!tty && s + 1 < t->steps && now_ms() - last_print < 5000.0)
        return;
    last_print = now_ms();
    fprintf(stderr, "%s%s: step %lld/%lld, %.1fs elapsed, ETA %.1fs%s", tty ? "\r\033[K" : "",
            t->r->cfg->name, (long long)(s + 1), (long long)t->steps, elapsed, eta,
            tty ? (s + 1 == t->steps ? "\n" : "") : "\n");
}

/* loss / N for accumulation: its node's backward divides the gradient likewise (PyTorch's
 * div by a Python number: float(x) / N rounded into x's dtype); one element, on the host */
static void div_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    float *v = host_values_get(r, n->grad);
    v[0] = v[0] / (float)n->scalar;
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    host_values_put(r, dx, v, stp);
    free(v);
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *loss_div(run *r, tensor *loss, int64_t n_micro)
{
    tensor *y = run_tensor(r, "loss.div", loss->dtype, 0, NULL, MEM_ACTIVATIONS);
    const tensor *from = loss; /* a Python number does not promote */
    tensor_why(y, DTYPE_REASON_INPUT, "div", &from, 1);
    float *v = host_values_get(r, loss);
    v[0] = v[0] / (float)n_micro;
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    host_values_put(r, y, v, stp);
    free(v);
    node *n = tape_record(r, "div", div_backward, y, &loss, 1);
    if (n)
        n->scalar = (double)n_micro;
    observe_tensor(r->obs, y, ROLE_LOSS, stp);
    return y;
}

/* Names what made the step's first non-finite tensor, once it is known: a gradient "X.grad"
 * was made by the backward of the node that read X in the forward pass (X is its forward
 * input); a forward tensor by the node whose output it is (its first input named). */
static void name_nonfinite_origin(trainer *t, int n_nodes)
{
    const char *name = t->r->obs->first_nonfinite;
    if (!name[0] || t->nonfinite_op[0])
        return;
    size_t len = strlen(name);
    bool grad = len > 5 && strcmp(name + len - 5, ".grad") == 0;
    for (int k = n_nodes - 1; k >= 0; k--) {
        const node *n = &t->tape_copy[k];
        for (int i = 0; grad && i < n->n_in; i++)
            if (strlen(n->in[i].name) == len - 5 && strncmp(n->in[i].name, name, len - 5) == 0) {
                snprintf(t->nonfinite_op, sizeof t->nonfinite_op, "%s backward", n->op);
                snprintf(t->nonfinite_input, sizeof t->nonfinite_input, "%s", n->in[i].name);
                return;
            }
        if (!grad && strcmp(n->out.name, name) == 0) {
            snprintf(t->nonfinite_op, sizeof t->nonfinite_op, "%s forward", n->op);
            snprintf(t->nonfinite_input, sizeof t->nonfinite_input, "%s", n->in[0].name);
            return;
        }
    }
}

/* micro-batch k's data: the model's own for k = 0, else drawn at step 0 and kept */
static void use_micro_batch(trainer *t, int64_t k)
{
    if (t->n_micro == 1)
        return;
    if (!t->micro_input[0]) {
        t->micro_input[0] = t->m.input;
        for (int64_t j = 1; j < t->n_micro; j++)
            t->micro_input[j] = microbatch_input(t->r, j, t->m.input);
    }
    if (k == 1 && !t->micro_target[0])
        t->micro_target[0] = t->m.target; /* made by micro-batch 0's loss */
    t->m.input = t->micro_input[k];
    t->m.target = t->micro_target[k];
}

static tensor *micro_target(trainer *t, int64_t k, const tensor *out)
{
    if (k == 0 || t->micro_target[k])
        return model_target(t->r, &t->m, out);
    t->micro_target[k] = t->m.target = microbatch_target(t->r, k, out);
    return t->m.target;
}

/* One micro-batch's forward and backward (the whole step's when accumulate = 1): its
 * gradients are left in the parameters' .grad. Returns the loss's value (divided by N). */
static float forward_backward(trainer *t, int64_t s, int64_t k)
{
    run *r = t->r;
    const case_config *cfg = r->cfg;
    use_micro_batch(t, k);
    /* forward (and the loss, inside or outside the autocast region) */
    observe_begin_pass(r->obs, PASS_FORWARD);
    if (s == 0) { /* the batch and the initial parameters, once: later steps reuse the batch,
                   * and each step's optimizer pass records the parameters it writes */
        observe_as_is(r, t->m.input, ROLE_INPUT);
        for (int i = 0; k == 0 && i < t->m.n_params; i++)
            observe_as_is(r, t->m.params[i], ROLE_PARAM);
    }
    r->autocast = cfg->autocast;
    r->autocast_dtype = cfg->autocast_dtype;
    tensor *out = model_forward(r, &t->m);
    fp8_forward_done(r); /* TE's fp8_autocast exit */
    if (!cfg->loss_in_autocast)
        autocast_exit(r);
    bool new_target = !t->m.target;
    tensor *target = micro_target(t, k, out);
    if (new_target)
        observe_as_is(r, target, ROLE_TARGET);
    tensor *loss = loss_def_of(cfg->loss)->forward(r, cfg, out, target);
    autocast_exit(r);
    if (t->n_micro > 1) { /* loss = loss / N */
        tensor *div = loss_div(r, loss, t->n_micro);
        tensor_release(&r->pool, loss);
        loss = div;
    }
    tensor *root = loss;
    if (t->scaler.enabled)
        root = scaler_scale(r, &t->scaler, loss);
    float value = read_scalar(r, loss);

    int64_t saved_by_dtype[DTYPE_COUNT];
    int64_t saved = tape_saved_bytes_by_dtype(r, saved_by_dtype);
    if (saved > t->saved_bytes) {
        t->saved_bytes = saved;
        memcpy(t->saved_by_dtype, saved_by_dtype, sizeof saved_by_dtype);
    }

    /* backward */
    observe_begin_pass(r->obs, PASS_BACKWARD);
    int n_nodes = r->n_nodes;
    memcpy(t->tape_copy, r->nodes, sizeof(node) * (size_t)n_nodes);
    tape_backward(r, root, 1.0f);
    fp8_backward_done(r);
    name_nonfinite_origin(t, n_nodes);
    if (root != loss)
        tensor_release(&r->pool, root);
    tensor_release(&r->pool, loss);
    tensor_release(&r->pool, out);
    return value;
}

/* clip_grad_norm_ / clip_grad_value_ on the step's gradients (clip.h) */
static clip_result clip_grads(run *r, tensor *const *grads, int n, bool master)
{
    const case_config *cfg = r->cfg;
    tensor_role role = master ? ROLE_GRAD_MASTER : ROLE_GRAD_PARAM;
    clip_result c = {.total_norm = NAN, .clip_coef = NAN};
    if (cfg->clip_grad_norm > 0)
        c = clip_grad_norm(r, grads, n, role);
    if (cfg->clip_grad_value > 0)
        clip_grad_value(r, grads, n, role);
    return c;
}

void train_capture_free(train_capture *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->values[i]);
    memset(c, 0, sizeof *c);
}

static void capture_grads(trainer *t, tensor *const *grads, float scale)
{
    train_capture *c = t->opt_in->capture;
    if (!c || c->done || host_values_dry(t->r))
        return;
    c->done = true;
    c->loss = t->last_loss;
    c->scale = t->scaler.enabled ? scale : 1.0f;
    for (int i = 0; i < t->opt.n && c->n < CAPTURE_MAX; i++) {
        if (!grads[i])
            continue;
        snprintf(c->names[c->n], sizeof c->names[c->n], "%s.grad", t->opt.param[i]->name);
        c->dtypes[c->n] = grads[i]->dtype;
        c->numel[c->n] = grads[i]->numel;
        c->values[c->n] = host_values_get(t->r, grads[i]);
        c->n++;
    }
}

static void train_step(trainer *t, int64_t s)
{
    run *r = t->r;
    const case_config *cfg = r->cfg;
    double t0 = now_ms();
    /* a dry pass counts what every step would hold and dump */
    observe_begin_step(r->obs, s, r->be->observe_every_step || case_observes_step(cfg, s));
    t->nonfinite_op[0] = t->nonfinite_input[0] = '\0';
    float scale = t->scaler.scale;
    int found_inf = 0;
    int64_t lost_acc = 0;
    double loss_sum = 0.0; /* accumulation: the micro-batches' loss / N, summed as .item()s */
    tensor *grads[2 * CASE_MAX_LAYERS];
    bool unscaled = false;
    if (t->n_micro == 1) {
        t->last_loss = forward_backward(t, s, 0);
        distributed_reduce_grads(r, t->m.params, t->m.n_params); /* a rank's all-reduce */
    } else {
        for (int64_t k = 0; k < t->n_micro; k++) {
            loss_sum += (double)forward_backward(t, s, k);
            lost_acc += optimizer_accumulate(r, &t->opt, &t->scaler, k, &found_inf);
        }
        t->last_loss = (float)loss_sum;
        unscaled = optimizer_accumulated(&t->opt, grads);
        /* DDP's no_sync: the micro-batches accumulate in .grad, then one all-reduce in the
         * last one's backward (reducer.cpp: its hooks fire once AccumulateGrad has added the
         * last gradient into .grad); the case parser refuses the float32 masters' own sums */
        distributed_reduce_grads(r, t->m.params, t->m.n_params);
    }

    /* GradScaler, clipping and optimizer */
    observe_begin_pass(r->obs, PASS_OPTIMIZER);
    if (!unscaled)
        optimizer_collect_grads(r, &t->opt, grads);
    int64_t lost = 0, steps_before = t->opt.steps_taken;
    clip_result clip = {.total_norm = NAN, .clip_coef = NAN};
    if (cfg->clip_before_unscale) /* the mistake: clipping the scaled gradients */
        clip = clip_grads(r, grads, t->opt.n, cfg->master_weights);
    if (t->scaler.enabled && !unscaled)
        found_inf = scaler_unscale(r, &t->scaler, grads, t->opt.n, cfg->master_weights);
    capture_grads(t, grads, scale);
    if (!cfg->clip_before_unscale) /* scaler.unscale_(optimizer); clip_grad_norm_(...) */
        clip = clip_grads(r, grads, t->opt.n, cfg->master_weights);
    if (!found_inf) /* scaler.step(optimizer): optimizer.step() unless an inf/NaN was found */
        lost = optimizer_step(r, &t->opt, grads);
    /* skipped: whether optimizer.step() did not run, as the optimizer counts its steps */
    int skipped = t->opt.steps_taken == steps_before;
    if (t->scaler.enabled)
        scaler_update(&t->scaler, found_inf);
    double lr = t->opt.lr;
    scheduler_step(&t->opt);
    optimizer_zero_grad(r, &t->opt, grads);
    r->be->synchronize(r->be);
    t->step_ms[s] = now_ms() - t0;

    run_record *rec = r->obs->rec;
    record_step *row = rec ? record_add_step(rec) : NULL;
    if (!row)
        return;
    *row = (record_step){
        .step = s,
        .loss = t->last_loss,
        .loss_scale = t->scaler.enabled ? scale : 1.0f,
        .found_inf = found_inf != 0,
        .skipped = skipped != 0,
        .step_ms = t->step_ms[s],
        .lr = lr,
        .lost_updates = lost,
        .first_nonfinite = record_intern(rec, found_inf ? r->obs->first_nonfinite : ""),
        /* accumulation's and clipping's: only where the case accumulates or clips */
        .accumulates = t->n_micro > 1,
        .lost_accumulations = lost_acc,
        .clips = cfg->clip_grad_norm > 0,
        .total_norm = record_g9(clip.total_norm),
        .clip_coef = record_g9(clip.clip_coef),
        .nonfinite_op = record_intern(rec, found_inf ? t->nonfinite_op : ""),
        .nonfinite_input = record_intern(rec, found_inf ? t->nonfinite_input : ""),
    };
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void dump_init(trainer *t, const char *dir)
{
    run *r = t->r;
    if (r->obs->dump_dry) {
        for (int i = 0; i < t->m.n_params; i++)
            r->obs->dump_bytes += tensor_bytes(t->m.params[i]);
        r->obs->dump_bytes += tensor_bytes(t->m.input);
        return;
    }
    char err[512];
    for (int i = 0; i < t->m.n_params; i++)
        if (dump_tensor(r->be, dir, "init", t->m.params[i], err, sizeof err))
            run_fail(r, "%s", err);
    if (dump_tensor(r->be, dir, "init", t->m.input, err, sizeof err))
        run_fail(r, "%s", err);
}

/* Every op in every dtype the case's tensors take (parameters, input, autocast's), as the
 * backend answers backend_supports(): a case it cannot run ends before its first tensor.
 * An op the backend leaves out altogether (backend_leaves_out: MXFP8's on the GPU) is asked
 * by what would call it, when the case needs it (fp8_linear.h's fp8_refusal). */
static void check_support(run *r)
{
    const case_config *cfg = r->cfg;
    dtype used[] = {cfg->params, cfg->input_dtype,
                    cfg->autocast ? cfg->autocast_dtype : cfg->params};
    for (size_t d = 0; d < sizeof used / sizeof used[0]; d++)
        for (int op = 0; op < BACKEND_OP_COUNT; op++)
            if (!backend_leaves_out(r->be, (backend_op)op) &&
                !backend_supports(r->be, (backend_op)op, used[d]))
                run_fail(r, "the %s backend cannot run %s on %s tensors", r->be->name,
                         backend_op_name((backend_op)op), dtype_name(used[d]));
}

/* The signal that asks the run to stop after this step, or 0: on a rank, the one every rank
 * agrees on (distributed_agree_signal), so that all stop after the same step; never in the
 * preflight's dry pass */
static int stop_asked(run *r)
{
    return host_values_dry(r) ? 0 : distributed_agree_signal(interrupt_signal());
}

static void train_steps(trainer *t)
{
    run *r = t->r;
    char err[512];
    check_support(r);
    fp8_begin(r);
    model_init(r, &t->m);
    distributed_broadcast_params(r, t->m.params, t->m.n_params); /* a rank: rank 0's values */
    optimizer_init(r, &t->opt, &t->m);
    scaler_init(&t->scaler, r->cfg);
    t->n_micro = r->cfg->accumulate;
    if (t->opt_in->dump_dir) {
        dump_init(t, t->opt_in->dump_dir);
        t->init_dump_bytes = r->obs->dump_bytes;
    }
    double start = now_ms();
    for (int64_t s = 0; s < t->steps; s++) {
        train_step(t, s);
        t->steps_done = s + 1;
        if (s == 0 && t->opt_in->dump_dir && r->obs->dump_dry) {
            r->obs->dump_bytes += tensor_bytes(t->m.target);
            t->init_dump_bytes += tensor_bytes(t->m.target);
        } else if (s == 0 && t->opt_in->dump_dir &&
                   dump_tensor(r->be, t->opt_in->dump_dir, "init", t->m.target, err, sizeof err))
            run_fail(r, "%s", err);
        progress(t, s, start);
        if (s + 1 < t->steps && (t->stop_signal = stop_asked(r)))
            break;
    }
}

static void fill_result(const case_config *cfg, const run *r, const trainer *t, int64_t steps_done,
                        run_record *rec)
{
    const observer *o = r->obs;
    case_result *res = &rec->result;
    snprintf(res->device, sizeof res->device, "%s", r->be->device);
    snprintf(res->params, sizeof res->params, "%s", dtype_name(cfg->params));
    snprintf(res->autocast, sizeof res->autocast, "%s",
             cfg->autocast ? dtype_name(cfg->autocast_dtype) : "off");
    snprintf(res->input_dtype, sizeof res->input_dtype, "%s", dtype_name(cfg->input_dtype));
    char out_name[TENSOR_NAME_MAX];
    snprintf(out_name, sizeof out_name, "%s.out", cfg->layers[cfg->n_layers - 1].name);
    dtype dt;
    if (record_find(rec, out_name, &dt))
        snprintf(res->output_dtype, sizeof res->output_dtype, "%s", dtype_name(dt));
    if (record_find(rec, "loss", &dt))
        snprintf(res->loss_dtype, sizeof res->loss_dtype, "%s", dtype_name(dt));
    observe_dtype_set(o, ROLE_GRAD_PARAM, res->param_grad_dtypes, sizeof res->param_grad_dtypes);
    observe_dtype_set(o, ROLE_GRAD_CAST, res->cast_grad_dtypes, sizeof res->cast_grad_dtypes);
    observe_dtype_set(o, ROLE_GRAD_ACTIVATION, res->activation_grad_dtypes,
                      sizeof res->activation_grad_dtypes);
    res->grad_underflow = o->grad_underflow;
    res->grad_numel = o->grad_numel;
    res->final_loss = steps_done ? (double)t->last_loss : NAN;
    res->peak_bytes = r->account.total_peak;
    res->workspace_peak_bytes = r->account.peak[MEM_WORKSPACE];
    if (steps_done) {
        double *sorted = malloc(sizeof(double) * (size_t)steps_done);
        if (sorted) {
            memcpy(sorted, t->step_ms, sizeof(double) * (size_t)steps_done);
            qsort(sorted, (size_t)steps_done, sizeof(double), cmp_double);
            res->step_ms = sorted[steps_done / 2];
            free(sorted);
        }
    } else {
        res->step_ms = NAN;
    }
}

/* memory.csv's rows: each category's peak and final bytes (buffers only for models that
 * have them), the total, and the most bytes saved for backward with their dtypes */
static void keep_memory(run_record *rec, const mem_account *a, const mem_account *end,
                        const trainer *t)
{
    record_memory *m;
    for (int c = 0; c < MEM_CATEGORY_COUNT; c++)
        if ((c != MEM_BUFFERS || a->peak[c]) && (m = record_add_memory(rec)))
            *m = (record_memory){.category = mem_category_name((mem_category)c),
                                 .peak = a->peak[c],
                                 .end = end->current[c]};
    if ((m = record_add_memory(rec)))
        *m = (record_memory){.category = "total", .peak = a->total_peak, .end = end->total};
    if ((m = record_add_memory(rec))) {
        *m = (record_memory){.category = "saved_for_backward", .peak = t->saved_bytes};
        memcpy(m->by_dtype, t->saved_by_dtype, sizeof m->by_dtype);
    }
}

int train_case(const case_config *cfg, backend *be, const train_options *opt, run_record *rec)
{
    case_result *res = &rec->result;
    memset(res, 0, sizeof *res);
    snprintf(res->name, sizeof res->name, "%s", cfg->name);
    rec->has_fp8 = cfg->fp8;
    trainer *t = calloc(1, sizeof *t);
    run *r = calloc(1, sizeof *r);
    observer *obs = calloc(1, sizeof *obs);
    int64_t steps = cfg->steps;
    double *step_ms = calloc((size_t)steps, sizeof(double));
    if (!t || !r || !obs || !step_ms) {
        free(t), free(r), free(obs), free(step_ms);
        snprintf(res->error, sizeof res->error, "out of host memory");
        return -1;
    }
    *obs = (observer){.rec = rec,
                      .be = be,
                      .dump_dir = opt->dump_dir,
                      .dump_only = opt->dump_only};
    r->cfg = cfg;
    r->be = be;
    r->obs = obs;
    r->counting = !opt->observe_off;
    r->pool = (tensor_pool){.be = be, .account = &r->account};
    be->account = &r->account;
    t->r = r;
    t->steps = steps;
    t->step_ms = step_ms;
    t->opt_in = opt;
    if (setjmp(r->fail) == 0) {
        res->ok = true;
        train_steps(t);
    } else {
        res->ok = false;
        res->interrupted = r->interrupted;
        snprintf(res->error, sizeof res->error, "%s", r->error);
    }
    int64_t done = t->steps_done;
    if (res->ok && t->stop_signal) { /* the completed steps are the run's results */
        res->interrupted = true;
        snprintf(res->error, sizeof res->error, "interrupted after step %lld of %lld (%s)",
                 (long long)done, (long long)steps, interrupt_name(t->stop_signal));
    }
    mem_account end = r->account; /* what the run holds at its end, before teardown */
    tape_clear(r);
    model_free_host(&t->m);
    autocast_exit(r);
    fp8_free(r);
    tensor_pool_clear(&r->pool);
    fill_result(cfg, r, t, done, rec);
    keep_memory(rec, &r->account, &end, t);
    be->account = NULL;
    int rc = 0;
    if (obs->write_failed) {
        snprintf(res->error, sizeof res->error, "writing --dump files failed%s%s",
                 obs->dump_error[0] ? ": " : "", obs->dump_error);
        rc = -1;
    } else if (rec->out_of_memory) {
        snprintf(res->error, sizeof res->error, "out of host memory keeping the run's record");
        rc = -1;
    }
    free(obs);
    free(step_ms);
    free(r);
    free(t);
    return rc;
}

int train_preflight(const case_config *cfg, const train_options *opt, int64_t *bytes,
                    int64_t *dump_bytes, char *err, int errlen)
{
    mem_account account = {0};
    backend *be = backend_dry_open(&account);
    trainer *t = calloc(1, sizeof *t);
    run *r = calloc(1, sizeof *r);
    observer *obs = calloc(1, sizeof *obs);
    int64_t steps = cfg->steps;
    int64_t dry_steps = steps < 2 ? steps : 2; /* the optimizer's state exists from step 2 on */
    double step_ms[2];
    if (!be || !t || !r || !obs) {
        snprintf(err, (size_t)errlen, "out of host memory");
        free(t), free(r), free(obs);
        if (be)
            be->close(be);
        return -1;
    }
    *obs = (observer){.be = be,
                      .dump_dir = opt->dump_dir,
                      .dump_only = opt->dump_only,
                      .dump_dry = true};
    r->cfg = cfg;
    r->be = be;
    r->obs = obs;
    r->pool = (tensor_pool){.be = be, .account = &r->account};
    be->account = &r->account;
    t->r = r; /* field by field: a trainer is too large for a compound literal's stack copy */
    t->steps = dry_steps;
    t->step_ms = step_ms;
    train_options quiet = *opt;
    quiet.quiet = true;
    t->opt_in = &quiet;
    int rc = 0;
    if (setjmp(r->fail) == 0) {
        train_steps(t);
    } else {
        snprintf(err, (size_t)errlen, "%s", r->error);
        rc = -1;
    }
    tape_clear(r);
    model_free_host(&t->m);
    autocast_exit(r);
    fp8_free(r);
    tensor_pool_clear(&r->pool);
    *bytes = r->account.total_peak;
    /* the init files, then every observed step as large as the dry steps were on average */
    int64_t observed = 0;
    for (int64_t s = 0; s < steps; s++)
        observed += case_observes_step(cfg, s);
    int64_t init = t->init_dump_bytes;
    *dump_bytes = opt->dump_dir ? init + (obs->dump_bytes - init) / dry_steps * observed : 0;
    free(obs);
    free(r);
    free(t);
    be->close(be);
    return rc;
}
