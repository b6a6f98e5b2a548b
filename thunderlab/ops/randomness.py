"""Ops that draw random numbers: ``rand``/``randn`` and dropout.

Each is declared with ``Tag.RANDOM`` (no pass merges, drops or recomputes a draw); a
``draws_when`` rule says when a call really draws (dropout with ``p == 0`` does not), which
executors ask before taking a call whose generator would differ from eager's.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag

from . import prims
from .declare import opaque_symbol, torchsymbol
from .elementwise import div, ge, mul, where
from .rules import derivative, draws_when

RANDOM = {Tag.RANDOM}


def _random_params(*size, generator=None, dtype=None, layout=None, device=None, pin_memory=False,
                   requires_grad=False, out=None): ...
def _random_like_params(a, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None): ...


rand = opaque_symbol("rand", torch.rand, tags=RANDOM, signature=_random_params)
randn = opaque_symbol("randn", torch.randn, tags=RANDOM, signature=_random_params)
rand_like = opaque_symbol("rand_like", torch.rand_like, tags=RANDOM, signature=_random_like_params)
randn_like = opaque_symbol("randn_like", torch.randn_like, tags=RANDOM, signature=_random_like_params)

# (output, keep mask): what eager's dropout runs on these devices (ATen's fused kernel), kept whole
native_dropout = opaque_symbol("native_dropout", torch.native_dropout, tags=RANDOM,
                               signature=lambda a, p, train: None)
FUSED_DROPOUT_DEVICES = {"cuda", "xpu"}


@derivative(native_dropout)
def _(b, g):
    gout = g[0] if isinstance(g, tuple) else g
    if gout is None:
        return []
    # eager's native_dropout_backward: the gradient where the mask kept, scaled as the output was
    return [(b.params.a, mul(mul(gout, b.output[1]), 1.0 / (1.0 - b.params.p)))]


@torchsymbol(F.dropout, torch.dropout, tags=RANDOM)
def dropout(a, p=0.5, training=True, inplace=False):
    if not training or p == 0 or a.numel() == 0:
        return prims.convert_element_type(a, a.dtype)
    if p == 1:
        return mul(a, 0)
    if a.device.type in FUSED_DROPOUT_DEVICES:
        return native_dropout(a, p, True)[0]
    if a.device.type == "cpu":  # eager's own steps, so the same draws: noise ~ Bernoulli(1 - p), scaled, times a
        return mul(a, div(prims.bernoulli(a, 1 - p), 1 - p))
    # elsewhere (mps, ...) eager's stream is not reproduced: a mask of the same distribution
    keep = ge(prims.uniform(a.shape, 0.0, 1.0, dtype=torch.float32, device=a.device), p)
    return where(keep, mul(a, 1.0 / (1.0 - p)), 0.0)


@draws_when(dropout)
def _(p):
    return bool(p.training) and p.p > 0
