#!/usr/bin/env python3
"""torch_reference.py: a case's training steps run by PyTorch itself, for the conformance test.

Reads a case's normalized configuration from `ampscope check --json CASE [--set ...]` (run
here as a subprocess, or read from stdin with --json -) and the initial parameters, input
and target that `ampscope run --dump DIR` wrote under DIR/init/, rebuilds the model in
PyTorch (a module with the case's layer names as attributes, so `model.fc1.weight` is
`fc1.weight`, each layer reading the outputs its `inputs` name: a graph),
and runs the case's steps as a PyTorch user would write them:

    optimizer = SGD | Adam | RMSprop(model.parameters(), ..., foreach=False)
    scheduler = CosineAnnealingLR(optimizer, T_max, eta_min)       # schedule = cosine
    scaler = torch.amp.GradScaler(device, init_scale, ...)          # [scaler]
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype):                          # autocast != off
            out = model(input)
            loss = criterion(out, target)                            # loss_in_autocast
        loss = criterion(out, target)                                # loss_in_autocast = no
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer); scaler.update()                      # or optimizer.step()
        scheduler.step()

and records, under ampscope's names (results/README.md), every tensor the harness also names:
  forward   `fc1.out` (forward hooks), `log_softmax.out` (cross_entropy's LogSoftmaxBackward0
            keeps it), `mse.out` (mse with reduction='none'), `loss`, `loss.scaled`;
  backward  `fc1.out.grad`, `log_softmax.out.grad`, `mse.out.grad`, `loss.grad`,
            `loss.scaled.grad` (tensor and node hooks); the gradients of cast copies,
            `fc1.weight@float16.grad` (a ToCopyBackward0 whose next node is a parameter's
            AccumulateGrad; its hook's grad_outputs[0] is the copy's gradient) and
            `fc3.out@float32.grad` (the ToCopyBackward0 in front of the loss);
            `fc1.weight.grad` (after backward; after scaler.unscale_ with a scaler);
  optimizer the state after each step (`fc1.weight.exp_avg`, ...), the parameters after the
            last step.
A name written twice in a step keeps its last value, as the harness's dump does.

Output, a CSV file: kind,step,tensor,dtype,zeros,norm,value
  kind tensor: a tensor of a step (zeros: exact zeros, norm: L2 norm in float64);
  kind loss:   the loss of a step (value: loss.item());
  kind param:  a parameter after the last step (step = the last step).
Prints the PyTorch version and the device on stdout: "PyTorch 2.15.0+cu132 on cpu".

Usage:
  python3 tools/torch_reference.py CASE [--set S.K=V]... --init DIR/init --out REF.csv
         [--device cpu|cuda] [--ampscope bin/ampscope]
  bin/ampscope check --json CASE | python3 tools/torch_reference.py --json - --init ... --out ...
Refused: precision.master_weights = yes (fp32 master copies inside the optimizer have no
PyTorch equivalent). On CUDA, reduced-precision reductions and TF32 are turned off so that
cuBLAS and cuDNN accumulate in float32, as the harness does.
"""
import argparse
import collections
import contextlib
import csv
import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
DTYPE_NAMES[torch.int64] = "int64"  # token ids
STATE_NAMES = ("momentum_buffer", "exp_avg", "exp_avg_sq", "square_avg", "grad_avg")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", nargs="?", help="case file (omit with --json)")
    p.add_argument("--set", action="append", default=[], metavar="S.K=V",
                   help="override a case key, as `ampscope check --set` does")
    p.add_argument("--json", metavar="FILE", help="read the normalized case JSON from FILE (- = stdin)")
    p.add_argument("--init", required=True, metavar="DIR",
                   help="the init/ folder `ampscope run --dump` wrote")
    p.add_argument("--out", required=True, metavar="FILE", help="the reference CSV to write")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--ampscope", default="bin/ampscope", help="the ampscope binary")
    a = p.parse_args()
    if (a.case is None) == (a.json is None):
        p.error("give a case file or --json, not both")
    if a.json and a.set:
        p.error("--set goes to `ampscope check` when --json is used")
    return a


