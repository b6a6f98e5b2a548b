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
    a, weight, bias, stride, padding, dilation, transposed, output_padding, groups = b.args
    ga, gw, gb = convolution_backward(g, a, weight, _is_t(bias), stride, padding, dilation, transposed,
                                      output_padding, groups, a.requires_grad)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- batch norm -------------------------------------------------------------------------------
_BN = ("a", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")


def _bn_params(b) -> dict:
    p = dict(zip(_BN, b.args))
    p.update({k: v for k, v in b.kwargs.items() if k in _BN})
    p.setdefault("training", False), p.setdefault("momentum", 0.1), p.setdefault("eps", 1e-5)
    for k in ("running_mean", "running_var", "weight", "bias"):
        p.setdefault(k, None)
    return p


def _bn_declines(p) -> bool:
    # cumulative averaging (momentum None) and statistics of other dtypes go through the decomposition
    a = p["a"]
    return (p["momentum"] is None or a.ndim < 2 or a.dtype not in (torch.float32, torch.float64)
            or not (p["training"] or _is_t(p["running_mean"])))


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
    p = _bn_params(b)
    if _bn_declines(p):
        return NotImplemented
    training = bool(p["training"]) or not _is_t(p["running_mean"])
    ga, gw, gb = batch_norm_backward(g, p["a"], p["weight"], p["running_mean"], p["running_var"], training, p["eps"])
    return [(p["a"], ga), (p["weight"], gw), (p["bias"], gb)]


@residuals("ltorch.batch_norm")
def _(b):
    p = _bn_params(b)
    if _bn_declines(p):
        return NotImplemented
    training = bool(p["training"]) or not _is_t(p["running_mean"])
    return native_batch_norm(p["a"], p["weight"], p["bias"], p["running_mean"], p["running_var"], training,
                             p["momentum"], p["eps"])


@vjp("ltorch.native_batch_norm")
def _(b, g):
    g_out, g_mean, g_invstd = g
    if g_mean is not None or g_invstd is not None:
        return NotImplemented
    a, weight, bias, running_mean, running_var, training, _momentum, eps = b.args
    _, save_mean, save_invstd = b.output
    ga, gw, gb = batch_norm_backward_saved(g_out, a, weight, running_mean, running_var, save_mean, save_invstd,
                                           training, eps)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- group norm -------------------------------------------------------------------------------
# Differentiated through its decomposition, a group norm's backward was some twenty small kernels
# (BiT has one per block); kept whole, its forward is eager's kernel returning the per-group
# statistics and its backward the one kernel eager autograd calls with them.
_GN = ("a", "num_groups", "weight", "bias", "eps")


def _gn_params(b):
    p = dict(zip(_GN, b.args))
    p.update({k: v for k, v in b.kwargs.items() if k in _GN})
    p.setdefault("weight", None), p.setdefault("bias", None), p.setdefault("eps", 1e-5)
    a, groups = p["a"], p["num_groups"]
    same = all(t is None or (_is_t(t) and t.dtype == a.dtype) for t in (p["weight"], p["bias"]))
    if (a.ndim < 2 or a.dtype not in (torch.float32, torch.float64) or not same or not isinstance(groups, int)
            or groups <= 0 or a.shape[1] % groups):
        return None  # other dtypes and the cases eager refuses go through the decomposition
    return p


def _gn_sizes(a):
    hw = 1
    for s in a.shape[2:]:
        hw *= s
    return a.shape[0], a.shape[1], hw


def _native_group_norm(a, weight, bias, num_groups, eps):
    n, c, hw = _gn_sizes(a)  # the kernels read contiguous memory (eager's group_norm makes it so)
    return tuple(aten.native_group_norm(a.contiguous(), weight, bias, n, c, hw, num_groups, eps))


def _native_group_norm_meta(a, weight, bias, num_groups, eps):
    stats = (a.shape[0], num_groups)
    inputs = [t for t in (a, weight, bias) if t is not None]
    return _like(a, *inputs), _new(stats, a.dtype, a.device, [a]), _new(stats, a.dtype, a.device, [a])


def _group_norm_backward_saved(g, a, mean, rstd, weight, has_bias, num_groups):
    n, c, hw = _gn_sizes(a)
    mask = [True, weight is not None, has_bias]
    return tuple(aten.native_group_norm_backward(g.contiguous(), a.contiguous(), mean, rstd, weight, n, c, hw,
                                                 num_groups, mask))


def _group_norm_backward_saved_meta(g, a, mean, rstd, weight, has_bias, num_groups):
    gb = _new((a.shape[1],), g.dtype, g.device, [g]) if has_bias else None
    return _like(a, g), _like(weight, g), gb


def _group_norm_backward(g, a, weight, has_bias, num_groups, eps):
    # the statistics again (where the forward ran the plain call, which keeps none)
    _, mean, rstd = _native_group_norm(a, None, None, num_groups, eps)
    return _group_norm_backward_saved(g, a, mean, rstd, weight, has_bias, num_groups)


def _group_norm_backward_meta(g, a, weight, has_bias, num_groups, eps):
    return _group_norm_backward_saved_meta(g, a, None, None, weight, has_bias, num_groups)


group_norm_backward = backward_symbol("group_norm_backward", _group_norm_backward, _group_norm_backward_meta)
native_group_norm = backward_symbol("native_group_norm", _native_group_norm, _native_group_norm_meta)
group_norm_backward_saved = backward_symbol("group_norm_backward_saved", _group_norm_backward_saved,
                                            _group_norm_backward_saved_meta)


@residuals("ltorch.group_norm")
def _(b):
    p = _gn_params(b)
    if p is None:
        return NotImplemented
    return native_group_norm(p["a"], p["weight"], p["bias"], p["num_groups"], p["eps"])


@vjp("ltorch.group_norm")
def _(b, g):
    p = _gn_params(b)
    if p is None:
        return NotImplemented
    ga, gw, gb = group_norm_backward(g, p["a"], p["weight"], _is_t(p["bias"]), p["num_groups"], p["eps"])
    return [(p["a"], ga), (p["weight"], gw), (p["bias"], gb)]


@vjp("ltorch.native_group_norm")
def _(b, g):
    g_out, g_mean, g_rstd = g
    if g_mean is not None or g_rstd is not None:
        return NotImplemented  # the statistics are used as values
    a, weight, bias, num_groups, _eps = b.args
    _, mean, rstd = b.output
    ga, gw, gb = group_norm_backward_saved(g_out, a, mean, rstd, weight, _is_t(bias), num_groups)
    return [(a, ga), (weight, gw), (bias, gb)]


# -- pooling ----------------------------------------------------------------------------------
def _pool_params(b, names, defaults) -> list:
    p = dict(zip(names, defaults))
    p.update(zip(names, b.args))
    p.update({k: v for k, v in b.kwargs.items() if k in p})
    return [p[n] for n in names]


def _pair(v, default):
    v = default if v is None or v == [] else v
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


_MAX_POOL = ("a", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")


def _max_pool_args(b):
    a, k, s, pad, d, ceil, ret = _pool_params(b, _MAX_POOL, (None, None, None, 0, 1, False, False))
    if ret or a.ndim != 4:
        return None
    return a, _pair(k, None), _pair(s, k), _pair(pad, 0), _pair(d, 1), bool(ceil)


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
    a = b.args[0]
    if a.ndim != 4:
        return NotImplemented
    return [(a, adaptive_avg_pool2d_backward(g, a))]


_AVG_POOL = ("a", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


def _avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return aten.avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


avg_pool2d_backward = backward_symbol("avg_pool2d_backward", _avg_pool2d_backward, lambda g, a, *rest: _like(a, g))


@vjp("ltorch.avg_pool2d")
def _(b, g):
    a, k, s, pad, ceil, count, div = _pool_params(b, _AVG_POOL, (None, None, None, 0, False, True, None))
    if a.ndim != 4:
        return NotImplemented
    return [(a, avg_pool2d_backward(g, a, _pair(k, None), _pair(s, k), _pair(pad, 0), bool(ceil), bool(count), div))]


# -- bounded activations (MobileNet's ReLU6) ----------------------------------------------------
def _hardtanh_backward(g, a, min_val, max_val):
    return aten.hardtanh_backward(g, a, min_val, max_val)


hardtanh_backward = backward_symbol("hardtanh_backward", _hardtanh_backward, lambda g, a, *rest: _like(a, g))


@vjp("ltorch.hardtanh", "ltorch.relu6")
def _(b, g):
    a = b.args[0]
    if not a.dtype.is_floating_point:
        return NotImplemented
    if b.sym.name == "relu6":
        low, high = 0.0, 6.0
    else:
        low, high = _pool_params(b, ("a", "min_val", "max_val"), (None, -1.0, 1.0))[1:]
    return [(a, hardtanh_backward(g, a, low, high))]
