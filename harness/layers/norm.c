/*
 * norm.c: the forward and backward the normalization kinds share (norm.h): autocast's
 * casts, PyTorch's dtype check, the output and statistics tensors, the backend's norm ops
 * and the tape; the shape rules of the kinds over the last dim.
 */
#include "norm.h"

tensor *norm_run(run *r, const layer_spec *l, backward_fn backward, const norm_geom *g, tensor *x,
                 tensor *w, tensor *b, norm_stats_dtype stats)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *xa = autocast_arg(r, ac, x);
    tensor *wa = w ? autocast_arg(r, ac, w) : NULL;
    tensor *ba = b ? autocast_arg(r, ac, b) : NULL;
    const tensor *p = wa && wa->dtype != xa->dtype ? wa : ba && ba->dtype != xa->dtype ? ba : NULL;
    if (p)
        run_fail(r, "expected scalar type %s but found %s", scalar_type_name(xa->dtype),
                 scalar_type_name(p->dtype));
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, xa, name, xa->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, ac, &xa, 1);
    dtype sdt = stats == NORM_STATS_FLOAT32 ? DTYPE_FLOAT32 : xa->dtype;
    int64_t rows = g->n * g->groups;
    tensor *mean = NULL; /* rms_norm has none */
    if (g->form != NORM_RMS) {
        snprintf(name, sizeof name, "%s.mean", l->name);
        mean = run_tensor(r, name, sdt, 1, &rows, MEM_ACTIVATIONS);
    }
    snprintf(name, sizeof name, "%s.rstd", l->name);
    tensor *rstd = run_tensor(r, name, sdt, 1, &rows, MEM_ACTIVATIONS);
    tensor *stats_of[2] = {rstd, mean};
    for (int i = 0; i < 2 && stats_of[i]; i++) /* float32: the kernel's accumulate type */
        if (stats == NORM_STATS_FLOAT32)
            tensor_why(stats_of[i], DTYPE_REASON_OPMATH, ac->op, NULL, 0);
        else
            autocast_why(r, stats_of[i], ac, &xa, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->norm_forward(r->be, g, xa, wa, ba, y, mean, rstd, stp));
    tensor *args[3] = {xa, wa, ba};
    node *n = tape_record(r, ac->op, backward, y, args, 3);
    tape_save(n, 0, xa);
    if (mean)
        tape_save(n, 1, mean);
    tape_save(n, 2, rstd);
    if (wa)
        tape_save(n, 3, wa);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, mean);
    tensor_release(&r->pool, rstd);
    tensor_release(&r->pool, xa);
    tensor_release(&r->pool, wa);
    tensor_release(&r->pool, ba);
    return y;
}

void norm_backward(run *r, node *n, const norm_geom *g)
{
    backend *be = r->be;
    tensor *dy = n->grad, *x = n->saved[0], *mean = n->saved[1], *rstd = n->saved[2],
           *w = n->saved[3];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *dx = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->norm_backward_input(be, g, dy, x, mean, rstd, w, dx, stp));
        node_give_grad(r, n, 0, dx, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *dw = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, be->norm_backward_weight(be, g, dy, x, mean, rstd, dw, stp));
        node_give_grad(r, n, 1, dw, stp);
    }
    if (node_needs_grad(n, 2)) {
        tensor *db = node_grad_tensor(r, n, 2);
        round_stats *stp = run_stats(r, &st);
        run_check(r, reduce_channel_sum(be, dy, g->n, g->inner, db, stp));
        node_give_grad(r, n, 2, db, stp);
    }
}

bool norm_last_dim_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    if (in[0].dim[in[0].ndim - 1] != l->in) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; %s %lld normalizes a last dim of %lld", s,
                   layer_def_of(l->kind)->name, (long long)l->in, (long long)l->in);
        return false;
    }
    *out = in[0];
    return true;
}

bool norm_last_dim_input_shape(const layer_spec *l, layer_shape *in)
{
    *in = (layer_shape){1, {l->in}};
    return true;
}
