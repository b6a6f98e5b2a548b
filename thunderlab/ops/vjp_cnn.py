"""Derivative rules for convolutional networks: convolution, batch norm, pooling, ReLU6, on eager's backward kernels.

Without these, a convolution's gradient ran its forward again under PyTorch autograd in the
backward trace (``ltorch.eager_vjp``) and batch norm was differentiated through its
decomposition, a dozen elementwise kernels per layer: a CNN trained markedly slower than
eager. Here each backward is the one kernel eager autograd calls (``convolution_backward``,
``native_batch_norm_backward``, ``max_pool2d_with_indices_backward``, ...), and batch norm and
max pooling swap, when differentiated, for forward variants that also return what that kernel
reads (the batch statistics; the indices of the maxima), as ``vjp_torch`` does for layer norm.
"""
from __future__ import annotations

import torch

from thunderlab.core.symbols import Symbol, Tag

from . import torch_ops as lt
from .prims import _new
from .vjp import vjp
from .vjp_torch import _is_t, backward_symbol, residuals

aten = torch.ops.aten


def _like(t, *inputs):
    return None if t is None else _new(t.shape, t.dtype, t.device, inputs)


# -- convolution ------------------------------------------------------------------------------
def _convolution_backward(g, a, weight, has_bias, stride, padding, dilation, transposed, output_padding, groups,
                          need_input):
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]] if has_bias else None
    return tuple(aten.convolution_backward(g, a, weight, bias_sizes, list(stride), list(padding), list(dilation),
                                           transposed, list(output_padding), groups, [need_input, True, has_bias]))


def _convolution_backward_meta(g, a, weight, has_bias, stride, padding, dilation, transposed, output_padding,
                               groups, need_input):
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    gb = _new((channels,), g.dtype, g.device, [g]) if has_bias else None
    return (_like(a, g) if need_input else None), _like(weight, g), gb


convolution_backward = backward_symbol("convolution_backward", _convolution_backward, _convolution_backward_meta)


@vjp("prims.convolution")
def _(b, g):
    p = b.params
    a, weight, bias = p.a, p.weight, p.bias
    ga, gw, gb = convolution_backward(g, a, weight, _is_t(bias), p.stride, p.padding, p.dilation, p.transposed,
                                      p.output_padding, p.groups, a.requires_grad)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- batch norm -------------------------------------------------------------------------------
def _bn_declines(p) -> bool:
    # cumulative averaging (momentum None) and statistics of other dtypes go through the decomposition
    a = p.a
    return (p.momentum is None or a.ndim < 2 or a.dtype not in (torch.float32, torch.float64)
            or not (p.training or _is_t(p.running_mean)))


def _native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    return tuple(aten.native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps))


def _native_batch_norm_meta(a, weight, bias, running_mean, running_var, training, momentum, eps):
    stats = (a.shape[1],) if training else (0,)
    return _like(a, a, weight, bias), _new(stats, a.dtype, a.device), _new(stats, a.dtype, a.device)


# updates the running statistics in place when training, as eager's kernel does
native_batch_norm = Symbol(name="native_batch_norm", module="ltorch", impl=_native_batch_norm,
                           meta=_native_batch_norm_meta, tags={Tag.SIDE_EFFECT})
lt.native_batch_norm = native_batch_norm


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


batch_norm_backward_saved = backward_symbol("batch_norm_backward_saved", _batch_norm_backward_saved,
                                            _batch_norm_backward_saved_meta)
batch_norm_backward = backward_symbol("batch_norm_backward", _batch_norm_backward, _batch_norm_backward_meta)


@vjp("ltorch.batch_norm")
def _(b, g):
    p = b.params
    if _bn_declines(p):
        return NotImplemented
    training = bool(p.training) or not _is_t(p.running_mean)
    ga, gw, gb = batch_norm_backward(g, p.a, p.weight, p.running_mean, p.running_var, training, p.eps)
    return [(p.a, ga), (p.weight, gw), (p.bias, gb)]


