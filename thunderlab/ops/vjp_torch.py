"""Derivative rules for torch-level symbols kept whole, using PyTorch's fused backward kernels.

With these, differentiating a model leaves its forward at the torch level (one call per op,
as eager runs it) and its backward calls the same kernels eager autograd calls. Each
backward kernel is a symbol of its own (``ltorch.gelu_backward``, ...), so it prints, is
claimed and is timed like any other call.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Symbol

from . import torch_ops as lt
from .prims import TraceError, _new, torch_meta
from .rules import RESIDUALS
from .vjp import linear_by_prims, sum_to, vjp

aten = torch.ops.aten


def backward_symbol(name: str, impl, meta=None) -> Symbol:
    """A torch-level backward symbol; its meta runs ``impl`` on meta tensors unless ``meta`` is given."""
    sym = Symbol(name=name, module="ltorch", impl=impl, meta=meta or torch_meta(impl, f"ltorch.{name}"))
    setattr(lt, name, sym)
    return sym


def _is_t(x) -> bool:
    return isinstance(x, TensorProxy)


def _layer_norm_backward(g, a, normalized_shape, weight, bias, eps):
    # the statistics again, from the fused forward kernel (cheaper than saving them)
    _, mean, rstd = aten.native_layer_norm(a, list(normalized_shape), None, None, eps)
    mask = [True, weight is not None, bias is not None]
    return tuple(aten.native_layer_norm_backward(g, a, list(normalized_shape), mean, rstd, weight, bias, mask))


def _additive(mask, dtype):
    """A boolean attention mask as the additive one the fused kernels take (eager's sdpa converts it alike)."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask.logical_not(), -math.inf)


def _sdpa_backward(g, q, k, v, attn_mask, is_causal, scale):
    if q.device.type == "cpu":
        attn_mask = _additive(attn_mask, q.dtype)
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)
        return tuple(aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, out, lse, 0.0, is_causal, attn_mask=attn_mask, scale=scale))
    with torch.enable_grad():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
        return tuple(torch.autograd.grad(out, (qq, kk, vv), g))


def _linear_backward(g, a, w, need_input, need_bias):
    # the kernels eager's AddmmBackward calls; leading batch dimensions are flattened into rows
    rows = g.dim() == 2
    g2 = g if rows else g.reshape(-1, g.shape[-1])
    ga = (g.mm(w) if rows else g.matmul(w)) if need_input else None
    gw = g2.t().mm(a if a.dim() == 2 else a.reshape(-1, a.shape[-1]))
    gb = g2.sum(0) if need_bias else None
    return ga, gw, gb


def _getitem_backward(g, shape, key):
    out = torch.zeros(shape, dtype=g.dtype, device=g.device)
    out[key] = g
    return out


def _pointwise_backward_meta(name: str, dtype_arg: int | None = None):
    """The meta of a backward kernel whose gradient is shaped like the gradient it is given.

    Direct metas (rather than the kernel's decomposition on meta tensors, which ``torch_meta``
    runs) keep differentiating a model cheap: a transformer asks for hundreds of these.
    """
    def meta(g, a, *rest, **kwargs):
        if tuple(g.shape) != tuple(a.shape):
            raise TraceError(f"ltorch.{name}: gradient {tuple(g.shape)} does not match {tuple(a.shape)}")
        dtype = rest[dtype_arg] if dtype_arg is not None else g.dtype
        return _new(g.shape, dtype, g.device, [g, a])
    return meta


gelu_backward = backward_symbol("gelu_backward", aten.gelu_backward.default, _pointwise_backward_meta("gelu_backward"))
silu_backward = backward_symbol("silu_backward", aten.silu_backward.default, _pointwise_backward_meta("silu_backward"))
threshold_backward = backward_symbol("threshold_backward", aten.threshold_backward.default,
                                     _pointwise_backward_meta("threshold_backward"))
# (grad, output, dim, input dtype): the gradient has the input's dtype
softmax_backward = backward_symbol("softmax_backward", torch._softmax_backward_data,
                                   _pointwise_backward_meta("softmax_backward", dtype_arg=1))
log_softmax_backward = backward_symbol("log_softmax_backward", torch._log_softmax_backward_data,
                                       _pointwise_backward_meta("log_softmax_backward", dtype_arg=1))


