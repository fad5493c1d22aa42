#!/usr/bin/env python3
"""block_values.py: float32 values of small-width variants of block_dtypes.py's blocks, on
the CPU, for comparing the harness's runs of the same blocks with PyTorch's.

Each block is built as block_dtypes.py builds it (the same library modules and forward),
at a small width, with the libraries' own initializers after torch.manual_seed(0); its
inputs are drawn after torch.manual_seed(1). One forward in float32 (no autocast), the
loss, backward, and per parameter the L2 norm of its gradient (in float64 from the float32
gradient). Nothing about the initialisation needs to be reproduced: every parameter and
input is written as a .npy file a case's [init] section (and `input = file`, `target =
file`, `constant`) can load.

  llama  LlamaForCausalLM, one decoder layer, hidden 64, 4 query heads and 2 key/value heads
         of 16, MLP 128, vocabulary 256, rms_norm_eps 1e-5, Llama-3.2-1B's rope parameters,
         attention "sdpa", tied head; batch 2 of 16 tokens; cross_entropy over every
         position (HF's _init_weights: linears and the embedding N(0, 0.02), norms ones)
  vit    timm VisionTransformer, 32x32 images, patches of 8 (16 tokens + the class token),
         width 64, 4 heads, MLP 128, one block with layer scale init_values=0.1 (DeiT-III's
         1e-6 would leave the block's gradients 1e-6 of the others), 10 classes; batch 4;
         cross_entropy (timm's init: trunc_normal std 0.02, cls_token normal std 1e-6)
  unet   block_dtypes.py's UnetBlock at width 32 (8 groups, 2 heads of 16, temb 128) on 8x8
         latents; batch 2; F.mse_loss(pred.float(), noise) (diffusers' default init)

Writes tests/references/blocks/<block>-small-values.csv, columns
  kind (loss | grad_norm), tensor (PyTorch's name: LlamaForCausalLM's, timm
  VisionTransformer's, UnetBlock's state_dict key), case_name (the layer of
  cases-draft/<block>-block-*.case it is), shape, value (%.9g), hex (float.hex)
and tests/references/blocks/<block>-small/<tensor>.npy: every parameter (PyTorch's names;
the tied lm_head.weight is embed_tokens.weight) and input (input_ids, labels; images,
labels; sample, t_emb, noise), and for llama the rotary tables rope_cos/rope_sin [T, 16]
and the eager causal mask causal_mask [T, T] as tools/rotary_tables.py computes them.

Usage: /opt/torch-venv/bin/python tools/block_values.py [BLOCK ...]
"""
import argparse
import csv
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import block_dtypes as bd  # noqa: E402

OUT = os.path.join(bd.ROOT, "tests", "references", "blocks")

# PyTorch parameter name prefix -> the case drafts' layer name
CASE_NAMES = {
    "llama": [("m.model.embed_tokens.", "tok."), ("m.model.layers.0.input_layernorm.weight", "n1w"),
              ("m.model.layers.0.self_attn.q_proj.", "q."), ("m.model.layers.0.self_attn.k_proj.", "k."),
              ("m.model.layers.0.self_attn.v_proj.", "v."), ("m.model.layers.0.self_attn.o_proj.", "o."),
              ("m.model.layers.0.post_attention_layernorm.weight", "n2w"),
              ("m.model.layers.0.mlp.gate_proj.", "gate."), ("m.model.layers.0.mlp.up_proj.", "up."),
              ("m.model.layers.0.mlp.down_proj.", "down."), ("m.model.norm.weight", "nfw")],
    "vit": [("vit.cls_token", "cls"), ("vit.pos_embed", "pos"), ("vit.patch_embed.proj.", "patch."),
            ("vit.blocks.0.norm1.", "n1."), ("vit.blocks.0.attn.qkv.", "qkv."),
            ("vit.blocks.0.attn.proj.", "proj."), ("vit.blocks.0.ls1.gamma", "g1"),
            ("vit.blocks.0.norm2.", "n2."), ("vit.blocks.0.mlp.fc1.", "fc1."),
            ("vit.blocks.0.mlp.fc2.", "fc2."), ("vit.blocks.0.ls2.gamma", "g2"),
            ("vit.norm.", "nf."), ("vit.head.", "head.")],
    "unet": [("time_embedding.linear_1.", "t1."), ("time_embedding.linear_2.", "temb."),
             ("conv_in.", "cin."), ("down.conv.", "down."), ("up.conv.", "upc."),
             ("resnet.norm1.", "rn1."), ("resnet.conv1.", "rc1."), ("resnet.time_emb_proj.", "rtp."),
             ("resnet.norm2.", "rn2."), ("resnet.conv2.", "rc2."), ("resnet.conv_shortcut.", "rsc."),
             ("attn.group_norm.", "agn."), ("attn.to_q.", "aq."), ("attn.to_k.", "ak."),
             ("attn.to_v.", "av."), ("attn.to_out.0.", "ao."), ("conv_norm_out.", "gno."),
             ("conv_out.", "out.")],
}

