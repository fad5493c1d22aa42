/*
 * position_embedding.c: `NAME = position_embedding P -> C`: adds a learned table [P, C] to
 * its input [B, T, C] by position, y = x + weight[:T] (GPT-2's `tok_emb + pos_emb`, written
 * as x + self.weight[:T] on a Parameter of nn.Embedding's init, N(0, 1)). The residual
 * stream: not on any autocast list (add's fallthrough in autocast_mode.cpp), so type
 * promotion gives y's dtype (float32 + float32 under autocast stays float32). Saves
 * nothing. Backward: dx = dy (cast into x's dtype where it differs), and the table's rows
 * [0, T) get dy summed over the batch (validate_outputs' sum_to_size in dy's dtype, float32
 * accumulation, then the cast into the table's dtype), rows [T, P) zero (SliceBackward's
 * zeros).
 */
#include "layer.h"

/* rows [r0, r0 + n) of a [P, C] table, as a tensor of their own (no memory of its own) */
static tensor table_rows(const tensor *t, int64_t r0, int64_t n)
{
    tensor v = *t;
    v.data = (char *)t->data + (size_t)(r0 * t->shape[1]) * dtype_size(t->dtype);
    v.shape[0] = n;
    v.numel = n * t->shape[1];
    return v;
}

static void position_embedding_backward(run *r, node *n)
{
    tensor *dy = n->grad;
    if (node_needs_grad(n, 0))
        give_grad_as_is(r, n, 0, dy);
    if (!node_needs_grad(n, 1))
        return;
    int64_t t = dy->shape[dy->ndim - 2], c = dy->shape[dy->ndim - 1], b = dy->numel / (t * c);
    tensor *dw = node_grad_tensor(r, n, 1);
    tensor head = table_rows(dw, 0, t), tail = table_rows(dw, t, dw->shape[0] - t);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->fill(r->be, dw, 0.0f));
    if (dy->dtype == dw->dtype) {
        run_check(r, reduce_channel_sum(r->be, dy, b, 1, &head, stp));
    } else {
        int64_t shape[2] = {t, c};
        tensor *sum = run_tensor(r, dw->name, dy->dtype, 2, shape, MEM_GRADS);
        run_check(r, reduce_channel_sum(r->be, dy, b, 1, sum, NULL));
        run_check(r, r->be->cast(r->be, sum, &head, stp));
        tensor_release(&r->pool, sum);
    }
    if (stp && tail.numel) /* the zero rows, counted as they are */
        run_check(r, r->be->observe(r->be, &tail, stp));
    node_give_grad(r, n, 1, dw, stp);
}

static tensor *position_embedding_forward(run *r, const layer_spec *l, tensor *const *in,
                                          tensor *const *params)
{
    tensor *x = in[0], *w = params[0];
    tensor rows = table_rows(w, 0, x->shape[x->ndim - 2]);
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor_like(r, x, name, promote_types(x->dtype, w->dtype), MEM_ACTIVATIONS);
    tensor *operands[2] = {x, w};
    autocast_why(r, y, layer_def_of(l->kind)->autocast, operands, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    const tensor *terms[2] = {x, &rows}; /* the add row; rows [T, C] repeat over the batch */
    run_check(r, r->be->pointwise_forward(r->be, PW_OP_add, &(op_params){0}, terms, y, stp));
    tensor *args[2] = {x, w};
    tape_record(r, "position_embedding", position_embedding_backward, y, args, 2);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool position_embedding_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                                     shape_check *sc)
{
    char s[128];
    shape_text(&in[0], s, sizeof s);
    if (in[0].ndim != 2) {
        shape_fail(sc, SHAPE_INPUT, "input has shape %s; position_embedding takes [T, C]", s);
        return false;
    }
    if (in[0].dim[1] != l->out)
        shape_fail(sc, SHAPE_INPUT, "input has shape %s: %lld channels, not %lld", s,
                   (long long)in[0].dim[1], (long long)l->out);
    if (in[0].dim[0] > l->in)
        shape_fail(sc, SHAPE_INPUT, "input has %lld positions, more than the table's %lld",
                   (long long)in[0].dim[0], (long long)l->in);
    *out = in[0];
    return true;
}

static int position_embedding_params(const layer_spec *l, layer_param *out)
{
    out[0] = (layer_param){"weight", 2, {l->in, l->out}, PARAM_INIT_NORMAL, -1 /* no row zeroed */};
    return 1;
}

static int position_embedding_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "position_embedding %lld → %lld", (long long)l->in,
                    (long long)l->out);
}

static const kind_arg position_embedding_args[] = {
    {"positions", "in", offsetof(layer_spec, in), 1},
    {"embedding_dim", "out", offsetof(layer_spec, out), 1},
};
static const autocast_op position_embedding_autocast[] = {
    {"position_embedding",
     AUTOCAST_NONE,
     "not listed (add's fallthrough in autocast_mode.cpp): type promotion",
     {"add.Tensor", "slice.Tensor"}},
};

const layer_def position_embedding_def = {
    .name = "position_embedding",
    .signature = "P -> C",
    .args = position_embedding_args,
    .n_args = COUNT_OF(position_embedding_args),
    .input_shape = no_input_shape,
    .shape = position_embedding_shape,
    .params = position_embedding_params,
    .autocast = position_embedding_autocast,
    .n_autocast = COUNT_OF(position_embedding_autocast),
    .forward = position_embedding_forward,
    .describe = position_embedding_describe,
};
