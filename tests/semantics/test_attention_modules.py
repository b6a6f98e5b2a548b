"""PyTorch's attention modules trained compiled, compared with eager step by step.

Written from the documentation of ``nn.MultiheadAttention`` (self-attention passes the same
tensor as query, key and value; ``dropout`` applies to the attention weights in training) and
``nn.TransformerEncoderLayer`` / ``nn.Transformer`` (dropout after attention and in the
feed-forward block). Each step compares the output, every parameter's gradient, and, after an
SGD step, the next step's output: a gradient that is wrong once shows up in every later step.
"""
import pytest
import torch
import torch.nn as nn

from tests.semantics.harness import train_like_eager


class SelfAttention(nn.Module):
    def __init__(self, dropout, need_weights):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, dropout=dropout, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x):
        causal = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), 1)
        out, weights = self.mha(x, x, x, need_weights=self.need_weights, attn_mask=causal)
        return out if weights is None else out + weights.sum(-1, keepdim=True)


def _encoder(dropout):
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=dropout, batch_first=True), 2,
                                 enable_nested_tensor=False)


MODELS = {
    "self-attention": lambda: SelfAttention(0.0, need_weights=True),
    "self-attention, dropout on the weights": lambda: SelfAttention(0.2, need_weights=True),
    "self-attention, dropout in sdpa": lambda: SelfAttention(0.2, need_weights=False),
    "2-layer encoder": lambda: _encoder(0.0),
    "2-layer encoder, dropout": lambda: _encoder(0.1),
    "encoder-decoder, dropout": lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.1, batch_first=True),
}


def _inputs(name, step):
    g = torch.Generator().manual_seed(100 + step)
    if name.startswith("encoder-decoder"):
        return torch.randn(2, 5, 8, generator=g), torch.randn(2, 4, 8, generator=g)
    return (torch.randn(2, 5, 8, generator=g),)


@pytest.mark.parametrize("entry", ["jit", "compile"])
@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_match_eager(name, entry):
    train_like_eager(MODELS[name], lambda step: _inputs(name, step), entry)