LLAMA_SMALL = dict(bd.LLAMA_32_1B, vocab_size=256, hidden_size=64, intermediate_size=128,
                   bos_token_id=None, eos_token_id=None,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16)
LLAMA_SMALL_BATCH, LLAMA_SMALL_TOKENS = 2, 16


def small_llama():
    from transformers import LlamaConfig
    from transformers.masking_utils import create_causal_mask
    cfg = LlamaConfig(num_hidden_layers=1, attn_implementation="sdpa", **LLAMA_SMALL)
    model = bd.LlamaBlock(cfg)
    torch.manual_seed(1)
    V, B, T = LLAMA_SMALL["vocab_size"], LLAMA_SMALL_BATCH, LLAMA_SMALL_TOKENS
    inputs = {"input_ids": torch.randint(0, V, (B, T)), "labels": torch.randint(0, V, (B, T))}
    pos = torch.arange(T).unsqueeze(0)
    cos, sin = model.m.model.rotary_emb(torch.zeros(1, T, 1), pos)
    mask = create_causal_mask(config=LlamaConfig(num_hidden_layers=1, attn_implementation="eager",
                                                 **LLAMA_SMALL),
                              inputs_embeds=torch.zeros(1, T, 64), attention_mask=None,
                              cache=None, position_ids=pos)
    consts = {"rope_cos": cos[0], "rope_sin": sin[0], "causal_mask": mask[0, 0]}
    return model, inputs, consts


def small_vit():
    model = bd.VitBlock(img_size=32, patch_size=8, embed_dim=64, num_heads=4, mlp_ratio=2.0,
                        init_values=0.1, num_classes=10)
    torch.manual_seed(1)
    return model, {"images": torch.randn(4, 3, 32, 32), "labels": torch.randint(0, 10, (4,))}, {}


def small_unet():
    from diffusers.models.embeddings import get_timestep_embedding
    model = bd.UnetBlock(C=32, temb=128, groups=8, heads=2)
    torch.manual_seed(1)
    t_emb = get_timestep_embedding(torch.tensor([500, 500]), 32, flip_sin_to_cos=True,
                                   downscale_freq_shift=0)
    return model, {"sample": torch.randn(2, 4, 8, 8), "t_emb": t_emb,
                   "noise": torch.randn(2, 4, 8, 8)}, {}


SMALL = {"llama": small_llama, "vit": small_vit, "unet": small_unet}


def case_name(block, name):
    for prefix, layer in CASE_NAMES[block]:
        if name.startswith(prefix):
            return layer + name[len(prefix):]
    sys.exit(f"block_values.py: {block}: no case name for parameter {name}")


def run(block):
    torch.manual_seed(0)
    model, inputs, consts = SMALL[block]()
    model.train()
    loss = model(**inputs)
    loss.backward()
    folder = os.path.join(OUT, f"{block}-small")
    os.makedirs(folder, exist_ok=True)
    rows = [dict(kind="loss", tensor="loss", case_name="loss", shape="scalar",
                 value=f"{loss.item():.9g}", hex=float(loss.item()).hex())]
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and p.grad is not None, name
        norm = float(torch.linalg.vector_norm(p.grad.double()))
        torch_name = name.removeprefix("m.").removeprefix("vit.")   # the wrappers' attributes
        rows.append(dict(kind="grad_norm", tensor=torch_name, case_name=case_name(block, name),
                         shape="x".join(str(s) for s in p.shape), value=f"{norm:.9g}",
                         hex=norm.hex()))
        np.save(os.path.join(folder, f"{torch_name}.npy"), p.detach().numpy())
    for name, t in list(inputs.items()) + list(consts.items()):
        np.save(os.path.join(folder, f"{name}.npy"), t.detach().numpy())
    path = os.path.join(OUT, f"{block}-small-values.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["kind", "tensor", "case_name", "shape", "value", "hex"],
                           lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{path}: loss {loss.item():.6g}, {len(rows) - 1} gradient norms", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("blocks", nargs="*", default=list(SMALL))
    a = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    for block in a.blocks:
        run(block)
    print(f"PyTorch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
