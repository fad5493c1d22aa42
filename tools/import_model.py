#!/usr/bin/env python3
"""import_model.py: a PyTorch model as an ampscope case (`bin/ampscope import` runs it).

    import_model.py SCRIPT.py [--out DIR] [--name NAME] [--params float32|float16|bfloat16]

SCRIPT.py defines model() (an nn.Module, float32, on the CPU), inputs() (a tuple of tensors:
one batch, the forward's positional arguments) and, when the forward returns logits rather
than a loss, target() and LOSS (an ampscope loss name: cross_entropy, mse, l1,
bce_with_logits). The model, moved to --params, is exported with torch.export.export on its
default training IR (no run_decompositions(): it would break rms_norm and sdpa into smaller
ops whose autocast policies differ from the fused op's), and each node of the graph becomes
one [model] line named after the node, so that `linear_3.out` in tensors.csv is that
node's output. The ATen op of a node is looked up in OPS, one row per op: the case kind it
becomes and how its arguments become the line's numbers, inputs and options.

Parameters keep their state_dict names (graph_signature.input_specs maps export's
p_... placeholders back): a linear, conv2d, embedding, layer_norm or rms_norm whose weight
and bias are one module's is that line with params=PREFIX; any other parameter is a
`parameter` line with params=NAME, its whole name. A node that depends on no parameter and
no float input (masks, position ids, rotary tables) is computed here by PyTorch and written
as a `constant` file. Views that change nothing (contiguous, clone, alias, detach, a
dropout of p=0) are dropped, their consumers reading their input.

Everything is checked before anything is written; the files are written into a temporary
folder inside DIR and moved into place at the end. Bad input (no model(), an export that
fails, ATen ops with no kind, shapes the harness cannot hold) is a message and exit 2.
"""
import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}
LOSSES = ("cross_entropy", "mse", "l1", "bce_with_logits")


class ImportError_(Exception):
    """bad input: its message, exit 2"""


def fail(msg):
    raise ImportError_(msg)


def die(msg):
    print(f"ampscope import: {msg}", file=sys.stderr)
    sys.exit(2)


# ---- the values a node's arguments name ----

class Layer:
    """a tensor of the case: a layer's output (or `input`), with a batch dim unless whole"""

    def __init__(self, name, val, whole=False):
        self.name, self.val, self.whole = name, val, whole


class Param:
    """a parameter or buffer of the module: its state_dict name and value"""

    def __init__(self, fqn, value, buffer):
        self.fqn, self.value, self.buffer = fqn, value, buffer


# ---- the table: ATen op -> (kind, how its arguments become the line) ----
#
# Each row's function receives the converter and the node and returns a Line (or None to
# drop the node, its consumers reading its first argument). Its inputs are names of case
# tensors; `g.tensor(a)` turns an argument into one (a layer, the input, a parameter's
# `parameter` line or a folded constant's `constant` line), `g.dim(a, node)` a dim of the
# whole tensor.

class Pending:
    """x[:, :, None].expand(..., n, ...) of more dims than a case's tensor has: only the
    reshape that merges the copies back (HF's repeat_kv) reads it, as
    x.repeat_interleave(n, dim)"""

    def __init__(self, x, dim, reps=None):
        self.x, self.dim, self.reps = x, dim, reps


class Split5:
    """x.reshape(B, N, S, H, D).permute(2, 0, 3, 1, 4).unbind(0) (timm's and many others'
    fused qkv), more dims than a case's tensor has: item k is the slice
    x[..., k*H*D:(k+1)*H*D] viewed as [B, N, H, D] and transposed to [B, H, N, D], the same
    values, gradients and dtypes in three lines"""

    def __init__(self, x, shape, perm=None):
        self.x, self.shape, self.perm = x, shape, perm


class Line:
    def __init__(self, kind, numbers=(), inputs=(), opts=None, params=None, note=None,
                 positional=False):
        self.kind, self.numbers, self.inputs = kind, list(numbers), list(inputs)
        self.opts, self.params, self.note = dict(opts or {}), params, note
        self.positional = positional  # inputs by position (several), else from=


