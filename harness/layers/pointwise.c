/*
 * pointwise.c: the layer kind of every pointwise row (ops/pointwise.h), made from the row:
 * `NAME = relu`, `NAME = gelu approximate=tanh`, `NAME = scale 0.125`, `NAME = dropout p=0.1`,
 * `NAME = add A B`, `NAME = mul A B` (a kind of several operands takes their layers' names
 * after its numbers; in a row of two, one of them may be a number, a Python scalar:
 * `NAME = add A 1e-6`, `NAME = sub 1.0 A`, see scalar_operand). Its case-file words are the
 * row's signature, args and opts; its autocast entry the row's policy and ATen ops;
 * pointwise_defs[op] is the kind LAYER_POINTWISE + op (config/kinds.h).
 *
 * Forward: autocast's casts for the row's policy (autocast_args), the output's dtype
 * (autocast_output_dtype: the promotion of the operands'), its shape (the operands'
 * broadcast), the backend's pointwise_forward, the node with what the row saves, the
 * observation of "<layer>.out".
 * Backward, for each operand that needs a gradient: the row's formula (or dy itself for an
 * operand the row passes it to) in the output's shape and in the dtype of dy and the saved
 * tensors, then summed to the operand's shape where it was broadcast (autograd's engine:
 * validate_outputs in torch/csrc/autograd/engine.cpp reduces a gradient whose shape is not
 * its input's with at::sum_to, in the gradient's dtype), then cast to the operand's dtype
 * where that differs (the engine's cast, the same function). Only the tensor handed on is
 * counted; the intermediates of that chain are not tensors a user sees.
 *
 * The random draws of a row (dropout's mask) come from a seed made of the case's seed, the
 * output's name and the step: every step draws anew, a run is reproducible, and the
 * backward draws the same mask from the seed its node keeps.
 */
#include "layer.h"

#include "autograd/host_values.h"
#include "core/rng.h"
#include "ops/broadcast.h"

/* ---- the rows' case-file words, autocast entries and definitions ---- */

/* each row's arrays, ended by an empty entry (a row may have none) */
#define PW_TABLES(name, arity, backward, policy, signature, args, opts, aten)                      \
    static const kind_arg pw_##name##_args[] = {PW_EXPAND args{NULL, NULL, 0, 0}};                 \
    static const kind_opt pw_##name##_opts[] = {PW_EXPAND opts{NULL}};                             \
    static const autocast_op pw_##name##_autocast[] = {                                            \
        {#name, policy, AUTOCAST_LIST(policy), {PW_EXPAND aten}}};
POINTWISE_OPS(PW_TABLES)

static tensor *pointwise_forward(run *r, const layer_spec *l, tensor *const *in,
                                 tensor *const *params);
static bool pointwise_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                            shape_check *sc);
static int pointwise_describe(const layer_spec *l, char *buf, size_t len);

