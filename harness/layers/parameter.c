/*
 * parameter.c: `NAME = parameter D0 [D1 ... D4] init=ones|zeros|normal|trunc_normal [std=S]
 * [mean=M]`: an nn.Parameter of that shape, without a batch dim (RMSNorm's weight, ViT's
 * class token [1, 1, 768] and position table [1, 197, 768], a layer scale's gamma [768]):
 * in model.parameters() in the order of the lines, with a .grad, optimizer state, and the
 * case's params dtype like every other parameter. Initialised as torch.nn.init does:
 * ones_, zeros_, normal_(mean, std) and trunc_normal_(mean, std, a=-2, b=2) (the default
 * std 1 and mean 0 are those functions'). Reading it runs no op; its consumers receive
 * the leaf itself, so autocast's cached_cast casts it once per forward for the ops on its
 * lists (a leaf that requires grad: autocast_mode.h's cached_cast), and its gradient is
 * accumulated as AccumulateGrad does. It broadcasts against [B, ...] activations as
 * PyTorch right-aligns shapes.
 */
#include "layer.h"

/* the slot of its init= */
enum { PARAMETER_INIT = 0 };
enum { INIT_ONES = 0, INIT_ZEROS, INIT_NORMAL, INIT_TRUNC_NORMAL };

static int parameter_params(const layer_spec *l, layer_param *out)
{
    /* init=: ones_, zeros_, normal_, trunc_normal_ */
    static const param_init inits[] = {PARAM_INIT_ONES, PARAM_INIT_ZEROS, PARAM_INIT_NORMAL_STD,
                                       PARAM_INIT_TRUNC_NORMAL};
    param_init init = inits[l->opt_choice[PARAMETER_INIT]];
    out[0] = (layer_param){"weight", l->n_dims, {0}, init, -1};
    for (int j = 0; j < l->n_dims; j++)
        out[0].shape[j] = l->dims[j];
    return 1;
}

static const char *const parameter_inits[] = {"ones", "zeros", "normal", "trunc_normal"};

static int parameter_describe(const layer_spec *l, char *buf, size_t len)
{
    layer_shape s;
    shape_of_dims(l, NULL, &s, NULL);
    char text[128];
    shape_text(&s, text, sizeof text);
    int init = l->opt_choice[PARAMETER_INIT];
    if (init == INIT_NORMAL || init == INIT_TRUNC_NORMAL)
        return snprintf(buf, len, "parameter %s (init=%s, mean=%g, std=%g)", text,
                        parameter_inits[init], l->init_mean, l->init_std);
    return snprintf(buf, len, "parameter %s (init=%s)", text, parameter_inits[init]);
}

static const kind_opt parameter_opts[] = {
    {"init", KIND_OPT_CHOICE, offsetof(layer_spec, opt_choice[PARAMETER_INIT]), .def = INIT_ONES,
     .choices = parameter_inits, .n_choices = COUNT_OF(parameter_inits),
     .required = "init=ones|zeros|normal|trunc_normal"},
    {"std", KIND_OPT_REAL, offsetof(layer_spec, init_std), .range = POSITIVE,
     .real_def = 1.0},
    {"mean", KIND_OPT_REAL, offsetof(layer_spec, init_mean), .range = ANY,
     .real_def = 0.0},
};

static const autocast_op parameter_autocast[] = {
    {"parameter", AUTOCAST_NONE, "not listed: a leaf read as it is, no op runs", {"alias"}},
};

const layer_def parameter_def = {
    .name = "parameter",
    .signature = "D0 [D1 ... D4]",
    .opts = parameter_opts,
    .n_opts = COUNT_OF(parameter_opts),
    .input_shape = no_input_shape,
    .shape = shape_of_dims,
    .params = parameter_params,
    .autocast = parameter_autocast,
    .n_autocast = COUNT_OF(parameter_autocast),
    .forward = forward_param_itself,
    .describe = parameter_describe,
    .words = KIND_WORDS_DIMS,
    .named_by_params = true,
};