def num(v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        r = repr(v)
        return r if r not in ("inf", "-inf", "nan") else fail(f"a non-finite number {r}")
    return str(v)


def yesno(v):
    return "yes" if v else "no"


def row_linear(g, n):
    x, w = n.args[0], n.args[1]
    b = n.args[2] if len(n.args) > 2 else None
    out, inp = g.shape(w)
    line = Line("linear", [inp, "->", out], [g.tensor(x)])
    g.own_params(line, n, "weight", w, b)
    return line


def row_conv2d(g, n):
    a = list(n.args) + [None] * (7 - len(n.args))
    x, w, b, stride, padding, dilation, groups = a
    stride, padding, dilation = stride or [1], padding or [0], dilation or [1]
    out, inp_g, kh, kw = g.shape(w)
    for what, v in (("kernel", [kh, kw]), ("stride", stride), ("padding", padding),
                    ("dilation", dilation)):
        if isinstance(v, str) or len(set(v)) != 1:
            fail(f"{n.name}: conv2d with {what}={v}: only square ones have a kind")
    groups = groups or 1
    opts = {"kernel": kh, "stride": stride[0], "padding": padding[0], "dilation": dilation[0]}
    if groups != 1:
        opts["groups"] = groups
    line = Line("conv2d", [inp_g * groups, "->", out], [g.tensor(x)], opts)
    g.own_params(line, n, "weight", w, b)
    return line


def row_embedding(g, n):
    w, ids = n.args[0], n.args[1]
    pad = n.args[2] if len(n.args) > 2 else -1
    v, c = g.shape(w)
    if not (isinstance(g.env.get(ids.name), Layer) and g.env[ids.name].name == "input"):
        fail(f"{n.name}: an embedding of ids other than the case's input ({ids.name}: token "
             "types or positions computed at import): the kind reads the input's ids only")
    line = Line("embedding", [v, "->", c], [g.tensor(ids)],
                {"padding_idx": pad} if pad is not None and pad >= 0 else {})
    g.own_params(line, n, "weight", w, None)
    return line


def row_layer_norm(g, n):
    a = list(n.args) + [None] * (5 - len(n.args))
    x, shape, w, b, eps = a[:5]
    if len(shape) != 1:
        fail(f"{n.name}: layer_norm over {len(shape)} dims: the kind normalizes the last one")
    line = Line("layer_norm", [shape[0]], [g.tensor(x)], {"eps": num(eps if eps is not None else 1e-5)})
    if w is None:
        line.opts["elementwise_affine"] = "no"
    elif b is None:
        line.opts["bias"] = "no"
    g.own_params(line, n, "weight", w, b)
    return line


def row_rms_norm(g, n):
    a = list(n.args) + [None] * (4 - len(n.args))
    x, shape, w, eps = a[:4]
    if len(shape) != 1:
        fail(f"{n.name}: rms_norm over {len(shape)} dims: the kind normalizes the last one")
    line = Line("rms_norm", [shape[0]], [g.tensor(x)], {} if eps is None else {"eps": num(eps)})
    if w is None:
        line.opts["elementwise_affine"] = "no"
    g.own_params(line, n, "weight", w, None)
    return line


def binary(kind):
    def row(g, n):
        a, b = n.args[0], n.args[1]
        if "alpha" in n.kwargs and n.kwargs["alpha"] != 1:
            fail(f"{n.name}: {kind} with alpha={n.kwargs['alpha']}: no kind")
        if not g.is_tensor(a) and not g.is_tensor(b):
            fail(f"{n.name}: {kind} of two numbers")
        ins = [g.tensor(v) if g.is_tensor(v) else num(float(v)) for v in (a, b)]
        return Line(kind, [], ins, positional=True)
    return row


def unary(kind, **fixed):
    def row(g, n):
        return Line(kind, [], [g.tensor(n.args[0])], dict(fixed))
    return row


def row_gelu(g, n):
    approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    return Line("gelu", [], [g.tensor(n.args[0])], {} if approx == "none" else {"approximate": approx})


def row_hardtanh(g, n):
    lo, hi = (list(n.args[1:3]) + [-1.0, 1.0])[:2]
    if (lo, hi) != (0.0, 6.0):
        fail(f"{n.name}: hardtanh({lo}, {hi}): only relu6's (0, 6) has a kind")
    return Line("relu6", [], [g.tensor(n.args[0])])


def row_pow(g, n):
    e = n.args[1]
    if g.is_tensor(e):
        fail(f"{n.name}: pow with a tensor exponent: no kind")
    return Line("pow", [num(float(e))], [g.tensor(n.args[0])])


def row_softmax(kind):
    def row(g, n):
        x, dim = n.args[0], n.args[1]
        dt = n.args[2] if len(n.args) > 2 else n.kwargs.get("dtype")
        opts = {"dim": g.dim(dim, n.args[0])}
        if dt is not None:
            opts["dtype"] = g.dtype_name(dt, n)
        return Line(kind, [], [g.tensor(x)], opts)
    return row


def reduction(kind):
    def row(g, n):
        x, dims = n.args[0], n.args[1]
        keep = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        if "dtype" in n.kwargs and n.kwargs["dtype"] is not None:
            fail(f"{n.name}: {kind} with dtype=: no kind")
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        return Line(kind, [], [g.tensor(x)],
                    {"dim": ",".join(str(g.dim(d, x)) for d in dims), "keepdim": yesno(keep)})
    return row


def row_to(g, n):
    dt = n.kwargs.get("dtype")
    if dt is None and len(n.args) > 1 and not g.is_tensor(n.args[1]):
        dt = n.args[1]
    if dt is None:
        return None  # a .to(device) or copy of the same dtype: its input
    return Line("to", [g.dtype_name(dt, n)], [g.tensor(n.args[0])])


def row_drop(g, n):
    return None


def row_dropout(g, n):
    p = n.args[1] if len(n.args) > 1 else 0.5
    train = n.args[2] if len(n.args) > 2 else True
    if p == 0 or not train:
        return None
    return Line("dropout", [], [g.tensor(n.args[0])], {"p": num(float(p))})


def row_transpose(g, n):
    x = n.args[0]
    d0, d1 = g.dim(n.args[1], x), g.dim(n.args[2], x)
    return Line("transpose", [d0, d1], [g.tensor(x)])


def row_t(g, n):
    return Line("transpose", [0, 1], [g.tensor(n.args[0])])


def row_reshape(g, n):
    out = g.out_shape(n)
    p = g.env.get(n.args[0].name)
    if isinstance(p, Pending):
        src = g.shape(p.x)
        d = p.dim - 1
        want = src[:d] + [src[d] * (p.reps or 1)] + src[d + 1:]
        if p.reps is None or out != want:
            fail(f"{n.name}: a reshape of a {len(src) + 1}-dim tensor: no kind")
        return Line("repeat_interleave", [], [g.tensor(p.x)], {"repeats": p.reps, "dim": d})
    if g.whole(n):
        fail(f"{n.name}: a view of a tensor without a batch dim: no kind")
    return Line("reshape", [str(s) for s in out[1:]], [g.tensor(n.args[0])])


def row_unsqueeze(kind):
    def row(g, n):
        x = n.args[0]
        rank = len(g.out_shape(n)) if kind == "unsqueeze" else len(g.shape(x))
        d = n.args[1]
        d = d + rank if d < 0 else d
        return Line(kind, [], [g.tensor(x)], {"dim": d})
    return row


def row_flatten(g, n):
    x = n.args[0]
    s = n.args[1] if len(n.args) > 1 else 0
    e = n.args[2] if len(n.args) > 2 else -1
    return Line("flatten", [], [g.tensor(x)], {"start_dim": g.dim(s, x), "end_dim": g.dim(e, x)})


def row_select(g, n):
    x = n.args[0]
    return Line("select", [], [g.tensor(x)], {"dim": g.dim(n.args[1], x), "index": n.args[2]})


def row_slice(g, n):
    a = list(n.args) + [None] * (5 - len(n.args))
    x, dim, start, end, step = a[:5]
    dim = 0 if dim is None else dim
    size = g.shape(x)[dim]
    start, end, step = start or 0, size if end is None else min(end, size), step or 1
    if start == 0 and end >= size and step == 1:
        return None  # x[:, :]: the whole tensor
    opts = {"dim": g.dim(dim, x), "start": start, "end": end}
    if step != 1:
        opts["step"] = step
    return Line("slice", [], [g.tensor(x)], opts)


def row_cat(kind):
    def row(g, n):
        ts = n.args[0]
        dim = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim", 0)
        rank = len(g.out_shape(n))
        d = dim + rank if dim < 0 else dim
        return Line(kind, [], [g.tensor(t) for t in ts], {"dim": d}, positional=True)
    return row


def row_matmul(g, n):
    return Line("matmul", [], [g.tensor(n.args[0]), g.tensor(n.args[1])], positional=True)


def row_sdpa(g, n):
    a = list(n.args) + [None] * (7 - len(n.args))
    q, k, v, mask, dropout, causal, scale = a[:7]
    mask = n.kwargs.get("attn_mask", mask)
    causal = n.kwargs.get("is_causal", causal)
    scale = n.kwargs.get("scale", scale)
    dropout = n.kwargs.get("dropout_p", dropout)
    gqa = n.kwargs.get("enable_gqa", False)
    if dropout:
        fail(f"{n.name}: scaled_dot_product_attention with dropout_p={dropout}: no kind")
    ins = [g.tensor(q), g.tensor(k), g.tensor(v)]
    if mask is not None:
        mv = g.env.get(mask.name)
        if isinstance(mv, g.torch.Tensor) and mv.dtype == g.torch.bool:
            # a bool mask computed at import: sdpa's math path adds 0 where it is True and
            # -inf where False (attention.cpp convert_boolean_attn_mask)
            add = g.torch.zeros(mv.shape).masked_fill(~mv, float("-inf"))
            ins.append(g.constant(mask.name, add, "the bool attn_mask as 0 and -inf"))
        elif g.val(mask).dtype == g.torch.bool:
            fail(f"{n.name}: a bool attn_mask computed from activations: no kind")
        else:
            ins.append(g.tensor(mask))
    opts = {}
    if causal:
        opts["causal"] = "yes"
    if scale is not None:
        opts["scale"] = num(float(scale))
    if gqa:
        opts["enable_gqa"] = "yes"
    return Line("scaled_dot_product_attention", [], ins, opts, positional=True)


def row_batch_norm(g, n):
    # aten.batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
    # eps, cudnn_enabled)
    x, w, b, rm, rv, training, momentum, eps = list(n.args[:8])
    c = g.shape(x)[1]
    line = Line("batch_norm2d", [c], [g.tensor(x)],
                {"eps": num(float(eps)), "momentum": num(float(momentum)),
                 "training": yesno(training)})
    if w is None:
        line.opts["affine"] = "no"
    g.own_params(line, n, "weight", w, b, extra=(rm, rv))
    return line


def row_pool(kind):
    def row(g, n):
        a = list(n.args) + [None] * 6
        x, kernel, stride, padding = a[0], a[1], a[2] or a[1], a[3] or [0]
        for what, v in (("kernel", kernel), ("stride", stride), ("padding", padding)):
            if len(set(v)) != 1:
                fail(f"{n.name}: {kind} with {what}={v}: only square ones have a kind")
        opts = {"kernel": kernel[0], "stride": stride[0], "padding": padding[0]}
        if kind == "max_pool2d" and (a[4] not in (None, [1], [1, 1]) or a[5]):
            fail(f"{n.name}: max_pool2d with dilation or ceil_mode: no kind")
        if kind == "avg_pool2d" and (a[4] or (a[5] is not None and not a[5])):
            fail(f"{n.name}: avg_pool2d with ceil_mode or count_include_pad=False: no kind")
        return Line(kind, [], [g.tensor(x)], opts)
    return row


def row_adaptive_avg_pool2d(g, n):
    if list(n.args[1]) not in ([1, 1], [1]):
        fail(f"{n.name}: adaptive_avg_pool2d to {n.args[1]}: only 1 has a kind")
    return Line("adaptive_avg_pool2d", [1], [g.tensor(n.args[0])])


def row_permute(g, n):
    x = n.args[0]
    return Line("permute", [], [g.tensor(x)], {"dims": ",".join(str(g.dim(d, x)) for d in n.args[1])})


def row_expand(g, n):
    x = n.args[0]
    sizes = list(n.args[1])
    src = g.shape(x)
    lead = len(sizes) - len(src)
    if g.whole(n) and sizes and sizes[0] == g.batch and (lead > 0 or src[0] != g.batch):
        v = g.env.get(x.name)
        fail(f"{n.name}: expand of {v.fqn if isinstance(v, Param) else x.name}, which has no "
             f"batch dim, to the batch's size "
             f"{sizes} (a class token's x.expand(B, -1, -1)): no kind gives a tensor a batch dim")
    words = [str(-1 if (i >= lead and s in (-1, src[i - lead])) else s)
             for i, s in enumerate(sizes)]
    return Line("expand", [], [g.tensor(x)], {"sizes": ",".join(words)})


def row_repeat_interleave(g, n):
    x, reps = n.args[0], n.args[1]
    dim = n.kwargs.get("dim", n.args[2] if len(n.args) > 2 else None)
    if g.is_tensor(reps) or dim is None:
        fail(f"{n.name}: repeat_interleave without an int repeats and a dim: no kind")
    return Line("repeat_interleave", [], [g.tensor(x)], {"repeats": reps, "dim": g.dim(dim, x)})


def row_getitem(g, n):
    """an output of split, chunk or unbind: the slice or select of the input it is"""
    src, k = n.args[0], n.args[1]
    op = str(src.target)
    x = src.args[0]
    if op.startswith("aten.unbind"):
        dim = src.args[1] if len(src.args) > 1 else 0
        return Line("select", [], [g.tensor(x)], {"dim": g.dim(dim, x), "index": k})
    if op.startswith("aten.split") or op.startswith("aten.chunk"):
        dim = src.args[2] if len(src.args) > 2 else src.kwargs.get("dim", 0)
        d = g.dim(dim, x)
        size = g.shape(x)[d]
        starts, s = [], 0
        for t in g.val(src):
            starts.append((s, s + t.shape[d]))
            s += t.shape[d]
        start, end = starts[k]
        if start == 0 and end == size:
            return None
        return Line("slice", [], [g.tensor(x)], {"dim": d, "start": start, "end": end})
    fail(f"{n.name}: an output of {op}: no kind")


# how a split/chunk/unbind node is read: by its getitem nodes (row_getitem), nothing itself
def row_multi(g, n):
    return "multi"


OPS = {
    # GEMMs and convolutions, norms: their weights are the module's (params=)
    "aten.linear.default": row_linear,
    "aten.conv2d.default": row_conv2d,
    "aten.embedding.default": row_embedding,
    "aten.layer_norm.default": row_layer_norm,
    "aten.rms_norm.default": row_rms_norm,
    "aten.batch_norm.default": row_batch_norm,
    "aten.matmul.default": row_matmul,
    "aten.scaled_dot_product_attention.default": row_sdpa,
    # pointwise rows: a number in an operand's place is a Python scalar
    "aten.add.Tensor": binary("add"),
    "aten.sub.Tensor": binary("sub"),
    "aten.mul.Tensor": binary("mul"),
    "aten.div.Tensor": binary("div"),
    "aten.maximum.default": binary("maximum"),
    "aten.minimum.default": binary("minimum"),
    "aten.pow.Tensor_Scalar": row_pow,
    "aten.rsqrt.default": unary("rsqrt"),
    "aten.sqrt.default": unary("sqrt"),
    "aten.exp.default": unary("exp"),
    "aten.log.default": unary("log"),
    "aten.reciprocal.default": unary("reciprocal"),
    "aten.abs.default": unary("abs"),
    "aten.neg.default": unary("neg"),
    "aten.sin.default": unary("sin"),
    "aten.cos.default": unary("cos"),
    "aten.erf.default": unary("erf"),
    "aten.relu.default": unary("relu"),
    "aten.silu.default": unary("silu"),
    "aten.sigmoid.default": unary("sigmoid"),
    "aten.tanh.default": unary("tanh"),
    "aten.gelu.default": row_gelu,
    "aten.hardswish.default": unary("hardswish"),
    "aten.hardsigmoid.default": unary("hardsigmoid"),
    "aten.hardtanh.default": row_hardtanh,
    "aten.relu6.default": unary("relu6"),
    # softmax and reductions
    "aten.softmax.int": row_softmax("softmax"),
    "aten.log_softmax.int": row_softmax("log_softmax"),
    "aten.sum.dim_IntList": reduction("sum"),
    "aten.mean.dim": reduction("mean"),
    "aten.amax.default": reduction("amax"),
    # casts and what changes nothing
    "aten.to.dtype": row_to,
    "aten.to.dtype_layout": row_to,
    "aten._to_copy.default": row_to,
    "aten.contiguous.default": row_drop,
    "aten.clone.default": row_drop,
    "aten.alias.default": row_drop,
    "aten.detach.default": row_drop,
    "aten.dropout.default": row_dropout,
    # shapes and views
    "aten.transpose.int": row_transpose,
    "aten.t.default": row_t,
    "aten.view.default": row_reshape,
    "aten.reshape.default": row_reshape,
    "aten._unsafe_view.default": row_reshape,
    "aten.unsqueeze.default": row_unsqueeze("unsqueeze"),
    "aten.squeeze.dim": row_unsqueeze("squeeze"),
    "aten.flatten.using_ints": row_flatten,
    "aten.select.int": row_select,
    "aten.slice.Tensor": row_slice,
    "aten.cat.default": row_cat("cat"),
    "aten.stack.default": row_cat("stack"),
    "aten.permute.default": row_permute,
    "aten.expand.default": row_expand,
    "aten.repeat_interleave.self_int": row_repeat_interleave,
    "aten.split.Tensor": row_multi,
    "aten.split_with_sizes.default": row_multi,
    "aten.chunk.default": row_multi,
    "aten.unbind.int": row_multi,
    # pooling
    "aten.max_pool2d.default": row_pool("max_pool2d"),
    "aten.avg_pool2d.default": row_pool("avg_pool2d"),
    "aten.adaptive_avg_pool2d.default": row_adaptive_avg_pool2d,
}

def inplace(row):
    """an in-place op (relu_, add_, hardswish_: nn.ReLU(inplace=True), `x += y`) as its
    out-of-place kind, when nothing reads the tensor it overwrites after it"""
    def wrapped(g, n):
        x = n.args[0]
        later = [u.name for u in x.users if u is not n and g.order[u] > g.order[n]]
        if later:
            fail(f"{n.name}: {n.target} overwrites {x.name}, which {', '.join(later)} "
                 "read after it: no kind")
        return row(g, n)
    return wrapped


for _op, _row in list(OPS.items()):
    _name, _, _overload = _op[len("aten."):].partition(".")
    if _row in (row_multi, row_drop) or _name.endswith("_"):
        continue
    if _name in ("add", "sub", "mul", "div", "relu", "silu", "gelu", "sigmoid", "tanh",
                 "hardswish", "hardsigmoid", "hardtanh", "relu6", "dropout", "neg", "exp"):
        OPS[f"aten.{_name}_.{_overload}"] = inplace(_row)

# Nodes that assert and return nothing
SKIPPED = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
           "aten.sym_constrain_range_for_size.default"}