def _layer_norm_backward_meta(g, a, normalized_shape, weight, bias, eps):
    # the gradients are shaped like what they differentiate; running the kernel's decomposition
    # on meta tensors (torch_meta) gives the same and costs milliseconds per call
    def like(t):
        return None if t is None else _new(t.shape, t.dtype, a.device, [g, a])

    if tuple(g.shape) != tuple(a.shape):
        raise TraceError(f"ltorch.layer_norm_backward: gradient {tuple(g.shape)} does not match input {tuple(a.shape)}")
    return like(a), like(weight), like(bias)


layer_norm_backward = backward_symbol("layer_norm_backward", _layer_norm_backward, _layer_norm_backward_meta)
sdpa_backward = backward_symbol("sdpa_backward", _sdpa_backward)
embedding_backward = backward_symbol("embedding_backward", aten.embedding_dense_backward.default)
getitem_backward = backward_symbol("getitem_backward", _getitem_backward)
linear_backward = backward_symbol("linear_backward", _linear_backward)


# -- elementwise with broadcasting -----------------------------------------------------------
@vjp("ltorch.add", "ltorch.sub")
def _(b, g):
    a, c, alpha = b.params.a, b.params.b, b.params.alpha
    gc = lt.neg(g) if b.sym.name == "sub" else g
    if alpha not in (None, 1) and _is_t(c):
        gc = lt.mul(gc, alpha)
    return [(a, sum_to(g, a.shape) if _is_t(a) else None), (c, sum_to(gc, c.shape) if _is_t(c) else None)]


@vjp("ltorch.mul")
def _(b, g):
    a, c = b.params.a, b.params.b
    return [(a, sum_to(lt.mul(g, c), a.shape) if _is_t(a) else None),
            (c, sum_to(lt.mul(g, a), c.shape) if _is_t(c) else None)]


@vjp("ltorch.div")
def _(b, g):
    a, c = b.params.a, b.params.b
    if b.params.rounding_mode is not None:
        return []
    ga = sum_to(lt.div(g, c), a.shape) if _is_t(a) else None
    gc = sum_to(lt.neg(lt.div(lt.mul(g, b.output), c)), c.shape) if _is_t(c) else None
    return [(a, ga), (c, gc)]


@vjp("ltorch.neg")
def _(b, g):
    return [(b.args[0], lt.neg(g))]


@vjp("ltorch.exp")
def _(b, g):
    return [(b.args[0], lt.mul(g, b.output))]


@vjp("ltorch.tanh")
def _(b, g):
    return [(b.args[0], lt.mul(g, lt.sub(1.0, lt.mul(b.output, b.output))))]


@vjp("ltorch.sigmoid")
def _(b, g):
    return [(b.args[0], lt.mul(g, lt.mul(b.output, lt.sub(1.0, b.output))))]


@vjp("ltorch.rsqrt")
def _(b, g):
    o = b.output
    return [(b.args[0], lt.mul(g, lt.mul(lt.mul(o, lt.mul(o, o)), -0.5)))]


@vjp("ltorch.pow")
def _(b, g):
    a, e = b.params.a, b.params.b
    if _is_t(e) or not _is_t(a):
        return NotImplemented
    if e == 2:
        return [(a, lt.mul(g, lt.mul(a, 2.0)))]
    return [(a, lt.mul(g, lt.mul(lt.pow(a, e - 1), e)))]


# -- activations and normalization: fused backward kernels -----------------------------------
@vjp("ltorch.gelu")
def _(b, g):
    return [(b.args[0], gelu_backward(g, b.args[0], approximate=b.params.approximate))]


@vjp("ltorch.silu")
def _(b, g):
    return [(b.args[0], silu_backward(g, b.args[0]))]


@vjp("ltorch.relu")
def _(b, g):
    return [(b.args[0], threshold_backward(g, b.output, 0))]


@vjp("ltorch.softmax", "ltorch.log_softmax")
def _(b, g):
    a, dim = b.params.a, b.params.dim
    if b.params.dtype is not None:
        return NotImplemented
    back = softmax_backward if b.sym.name == "softmax" else log_softmax_backward
    return [(a, back(g, b.output, dim % max(a.ndim, 1), a.dtype))]