def load_config(a):
    if a.json:
        f = sys.stdin if a.json == "-" else open(a.json)
        return json.load(f)
    cmd = [a.ampscope, "check", "--json", a.case]
    for s in a.set:
        cmd += ["--set", s]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("torch_reference: %s failed:\n%s" % (" ".join(cmd), done.stderr.strip()))
    return json.loads(done.stdout)


def load_tensor(init_dir, name):
    """DIR/NAME.npy, or DIR/NAME.bfloat16.npy (exact float32 values of a bfloat16 tensor)."""
    plain = os.path.join(init_dir, name + ".npy")
    if os.path.exists(plain):
        return torch.from_numpy(np.load(plain))
    wide = os.path.join(init_dir, name + ".bfloat16.npy")
    if os.path.exists(wide):
        return torch.from_numpy(np.load(wide)).to(torch.bfloat16)
    raise SystemExit("torch_reference: %s has no %s.npy (run `ampscope run --dump`)"
                     % (init_dir, name))


class Add(nn.Module):
    def forward(self, a, b):
        return a + b


class Mul(nn.Module):
    def forward(self, a, b):
        return a * b


class Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor  # a Python float: no type promotion


class Matmul(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class Transpose(nn.Module):
    def __init__(self, d1, d2):
        super().__init__()
        self.dims = (d1, d2)

    def forward(self, x):
        return x.transpose(*self.dims)


class SplitHeads(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        return x.view(b, t, self.heads, c // self.heads).transpose(1, 2)


class MergeHeads(nn.Module):
    def forward(self, x):
        b, h, t, d = x.shape
        return x.transpose(1, 2).contiguous().view(b, t, h * d)


class PositionEmbedding(nn.Module):
    """x + weight[:T]: a learned [P, C] table added by position (nn.Embedding's init)."""

    def __init__(self, positions, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(positions, dim))

    def forward(self, x):
        return x + self.weight[: x.shape[-2]]


def autocast_on(x):
    return torch.is_autocast_enabled(x.device.type)


def fp32_norm(base):
    """layer_norm, group_norm or rms_norm as CUDA autocast runs it (KERNEL_CUDA(layer_norm,
    fp32), KERNEL_CUDA(group_norm, fp32), KERNEL_CUDA(rms_norm, fp32)): a half input cast up, the op in float32. CPU autocast
    2.15 keeps them in the input's dtype, so the reference casts explicitly
    (tests/references/README.md). A subclass, so the parameters keep the layer's names."""

    class Norm(base):
        def forward(self, x):
            if autocast_on(x) and x.dtype != torch.float32:
                x = x.float()
            return super().forward(x)
    return Norm


LayerNorm32, GroupNorm32 = fp32_norm(nn.LayerNorm), fp32_norm(nn.GroupNorm)
RMSNorm32 = fp32_norm(nn.RMSNorm)  # KERNEL_CUDA(rms_norm, fp32) since PyTorch 2.12


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Softmax(nn.Module):
    """softmax and log_softmax over `dim` with the case's dtype= ("none": None), as CUDA
    autocast calls them (KERNEL_CUDA(softmax, fp32_set_opt_dtype): a given dtype is kept,
    else dtype=float32 is passed to the op, whose copy the harness does not name; hook_graph
    leaves it out); CPU autocast 2.15 keeps the input's dtype."""

    def __init__(self, fn, dim=-1, dtype="none"):
        super().__init__()
        self.fn, self.dim, self.dtype = fn, dim, DTYPES.get(dtype)

    def forward(self, x):
        if self.dtype is not None:
            return self.fn(x, dim=self.dim, dtype=self.dtype)
        if autocast_on(x):
            return self.fn(x, dim=self.dim, dtype=torch.float32)
        return self.fn(x, dim=self.dim)


class To(nn.Module):
    """x.to(torch.DTYPE), or x.to(other.dtype) ("like": the second input, read for its dtype)"""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = DTYPES.get(dtype)

    def forward(self, x, like=None):
        return x.to(like.dtype if like is not None else self.dtype)


class CausalMask(nn.Module):
    """masked_fill of the upper triangle (above the diagonal) of the last two dims with -inf."""

    def forward(self, x):
        t, u = x.shape[-2], x.shape[-1]
        upper = torch.ones(t, u, dtype=torch.bool, device=x.device).triu(1)
        return x.masked_fill(upper, float("-inf"))


class Sdpa(nn.Module):
    """F.scaled_dot_product_attention on PyTorch's math path (CPU PyTorch otherwise picks a
    flash kernel of its own); scale 0 in the case means the default 1/sqrt(E); a fourth
    input is the additive attn_mask, its per-sample dims after the batch dim (a [B, L, S]
    mask is [B, 1, L, S] for PyTorch's broadcast against [B, H, L, S])."""

    def __init__(self, causal, scale, enable_gqa):
        super().__init__()
        self.causal, self.scale, self.enable_gqa = causal, scale or None, enable_gqa
        self.whole_mask = False  # a constant's mask: no batch dim, broadcast as it is

    def forward(self, q, k, v, mask=None):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        if mask is not None and not self.whole_mask:
            mask = mask.reshape(mask.shape[:1] + (1,) * (4 - mask.dim()) + mask.shape[1:])
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                  is_causal=self.causal, scale=self.scale,
                                                  enable_gqa=self.enable_gqa)


class Constant(nn.Module):
    """A buffer read from an .npy file (register_buffer): no gradient, not a parameter."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self.register_buffer("value", torch.from_numpy(np.load(path)))

    def forward(self):
        return self.value


class Parameter(nn.Module):
    """An nn.Parameter of its own shape, without a batch dim (its values come from init/)."""

    def __init__(self, shape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(shape))

    def forward(self):
        return self.weight


class Reshape(nn.Module):
    """x.reshape(B, *sizes): the sizes of a sample, -1 inferred by PyTorch."""

    def __init__(self, sizes):
        super().__init__()
        self.sizes = sizes

    def forward(self, x):
        return x.reshape(x.shape[0], *self.sizes)


SOURCE_KINDS = ("constant", "parameter")  # layers that read no input


class Graph(nn.Module):
    """The case's layers as attributes (so `model.fc1.weight` is `fc1.weight`), each reading
    the outputs its `inputs` name; the last layer's output is the model's. A tied weight
    (`weight_of`) is the other layer's Parameter itself: one tensor, one .grad."""

    def __init__(self, cfg):
        super().__init__()
        self.spec = cfg["model"]
        paths = {i["tensor"]: i["path"] for i in cfg.get("init", [])}
        for l in self.spec:
            setattr(self, l["name"], Constant(paths[l["name"] + ".value"])
                    if l["kind"] == "constant" else make_layer(l))
        whole = {l["name"] for l in self.spec if l.get("batch_dim") is False}
        for l in self.spec:
            if l.get("weight_of"):
                getattr(self, l["name"]).weight = getattr(self, l["weight_of"]).weight
            if l["kind"] == "scaled_dot_product_attention" and len(l["inputs"]) > 3:
                getattr(self, l["name"]).whole_mask = l["inputs"][3] in whole

    def forward(self, x):
        outs = {"input": x}
        for l in self.spec:
            ins = ([] if l["kind"] in SOURCE_KINDS
                   else [outs[n] for n in l.get("inputs", [])] or [out])
            # autocast=no: the layer inside torch.autocast(device, enabled=False)
            with torch.autocast(ins[0].device.type, enabled=False) \
                    if l.get("autocast") is False else contextlib.nullcontext():
                out = outs[l["name"]] = getattr(self, l["name"])(*ins)
        return out


def make_layer(l):
    kind = l["kind"]
    if kind == "linear":
        return nn.Linear(l["in"], l["out"], bias=l["bias"])
    if kind == "conv2d":
        return nn.Conv2d(l["in"], l["out"], l["kernel"], stride=l["stride"],
                         padding=l["padding"], dilation=l["dilation"], groups=l["groups"],
                         bias=l["bias"])
    if kind == "relu":
        return nn.ReLU()
    if kind == "flatten":
        return nn.Flatten()
    # graph models
    if kind == "embedding":
        pad = l["padding_idx"]
        return nn.Embedding(l["in"], l["out"], padding_idx=None if pad < 0 else pad)
    if kind == "position_embedding":
        return PositionEmbedding(l["in"], l["out"])
    if kind == "add":
        return Add()
    if kind == "mul":
        return Mul()
    if kind == "scale":
        return Scale(l["factor"])
    if kind == "matmul":
        return Matmul()
    if kind == "transpose":
        return Transpose(l["dim0"], l["dim1"])
    if kind == "split_heads":
        return SplitHeads(l["heads"])
    if kind == "merge_heads":
        return MergeHeads()
    # activations, normalization, pooling, attention
    if kind == "layer_norm":
        return LayerNorm32(l["normalized_shape"], eps=l["eps"],
                           elementwise_affine=l["elementwise_affine"], bias=l["bias"])
    if kind == "rms_norm":  # eps 0 in the case: None
        return RMSNorm32(l["normalized_shape"], eps=l["eps"] or None,
                         elementwise_affine=l["elementwise_affine"])
    if kind == "group_norm":
        return GroupNorm32(l["num_groups"], l["num_channels"], eps=l["eps"], affine=l["affine"])
    if kind == "batch_norm2d":  # on no autocast list: half x with float32 weight and stats
        return nn.BatchNorm2d(l["num_features"], eps=l["eps"], momentum=l["momentum"],
                              affine=l["affine"])
    if kind == "gelu":
        return nn.GELU(approximate=l["approximate"])
    if kind == "silu":
        return nn.SiLU()
    if kind == "sigmoid":
        return nn.Sigmoid()
    if kind == "tanh":
        return nn.Tanh()
    if kind == "softmax":
        return Softmax(F.softmax, l["dim"], l["dtype"])
    if kind == "log_softmax":
        return Softmax(F.log_softmax, l["dim"], l["dtype"])
    if kind == "to":
        return To(l["dtype"])
    if kind == "causal_mask":
        return CausalMask()
    if kind == "max_pool2d":
        return nn.MaxPool2d(l["kernel"], stride=l["stride"] or None, padding=l["padding"])
    if kind == "avg_pool2d":
        return nn.AvgPool2d(l["kernel"], stride=l["stride"] or None, padding=l["padding"])
    if kind == "adaptive_avg_pool2d":
        return nn.AdaptiveAvgPool2d(1)
    if kind == "scaled_dot_product_attention":
        return Sdpa(l["causal"], l["scale"], l["enable_gqa"])
    if kind == "parameter":
        return Parameter(tuple(l["sizes"]))
    if kind == "reshape":
        return Reshape(l["sizes"])
    if kind == "dropout":
        raise SystemExit("torch_reference: dropout's mask is not PyTorch's (docs/SEMANTICS.md): "
                         "its values cannot be compared; refused")
    raise SystemExit("torch_reference: unknown layer kind %s" % kind)


def build_model(cfg):
    return Graph(cfg)


def make_optimizer(cfg, params):
    o = cfg["train"]["optimizer"]
    opts = dict(o["options"])
    kind = o["kind"]
    if kind == "sgd":
        return torch.optim.SGD(params, foreach=False, **opts)
    if kind == "adam":
        opts["betas"] = tuple(opts["betas"])
        return torch.optim.Adam(params, foreach=False, **opts)
    if kind == "adamw":
        opts["betas"] = tuple(opts["betas"])
        return torch.optim.AdamW(params, foreach=False, **opts)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, foreach=False, **opts)
    raise SystemExit("torch_reference: unknown optimizer %s" % kind)


class Recorder:
    """Rows keyed by (kind, step, tensor): a later write of the same key replaces the value."""

    def __init__(self):
        self.rows = collections.OrderedDict()
        self.step = 0

    def tensor(self, name, t, kind="tensor"):
        t = t.detach()
        norm = math.sqrt(t.to(torch.float64).pow(2).sum().item())
        self.rows[(kind, self.step, name)] = (DTYPE_NAMES[t.dtype], int((t == 0).sum().item()),
                                              repr(norm), "")

    def loss(self, t):
        self.rows[("loss", self.step, "loss")] = (DTYPE_NAMES[t.dtype], "", "", repr(t.item()))

    def hook_grad(self, name, t):
        t.register_hook(lambda g: self.tensor(name + ".grad", g))

    def write(self, path):
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["kind", "step", "tensor", "dtype", "zeros", "norm", "value"])
            for (kind, step, name), vals in self.rows.items():
                w.writerow([kind, step, name, *vals])