# ---- the converter ----

class Graph:
    def __init__(self, torch, ep, module, inputs, dtype):
        self.torch, self.ep = torch, ep
        self.lines = []      # (name, Line, comment, heading)
        self.files = {}      # file name -> numpy array
        self.env = {}        # node name -> Layer | Param | torch.Tensor (a constant) | other
        self.owner = {}      # state_dict name -> the layer that owns it (params=)
        self.param_lines = {}  # state_dict name -> its `parameter` line's name
        self.const_lines = {}  # node name -> its `constant` line's name
        self.names = set()
        self.dtype = dtype
        self.batch = None
        self.input_node = None
        self.unknown = {}    # aten op -> [count, first module path]
        self.autocast_found = {}  # file:line -> the `with ...autocast` around some node
        self.dropped = []    # what the next line's comment says was dropped before it
        self.notes = []
        sd = dict(module.state_dict(keep_vars=True))
        sig = ep.graph_signature
        self.specs = {}
        for s in sig.input_specs:
            self.specs[s.arg.name] = s
        self.inputs = inputs
        self.state = {**dict(module.named_parameters(remove_duplicate=False)),
                      **dict(module.named_buffers(remove_duplicate=False))}
        self.state.update({k: v for k, v in sd.items() if k not in self.state})
        self.constants = ep.constants

    # tensors of arguments
    def is_tensor(self, a):
        return hasattr(a, "op") and isinstance(self.env.get(a.name), (Layer, Param)) or (
            hasattr(a, "op") and isinstance(self.env.get(a.name), self.torch.Tensor))

    def val(self, a):
        """the node's value: a real tensor for constants and parameters, else export's fake"""
        v = self.env.get(a.name)
        if isinstance(v, Layer):
            return v.val
        if isinstance(v, Param):
            return v.value
        if isinstance(v, self.torch.Tensor):
            return v
        return a.meta.get("val")

    def shape(self, a):
        return list(self.val(a).shape)

    def out_shape(self, n):
        return list(n.meta["val"].shape)

    def whole(self, n):
        """a node's output has no batch dim: it reads no tensor that has one"""
        return not any(isinstance(self.env.get(a.name), Layer) and not self.env[a.name].whole
                       for a in n.all_input_nodes)

    def dim(self, d, x):
        return d  # dims of the whole tensor, as the case's kinds take them

    def dtype_name(self, dt, n):
        t = self.torch
        names = {t.float32: "float32", t.float16: "float16", t.bfloat16: "bfloat16"}
        if dt not in names:
            fail(f"{n.name}: a cast to {dt}: the case's tensors are float32, float16, bfloat16")
        return names[dt]

    def fresh(self, base):
        name = base if base != "input" else "input_"
        k = 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def tensor(self, a):
        """the case tensor an argument names: a layer, the input, or a line made for it"""
        if not hasattr(a, "op"):
            fail(f"an argument {a!r} where a tensor is read")
        v = self.env.get(a.name)
        if isinstance(v, Layer):
            return v.name
        if isinstance(v, Param):
            if v.fqn in self.param_lines:
                return self.param_lines[v.fqn]
            if v.buffer:
                return self.constant(a.name, v.value, f"buffer {v.fqn}")
            name = self.fresh(a.name)
            shape = list(v.value.shape)
            if not 1 <= len(shape) <= 3:
                fail(f"parameter {v.fqn} of {len(shape)} dims: a parameter line has 1 to 3")
            self.param_lines[v.fqn] = name
            self.emit(name, Line("parameter", shape, [], {"init": "zeros"}, params=v.fqn),
                      f"nn.Parameter {v.fqn}", None)
            self.files[v.fqn] = v.value
            return name
        if isinstance(v, self.torch.Tensor):
            return self.constant(a.name, v, "computed by PyTorch at import")
        if isinstance(v, Pending):
            fail(f"{a.name}: a {len(self.shape(v.x)) + 1}-dim tensor read by another op than "
                 "the reshape that merges its copies: a case's tensors have at most 4 dims")
        fail(f"{a.name}: a {type(v).__name__} where a tensor is read")

    def constant(self, node_name, value, why):
        if node_name in self.const_lines:
            return self.const_lines[node_name]
        t = self.torch
        if not value.is_floating_point():
            fail(f"{node_name}: a {value.dtype} tensor read as a float one "
                 f"({why}): no kind reads integer tensors but embedding")
        v = value.detach()
        if v.dim() > 3 and v.shape[0] == self.batch and all(
                t.equal(v[0]) for t in v[1:]):
            v = v[:1]  # the same for every sample: one broadcast over the batch
        while v.dim() > 3 and v.shape[0] == 1:
            v = v[0]
        if v.dim() > 3 or v.dim() == 0:
            fail(f"{node_name}: a constant of shape {list(value.shape)} ({why}): "
                 "a constant has 1 to 3 dims")
        if v.dtype == t.bfloat16:
            v = v.float()
        name = self.fresh("c_" + node_name)
        fname = f"{name}.npy"
        self.files[fname] = v
        self.const_lines[node_name] = name
        self.emit(name, Line("constant", [fname], []), why, None)
        return name

    def own_params(self, line, n, first, w, b, extra=()):
        """params=PREFIX when w and b (and buffers) are one module's, used here only"""
        ws = [(first, w), ("bias", b)] + list(zip(("running_mean", "running_var"), extra))
        fqns = {}
        for what, a in ws:
            if a is None:
                continue
            v = self.env.get(a.name)
            if not isinstance(v, Param):
                fail(f"{n.name}: its {what} is computed in the graph ({a.name}): the kind "
                     "takes its own parameters")
            fqns[what] = v
        wv = fqns[first] if first in fqns else None
        if wv is not None and wv.fqn in self.owner:
            # a tied weight: the layer that owns it, its bias its own
            line.opts["weight"] = self.owner[wv.fqn] + ".weight"
        prefixes = {v.fqn.rsplit(".", 1)[0] if "." in v.fqn else "" for k, v in fqns.items()
                    if not (k == first and wv.fqn in self.owner)}
        names_ok = all(v.fqn.endswith("." + k) for k, v in fqns.items()
                       if not (k == first and wv.fqn in self.owner))
        if len(prefixes) > 1 or not names_ok or "" in prefixes:
            fail(f"{n.name}: its parameters {', '.join(v.fqn for v in fqns.values())} are no "
                 "one module's weight and bias")
        if b is None and line.kind in ("linear", "conv2d"):
            line.opts["bias"] = "no"
        line.params = prefixes.pop() if prefixes else None
        line.owned = [(k, v) for k, v in fqns.items()
                      if not (k == first and wv.fqn in self.owner)]

    def emit(self, name, line, comment, heading):
        line.dropped, self.dropped = self.dropped, []
        self.lines.append((name, line, comment, heading))


