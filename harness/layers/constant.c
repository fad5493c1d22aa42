/*
 * constant.c: `NAME = constant PATH.npy`: a tensor read from an .npy file (float32, float16,
 * or float64 rounded to float32), its path relative to the case file's folder, as a module
 * holds a table with self.register_buffer("NAME", torch.from_numpy(np.load(PATH))) (Llama's
 * rotary cos/sin tables). Its shape is the file's, without a batch dim: it broadcasts
 * against [B, ...] activations as PyTorch right-aligns shapes (a [T, D] table times
 * [B, H, T, D]), as an operand of a pointwise row, of `to`, and as sdpa's attn_mask.
 * It is a buffer (torch/nn/modules/module.py, register_buffer): not in
 * model.parameters(), no gradient, no optimizer state, counted under buffers; its dtype is
 * its file's, unless the case's params dtype is float16 or bfloat16 (module.half() and
 * .bfloat16() cast floating buffers too: Module._apply). Its tensor, "NAME.value", is read
 * from the file as an [init] entry (case/model.c adds it); reading it runs no op, so it is
 * on no autocast list, and its consumers read it as it is (autocast casts it anew for each
 * consumer on a list: it is not a leaf that requires grad).
 */
#include "layer.h"

static int constant_params(const layer_spec *l, layer_param *out)
{
    out[0] = (layer_param){"value", l->n_dims, {0}, PARAM_BUFFER_FILE, 0};
    for (int j = 0; j < l->n_dims; j++)
        out[0].shape[j] = l->dims[j];
    return 1;
}

static int constant_describe(const layer_spec *l, char *buf, size_t len)
{
    layer_shape s;
    shape_of_dims(l, NULL, &s, NULL);
    char text[128];
    shape_text(&s, text, sizeof text);
    return snprintf(buf, len, "constant %s %s (a buffer)", text, dtype_name(l->file_dtype));
}

static const autocast_op constant_autocast[] = {
    {"constant", AUTOCAST_NONE, "not listed: a buffer read as it is, no op runs", {"alias"}},
};

const layer_def constant_def = {
    .name = "constant",
    .signature = "PATH",
    .input_shape = no_input_shape,
    .shape = shape_of_dims,
    .params = constant_params,
    .autocast = constant_autocast,
    .n_autocast = COUNT_OF(constant_autocast),
    .forward = forward_param_itself,
    .describe = constant_describe,
    .words = KIND_WORDS_PATH,
};