def hook_graph(rec, root, node_names, param_names):
    """Node hooks on the backward graph for the tensors no Python variable holds: cast copies'
    gradients (ToCopyBackward0) and cross_entropy's log_softmax (LogSoftmaxBackward0)."""
    seen, todo, copies = set(), [root.grad_fn], collections.defaultdict(list)
    internal = set()  # softmax(x, dtype=float32)'s own copy: no cast node in the harness
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)
        kind = type(node).__name__
        if kind in ("SoftmaxBackward0", "LogSoftmaxBackward0") and node in node_names:
            internal.update(n for n, _ in node.next_functions
                            if type(n).__name__ == "ToCopyBackward0")
        if kind == "LogSoftmaxBackward0" and node not in node_names:  # the loss's
            rec.tensor("log_softmax.out", node._saved_result)
            node.register_hook(lambda gi, go: rec.tensor("log_softmax.out.grad", go[0]))
        elif kind == "ToCopyBackward0" and node not in node_names:  # a `to` layer's is its own
            src = node.next_functions[0][0]
            if type(src).__name__ == "AccumulateGrad":
                base = param_names[src.variable]
            elif src in node_names:
                base = node_names[src]
            else:
                continue
            copies[base].append(node)
    # an activation cast for several consumers has a copy per consumer, named in the order
    # they were made, as the harness names them: x@float16, x@float16_2, ...
    for base, nodes in copies.items():
        nodes = [n for n in nodes if n not in internal]
        for k, node in enumerate(sorted(nodes, key=lambda n: n._sequence_nr())):
            suffix = "_%d" % (k + 1) if k else ""

            def copy_grad(gi, go, base=base, suffix=suffix):
                rec.tensor("%s@%s%s.grad" % (base, DTYPE_NAMES[go[0].dtype], suffix), go[0])
            node.register_hook(copy_grad)


