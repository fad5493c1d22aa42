#!/usr/bin/env python3
"""block_dtypes.py: the dtype PyTorch's CUDA autocast gives every forward tensor of three
reference blocks (a Llama decoder, a ViT block, a diffusion UNet up block), without a GPU.

The blocks are built from configs (nothing is downloaded), with the real widths, on fake
CUDA tensors (FakeTensorMode: shapes and dtypes only, no memory, no arithmetic), and run
eagerly with CUDA autocast switched on at the dispatcher (torch.set_autocast_enabled("cuda"):
the `torch.autocast("cuda")` context manager disables itself on a machine without CUDA),
so every op goes through the AutocastCUDA kernels autocast_mode.cpp registers. A
TorchFunctionMode records each tensor-returning call the models' Python code makes (a call
made inside another, e.g. F.interpolate's upsample_nearest2d, is not recorded twice) with
the module that made it (forward hooks), its shape and its dtype.

Why an eager run and not torch.export + fx.Interpreter: export bakes dtypes read at trace
time into the graph. diffusers' AttnProcessor2_0 writes `hidden_states.to(query.dtype)`;
traced with float32 parameters this becomes `to(float32)`, and replayed under autocast it
would cast sdpa's float16 output up, where the eager code (query float16) does nothing.
HF's LlamaRMSNorm (`.to(input_dtype)`) and eager attention (`.to(query.dtype)`) have the
same pattern. Export also makes HF build an explicit sdpa mask (masking_utils's
_ignore_causal_mask_sdpa never skips it while exporting) and repeat k and v, where the
eager model on CUDA calls sdpa with is_causal=True and enable_gqa=True.

Blocks (see build_* for the exact modules and their sources):
  llama-sdpa, llama-eager  HF transformers' LlamaForCausalLM with one LlamaDecoderLayer
                           (embed_tokens, rotary_emb, layers.0, norm, lm_head tied to the
                           embedding) at Llama-3.2-1B's width, attn_implementation "sdpa" /
                           "eager"; loss F.cross_entropy(logits.view(-1, V), labels.view(-1))
  llama-rmsnorm-op         llama-sdpa with every LlamaRMSNorm replaced by torch.nn.RMSNorm
                           (F.rms_norm: one op, on CUDA autocast's fp32 list)
  vit                      timm's VisionTransformer, ViT-B/16 with depth 1 and layer scale
                           (init_values=1e-6 as timm's deit3_base_patch16_224), class-token
                           head over 1000 classes; loss cross_entropy
  unet                     diffusers' TimestepEmbedding, conv_in, Downsample2D, Upsample2D
                           (nearest), the skip's cat, ResnetBlock2D (640 -> 320, temb 1280),
                           Attention with group_norm (8 heads of 40), conv_norm_out/conv_act/
                           conv_out, at SD 1.5's first width (320) on 32x32 latents; loss
                           F.mse_loss(pred.float(), noise.float()) as diffusers'
                           train_text_to_image.py
Configs: fp32 (float32 parameters, no autocast), autocast-fp16 and autocast-bf16 (float32
parameters, autocast float16 / bfloat16), bf16-params (model.to(torch.bfloat16), floating
inputs cast to bfloat16, no autocast).

Writes tests/references/blocks/<block>-<config>.csv with columns
  node    the ATen op the call is (aten::linear, aten::upsample_nearest2d, ...)
  module  the innermost module running (its qualified name; "" at the top level)
  name    a short readable name: the module's path and the op, numbered when repeated
  shape   the output's shape, dims joined by x
  dtype   the output's dtype
  why     "autocast <list>" (the op's list in tests/references/autocast_lists.csv, under
          autocast; a composite's inner ops' lists: cross_entropy_loss), "explicit cast"
          (.to/.float with another dtype), "explicit cast to its own dtype (returns self)"
          (aten/src/ATen/native/TensorConversions.cpp: to() of the same dtype copies
          nothing), "explicit dtype=" (an op given dtype=), "promotion" (inputs of several
          floating dtypes, on no list), "input dtype", "integer/bool op", "factory" (made
          from no tensor), "input"
The first rows are the block's inputs. Parameters and autograd's backward are not listed:
a parameter keeps its dtype and its .grad has it; each activation gradient has its
tensor's dtype (torch/csrc/autograd/engine.cpp validate_outputs).

Usage: /opt/torch-venv/bin/python tools/block_dtypes.py [--out DIR] [BLOCK ...]
"""
import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIGS = {
    # name: (parameter dtype, autocast dtype or None)
    "fp32": (torch.float32, None),
    "autocast-fp16": (torch.float32, torch.float16),
    "autocast-bf16": (torch.float32, torch.bfloat16),
    "bf16-params": (torch.bfloat16, None),
}