def qkv_split(g, n, op, val):
    """the nodes of a Split5: the reshape and permute are pending, each item of the unbind
    three lines; False for any other node"""
    p = g.env.get(n.args[0].name) if n.args and hasattr(n.args[0], "op") else None
    if op in ("aten.reshape.default", "aten.view.default") and isinstance(val, g.torch.Tensor) \
            and val.dim() == 5 and isinstance(p, Layer) and not p.whole:
        b, t, k, h, d = val.shape
        if list(g.shape(n.args[0])) == [b, t, k * h * d]:
            g.env[n.name] = Split5(p, list(val.shape))
            return True
    if op == "aten.permute.default" and isinstance(p, Split5) and p.perm is None and \
            list(n.args[1]) == [2, 0, 3, 1, 4]:
        g.env[n.name] = Split5(p.x, p.shape, list(n.args[1]))
        return True
    if op == "aten.unbind.int" and isinstance(p, Split5) and p.perm and \
            (n.args[1] if len(n.args) > 1 else 0) == 0:
        g.env[n.name] = p
        return True
    if "getitem" in op and isinstance(p, Split5):
        b, t, _, h, d = p.shape
        k = n.args[1]
        path, _ = module_path(n)
        src = source_line(n)
        comment = (path or "(top)") + (f" ({src})" if src else "")
        sl = g.fresh(n.name + "_slice")
        g.emit(sl, Line("slice", [], [p.x.name], {"dim": 2, "start": k * h * d,
                                                   "end": (k + 1) * h * d}), comment, None)
        vw = g.fresh(n.name + "_view")
        g.emit(vw, Line("reshape", [t, h, d], [sl]), comment, None)
        name = g.fresh(n.name)
        g.emit(name, Line("transpose", [1, 2], [vw]), comment, None)
        g.env[n.name] = Layer(name, val, False)
        return True
    if isinstance(p, Split5):
        fail(f"{n.name}: {op} of a {len(p.shape)}-dim view: no kind")
    return False


