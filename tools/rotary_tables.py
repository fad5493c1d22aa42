#!/usr/bin/env python3
"""rotary_tables.py: the rotary tables of cases-draft/llama-block-*.case, as HF transformers'
LlamaRotaryEmbedding computes them, written as float32 .npy constants [T, D], and the
additive causal mask HF's eager attention adds to its scores.

LlamaRotaryEmbedding.forward (transformers/models/llama/modeling_llama.py):
    freqs = position_ids[..., None].float() * inv_freq.float()
    emb = cat((freqs, freqs), dim=-1); cos = emb.cos() * attention_scaling (1.0); sin likewise
    return cos.to(x.dtype), sin.to(x.dtype)
with inv_freq from the config's rope parameters (Llama-3.2-1B: rope type "llama3", theta
500000, factor 32, low/high frequency factors 1 and 4, original context 8192:
modeling_rope_utils._compute_llama3_parameters). The module itself is called here, on
positions 0..T-1 (one sequence, batch 1), and the batch dim dropped: the case's [T, D]
constant broadcasts over batch and heads as cos.unsqueeze(1) does in apply_rotary_pos_emb.

Writes cases/data/llama-rope-{cos,sin}.npy: the float32 model's tables (inv_freq float32;
x float32, so the final .to is no cast), and cases/data/llama-rope-{cos,sin}-bf16-params.npy:
the tables of the model after .to(torch.bfloat16), whose inv_freq buffer is then rounded to
bfloat16 (the product and cos/sin are still computed in float32 from it); the values are
written in float32, and the case casts them to bfloat16 (`.to(x.dtype)`, x bfloat16 there).

cases/data/llama-causal-mask.npy is masking_utils.create_causal_mask's mask for attention
"eager" with float32 embeddings and no padding ([1, 1, T, T] -> [T, T]): 0 where a position
may attend, torch.finfo(float32).min above the diagonal (eager_mask: torch.where(mask, 0,
min_dtype) in the embeddings' dtype). The scores (float16 or bfloat16 under autocast) plus
this float32 mask promote to float32.

Usage: /opt/torch-venv/bin/python tools/rotary_tables.py [--tokens T]
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from block_dtypes import LLAMA_32_1B, LLAMA_TOKENS, ROOT, llama_config  # noqa: E402


def tables(rope, dtype, T):
    rope = rope.to(dtype)            # what model.to(dtype) does to the inv_freq buffer
    x = torch.zeros(1, T, 1)         # read only for its device and dtype (float32)
    pos = torch.arange(T).unsqueeze(0)
    cos, sin = rope(x, pos)
    return cos[0].numpy(), sin[0].numpy()


def causal_mask(T):
    from transformers.masking_utils import create_causal_mask
    embeds = torch.zeros(1, T, LLAMA_32_1B["hidden_size"])
    mask = create_causal_mask(config=llama_config("eager"), inputs_embeds=embeds,
                              attention_mask=None, cache=None,
                              position_ids=torch.arange(T).unsqueeze(0))
    assert mask.shape == (1, 1, T, T) and mask.dtype == torch.float32
    m = mask[0, 0].numpy()
    lo = np.finfo(np.float32).min
    assert (m == np.where(np.tril(np.ones((T, T), bool)), 0.0, lo)).all()
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=LLAMA_TOKENS)
    ap.add_argument("--out", default=os.path.join(ROOT, "cases", "data"))
    a = ap.parse_args()
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    rope = LlamaRotaryEmbedding(llama_config("sdpa"))
    assert rope.inv_freq.dtype == torch.float32
    head_dim = LLAMA_32_1B["head_dim"]
    for suffix, dtype in (("", torch.float32), ("-bf16-params", torch.bfloat16)):
        cos, sin = tables(rope, dtype, a.tokens)
        assert cos.shape == (a.tokens, head_dim) and cos.dtype == np.float32
        for name, t in (("cos", cos), ("sin", sin)):
            path = os.path.join(a.out, f"llama-rope-{name}{suffix}.npy")
            np.save(path, t)
            print(f"{path}: {t.shape[0]}x{t.shape[1]} float32", file=sys.stderr)
    mask = causal_mask(a.tokens)
    path = os.path.join(a.out, "llama-causal-mask.npy")
    np.save(path, mask)
    print(f"{path}: {mask.shape[0]}x{mask.shape[1]} float32", file=sys.stderr)


if __name__ == "__main__":
    main()
