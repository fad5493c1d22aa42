"""HF transformers' BertModel from a tiny BertConfig with an attention_mask (padding in the second sample), no download."""
import torch
from transformers import BertConfig, BertModel


class Wrap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=64,
                                      max_position_embeddings=32, attn_implementation="sdpa",
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                           add_pooling_layer=False)

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def model():
    torch.manual_seed(0)
    return Wrap()


def inputs():
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[:, 6:] = 0  # the same padding in every sample: one mask for the batch
    return (torch.randint(0, 64, (2, 8), generator=g), mask)


LOSS = "mse"


def target():
    g = torch.Generator().manual_seed(2)
    return torch.randn(2, 8, 32, generator=g)
