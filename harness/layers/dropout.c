/*
 * dropout.c: nn.Dropout(p) in training mode (`dropout p=`, PyTorch's default p = 0.5):
 * y = x * mask / (1 - p), each element kept with probability 1 - p. dropout is on no autocast
 * list (aten/src/ATen/autocast_mode.h's AT_FORALL_* lists do not name it or native_dropout),
 * so autocast_mode.cpp's fallthrough runs it in its input's dtype; the product is taken in
 * float32 and rounded once (aten/src/ATen/native/cuda/Dropout.cu, activation_math.h).
 *
 * The mask is the harness's own, not PyTorch's Philox stream: values differ from PyTorch's
 * wherever dtypes do not (docs/SEMANTICS.md). It is drawn from a seed made of the case's seed, the
 * layer's name and the step, so every step draws a new mask and a run is reproducible; the
 * backward draws the same mask again from that seed. PyTorch keeps the mask for backward
 * (native_dropout's bool mask, one byte per element); the harness keeps nothing, so the
 * saved-activation bytes leave those bytes out. p = 0 makes a copy here, where PyTorch's
 * dropout (Dropout.cpp: the fused kernel only for 0 < p < 1, then _dropout returns its input
 * when p == 0) hands back the input itself; the values are the same. p = 1 (PyTorch:
 * input * 0) is refused by the option's range.
 */
#include "layer.h"

#include "core/rng.h"

/* opt_real[0]: p */
static const kind_opt dropout_opts[] = {
    {"p", KIND_OPT_REAL, offsetof(layer_spec, opt_real[0]), .range = UNIT_HALF, .real_def = 0.5},
};

/* the mask's seed for the layer whose output is out_name, in this step */
static uint64_t dropout_seed(const run *r, const char *out_name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
    for (const char *p = out_name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    uint64_t x = r->cfg->seed ^ h ^ ((uint64_t)r->obs->step * 0x9e3779b97f4a7c15ull);
    return rng_splitmix(&x);
}

static void dropout_backward(run *r, node *n)
{
    tensor *dx = node_grad_tensor(r, n, 0);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->dropout_backward(r->be, n->grad, n->scalar, dropout_seed(r, n->out.name),
                                         dx, stp));
    node_give_grad(r, n, 0, dx, stp);
}

static tensor *dropout_forward(run *r, const layer_spec *l, tensor *const *in,
                               tensor *const *params)
{
    tensor *x = in[0];
    double p = l->opt_real[0];
    char name[TENSOR_NAME_MAX];
    snprintf(name, sizeof name, "%s.out", l->name);
    tensor *y = run_tensor_like(r, x, name, x->dtype, MEM_ACTIVATIONS);
    autocast_why(r, y, "dropout", &x, 1);
    round_stats st;
    round_stats *stp = run_stats(r, &st);
    run_check(r, r->be->dropout_forward(r->be, x, p, dropout_seed(r, y->name), y, stp));
    node *n = tape_record(r, "dropout", dropout_backward, y, &x, 1);
    if (n)
        n->scalar = p;
    observe_tensor(r->obs, y, ROLE_ACTIVATION, stp);
    return y;
}

static int dropout_describe(const layer_spec *l, char *buf, size_t len)
{
    return snprintf(buf, len, "dropout (p=%g)", l->opt_real[0]);
}

static const autocast_op dropout_autocast[] = {
    {"dropout", AUTOCAST_NONE,
     "not listed: autocast_mode.cpp's fallthrough runs it in its input's dtype"},
};

const layer_def dropout_def = {
    .name = "dropout",
    .signature = "",
    .opts = dropout_opts,
    .n_opts = COUNT_OF(dropout_opts),
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = dropout_autocast,
    .n_autocast = COUNT_OF(dropout_autocast),
    .forward = dropout_forward,
    .describe = dropout_describe,
};