def module_path(n):
    st = n.meta.get("nn_module_stack") or {}
    if not st:
        return "", None
    path, cls = list(st.values())[-1]
    cls = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", "")
    return path, cls


def block_of(n):
    """the first module of the stack at a container index (layers.0, blocks.3): a block"""
    for path, cls in (n.meta.get("nn_module_stack") or {}).values():
        if path and path.split(".")[-1].isdigit():
            return path, (cls.rsplit(".", 1)[-1] if isinstance(cls, str) else "")
    return None


def autocast_regions(n, found):
    """each `with ...autocast...:` of the model's code around a frame of n's stack trace
    (torch.autocast, HF's maybe_autocast): traced with autocast off, such a region is not in
    the graph, and under autocast the code would have run otherwise; into found, by place"""
    import linecache
    st = n.meta.get("stack_trace") or ""
    for l in st.splitlines():
        l = l.strip()
        if not l.startswith("File \"") or ", line " not in l:
            continue
        f = l[6:l.index('"', 6)]
        if "/torch/" in f:
            continue
        ln = int(l.split(", line ")[1].split(",")[0])
        code = linecache.getline(f, ln)
        indent = len(code) - len(code.lstrip())
        for k in range(ln - 1, max(ln - 60, 0), -1):
            prev = linecache.getline(f, k)
            if not prev.strip():
                continue
            pin = len(prev) - len(prev.lstrip())
            if pin < indent:
                if prev.lstrip().startswith("with ") and "autocast" in prev:
                    found.setdefault(f"{os.path.basename(f)}:{k}", prev.strip())
                indent = pin
            if pin == 0:
                break


