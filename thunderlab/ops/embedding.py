"""Embedding lookups and one-hot encoding."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import prims
from .common import is_tensor
from .declare import backward_symbol, opaque_symbol, torchsymbol
from .rules import derivative


@torchsymbol(F.embedding, torch.embedding)
def embedding(a, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if max_norm is not None:
        return NotImplemented  # renormalizes the weight in place
    if not is_tensor(a):
        return NotImplemented
    return prims.take(weight, a, 0)


embedding_backward = backward_symbol("embedding_backward", torch.ops.aten.embedding_dense_backward.default)


@derivative(embedding)
def _(b, g):
    p = b.params
    if p.max_norm is not None:
        return NotImplemented
    n = p.weight.shape[0]
    pad = -1 if p.padding_idx is None else (p.padding_idx if p.padding_idx >= 0 else n + p.padding_idx)
    # scale_grad_by_freq: each row's gradient divided by how often its index occurs in the batch
    return [(p.weight, embedding_backward(g, p.a, n, pad, bool(p.scale_grad_by_freq)))]


one_hot = opaque_symbol("one_hot", F.one_hot, torch._C._nn.one_hot, signature=lambda a, num_classes=-1: None)