def configure_device(device):
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("torch_reference: --device cuda, but torch.cuda.is_available() is False")
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    elif hasattr(torch._C, "_set_cpu_allow_fp16_reduced_precision_reduction"):
        torch._C._set_cpu_allow_fp16_reduced_precision_reduction(False)


def run(cfg, init_dir, device):
    prec, data, train = cfg["precision"], cfg["data"], cfg["train"]
    if prec["master_weights"]:
        raise SystemExit("torch_reference: %s: master_weights = yes has no PyTorch equivalent "
                         "(fp32 master copies inside the optimizer); refused" % cfg["name"])
    model = build_model(cfg).to(device=device, dtype=DTYPES[prec["params"]])
    if prec["params"] == "float32":  # the case's params: no module.half() or .float() call,
        for m in model.modules():     # so a buffer keeps its file's dtype
            if isinstance(m, Constant):
                m.value = torch.from_numpy(np.load(m.path)).to(device)
    param_names = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = load_tensor(init_dir, name)
            if t.dtype != p.dtype or t.shape != p.shape:
                raise SystemExit("torch_reference: %s is %s %s, the model wants %s %s"
                                 % (name, t.dtype, tuple(t.shape), p.dtype, tuple(p.shape)))
            p.copy_(t)
            param_names[p] = name
    x = load_tensor(init_dir, "input").to(device)
    target = load_tensor(init_dir, "target").to(device)
    if DTYPE_NAMES[x.dtype] != data["input_dtype"]:
        raise SystemExit("torch_reference: input.npy is %s, the case says %s"
                         % (x.dtype, data["input_dtype"]))

    autocast = prec["autocast"]
    loss_kind, reduction = train["loss"], train["reduction"]
    optimizer = make_optimizer(cfg, model.parameters())
    schedule = train["schedule"]
    scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=schedule["T_max"], eta_min=schedule["eta_min"])
        if schedule["kind"] == "cosine" else None)
    sc = cfg["scaler"]
    scaler = (torch.amp.GradScaler(device, init_scale=sc["init_scale"],
                                   growth_factor=sc["growth_factor"],
                                   backoff_factor=sc["backoff_factor"],
                                   growth_interval=sc["growth_interval"])
              if sc["enabled"] else None)

    rec = Recorder()
    node_names = {}

    def forward_hook(name):
        def hook(module, inputs, out):
            if any(out is x for x in inputs):  # `to` of its own dtype returns its input:
                return                          # no name of its own, as in the harness
            rec.tensor(name + ".out", out)
            if out.requires_grad:
                rec.hook_grad(name + ".out", out)
                node_names[out.grad_fn] = name + ".out"
        return hook

    for l in cfg["model"]:
        if l["kind"] not in SOURCE_KINDS:  # their tensors are NAME.value, NAME.weight
            getattr(model, l["name"]).register_forward_hook(forward_hook(l["name"]))

    def criterion(out):
        if loss_kind == "cross_entropy" and out.dim() > 2:  # [B, T, V]: every position
            return F.cross_entropy(out.view(-1, out.shape[-1]), target.view(-1))
        if loss_kind == "cross_entropy":
            return F.cross_entropy(out, target)
        if loss_kind == "bce_with_logits":
            return F.binary_cross_entropy_with_logits(out, target)
        if loss_kind == "l1":
            return F.l1_loss(out, target)
        if reduction == "none":
            elem = F.mse_loss(out, target, reduction="none")
            rec.tensor("mse.out", elem)
            rec.hook_grad("mse.out", elem)
            return elem.mean()
        return F.mse_loss(out, target)

    for step in range(train["steps"]):
        rec.step = step
        node_names.clear()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=DTYPES.get(autocast), enabled=autocast != "off"):
            out = model(x)
            if prec["loss_in_autocast"]:
                loss = criterion(out)
        if not prec["loss_in_autocast"]:
            loss = criterion(out)
        rec.tensor("loss", loss)
        rec.loss(loss)
        rec.hook_grad("loss", loss)
        root = loss
        if scaler:
            root = scaler.scale(loss)
            rec.tensor("loss.scaled", root)
            rec.hook_grad("loss.scaled", root)
        hook_graph(rec, root, node_names, param_names)
        root.backward()
        if scaler:
            scaler.unscale_(optimizer)
        for p, name in param_names.items():
            if p.grad is not None:
                rec.tensor(name + ".grad", p.grad)
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if scheduler:
            scheduler.step()
        for p, name in param_names.items():
            for key in STATE_NAMES:
                s = optimizer.state[p].get(key)
                if isinstance(s, torch.Tensor):
                    rec.tensor("%s.%s" % (name, key), s)
    for p, name in param_names.items():
        rec.tensor(name, p, kind="param")
    return rec


def main():
    a = parse_args()
    cfg = load_config(a)
    configure_device(a.device)
    with warnings.catch_warnings():
        # a skipped step calls scheduler.step() without optimizer.step(), as the harness does
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step()`")
        rec = run(cfg, a.init, a.device)
    rec.write(a.out)
    print("PyTorch %s on %s" % (torch.__version__, a.device))


if __name__ == "__main__":
    main()