@residuals("ltorch.batch_norm")
def _(b):
    p = b.params
    if _bn_declines(p):
        return NotImplemented
    training = bool(p.training) or not _is_t(p.running_mean)
    return native_batch_norm(p.a, p.weight, p.bias, p.running_mean, p.running_var, training, p.momentum, p.eps)


@vjp("ltorch.native_batch_norm")
def _(b, g):
    g_out, g_mean, g_invstd = g
    if g_mean is not None or g_invstd is not None:
        return NotImplemented
    p = b.params
    a, weight, bias = p.a, p.weight, p.bias
    _, save_mean, save_invstd = b.output
    ga, gw, gb = batch_norm_backward_saved(g_out, a, weight, p.running_mean, p.running_var, save_mean, save_invstd,
                                           p.training, p.eps)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- pooling ----------------------------------------------------------------------------------
def _pair(v, default):
    v = default if v is None or v == [] else v
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def _max_pool_args(b):
    p = b.params
    if p.return_indices or p.a.ndim != 4:
        return None
    return (p.a, _pair(p.kernel_size, None), _pair(p.stride, p.kernel_size), _pair(p.padding, 0),
            _pair(p.dilation, 1), bool(p.ceil_mode))


def _max_pool2d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode):
    return tuple(aten.max_pool2d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode))


def _max_pool2d_backward(g, a, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return aten.max_pool2d_with_indices_backward(g, a, kernel_size, stride, padding, dilation, ceil_mode, indices)


max_pool2d_with_indices = backward_symbol("max_pool2d_with_indices", _max_pool2d_with_indices)
max_pool2d_backward = backward_symbol("max_pool2d_backward", _max_pool2d_backward,
                                      lambda g, a, *rest: _like(a, g))


@residuals("ltorch.max_pool2d")
def _(b):
    args = _max_pool_args(b)
    return NotImplemented if args is None else max_pool2d_with_indices(*args)


@vjp("ltorch.max_pool2d_with_indices")
def _(b, g):
    g_out, _g_idx = g
    a, *params = b.args
    return [(a, max_pool2d_backward(g_out, a, *params, b.output[1]))]


def _adaptive_avg_pool2d_backward(g, a):
    return aten._adaptive_avg_pool2d_backward(g, a)


adaptive_avg_pool2d_backward = backward_symbol("adaptive_avg_pool2d_backward", _adaptive_avg_pool2d_backward,
                                               lambda g, a: _like(a, g))


@vjp("ltorch.adaptive_avg_pool2d")
def _(b, g):
    a = b.params.a
    if a.ndim != 4:
        return NotImplemented
    return [(a, adaptive_avg_pool2d_backward(g, a))]


def _avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return aten.avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


avg_pool2d_backward = backward_symbol("avg_pool2d_backward", _avg_pool2d_backward, lambda g, a, *rest: _like(a, g))


@vjp("ltorch.avg_pool2d")
def _(b, g):
    p = b.params
    a, k = p.a, p.kernel_size
    if a.ndim != 4:
        return NotImplemented
    return [(a, avg_pool2d_backward(g, a, _pair(k, None), _pair(p.stride, k), _pair(p.padding, 0), bool(p.ceil_mode),
                                    bool(p.count_include_pad), p.divisor_override))]


# -- bounded activations (MobileNet's ReLU6) ----------------------------------------------------
def _hardtanh_backward(g, a, min_val, max_val):
    return aten.hardtanh_backward(g, a, min_val, max_val)


hardtanh_backward = backward_symbol("hardtanh_backward", _hardtanh_backward, lambda g, a, *rest: _like(a, g))


@vjp("ltorch.hardtanh", "ltorch.relu6")
def _(b, g):
    a = b.params.a
    if not a.dtype.is_floating_point:
        return NotImplemented
    if b.sym.name == "relu6":
        low, high = 0.0, 6.0
    else:
        low, high = b.params.min_val, b.params.max_val
    return [(a, hardtanh_backward(g, a, low, high))]
