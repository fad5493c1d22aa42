/*
 * matmul.c: `NAME = matmul A B`, torch.matmul(a, b) of [..., M, K] and [..., K, N] with the
 * same leading dims (the batch, and heads): a batched product, [..., M, N]. On autocast's
 * lower precision list (KERNEL_CUDA(matmul, lower_precision_fp) in autocast_mode.cpp):
 * both operands are cast to the autocast dtype, activations anew for each consumer (a
 * float32 softmax's probabilities are cast back down here). Saves both operands (as
 * BmmBackward0 keeps self and mat2); backward: da = dy b^T, db = a^T dy
 * (tools/autograd/derivatives.yaml, bmm).
 */
#include "layer.h"

static void matmul_backward(run *r, node *n)
{
    tensor *dy = n->grad, *a = n->saved[0], *b = n->saved[1];
    round_stats st;
    if (node_needs_grad(n, 0)) {
        tensor *da = node_grad_tensor(r, n, 0);
        round_stats *stp = run_stats(r, &st);
        run_check(r, r->be->matmul(r->be, dy, b, false, true, da, stp));
        node_give_grad(r, n, 0, da, stp);
    }
    if (node_needs_grad(n, 1)) {
        tensor *db = node_grad_tensor(r, n, 1);
        round_stats *stp = run_stats(r, &st);
        run_check(r, r->be->matmul(r->be, a, dy, true, false, db, stp));
        node_give_grad(r, n, 1, db, stp);
    }
}

static tensor *matmul_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    tensor *a = autocast_arg(r, ac, in[0]), *b = autocast_arg(r, ac, in[1]);
    if (a->dtype != b->dtype) /* bmm's check (aten/src/ATen/native/LinearAlgebra.cpp) */
        run_fail(r, "expected self and mat2 to have the same dtype, but got: %s != %s",
                 type_meta_name(a->dtype), type_meta_name(b->dtype));
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    int64_t shape[TENSOR_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++)
        shape[d] = a->shape[d];
    shape[a->ndim - 1] = b->shape[b->ndim - 1];
    tensor *y = run_tensor(r, name, a->dtype, a->ndim, shape, MEM_ACTIVATIONS);
    tensor *args[2] = {a, b};
    autocast_why(r, y, ac, args, 2);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->matmul(r->be, a, b, false, false, y, stp));
    node *n = tape_record(r, "matmul", matmul_backward, y, args, 2);
    tape_save(n, 0, a);
    tape_save(n, 1, b);
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    tensor_release(&r->pool, a);
    tensor_release(&r->pool, b);
    return y;
}

static bool matmul_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                         shape_check *sc)
{
    const layer_shape *a = &in[0], *b = &in[1];
    bool ok = a->ndim >= 2 && a->ndim == b->ndim && a->dim[a->ndim - 1] == b->dim[b->ndim - 2];
    for (int d = 0; ok && d < a->ndim - 2; d++)
        ok = a->dim[d] == b->dim[d];
    if (!ok) {
        char sa[128], sb[128];
        shape_text(a, sa, sizeof sa);
        shape_text(b, sb, sizeof sb);
        shape_fail(sc, SHAPE_LAYER,
                   "its inputs have shapes %s and %s; matmul needs [..., M, K] and [..., K, N] "
                   "with the same leading dims",
                   sa, sb);
        return false;
    }
    *out = *a;
    out->dim[a->ndim - 1] = b->dim[b->ndim - 1];
    return true;
}

static int matmul_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "matmul");
}

static const autocast_op matmul_autocast[] = {
    {"matmul",
     AUTOCAST_LOWER_PRECISION_FP,
     "lower_precision_fp: KERNEL_CUDA(matmul, lower_precision_fp)",
     {"matmul", "bmm"}},
};

const layer_def matmul_def = {
    .name = "matmul",
    .signature = "",
    .input_shape = no_input_shape,
    .shape = matmul_shape,
    .params = no_params,
    .autocast = matmul_autocast,
    .n_autocast = COUNT_OF(matmul_autocast),
    .forward = matmul_forward,
    .describe = matmul_describe,
    .n_inputs = 2,
};