# Llama-3.2-1B (the config.json of meta-llama/Llama-3.2-1B on the Hugging Face hub, in
# LlamaConfig's field names: transformers/models/llama/configuration_llama.py; rope type
# "llama3" is transformers' modeling_rope_utils._compute_llama3_parameters)
LLAMA_32_1B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5, hidden_act="silu",
    max_position_embeddings=131072, tie_word_embeddings=True, attention_bias=False,
    mlp_bias=False, bos_token_id=128000, eos_token_id=128001,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                     "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192})
LLAMA_BATCH, LLAMA_TOKENS = 1, 64
VIT_BATCH = 8
UNET_BATCH = 2

# a tensor method or function name -> the ATen op it is
ATEN_OF = {
    "__mul__": "mul", "__rmul__": "mul", "__add__": "add", "__radd__": "add",
    "__iadd__": "add_", "__sub__": "sub", "__rsub__": "rsub", "__truediv__": "div",
    "__neg__": "neg", "__and__": "bitwise_and", "__or__": "bitwise_or",
    "__ge__": "ge", "__gt__": "gt", "__le__": "le", "__lt__": "lt", "__eq__": "eq",
    "__ne__": "ne", "__invert__": "bitwise_not",
    "bfloat16": "to", "float": "to", "half": "to", "cross_entropy": "cross_entropy_loss",
    "softmax": "softmax", "dropout": "dropout",
}
# composite ATen ops whose autocast lists are those of the ops they call
# (aten/src/ATen/native/LossNLL.cpp cross_entropy_loss: log_softmax then nll_loss)
INNER = {"cross_entropy_loss": ("log_softmax", "nll_loss")}
CAST_METHODS = {"to", "float", "half", "bfloat16", "type"}


def autocast_lists():
    lists = {}
    with open(os.path.join(ROOT, "tests", "references", "autocast_lists.csv")) as f:
        for row in csv.DictReader(f):
            lists[row["op"]] = row["list"]
    return lists


def aten_name(func, args, kwargs):
    name = getattr(func, "__name__", "")
    if name == "__getitem__":
        idx = args[1] if isinstance(args[1], tuple) else (args[1],)
        if any(isinstance(i, torch.Tensor) for i in idx):
            return "index"
        if any(isinstance(i, int) for i in idx):
            return "select"
        if any(i is None for i in idx) and not any(isinstance(i, slice) and i != slice(None)
                                                   for i in idx):
            return "unsqueeze"
        return "slice"
    if name == "interpolate":
        mode = kwargs.get("mode", args[3] if len(args) > 3 else "nearest")
        return {"nearest": "upsample_nearest2d", "bilinear": "upsample_bilinear2d",
                "nearest-exact": "_upsample_nearest_exact2d"}[mode]
    return ATEN_OF.get(name, name)


def has_dtype_arg(name, args, kwargs):
    if kwargs.get("dtype") is not None:
        return True
    if name in ("float", "half", "bfloat16"):
        return True
    return name in ("to", "type") and any(isinstance(a, torch.dtype) for a in args[1:])