#define PW_DEF(op, arity_, backward_, policy_, sig_, args_, opts_, aten_)                          \
    [PW_OP_##op] = {.name = #op,                                                                   \
                    .signature = sig_,                                                             \
                    .args = pw_##op##_args,                                                        \
                    .n_args = COUNT_OF(pw_##op##_args) - 1,                                        \
                    .opts = pw_##op##_opts,                                                        \
                    .n_opts = COUNT_OF(pw_##op##_opts) - 1,                                        \
                    .shape = pointwise_shape,                                                      \
                    .input_shape = no_input_shape,                                                 \
                    .params = no_params,                                                           \
                    .autocast = pw_##op##_autocast,                                                \
                    .n_autocast = 1,                                                               \
                    .forward = pointwise_forward,                                                  \
                    .describe = pointwise_describe,                                                \
                    .n_inputs = arity_,                                                            \
                    .scalar_inputs = arity_ == 2,                                                  \
                    .whole_inputs = true},
const layer_def pointwise_defs[PW_OP_COUNT] = {POINTWISE_OPS(PW_DEF)};

static pw_op row_of(const layer_spec *l) { return (pw_op)(l->kind - LAYER_POINTWISE); }

/* the operands that are tensors (layers' outputs): the row's, less a Python scalar */
static int tensor_operands(const layer_spec *l)
{
    return pw_rows[row_of(l)].arity - (l->scalar_operands ? 1 : 0);
}

/* ---- shape and description ---- */

/* Operand b's shape broadcast into *out: of one rank when both are per sample; when either
 * is a whole shape (no batch dim, already aligned), right-aligned. False after the message. */
static bool broadcast_into(layer_shape *out, bool whole, const layer_shape *b, bool b_whole,
                           shape_check *sc)
{
    int nd;
    int64_t dim[TENSOR_MAX_DIMS];
    if ((whole || b_whole || b->ndim == out->ndim) &&
        shape_broadcast(out->ndim, out->dim, b->ndim, b->dim, &nd, dim) && nd <= LAYER_MAX_RANK) {
        out->ndim = nd;
        for (int j = 0; j < nd; j++)
            out->dim[j] = dim[j];
        return true;
    }
    char a[128], c[128];
    shape_text(out, a, sizeof a);
    shape_text(b, c, sizeof c);
    if (b->ndim != out->ndim && !whole && !b_whole)
        shape_fail(sc, SHAPE_LAYER,
                   "its inputs have %d and %d dims per sample (%s and %s): with the batch "
                   "dim in front, broadcasting would align the batch with a dim of a "
                   "sample; give them one rank (a dim of 1 broadcasts)",
                   out->ndim, b->ndim, a, c);
    else
        shape_fail(sc, SHAPE_LAYER,
                   "its inputs have shapes %s and %s, which do not broadcast (each pair "
                   "of dims equal, or one of them 1)",
                   a, c);
    return false;
}

/* The operands' shapes broadcast. Those of activations are per sample, the batch dim in
 * front; ranks that differ are refused: PyTorch right-aligns whole shapes, so the
 * shorter's batch dim would meet a sample dim of the other. A constant's or a parameter's
 * (layer_spec.whole_inputs) is its whole shape, right-aligned against [B, ...]: it may have
 * as many dims as a sample, or one more whose size is 1 (it broadcasts along the batch).
 * The output has no batch dim when no operand has one. */
static bool pointwise_shape(const layer_spec *l, const layer_shape *in, layer_shape *out,
                            shape_check *sc)
{
    int n = tensor_operands(l), first = 0;
#define WHOLE(k) ((l->whole_inputs >> (k)) & 1u)
    while (first < n - 1 && WHOLE(first))
        first++;
    *out = in[first];
    bool whole = WHOLE(first);
    for (int k = 0; k < n; k++) /* the activations first */
        if (k != first && !WHOLE(k) && !broadcast_into(out, false, &in[k], false, sc))
            return false;
    for (int k = 0; k < n; k++) { /* then the whole shapes */
        if (k == first || !WHOLE(k))
            continue;
        layer_shape b = in[k];
        char a[128], c[128];
        shape_text(out, a, sizeof a);
        shape_text(&in[k], c, sizeof c);
        if (!whole && b.ndim == out->ndim + 1) {
            if (b.dim[0] != 1) {
                shape_fail(sc, SHAPE_LAYER,
                           "its input of shape %s (no batch dim) meets the batch dim of [B, %s] "
                           "with its first dim %lld: that dim must be 1",
                           c, a, (long long)b.dim[0]);
                return false;
            }
            b.ndim--;
            memmove(b.dim, b.dim + 1, sizeof(int64_t) * (size_t)b.ndim);
        }
        if (!whole && b.ndim > out->ndim) {
            shape_fail(sc, SHAPE_LAYER,
                       "its input of shape %s (no batch dim) has more dims than [B, %s]", c, a);
            return false;
        }
        if (!broadcast_into(out, whole, &b, true, sc))
            return false;
    }
#undef WHOLE
    return true;
}

/* snprintf onto buf at *at (the contract's count, past len too) */
static void put(char *buf, size_t len, int *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, int *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t off = (size_t)*at < len ? (size_t)*at : len;
    int n = vsnprintf(buf + off, len - off, fmt, ap);
    va_end(ap);
    *at += n > 0 ? n : 0;
}

/* "scale 0.125", "gelu (approximate=tanh)", "dropout (p=0.1)": the name, its numbers, then
 * its options, a choice when it is not its default and a number always */
static int pointwise_describe(const layer_spec *l, char *buf, size_t len)
{
    const layer_def *d = layer_def_of(l->kind);
    int at = 0, shown = 0;
    put(buf, len, &at, "%s", d->name);
    for (int a = 0; a < d->n_args; a++)
        put(buf, len, &at, " %g", *(const double *)((const char *)l + d->args[a].offset));
    for (int o = 0; o < d->n_opts; o++) {
        const kind_opt *opt = &d->opts[o];
        const void *field = (const char *)l + opt->offset;
        if (opt->type == KIND_OPT_CHOICE && *(const int *)field != opt->def)
            put(buf, len, &at, "%s%s=%s", shown++ ? ", " : " (", opt->name,
                opt->choices[*(const int *)field]);
        else if (opt->type == KIND_OPT_REAL)
            put(buf, len, &at, "%s%s=%g", shown++ ? ", " : " (", opt->name, *(const double *)field);
    }
    if (shown)
        put(buf, len, &at, ")");
    for (int k = 0; k < pw_rows[row_of(l)].arity; k++)
        if (l->scalar_operands & (1u << k))
            put(buf, len, &at, " (operand %d the Python scalar %g)", k, l->scalar);
    return at;
}

/* ---- forward and backward ---- */

/* The call's scalars: the row's slots of the layer's numbers and options, and its seed */
static op_params pointwise_params(const run *r, const layer_spec *l, const char *out_name)
{
    op_params p = {.seed = 0};
    for (int s = 0; s < OP_MAX_PARAMS; s++) {
        p.real[s] = l->opt_real[s];
        p.choice[s] = l->opt_choice[s];
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
    for (const char *c = out_name; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    uint64_t x = r->cfg->seed ^ h ^ ((uint64_t)r->obs->step * 0x9e3779b97f4a7c15ull);
    p.seed = rng_splitmix(&x);
    return p;
}

/* g summed into to over the dims where to (a shape that broadcasts to g's) has 1 or nothing:
 * at::sum_to, the sum row over those dims */
static void sum_to(run *r, const tensor *g, tensor *to, round_stats *st)
{
    unsigned dims = 0;
    int off = g->ndim - to->ndim;
    for (int j = 0; j < g->ndim; j++)
        if (j < off || to->shape[j - off] != g->shape[j])
            dims |= 1u << j;
    const op_params none = {.seed = 0};
    run_check(r, r->be->reduce_forward(r->be, RD_OP_sum, &none, g, dims, to, st));
}

/* operand k's gradient (see the file's comment) */
static void pointwise_grad(run *r, node *n, int k)
{
    const pw_row *row = &pw_rows[n->row];
    tensor *dy = n->grad;
    bool passes = row->backward & PW_PASSES(k);
    bool broadcast = n->in[k].numel != dy->numel;
    if (passes && !broadcast) {
        give_grad_as_is(r, n, k, dy);
        return;
    }
    dtype e = dy->dtype; /* the dtype TensorIterator computes the formula in */
    for (int j = 0; j < NODE_MAX_INPUTS; j++)
        if (n->saved[j])
            e = promote_types(e, n->saved[j]->dtype);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    tensor *dx = node_grad_tensor(r, n, k);
    /* the element gradient, into dx when nothing follows it */
    tensor *g = dy;
    if (!passes) {
        g = broadcast || e != dx->dtype ? run_tensor_like(r, dy, dx->name, e, MEM_GRADS) : dx;
        const tensor *saved[PW_MAX_ARITY] = {n->saved[0], n->saved[1], n->saved[2]};
        run_check(r, r->be->pointwise_backward(r->be, n->row, &n->pw, k, dy, saved,
                                               n->saved[PW_MAX_ARITY], g, g == dx ? stp : NULL));
    }
    /* summed to the operand's shape, in e */
    tensor *s = g;
    if (broadcast) {
        s = e != dx->dtype ? run_tensor_like(r, dx, dx->name, e, MEM_GRADS) : dx;
        sum_to(r, g, s, s == dx ? stp : NULL);
    }
    if (s != dx)
        run_check(r, r->be->cast(r->be, s, dx, stp));
    if (s != dx && s != dy)
        tensor_release(&r->pool, s);
    if (g != dx && g != dy && g != s)
        tensor_release(&r->pool, g);
    node_give_grad(r, n, k, dx, stp);
}

static void pointwise_backward(run *r, node *n)
{
    for (int k = 0; k < pw_rows[n->row].arity; k++)
        if (node_needs_grad(n, k))
            pointwise_grad(r, n, k);
}

/* A Python scalar operand as PyTorch's CUDA kernels see it: a CPU scalar (a wrapped
 * number) that takes no part in type promotion and is not cast to the common dtype
 * (TensorIterator.cpp, compute_types: inputs are promoted to the common dtype only when the
 * common device is the CPU), which the kernel reads as opmath, the double rounded once to
 * float32 (cuda/Loops.cuh, opmath_gpu_kernel_with_scalars: iter.scalar_value<opmath_t>):
 * here a float32 tensor of that value, every dim 1, that broadcasts and needs no gradient. */
static tensor *scalar_operand(run *r, const char *layer_out, int nd, float v)
{
    char name[TENSOR_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.scalar", layer_out);
    int64_t ones[TENSOR_MAX_DIMS];
    for (int j = 0; j < nd; j++)
        ones[j] = 1;
    tensor *t = run_tensor(r, name, DTYPE_FLOAT32, nd, ones, MEM_ACTIVATIONS);
    host_values_put(r, t, &v, NULL);
    return t;
}

static tensor *pointwise_forward(run *r, const layer_spec *l, tensor *const *in,
                                 tensor *const *params)
{
    pw_op op = row_of(l);
    const pw_row *row = &pw_rows[op];
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    int nt = tensor_operands(l);
    tensor *targs[PW_MAX_ARITY], *args[PW_MAX_ARITY];
    autocast_args(r, ac, in, nt, targs);
    int nd = targs[0]->ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    for (int j = 0; j < nd; j++)
        shape[j] = targs[0]->shape[j];
    for (int k = 1; k < nt; k++) /* the case's check made them broadcast */
        shape_broadcast(nd, shape, targs[k]->ndim, targs[k]->shape, &nd, shape);
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    tensor *y = run_tensor(r, name, autocast_output_dtype(targs, nt), nd, shape, MEM_ACTIVATIONS);
    autocast_why(r, y, ac, targs, nt);
    float scalar = (float)l->scalar;
    if (op == PW_OP_div && (l->scalar_operands & 2u)) {
        /* cuda/BinaryDivTrueKernel.cu (div_true_kernel_cuda): a CPU scalar divisor b is
         * a * (1.0f / b), mul's functor; DivBackward0's grad / other the same kernel */
        scalar = 1.0f / scalar;
        op = PW_OP_mul;
    }
    for (int k = 0, t = 0; k < row->arity; k++)
        args[k] = l->scalar_operands & (1u << k) ? scalar_operand(r, name, nd, scalar) : targs[t++];
    op_params p = pointwise_params(r, l, name);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->pointwise_forward(r->be, op, &p, (const tensor *const *)args, y, stp));
    node *n = tape_record(r, row->name, pointwise_backward, y, args, row->arity);
    if (n) {
        n->row = op;
        n->pw = p;
        for (int k = 0; k < row->arity; k++)
            if (pw_rows[op].backward & PW_SAVES(k))
                tape_save(n, k, args[k]);
        if (pw_rows[op].backward & PW_SAVE_OUT)
            tape_save(n, PW_MAX_ARITY, y);
    }
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    for (int k = 0; k < row->arity; k++)
        tensor_release(&r->pool, args[k]);
    return y;
}
