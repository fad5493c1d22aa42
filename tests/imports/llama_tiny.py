"""HF transformers' LlamaForCausalLM from a tiny LlamaConfig (grouped-query attention: 4 heads, 2 kv heads), no download."""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

CFG = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
           rms_norm_eps=1e-5, tie_word_embeddings=False, attn_implementation="sdpa")


class Wrap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = LlamaForCausalLM(LlamaConfig(**CFG))

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


def model():
    torch.manual_seed(0)
    return Wrap()


def inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 64, (2, 8), generator=g),)


LOSS = "cross_entropy"


def target():
    g = torch.Generator().manual_seed(2)
    return torch.randint(0, 64, (2, 8), generator=g)
