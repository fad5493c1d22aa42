/*
 * to.c: `NAME = to DTYPE`, x.to(torch.DTYPE) (`.float()`, `.half()`, `.bfloat16()`), and
 * `NAME = to OTHER.dtype`, x.to(other.dtype), OTHER a layer above the line (or `input`)
 * read for its dtype only: it is computed before and kept until this layer has run, and no
 * gradient flows to it. x is the previous layer's output or `from=NAME`.
 *
 * PyTorch (aten/src/ATen/native/TensorConversions.cpp): `to` returns self when nothing
 * changes (to_impl: `if (to_will_alias(...)) return self;`), so a `to` of the dtype x
 * already has is x itself, here too: no node, no memory, no name of its own (its
 * consumers read x, and x's gradient is named after x; tensors.csv has no row for this
 * layer's output). Any other dtype is `_to_copy`, a copy in the new dtype whose backward
 * casts the gradient back to x's dtype (tools/autograd/derivatives.yaml: `_to_copy`: `self:
 * _to_copy_backward(grad, self.options())`, the node ToCopyBackward0). `to` and
 * `_to_copy` have no AutocastCUDA kernel (they are on no list of
 * aten/src/ATen/autocast_mode.cpp), so autocast does not touch them: `.to(float32)` of a
 * float16 activation under autocast is float32. The output's dtype_reason is "cast".
 *
 * The number of the signature is the dtype: opt_int[0] is a dtype, or KIND_DTYPE_OF_INPUT for
 * OTHER.dtype (the case parser makes OTHER the layer's second input, in[1]).
 */
#include "layer.h"

#include <stddef.h>

static tensor *to_forward(run *r, const layer_spec *l, tensor *const *in, tensor *const *params)
{
    tensor *x = in[0];
    dtype dt = l->opt_int[0] == KIND_DTYPE_OF_INPUT ? in[1]->dtype : (dtype)l->opt_int[0];
    const autocast_op *ac = layer_def_of(l->kind)->autocast;
    char name[TENSOR_NAME_MAX];
    layer_out_name(l, name, sizeof name);
    if (dt != x->dtype)
        return cast_named(r, x, dt, MEM_ACTIVATIONS, name, DTYPE_REASON_CAST, ac->op,
                          ROLE_ACTIVATION);
    tensor_retain(x); /* to_will_alias: x itself */
    return x;
}

static int to_describe(const layer_spec *l, char *buf, size_t len)
{
    if (l->opt_int[0] == KIND_DTYPE_OF_INPUT)
        return snprintf(buf, len, "to (the dtype of its second input)");
    return snprintf(buf, len, "to %s", dtype_name((dtype)l->opt_int[0]));
}

static const kind_arg to_args[] = {
    {"dtype", "dtype", offsetof(layer_spec, opt_int[0]), KIND_ARG_DTYPE},
};

static const autocast_op to_autocast[] = {
    {"to",
     AUTOCAST_NONE,
     "not listed (to and _to_copy have no AutocastCUDA kernel): an explicit cast",
     {"to.dtype", "_to_copy"}},
};

const layer_def to_def = {
    .name = "to",
    .signature = "DTYPE",
    .args = to_args,
    .n_args = COUNT_OF(to_args),
    .input_shape = no_input_shape,
    .shape = shape_same,
    .params = no_params,
    .autocast = to_autocast,
    .n_autocast = COUNT_OF(to_autocast),
    .forward = to_forward,
    .describe = to_describe,
    .whole_inputs = true, /* a constant's or a parameter's .to(dtype) */
};
