"""Normalization: layer norm, RMS norm, batch norm, group norm, weight norm.

Layer norm, batch norm and group norm are differentiated with the kernels eager autograd calls: when a call
needs a gradient, ``autodiff`` swaps it for its ``residuals`` variant (``native_layer_norm``,
``native_batch_norm``, ``native_group_norm``), which also returns the statistics the backward kernel reads.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError

from . import prims
from .common import canonical_dim, convert, is_tensor, keep_dims, upcast
from .declare import backward_symbol, torchsymbol
from .elementwise import add, div, mul, rsqrt, sqrt, sub
from .prims import new_proxy
from .reductions import mean, sum_
from .rules import derivative, residuals

aten = torch.ops.aten


def _like(t, *inputs):
    return None if t is None else new_proxy(t.shape, t.dtype, t.device, inputs)


# -- layer norm ----------------------------------------------------------------------------
@torchsymbol(F.layer_norm, torch.layer_norm)
def layer_norm(a, normalized_shape, weight=None, bias=None, eps=1e-5):
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    x = upcast(a)
    var, mu = prims.var_mean(x, dims, correction=0)
    var, mu = keep_dims(var, a, dims), keep_dims(mu, a, dims)
    out = mul(sub(x, mu), rsqrt(add(var, eps)))
    if weight is not None:
        out = mul(out, weight)
    if bias is not None:
        out = add(out, bias)
    return convert(out, a.dtype)


def _layer_norm_backward(g, a, normalized_shape, weight, bias, eps):
    # the statistics again, from the fused forward kernel (cheaper than saving them)
    _, mu, rstd = aten.native_layer_norm(a, list(normalized_shape), None, None, eps)
    mask = [True, weight is not None, bias is not None]
    return tuple(aten.native_layer_norm_backward(g, a, list(normalized_shape), mu, rstd, weight, bias, mask))


def _layer_norm_backward_meta(g, a, normalized_shape, weight, bias, eps):
    # the gradients are shaped like what they differentiate; running the kernel's decomposition
    # on meta tensors (torch_meta) gives the same and costs milliseconds per call
    if tuple(g.shape) != tuple(a.shape):
        raise TraceError(f"ltorch.layer_norm_backward: gradient {tuple(g.shape)} does not match input {tuple(a.shape)}")
    return _like(a, g, a), _like(weight, g, a), _like(bias, g, a)


def _native_layer_norm(a, normalized_shape, weight, bias, eps):
    return tuple(aten.native_layer_norm(a, list(normalized_shape), weight, bias, eps))


def _layer_norm_backward_saved(g, a, normalized_shape, mean, rstd, weight, bias):
    mask = [True, weight is not None, bias is not None]
    return tuple(aten.native_layer_norm_backward(g, a, list(normalized_shape), mean, rstd, weight, bias, mask))


def _layer_norm_backward_saved_meta(g, a, normalized_shape, mean, rstd, weight, bias):
    return _layer_norm_backward_meta(g, a, normalized_shape, weight, bias, 0.0)


layer_norm_backward = backward_symbol("layer_norm_backward", _layer_norm_backward, _layer_norm_backward_meta)
native_layer_norm = backward_symbol("native_layer_norm", _native_layer_norm)
layer_norm_backward_saved = backward_symbol("layer_norm_backward_saved", _layer_norm_backward_saved,
                                            _layer_norm_backward_saved_meta)


@derivative(layer_norm)
def _(b, g):
    p = b.params
    ga, gw, gb = layer_norm_backward(g, p.a, tuple(p.normalized_shape), p.weight, p.bias, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@residuals(layer_norm)
def _(b):
    p = b.params
    return native_layer_norm(p.a, tuple(p.normalized_shape), p.weight, p.bias, p.eps)


@derivative(native_layer_norm)
def _(b, g):
    g_out, g_mean, g_rstd = g
    if g_mean is not None or g_rstd is not None:
        return NotImplemented  # the statistics are used as values: differentiate the decomposition
    p = b.params
    _, mu, rstd = b.output
    ga, gw, gb = layer_norm_backward_saved(g_out, p.a, tuple(p.normalized_shape), mu, rstd, p.weight, p.bias)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@torchsymbol(F.rms_norm, torch.rms_norm)
def rms_norm(a, normalized_shape, weight=None, eps=None):
    dims = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    x = upcast(a)
    if eps is None:
        eps = torch.finfo(a.dtype).eps
    ms = mean(mul(x, x), dims, keepdim=True)
    out = mul(x, rsqrt(add(ms, eps)))
    if weight is not None:
        out = mul(out, weight)
    return convert(out, a.dtype)


# -- batch norm ----------------------------------------------------------------------------
@torchsymbol(F.batch_norm, torch.batch_norm, tags={Tag.SIDE_EFFECT})
def batch_norm(a, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5,
               cudnn_enabled=None):
    dims = tuple(d for d in range(a.ndim) if d != 1)
    bshape = tuple(a.shape[1] if d == 1 else 1 for d in range(a.ndim))
    if a.ndim < 2:
        return NotImplemented  # no channel dimension
    x = upcast(a)

    def per_channel(v):
        return prims.broadcast_in_dim(v, bshape, (1,))

    if training or running_mean is None:
        var, mu = prims.var_mean(x, dims, correction=0)
        if training and running_mean is not None:
            if momentum is None:
                return NotImplemented  # cumulative averaging needs num_batches_tracked
            n = a.numel() // a.shape[1]
            new_mean = add(mul(running_mean, 1 - momentum), mul(convert(mu, running_mean.dtype), momentum))
            unbiased = mul(var, n / max(n - 1, 1))
            new_var = add(mul(running_var, 1 - momentum), mul(convert(unbiased, running_var.dtype), momentum))
            prims.copy_(new_mean, running_mean)
            prims.copy_(new_var, running_var)
    else:
        mu, var = running_mean, running_var
    out = mul(sub(x, per_channel(mu)), per_channel(rsqrt(add(var, eps))))
    if weight is not None:
        out = mul(out, per_channel(weight))
    if bias is not None:
        out = add(out, per_channel(bias))
    return convert(out, a.dtype)


def _native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    return tuple(aten.native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps))


def _native_batch_norm_meta(a, weight, bias, running_mean, running_var, training, momentum, eps):
    stats = (a.shape[1],) if training else (0,)
    return _like(a, a, weight, bias), new_proxy(stats, a.dtype, a.device), new_proxy(stats, a.dtype, a.device)


def _native_batch_norm_functional(a, weight, bias, running_mean, running_var, momentum, eps):
    return tuple(aten._native_batch_norm_legit_functional(a, weight, bias, running_mean, running_var, True, momentum,
                                                          eps))


def _native_batch_norm_functional_meta(a, weight, bias, running_mean, running_var, momentum, eps):
    stats = (a.shape[1],)
    return (_like(a, a, weight, bias), new_proxy(stats, a.dtype, a.device), new_proxy(stats, a.dtype, a.device),
            _like(running_mean, a, running_mean), _like(running_var, a, running_var))


def _batch_norm_backward_saved(g, a, weight, running_mean, running_var, save_mean, save_invstd, training, eps):
    mask = [True, weight is not None, weight is not None]
    return tuple(aten.native_batch_norm_backward(g, a, weight, running_mean, running_var, save_mean, save_invstd,
                                                 training, eps, mask))


def _batch_norm_backward_saved_meta(g, a, weight, running_mean, running_var, save_mean, save_invstd, training, eps):
    return _like(a, g), _like(weight, g), _like(weight, g)


def _batch_norm_backward(g, a, weight, running_mean, running_var, training, eps):
    # the batch statistics again (the forward ran the plain call, which keeps none)
    save_mean = save_invstd = None
    if training:
        dims = [d for d in range(a.dim()) if d != 1]
        var, save_mean = torch.var_mean(a, dims, correction=0)
        save_invstd = (var + eps).rsqrt()
    return _batch_norm_backward_saved(g, a, weight, running_mean, running_var, save_mean, save_invstd, training, eps)


def _batch_norm_backward_meta(g, a, weight, running_mean, running_var, training, eps):
    return _like(a, g), _like(weight, g), _like(weight, g)


# updates the running statistics in place when training, as eager's kernel does
native_batch_norm = backward_symbol("native_batch_norm", _native_batch_norm, _native_batch_norm_meta,
                                    tags={Tag.SIDE_EFFECT})
# training with running statistics: the updated statistics are outputs, written into the buffers by prims.copy_
# calls the program places after every call that reads them, so the normalization joins its fusion region
# (never recomputed in backward: that would compute the batch statistics again, a pass over the activation)
native_batch_norm_functional = backward_symbol("native_batch_norm_functional", _native_batch_norm_functional,
                                               _native_batch_norm_functional_meta, tags={Tag.DONT_RECOMPUTE})
# no running statistics to update (weight standardization normalizes a weight this way): it writes nothing, so
# it joins its fusion region
native_batch_norm_no_stats = backward_symbol("native_batch_norm_no_stats", _native_batch_norm,
                                             _native_batch_norm_meta, tags={Tag.DONT_RECOMPUTE})
batch_norm_backward_saved = backward_symbol("batch_norm_backward_saved", _batch_norm_backward_saved,
                                            _batch_norm_backward_saved_meta)
batch_norm_backward = backward_symbol("batch_norm_backward", _batch_norm_backward, _batch_norm_backward_meta)


def _bn_declines(p) -> bool:
    # cumulative averaging (momentum None) and statistics of other dtypes go through the decomposition
    a = p.a
    return (p.momentum is None or a.ndim < 2 or a.dtype not in (torch.float32, torch.float64)
            or not (p.training or is_tensor(p.running_mean)))


@derivative(batch_norm)
def _(b, g):
    p = b.params
    if _bn_declines(p):
        return NotImplemented
    training = bool(p.training) or not is_tensor(p.running_mean)
    ga, gw, gb = batch_norm_backward(g, p.a, p.weight, p.running_mean, p.running_var, training, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@residuals(batch_norm)
def _(b):
    p = b.params
    if _bn_declines(p):
        return NotImplemented
    training = bool(p.training) or not is_tensor(p.running_mean)
    if training and is_tensor(p.running_mean) and is_tensor(p.running_var):
        out = native_batch_norm_functional(p.a, p.weight, p.bias, p.running_mean, p.running_var, p.momentum, p.eps)
        prims.copy_(out[3], p.running_mean)  # autodiff places these writes (see passes/autodiff._with_residuals)
        prims.copy_(out[4], p.running_var)
        return out
    if not is_tensor(p.running_mean) and not is_tensor(p.running_var):
        return native_batch_norm_no_stats(p.a, p.weight, p.bias, None, None, training, p.momentum, p.eps)
    return native_batch_norm(p.a, p.weight, p.bias, p.running_mean, p.running_var, training, p.momentum, p.eps)


@derivative(native_batch_norm, native_batch_norm_functional, native_batch_norm_no_stats)
def _(b, g):
    g_out, *g_stats = g  # the statistics (and the functional call's new running ones) get no gradient
    if any(s is not None for s in g_stats):
        return NotImplemented
    p = b.params
    save_mean, save_invstd = b.output[1], b.output[2]
    training = True if b.sym is native_batch_norm_functional else p.training  # the functional call is training's
    ga, gw, gb = batch_norm_backward_saved(g_out, p.a, p.weight, p.running_mean, p.running_var, save_mean,
                                           save_invstd, training, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


# -- group norm ----------------------------------------------------------------------------
@torchsymbol(F.group_norm, torch.group_norm)
def group_norm(a, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=None):
    n, c = a.shape[0], a.shape[1]
    g = prims.reshape(upcast(a), (n, num_groups, (c // num_groups) * math.prod(a.shape[2:])))
    var, mu = prims.var_mean(g, (2,), correction=0)
    out = mul(sub(g, keep_dims(mu, g, (2,))), rsqrt(add(keep_dims(var, g, (2,)), eps)))
    out = prims.reshape(out, a.shape)
    bshape = tuple(c if d == 1 else 1 for d in range(a.ndim))
    if weight is not None:
        out = mul(out, prims.broadcast_in_dim(weight, bshape, (1,)))
    if bias is not None:
        out = add(out, prims.broadcast_in_dim(bias, bshape, (1,)))
    return convert(out, a.dtype)


# Differentiated through its decomposition, a group norm's backward was some twenty small kernels
# (BiT has one per block); kept whole, its forward is eager's kernel returning the per-group
# statistics and its backward the one kernel eager autograd calls with them.
def _gn_sizes(a):
    return a.shape[0], a.shape[1], math.prod(a.shape[2:])


def _native_group_norm(a, weight, bias, num_groups, eps):
    n, c, hw = _gn_sizes(a)  # the kernels read contiguous memory (eager's group_norm makes it so)
    return tuple(aten.native_group_norm(a.contiguous(), weight, bias, n, c, hw, num_groups, eps))


def _native_group_norm_meta(a, weight, bias, num_groups, eps):
    stats = (a.shape[0], num_groups)
    inputs = [t for t in (a, weight, bias) if t is not None]
    return _like(a, *inputs), new_proxy(stats, a.dtype, a.device, [a]), new_proxy(stats, a.dtype, a.device, [a])


def _group_norm_backward_saved(g, a, mean, rstd, weight, has_bias, num_groups):
    n, c, hw = _gn_sizes(a)
    mask = [True, weight is not None, has_bias]
    return tuple(aten.native_group_norm_backward(g.contiguous(), a.contiguous(), mean, rstd, weight, n, c, hw,
                                                 num_groups, mask))


def _group_norm_backward_saved_meta(g, a, mean, rstd, weight, has_bias, num_groups):
    gb = new_proxy((a.shape[1],), g.dtype, g.device, [g]) if has_bias else None
    return _like(a, g), _like(weight, g), gb


def _group_norm_backward(g, a, weight, has_bias, num_groups, eps):
    # the statistics again (the forward ran the plain call, which keeps none)
    _, mean, rstd = _native_group_norm(a, None, None, num_groups, eps)
    return _group_norm_backward_saved(g, a, mean, rstd, weight, has_bias, num_groups)


def _group_norm_backward_meta(g, a, weight, has_bias, num_groups, eps):
    return _group_norm_backward_saved_meta(g, a, None, None, weight, has_bias, num_groups)


# no tags: unlike batch norm's, these kernels update nothing in place
native_group_norm = backward_symbol("native_group_norm", _native_group_norm, _native_group_norm_meta)
group_norm_backward_saved = backward_symbol("group_norm_backward_saved", _group_norm_backward_saved,
                                            _group_norm_backward_saved_meta)
group_norm_backward = backward_symbol("group_norm_backward", _group_norm_backward, _group_norm_backward_meta)


def _gn_declines(p) -> bool:
    # other dtypes, and the cases eager refuses, go through the decomposition
    a, groups = p.a, p.num_groups
    same = all(t is None or (is_tensor(t) and t.dtype == a.dtype) for t in (p.weight, p.bias))
    return (a.ndim < 2 or a.dtype not in (torch.float32, torch.float64) or not same
            or not isinstance(groups, int) or groups <= 0 or a.shape[1] % groups != 0)


@derivative(group_norm)
def _(b, g):
    p = b.params
    if _gn_declines(p):
        return NotImplemented
    ga, gw, gb = group_norm_backward(g, p.a, p.weight, is_tensor(p.bias), p.num_groups, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@residuals(group_norm)
def _(b):
    p = b.params
    if _gn_declines(p):
        return NotImplemented
    return native_group_norm(p.a, p.weight, p.bias, p.num_groups, p.eps)


@derivative(native_group_norm)
def _(b, g):
    g_out, g_mean, g_rstd = g
    if g_mean is not None or g_rstd is not None:
        return NotImplemented  # the statistics are used as values
    p = b.params
    _, mean_, rstd = b.output
    ga, gw, gb = group_norm_backward_saved(g_out, p.a, mean_, rstd, p.weight, is_tensor(p.bias), p.num_groups)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


# -- weight norm ---------------------------------------------------------------------------
# ``torch.nn.utils.parametrizations.weight_norm`` computes its weight as ``torch._weight_norm(v, g, dim)``:
# v * (g / ||v||), the 2-norm taken over every dimension but ``dim`` (over all of them when ``dim`` is -1;
# PyTorch's norm_except_dim). Its decomposition is differentiated by the rules of these few ops; kept whole,
# PyTorch's autograd would run it again in backward.
@torchsymbol(torch._weight_norm)
def weight_norm(v, g, dim=0):
    if v.dtype not in (torch.float32, torch.float64) or g.dtype != v.dtype:
        return NotImplemented  # reduced precision: PyTorch's kernel accumulates the norm in float
    kept = None if dim == -1 else canonical_dim(dim, v.ndim)
    dims = tuple(d for d in range(v.ndim) if d != kept)
    norm = sqrt(sum_(mul(v, v), dims, keepdim=True)) if dims else sqrt(mul(v, v))
    return mul(v, div(g, norm))
