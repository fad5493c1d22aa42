/*
 * embedding.c: nn.Embedding, `NAME = embedding V -> C [padding_idx=P]`: int64 token ids
 * [B, T] (the input: `input = tokens vocab=V` or an int64 file) to rows of the weight
 * [V, C], out [B, T, C] in the weight's dtype. Not on any autocast list (autocast_mode.cpp
 * registers no embedding kernel: the fallthrough), so with float32 weights it returns
 * float32 under autocast, and the residual stream that adds to it stays float32. The weight
 * is N(0, 1) (nn.Embedding.reset_parameters: normal_, the padding_idx row zeroed). Saved for
 * backward: the ids. The weight's gradient is embedding_dense_backward's scatter-add in the
 * weight's dtype (no row for padding_idx); the ids take none.
 */
#include "layer.h"

#define PADDING_NONE (-1) /* opt_int[0] when padding_idx is not given */

static void embedding_backward(run *r, node *n)
{
    if (!node_needs_grad(n, 1))
        return;
    tensor *dw = node_grad_tensor(r, n, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->embedding_backward(r->be, n->grad, n->saved[0], n->index, dw, stp));
    node_give_grad(r, n, 1, dw, stp);
}

static tensor *embedding_forward(run *r, const layer_spec *l, tensor *const *in,
                                 tensor *const *params)
{
    tensor *idx = in[0], *w = params[0];
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < idx->ndim; d++)
        shape[d] = idx->shape[d];
    shape[idx->ndim] = w->shape[1];
    tensor *y = run_tensor(r, name, w->dtype, idx->ndim + 1, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, layer_def_of(l->kind)->autocast, &w, 1); /* the weight is its floating operand */
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->embedding_forward(r->be, idx, w, y, stp));
    tensor *args[2] = {idx, w};
    node *n = tape_record(r, "embedding", embedding_backward, y, args, 2);
    tape_save(n, 0, idx);
    if (n)
        n->index = l->opt_int[0];
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static bool embedding_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                            shape_check *sc)
{
    if (in[0].ndim + 1 > LAYER_MAX_RANK) {
        char s[128];
        shape_text(&in[0], s, sizeof s);
        shape_fail(sc, SHAPE_INPUT, "token ids of shape %s; embedding takes [T] per sample", s);
        return false;
    }
    if (l->opt_int[0] != PADDING_NONE && l->opt_int[0] >= l->in)
        shape_fail(sc, SHAPE_LAYER, "padding_idx must be within num_embeddings (%lld)",
                   (long long)l->in);
    *out = in[0];
    out->dim[out->ndim++] = l->out;
    return true;
}

static int embedding_params(const layer_spec *l, layer_param *out)
{
    out[0] = (layer_param){
        "weight", 2, {l->in, l->out}, PARAM_INIT_NORMAL, l->opt_int[0] /* the row zeroed */};
    return 1;
}

static int embedding_describe(const layer_spec *l, char *buf, size_t len)
{
    if (l->opt_int[0] == PADDING_NONE)
        return snprintf(buf, len, "embedding %lld → %lld", (long long)l->in, (long long)l->out);
    return snprintf(buf, len, "embedding %lld → %lld (padding_idx %lld)", (long long)l->in,
                    (long long)l->out, (long long)l->opt_int[0]);
}

static const kind_arg embedding_args[] = {
    {"num_embeddings", "in", offsetof(layer_spec, in), 1},
    {"embedding_dim", "out", offsetof(layer_spec, out), 1},
};
static const kind_opt embedding_opts[] = {
    {"padding_idx", KIND_OPT_INT, offsetof(layer_spec, opt_int[0]), .min = 0, .def = PADDING_NONE},
};
static const autocast_op embedding_autocast[] = {
    {"embedding",
     AUTOCAST_NONE,
     "not listed (autocast_mode.cpp's fallthrough): runs in the weight's dtype",
     {"embedding", "embedding_dense_backward"}},
};

const layer_def embedding_def = {
    .name = "embedding",
    .signature = "V -> C",
    .args = embedding_args,
    .n_args = COUNT_OF(embedding_args),
    .opts = embedding_opts,
    .n_opts = COUNT_OF(embedding_opts),
    .input_shape = no_input_shape,
    .shape = embedding_shape,
    .params = embedding_params,
    .autocast = embedding_autocast,
    .n_autocast = COUNT_OF(embedding_autocast),
    .forward = embedding_forward,
    .describe = embedding_describe,
    .reads_tokens = true,
};