# -- forwards that keep what their backward kernel needs -----------------------------------------
# A kept-whole layer norm or attention can run as the kernel eager autograd runs, which also
# returns its statistics (mean and 1/std; the log-sum-exp); backward then reads them instead of
# computing the forward a second time. ``autodiff`` swaps a call that needs a gradient for its
# variant here: ``RESIDUALS[qualname](b)`` records the variant's call (its first output stands
# for ``b``'s) or returns NotImplemented to keep ``b`` as it is.
residuals = RESIDUALS.register


def _native_layer_norm(a, normalized_shape, weight, bias, eps):
    return tuple(aten.native_layer_norm(a, list(normalized_shape), weight, bias, eps))


def _layer_norm_backward_saved(g, a, normalized_shape, mean, rstd, weight, bias):
    mask = [True, weight is not None, bias is not None]
    return tuple(aten.native_layer_norm_backward(g, a, list(normalized_shape), mean, rstd, weight, bias, mask))


def _layer_norm_backward_saved_meta(g, a, normalized_shape, mean, rstd, weight, bias):
    return _layer_norm_backward_meta(g, a, normalized_shape, weight, bias, 0.0)


def _sdpa_cpu(q, k, v, is_causal, attn_mask, scale):
    attn_mask = _additive(attn_mask, q.dtype)
    return tuple(aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale))


def _sdpa_cpu_backward(g, q, k, v, out, lse, is_causal, attn_mask, scale):
    attn_mask = _additive(attn_mask, q.dtype)
    return tuple(aten._scaled_dot_product_flash_attention_for_cpu_backward(
        g, q, k, v, out, lse, 0.0, is_causal, attn_mask=attn_mask, scale=scale))


def _sdpa_cpu_backward_meta(g, q, k, v, out, lse, is_causal, attn_mask, scale):
    return tuple(_new(t.shape, t.dtype, t.device, [g, t]) for t in (q, k, v))


native_layer_norm = backward_symbol("native_layer_norm", _native_layer_norm)
layer_norm_backward_saved = backward_symbol("layer_norm_backward_saved", _layer_norm_backward_saved,
                                            _layer_norm_backward_saved_meta)
sdpa_cpu = backward_symbol("sdpa_cpu", _sdpa_cpu)
sdpa_cpu_backward = backward_symbol("sdpa_cpu_backward", _sdpa_cpu_backward, _sdpa_cpu_backward_meta)


@residuals("ltorch.layer_norm")
def _(b):
    p = b.params
    return native_layer_norm(p.a, tuple(p.normalized_shape), p.weight, p.bias, p.eps)


@vjp("ltorch.native_layer_norm")
def _(b, g):
    g_out, g_mean, g_rstd = g
    if g_mean is not None or g_rstd is not None:
        return NotImplemented  # the statistics are used as values: differentiate the decomposition
    a, shape, weight, bias = b.args[:4]
    _, mean, rstd = b.output
    ga, gw, gb = layer_norm_backward_saved(g_out, a, tuple(shape), mean, rstd, weight, bias)
    return [(a, ga), (weight, gw), (bias, gb)]


@residuals("ltorch.scaled_dot_product_attention")
def _(b):
    p = b.params
    q, k, v, mask = p.q, p.k, p.v, p.attn_mask
    if (q.device.type != "cpu" or p.dropout_p or p.enable_gqa
            or not q.ndim == k.ndim == v.ndim == 4 or (_is_t(mask) and mask.requires_grad)):
        return NotImplemented  # the CPU flash kernel's conditions; otherwise backward recomputes
    return sdpa_cpu(q, k, v, bool(p.is_causal), mask, p.scale)


@vjp("ltorch.sdpa_cpu")
def _(b, g):
    g_out, g_lse = g
    if g_lse is not None:
        return NotImplemented
    q, k, v, is_causal, mask, scale = b.args
    out, lse = b.output
    gq, gk, gv = sdpa_cpu_backward(g_out, q, k, v, out, lse, is_causal, mask, scale)
    return [(q, gq), (k, gk), (v, gv)]