def source_line(n):
    """the innermost frame of the stack trace outside torch/: file:line and its code"""
    st = n.meta.get("stack_trace") or ""
    frames = []
    lines = st.splitlines()
    for i, l in enumerate(lines):
        l = l.strip()
        if l.startswith("File \""):
            f = l[6:l.index('"', 6)]
            ln = l.split(", line ")[1].split(",")[0] if ", line " in l else "?"
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            frames.append((f, ln, code))
    for f, ln, code in reversed(frames):
        if "/torch/" not in f:
            return f"{os.path.basename(f)}:{ln}: {code}"
    return ""


def convert(torch, ep, module, inputs, dtype):
    g = Graph(torch, ep, module, inputs, dtype)
    from torch.export.graph_signature import InputKind
    user = [s for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    del user
    users = list(inputs)
    k = 0
    case_input = None
    for n in ep.graph.nodes:
        if n.op != "placeholder":
            continue
        s = g.specs[n.name]
        if s.kind == InputKind.USER_INPUT:
            t = users[k]
            k += 1
            if case_input is None and (t.is_floating_point() or any(
                    str(u.target) == "aten.embedding.default" and u.args[1] is n for u in n.users)):
                case_input = n
                g.batch = t.shape[0]
                g.env[n.name] = Layer("input", t, whole=False)
                g.input_value = t
            elif t.is_floating_point():
                fail(f"the forward's input {n.name} is a second float tensor: a case has one "
                     "input")
            else:
                g.env[n.name] = t  # an integer input: a constant of this batch
        elif s.kind == InputKind.PARAMETER:
            g.env[n.name] = Param(s.target, g.state[s.target].detach(), False)
        elif s.kind == InputKind.BUFFER:
            g.env[n.name] = Param(s.target, g.state[s.target].detach(), True)
        elif s.kind in (InputKind.CONSTANT_TENSOR,):
            g.env[n.name] = g.constants[s.target].detach()
        else:
            fail(f"{n.name}: a graph input of kind {s.kind.name}: not supported")
    if case_input is None:
        fail("the forward reads no float tensor and no token ids: nothing for the case's input")
    g.order = {n: i for i, n in enumerate(ep.graph.nodes)}
    last_block = None
    result = None
    multi = set()
    for n in ep.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            result = n
            break
        op = str(n.target)
        if n.op != "call_function":
            fail(f"{n.name}: a {n.op} node ({n.target}): not supported")
        if op in SKIPPED:
            continue
        autocast_regions(n, g.autocast_found)
        if qkv_split(g, n, op, n.meta.get("val")):
            continue
        if op == "<built-in function getitem>" or op.endswith("getitem"):
            src = n.args[0]
            if src.name in g.env and not isinstance(g.env[src.name], (Layer,)) and src.name not in multi:
                g.env[n.name] = g.env[src.name][n.args[1]]
                continue
            row = row_getitem
        else:
            row = OPS.get(op)
        # fold what depends on no parameter and no float input
        if all(constant_of(torch, g.env.get(a.name)) for a in n.all_input_nodes):
            g.env[n.name] = fold(torch, g, n)
            continue
        if row is None:
            path, _ = module_path(n)
            ent = g.unknown.setdefault(op, [0, path or "the model itself"])
            ent[0] += 1
            g.env[n.name] = Layer(n.name, n.meta.get("val"), False)
            continue
        if g.unknown:
            # after an unknown op, keep walking for the list but make no lines
            g.env[n.name] = Layer(n.name, n.meta.get("val"), g.whole(n))
            if row is row_multi:
                multi.add(n.name)
            continue
        if row is row_multi:
            multi.add(n.name)
            g.env[n.name] = "multi"
            continue
        val = n.meta.get("val")
        if op == "aten.unsqueeze.default" and val.dim() > 4:
            g.env[n.name] = Pending(n.args[0], n.args[1] % val.dim())
            continue
        p = g.env.get(n.args[0].name) if n.args and hasattr(n.args[0], "op") else None
        if op == "aten.expand.default" and isinstance(p, Pending) and p.reps is None:
            src = list(g.val(p.x).shape)
            sizes = list(n.args[1])
            if all(s in (-1, src[i - (i > p.dim)]) for i, s in enumerate(sizes) if i != p.dim):
                g.env[n.name] = Pending(p.x, p.dim, sizes[p.dim])
                continue
        line = row(g, n)
        if line is None:
            g.env[n.name] = g.env[n.args[0].name]
            src = g.env[n.name]
            g.dropped.append(f"{n.name} ({op}) is its input "
                             f"{src.name if isinstance(src, Layer) else n.args[0].name}: dropped")
            continue
        if not isinstance(val, torch.Tensor):
            fail(f"{n.name}: {op} returns {type(val).__name__}: not a tensor")
        whole = g.whole(n)
        if not whole and (val.dim() < 2 or val.shape[0] != g.batch) and line.kind not in ("parameter",):
            fail(f"{n.name}: {op} gives shape {list(val.shape)}, whose first dim is not the "
                 f"batch ({g.batch}): the case's tensors keep the batch dim first")
        if not whole and val.dim() > 4:
            fail(f"{n.name}: {op} gives a {val.dim()}-dim tensor {list(val.shape)}: the case's "
                 "tensors have at most 4 dims with the batch")
        name = g.fresh(n.name)
        path, cls = module_path(n)
        src = source_line(n)
        comment = (path or "(top)") + (f" ({src})" if src else "")
        blk = block_of(n)
        heading = None
        if blk and blk != last_block:
            heading = f"---- {blk[0]} ({blk[1]}) ----"
            last_block = blk
        elif not blk and last_block:
            heading = "---- after the blocks ----"
            last_block = None
        g.emit(name, line, comment, heading)
        for what, p in getattr(line, "owned", []):
            g.owner[p.fqn] = name
            g.files[p.fqn] = p.value
        g.env[n.name] = Layer(name, val, whole)
    if g.unknown:
        items = sorted(g.unknown.items(), key=lambda kv: -kv[1][0])
        text = ", ".join(f"{op} ({c} node{'s' if c > 1 else ''}, first in {p})"
                         for op, (c, p) in items)
        fail(f"{len(items)} op{'s have' if len(items) > 1 else ' has'} no kind: {text}")
    outs = [a for a in (result.args[0] if isinstance(result.args[0], (list, tuple)) else [result.args[0]])
            if hasattr(a, "op") and isinstance(g.env.get(a.name), Layer)]
    if not outs:
        fail("the forward returns no tensor the case computes (a structure without a tensor "
             "from the input, or only constants)")
    out = outs[0]
    out_layer = g.env[out.name]
    if out_layer.name == "input" or out_layer.whole:
        fail("the forward's first tensor output does not depend on its input")
    if g.lines[-1][0] != out_layer.name:
        # the model's output is the last line: a view of the output that keeps it
        g.emit(g.fresh("output"), Line("reshape", [str(s) for s in list(out_layer.val.shape)[1:]],
                                       [out_layer.name]), "the forward's output", None)
    return g


def constant_of(torch, v):
    """whether a value is known at import: a folded tensor or list, an integer input, a
    buffer (non-persistent ones among them: rotary tables, position ids)"""
    return (isinstance(v, (torch.Tensor, list, tuple)) or
            (isinstance(v, Param) and v.buffer))


def fold(torch, g, n):
    """a node of constants only, computed by PyTorch"""
    def value(a):
        if hasattr(a, "op"):
            v = g.env[a.name]
            return v.value if isinstance(v, Param) else v
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a
    args = value(list(n.args))
    kwargs = {k: value(v) for k, v in n.kwargs.items()}
    try:
        return n.target(*args, **kwargs)
    except Exception as e:  # an op that needs a device or a shape it cannot have here
        fail(f"{n.name}: computing {n.target} at import failed: {e}")


# ---- the case file ----

def opts_text(line, ins):
    parts = []
    if line.positional:
        parts += [str(i) for i in ins]
    elif ins:
        parts.append(f"from={ins[0]}")
    for k, v in line.opts.items():
        parts.append(f"{k}={v}")
    if line.params:
        parts.append(f"params={line.params}")
    return parts


def case_text(g, name, script, dtype, loss, torch_version):
    """the case file; its .npy files lie in the folder NAME beside it"""
    out = [f"# {name}: imported by `ampscope import {os.path.basename(script)}` from "
           f"torch.export's graph (PyTorch {torch_version}), {dtype} parameters.",
           "# One layer per graph node, named after the node; parameters under their "
           "state_dict names (params=).",
           ]
    for place, code in sorted(g.autocast_found.items()):
        out.append(f"# WARNING: {place} `{code}`: an autocast region in the model's code, "
                   "traced with autocast off; under autocast it may run otherwise than this "
                   "graph (set autocast=no on its lines where it disables autocast)")
    out += ["[case]", f"name = {name}",
           f"description = {os.path.basename(script)} imported: "
           f"{sum(1 for l in g.lines if l[1].kind not in ('constant', 'parameter'))} graph nodes",
           "[model]"]
    width = max((len(n) for n, *_ in g.lines), default=4)
    for lname, line, comment, heading in g.lines:
        if heading:
            out.append(f"# {heading}")
        out += [f"# {d}" for d in line.dropped]
        numbers = [f"{name}/{x}" for x in line.numbers] if line.kind == "constant" else line.numbers
        words = [line.kind] + [str(x) for x in numbers] + opts_text(line, line.inputs)
        out.append(f"{lname.ljust(width)} = {' '.join(words)}  # {comment}")
    shape = list(g.input_value.shape)
    tokens = not g.input_value.is_floating_point()
    out += ["[data]", f"batch = {shape[0]}"]
    if len(shape) > 1:
        out.append(f"shape = {'x'.join(str(s) for s in shape[1:])}")
    out.append(f"input = file {name}/input.npy")
    if not tokens:
        out.append(f"input_dtype = {dtype}")
    out.append(f"target = file {name}/target.npy")
    out += ["[precision]", f"params = {dtype}", "autocast = off",
            f"export_params = {dtype}   # the graph was exported with {dtype} parameters",
            "[train]", f"loss = {loss}", "optimizer = sgd lr=0", "steps = 1", "[init]"]
    for fqn in sorted(k for k in g.files if not k.endswith(".npy")):
        out.append(f"{fqn} = file {name}/{fqn}.npy")
    return "\n".join(out) + "\n"


def load_script(path):
    spec = importlib.util.spec_from_file_location("ampscope_import_script", path)
    if spec is None:
        fail(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        fail(f"{path}: running the script failed: {type(e).__name__}: {e}")
    return mod


def to_numpy(torch, t):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def main(argv):
    ap = argparse.ArgumentParser(prog="ampscope import",
                                 description="a PyTorch model as an ampscope case")
    ap.add_argument("script")
    ap.add_argument("--out", default="cases")
    ap.add_argument("--name")
    ap.add_argument("--params", default="float32", choices=sorted(DTYPES))
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        sys.exit(2 if e.code else 0)
    try:
        import numpy as np
        import torch
    except ImportError as e:
        die(f"{sys.executable} cannot import torch ({e}): the importer exports the model "
            "with torch.export\n---> HINT: set AMPSCOPE_PYTHON to a python that has torch")
    try:
        if not os.path.isfile(a.script):
            fail(f"{a.script}: no such file")
        name = a.name or os.path.splitext(os.path.basename(a.script))[0]
        if not name or any(not (c.isalnum() or c in "._-") for c in name):
            fail(f"--name {name}: expected [A-Za-z0-9._-]+")
        mod = load_script(a.script)
        for fn in ("model", "inputs"):
            if not callable(getattr(mod, fn, None)):
                fail(f"{a.script} defines no {fn}(): it must define model() (an nn.Module) "
                     "and inputs() (a tuple of tensors)")
        module = mod.model()
        if not isinstance(module, torch.nn.Module):
            fail(f"{a.script}: model() returned a {type(module).__name__}, not an nn.Module")
        dtype = getattr(torch, a.params)
        module = module.to(dtype)
        inputs = mod.inputs()
        inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
        if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
            fail(f"{a.script}: inputs() must return a tuple of tensors")
        inputs = tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
        loss = getattr(mod, "LOSS", None)
        if loss not in LOSSES:
            fail(f"{a.script}: LOSS = {loss!r}: expected one of {', '.join(LOSSES)} "
                 "(with target())")
        if not callable(getattr(mod, "target", None)):
            fail(f"{a.script} defines no target(): LOSS {loss} compares the output with it")
        target = mod.target()
        try:
            ep = torch.export.export(module, inputs)
        except Exception as e:
            fail(f"torch.export.export failed: {type(e).__name__}: {e}")
        g = convert(torch, ep, module, inputs, a.params)
        files = {}
        for k, v in g.files.items():
            files[k if k.endswith(".npy") else k + ".npy"] = to_numpy(torch, v)
        inp = to_numpy(torch, g.input_value)
        files["input.npy"] = inp
        files["target.npy"] = to_numpy(torch, target)
        text = case_text(g, name, a.script, a.params, loss, torch.__version__)
    except ImportError_ as e:
        die(str(e))
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.", dir=a.out)
    try:
        sub = os.path.join(tmp, name)
        os.makedirs(sub)
        for fn, arr in files.items():
            np.save(os.path.join(sub, fn), arr)
        with open(os.path.join(tmp, name + ".case"), "w") as f:
            f.write(text)
        dest = os.path.join(a.out, name)
        if os.path.exists(dest):
            shutil.rmtree(dest)
        os.replace(sub, dest)
        os.replace(os.path.join(tmp, name + ".case"), os.path.join(a.out, name + ".case"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_nodes = sum(1 for l in g.lines if l[1].kind not in ("constant", "parameter"))
    print(f"import: {os.path.join(a.out, name + '.case')}: {n_nodes} graph nodes, "
          f"{len(files)} .npy files in {os.path.join(a.out, name)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