def tensors_in(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from tensors_in(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from tensors_in(y)


def short(dtype):
    return str(dtype).replace("torch.", "")


class Recorder(TorchFunctionMode):
    """records every tensor-returning torch call of the model's Python code"""

    def __init__(self, lists, autocast_on, modules):
        super().__init__()
        self.lists, self.autocast_on, self.rows = lists, autocast_on, []
        self.stack, self.names, self.counts = [""], {id(m): n for n, m in modules}, {}

    def enter(self, mod, *_):
        self.stack.append(self.names.get(id(mod), self.stack[-1]))

    def leave(self, *_):
        self.stack.pop()

    def add(self, node, t, why, name=None):
        module = self.stack[-1]
        op = node.replace("aten::", "")
        key = f"{module}/{op}"
        k = self.counts.get(key, 0)
        self.counts[key] = k + 1
        short_module = module
        for prefix in ("m.model", "m", "vit"):
            if short_module == prefix or short_module.startswith(prefix + "."):
                short_module = short_module[len(prefix) + 1:]
                break
        base = f"{short_module}.{op}" if short_module else op
        if name is None:
            name = base if k == 0 else f"{base}_{k}"
        self.rows.append(dict(node=node, module=module, name=name,
                              shape="x".join(str(s) for s in t.shape) or "scalar",
                              dtype=short(t.dtype), why=why))

    def why(self, aten, func_name, args, kwargs, out):
        ins = [t for t in tensors_in((args, kwargs))]
        floats = {t.dtype for t in ins if t.is_floating_point()}
        if func_name in CAST_METHODS and has_dtype_arg(func_name, args, kwargs):
            if ins and ins[0].dtype == out.dtype:
                return "explicit cast to its own dtype (returns self)"
            return "explicit cast"
        if self.autocast_on and out.is_floating_point():
            if aten in self.lists:
                why = "autocast " + self.lists[aten]
                if self.lists[aten] == "fp32_set_opt_dtype" and kwargs.get("dtype"):
                    why += f" (dtype={short(kwargs['dtype'])} given)"
                return why
            if aten in INNER:
                return " + ".join(f"autocast {self.lists[i]} ({i})" for i in INNER[aten])
        if kwargs.get("dtype") is not None:
            return "explicit dtype="
        if not ins:
            return "factory"
        if not out.is_floating_point():
            return "integer/bool op"
        if len(floats) > 1:
            return "promotion"
        return "input dtype"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name in ("__get__", "__set__", "__setitem__", "size", "dim", "numel", "item",
                    "__format__", "__repr__", "__bool__", "__len__", "__index__",
                    "__int__", "__float__", "is_floating_point", "data_ptr", "requires_grad_"):
            return out
        outs = list(tensors_in(out))
        if not outs:
            return out
        aten = aten_name(func, args, kwargs)
        for t in outs:
            why = self.why(aten, name, args, kwargs, t)
            if aten == "scaled_dot_product_attention":
                # how the library called it: HF's sdpa path passes is_causal and enable_gqa
                opts = [f"{k}={kwargs[k]}" for k in ("is_causal", "enable_gqa") if k in kwargs]
                if kwargs.get("attn_mask") is not None:
                    opts.append("attn_mask " + short(kwargs["attn_mask"].dtype))
                why += f" ({' '.join(opts)})" if opts else ""
            self.add("aten::" + aten, t, why)
        return out


def autocast_on(dtype):
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", dtype)
    torch.autocast_increment_nesting()


def autocast_off():
    torch.autocast_decrement_nesting()
    torch.set_autocast_enabled("cuda", False)
    torch.clear_autocast_cache()


# ---- the blocks: each build_X returns (model, inputs dict) on the current (fake) device ----

def llama_config(attn):
    from transformers import LlamaConfig
    return LlamaConfig(num_hidden_layers=1, attn_implementation=attn, **LLAMA_32_1B)


class LlamaBlock(torch.nn.Module):
    """LlamaForCausalLM with one decoder layer, its logits' cross entropy over every
    position (as the harness's cases compute it: no shift, no ignore_index)"""

    def __init__(self, cfg):
        super().__init__()
        from transformers import LlamaForCausalLM
        self.m = LlamaForCausalLM(cfg)

    def forward(self, input_ids, labels):
        logits = self.m(input_ids=input_ids, use_cache=False).logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


def build_llama(attn, rmsnorm_op=False):
    # masking_utils.find_packed_sequence_indices returns None (one sequence per row) for
    # positions 0..T-1 on real tensors, but keeps its packed-sequence mask for anything
    # is_tracing() calls traced, fake tensors included; that mask would stop
    # create_causal_mask from leaving the mask to sdpa's is_causal (with enable_gqa) as it
    # does on a GPU. The block's positions are always 0..T-1: one sequence.
    import transformers.masking_utils as masking_utils
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    model = LlamaBlock(llama_config(attn))
    if rmsnorm_op:
        C, eps = LLAMA_32_1B["hidden_size"], LLAMA_32_1B["rms_norm_eps"]
        layer = model.m.model.layers[0]
        layer.input_layernorm = torch.nn.RMSNorm(C, eps=eps)
        layer.post_attention_layernorm = torch.nn.RMSNorm(C, eps=eps)
        model.m.model.norm = torch.nn.RMSNorm(C, eps=eps)
    assert model.m.lm_head.weight is model.m.model.embed_tokens.weight, "head not tied"
    V = LLAMA_32_1B["vocab_size"]
    ids = torch.randint(0, V, (LLAMA_BATCH, LLAMA_TOKENS))
    return model, {"input_ids": ids, "labels": torch.randint(0, V, (LLAMA_BATCH, LLAMA_TOKENS))}


def vit_model(**kw):
    from timm.models.vision_transformer import VisionTransformer
    # ViT-B/16 (timm's vit_base_patch16_224: patch 16, width 768, 12 heads, MLP 3072,
    # class token, pos_embed [1, 197, 768] including the class token, global_pool 'token')
    # with one block and DeiT-III's layer scale (timm's deit3_base_patch16_224 passes
    # init_values=1e-6)
    args = dict(img_size=224, patch_size=16, embed_dim=768, depth=1, num_heads=12,
                mlp_ratio=4.0, qkv_bias=True, init_values=1e-6, class_token=True,
                global_pool="token", num_classes=1000)
    args.update(kw)
    return VisionTransformer(**args)


class VitBlock(torch.nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.vit = vit_model(**kw)

    def forward(self, images, labels):
        return F.cross_entropy(self.vit(images), labels)


def build_vit():
    model = VitBlock()
    return model, {"images": torch.randn(VIT_BATCH, 3, 224, 224),
                   "labels": torch.randint(0, 1000, (VIT_BATCH,))}


class UnetBlock(torch.nn.Module):
    """SD 1.5's first width (block_out_channels[0] = 320, temb 4 * 320 = 1280, 32 groups,
    8 heads: attention_head_dim=8 in SD 1.5's unet config) around one up block: the
    timestep embedding MLP, conv_in (4 -> C) whose output is the skip, a Downsample2D
    (conv stride 2) and an Upsample2D (nearest x2 + conv), cat([up, skip], dim=1) as
    diffusers' UpBlock2D does, ResnetBlock2D(2C -> C, temb), an Attention block with
    group_norm and a residual (as UNetMidBlock2D builds it), then the UNet's output head
    (conv_norm_out, SiLU, conv_out C -> 4)"""

    def __init__(self, C=320, temb=1280, groups=32, heads=8):
        super().__init__()
        from diffusers.models.attention_processor import Attention
        from diffusers.models.downsampling import Downsample2D
        from diffusers.models.embeddings import TimestepEmbedding
        from diffusers.models.resnet import ResnetBlock2D
        from diffusers.models.upsampling import Upsample2D
        self.time_embedding = TimestepEmbedding(C, temb)
        self.conv_in = torch.nn.Conv2d(4, C, 3, padding=1)
        self.down = Downsample2D(C, use_conv=True, out_channels=C, padding=1, name="op")
        self.up = Upsample2D(C, use_conv=True, out_channels=C)
        self.resnet = ResnetBlock2D(in_channels=2 * C, out_channels=C, temb_channels=temb,
                                    eps=1e-5, groups=groups)
        self.attn = Attention(C, heads=heads, dim_head=C // heads, rescale_output_factor=1.0,
                              eps=1e-5, norm_num_groups=groups, residual_connection=True,
                              bias=True, upcast_softmax=True, _from_deprecated_attn_block=True)
        self.conv_norm_out = torch.nn.GroupNorm(groups, C, eps=1e-5)
        self.conv_act = torch.nn.SiLU()
        self.conv_out = torch.nn.Conv2d(C, 4, 3, padding=1)

    def forward(self, sample, t_emb, noise):
        emb = self.time_embedding(t_emb)
        skip = self.conv_in(sample)
        h = self.up(self.down(skip))
        h = torch.cat([h, skip], dim=1)
        h = self.resnet(h, emb)
        h = self.attn(h)
        pred = self.conv_out(self.conv_act(self.conv_norm_out(h)))
        return F.mse_loss(pred.float(), noise.float(), reduction="mean")


def build_unet():
    return UnetBlock(), {"sample": torch.randn(UNET_BATCH, 4, 32, 32),
                         "t_emb": torch.randn(UNET_BATCH, 320),
                         "noise": torch.randn(UNET_BATCH, 4, 32, 32)}


BLOCKS = {
    "llama-sdpa": lambda: build_llama("sdpa"),
    "llama-eager": lambda: build_llama("eager"),
    "llama-rmsnorm-op": lambda: build_llama("sdpa", rmsnorm_op=True),
    "vit": build_vit,
    "unet": build_unet,
}
# blocks whose constructors need real values (timm's drop-path rates call .item()): built
# on the CPU for real (small at one block) and then copied to fake CUDA tensors
BUILT_ON_CPU = {"vit", "unet"}


def convert_model(model, fn):
    """model.to(...) written out (floating parameters and buffers through fn; a tied
    parameter stays one): Module._apply cannot swap fake parameters in place"""
    done = {}
    for mod in model.modules():
        for n, p in mod._parameters.items():
            if p is not None:
                if id(p) not in done:
                    done[id(p)] = torch.nn.Parameter(fn(p).detach(), p.requires_grad)
                mod._parameters[n] = done[id(p)]
        for n, b in mod._buffers.items():
            if b is not None:
                mod._buffers[n] = fn(b)


def run(block, config, lists):
    params, amp = CONFIGS[config]
    torch.manual_seed(0)
    fake = FakeTensorMode()
    built = None
    if block in BUILT_ON_CPU:
        built = BLOCKS[block]()
    with fake, torch.device("cuda"):
        model, inputs = built or BLOCKS[block]()

        def to_fake_cuda(t):
            if not isinstance(t, FakeTensor):
                t = fake.from_tensor(t)
            return t.to("cuda", params) if t.is_floating_point() else t.to("cuda")
        convert_model(model, to_fake_cuda)
        inputs = {k: to_fake_cuda(v) for k, v in inputs.items()}
        rec = Recorder(lists, amp is not None, list(model.named_modules()))
        hooks = [torch.nn.modules.module.register_module_forward_pre_hook(rec.enter),
                 torch.nn.modules.module.register_module_forward_hook(rec.leave)]
        for k, v in inputs.items():
            rec.add("input", v, "input", name=k)
        if amp is not None:
            autocast_on(amp)
        try:
            with rec:
                model(**inputs)
        finally:
            if amp is not None:
                autocast_off()
            for h in hooks:
                h.remove()
    return rec.rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "references", "blocks"))
    ap.add_argument("blocks", nargs="*", default=list(BLOCKS))
    a = ap.parse_args()
    lists = autocast_lists()
    os.makedirs(a.out, exist_ok=True)
    for block in a.blocks:
        for config in CONFIGS:
            rows = run(block, config, lists)
            path = os.path.join(a.out, f"{block}-{config}.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["node", "module", "name", "shape", "dtype",
                                                  "why"], lineterminator="\n")
                w.writeheader()
                w.writerows(rows)
            print(f"{path}: {len(rows)} tensors", file=sys.stderr)
    print(f"PyTorch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
