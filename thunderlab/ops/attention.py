"""Scaled dot-product attention, its derivative and its CPU flash-attention variant."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag

from . import prims
from .activations import softmax
from .common import is_tensor
from .declare import backward_symbol, torchsymbol
from .elementwise import add, mul, where
from .linalg import matmul
from .prims import new_proxy
from .randomness import dropout
from .rules import derivative, draws_when, residuals
from .shape import tril

aten = torch.ops.aten


@torchsymbol(F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention,
             tags={Tag.RANDOM, Tag.DONT_RECOMPUTE})
def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        return NotImplemented
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    kt = prims.transpose(k, tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2))
    scores = mul(matmul(q, kt), scale)
    if is_causal:
        mask = tril(prims.full((L, S), True, dtype=torch.bool, device=q.device))
        scores = where(mask, scores, -float("inf"))
    if attn_mask is not None:
        scores = where(attn_mask, scores, -float("inf")) if attn_mask.dtype == torch.bool else add(scores, attn_mask)
    probs = softmax(scores, -1)
    if dropout_p > 0:
        probs = dropout(probs, dropout_p, True)
    return matmul(probs, v)


@draws_when(scaled_dot_product_attention)
def _(p):
    return p.dropout_p > 0


def _additive(mask, dtype):
    """A boolean attention mask as the additive one the fused kernels take (eager's sdpa converts it alike)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask.logical_not(), -math.inf)


def _sdpa_backward(g, q, k, v, attn_mask, is_causal, scale):
    if q.device.type == "cpu":
        attn_mask = _additive(attn_mask, q.dtype)
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=attn_mask,
                                                                    scale=scale)
        return tuple(aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, out, lse, 0.0, is_causal, attn_mask=attn_mask, scale=scale))
    with torch.enable_grad():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
        return tuple(torch.autograd.grad(out, (qq, kk, vv), g))


sdpa_backward = backward_symbol("sdpa_backward", _sdpa_backward)


@derivative(scaled_dot_product_attention)
def _(b, g):
    p = b.params
    if p.dropout_p or p.enable_gqa:
        return NotImplemented
    mask = p.attn_mask
    if is_tensor(mask) and mask.requires_grad:
        return NotImplemented
    q, k, v = p.q, p.k, p.v
    if not q.ndim == k.ndim == v.ndim == 4:
        return NotImplemented  # the fused kernels take (batch, heads, length, dim)
    gq, gk, gv = sdpa_backward(g, q, k, v, mask, p.is_causal, p.scale)
    return [(q, gq), (k, gk), (v, gv)]


# -- on the CPU: the flash kernel's forward also returns the log-sum-exp its backward reads ------
def _sdpa_cpu(q, k, v, is_causal, attn_mask, scale):
    attn_mask = _additive(attn_mask, q.dtype)
    return tuple(aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=attn_mask,
                                                                  scale=scale))


def _sdpa_cpu_backward(g, q, k, v, out, lse, is_causal, attn_mask, scale):
    attn_mask = _additive(attn_mask, q.dtype)
    return tuple(aten._scaled_dot_product_flash_attention_for_cpu_backward(
        g, q, k, v, out, lse, 0.0, is_causal, attn_mask=attn_mask, scale=scale))


def _sdpa_cpu_backward_meta(g, q, k, v, out, lse, is_causal, attn_mask, scale):
    return tuple(new_proxy(t.shape, t.dtype, t.device, [g, t]) for t in (q, k, v))


# the attention kernel is the costliest call of its layer: backward reads its saved output and
# log-sum-exp, never a second run of it (remat would otherwise trade them for q, k and v)
sdpa_cpu = backward_symbol("sdpa_cpu", _sdpa_cpu, tags={Tag.DONT_RECOMPUTE})
sdpa_cpu_backward = backward_symbol("sdpa_cpu_backward", _sdpa_cpu_backward, _sdpa_cpu_backward_meta)


@residuals(scaled_dot_product_attention)
def _(b):
    p = b.params
    q, k, v, mask = p.q, p.k, p.v, p.attn_mask
    if (q.device.type != "cpu" or p.dropout_p or p.enable_gqa
            or not q.ndim == k.ndim == v.ndim == 4 or (is_tensor(mask) and mask.requires_grad)):
        return NotImplemented  # the CPU flash kernel's conditions; otherwise backward recomputes
    return sdpa_cpu(q, k, v, bool(p.is_causal), mask, p.scale)


@derivative(sdpa_cpu)
def _(b, g):
    g_out, g_lse = g
    if g_lse is not None:
        return NotImplemented
    p = b.params
    out, lse = b.output
    gq, gk, gv = sdpa_cpu_backward(g_out, p.q, p.k, p.v, out, lse, p.is_causal, p.attn_mask, p.scale)
    return [(p.q, gq), (p.k, gk), (p.v, gv)]