@vjp("ltorch.layer_norm")
def _(b, g):
    p = b.params
    ga, gw, gb = layer_norm_backward(g, p.a, tuple(p.normalized_shape), p.weight, p.bias, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@vjp("ltorch.scaled_dot_product_attention")
def _(b, g):
    p = b.params
    if p.dropout_p or p.enable_gqa:
        return NotImplemented
    mask = p.attn_mask
    if _is_t(mask) and mask.requires_grad:
        return NotImplemented
    q, k, v = p.q, p.k, p.v
    if not q.ndim == k.ndim == v.ndim == 4:
        return NotImplemented  # the fused kernels take (batch, heads, length, dim)
    gq, gk, gv = sdpa_backward(g, q, k, v, mask, p.is_causal, p.scale)
    return [(q, gq), (k, gk), (v, gv)]


@vjp("ltorch.embedding")
def _(b, g):
    p = b.params
    idx, weight = p.a, p.weight
    if p.max_norm is not None or p.scale_grad_by_freq:
        return NotImplemented
    padding_idx = p.padding_idx
    pad = -1 if padding_idx is None else (padding_idx if padding_idx >= 0 else weight.shape[0] + padding_idx)
    return [(weight, embedding_backward(g, idx, weight.shape[0], pad, False))]


@vjp("ltorch.linear")
def _(b, g):
    a, w, bias = b.params.a, b.params.weight, b.params.bias
    if a.ndim < 2 or g.ndim < 2:
        return linear_by_prims(b, g)  # vectors: the general rule
    # the weight is read only for the input's gradient: without one it is not saved for backward
    ga, gw, gb = linear_backward(g, a, w if a.requires_grad else None, a.requires_grad, _is_t(bias))
    return [(a, ga), (w, gw), (bias, gb)]


# -- views and reductions --------------------------------------------------------------------
@vjp("ltorch.view", "ltorch.reshape", "ltorch.flatten", "ltorch.unsqueeze", "ltorch.squeeze", "ltorch.view_as",
     "ltorch.unflatten")
def _(b, g):
    a = b.args[0]
    return [(a, lt.reshape(g, a.shape))]


@vjp("ltorch.contiguous", "ltorch.clone")
def _(b, g):
    return [(b.args[0], g)]


@vjp("ltorch.transpose")
def _(b, g):
    a, d0, d1 = b.params.a, b.params.dim0, b.params.dim1
    return [(a, lt.transpose(g, d0, d1))]


@vjp("ltorch.permute")
def _(b, g):
    a = b.params.a
    dims = [d % a.ndim for d in lt.shape_arg(b.params.dims)]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return [(a, lt.permute(g, tuple(inv)))]


@vjp("ltorch.expand", "ltorch.expand_as", "ltorch.broadcast_to")
def _(b, g):
    a = b.args[0]
    return [(a, sum_to(g, a.shape))]


@vjp("ltorch.split", "ltorch.chunk", "ltorch.split_with_sizes")
def _(b, g):
    a = b.args[0]
    if any(x is None for x in g):
        parts = [x if x is not None else lt.zeros_like(o) for x, o in zip(g, b.output)]
    else:
        parts = list(g)
    return [(a, lt.cat(parts, b.params.dim))]


@vjp("ltorch.getitem")
def _(b, g):
    a, key = b.params.a, b.params.key
    if any(_is_t(k) or isinstance(k, list) for k in (key if isinstance(key, tuple) else (key,))):
        return NotImplemented  # advanced indexing can pick an element twice: the decomposition sums
    return [(a, getitem_backward(g, a.shape, key))]


@vjp("ltorch.sum")
def _(b, g):
    a, dim, keepdim = b.params.a, b.params.dim, b.params.keepdim
    if b.params.dtype is not None and not b.params.dtype == a.dtype:
        return NotImplemented
    dims = lt.dims_of(a, dim)
    if not keepdim:
        g = lt.reshape(g, tuple(1 if i in dims else s for i, s in enumerate(a.shape)))
    return [(a, lt.expand(g, a.shape))]


@vjp("ltorch.mean")
def _(b, g):
    a, dim, keepdim = b.params.a, b.params.dim, b.params.keepdim
    dims = lt.dims_of(a, dim)
    n = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    if not keepdim:
        g = lt.reshape(g, tuple(1 if i in dims else s for i, s in enumerate(a.shape)))
    return [(a, lt.div(lt.expand(g, a.shape), n))]


@vjp("ltorch.to", "ltorch.float", "ltorch.type_as", "ltorch.half", "ltorch.bfloat16", "ltorch.double")
def _(b, g):
    a = b.args[0]
    return [(a, lt.to(g, a.dtype) if g.dtype != a.dtype else g)]


