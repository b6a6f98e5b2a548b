"""Convolution, padding and pooling, with eager's pooling backward kernels.

The convolution ops decompose into ``prims.convolution`` (whose derivative is in ``vjp.py``, with
the other prims'). Max pooling, when differentiated, swaps for the variant that also returns the
positions of the maxima, which its backward kernel reads.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag

from . import prims
from .declare import backward_symbol, opaque_symbol, torchsymbol
from .prims import new_proxy
from .reductions import mean
from .rules import derivative, residuals

aten = torch.ops.aten
_nn = torch._C._nn


def _tup(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _string_padding(a, weight, padding, stride, dilation, n):
    """``padding="valid"`` or ``"same"`` as numbers, and the input padded on the right where "same" needs an odd
    total (as eager's convolution does); None where eager would refuse (another string, a strided "same")."""
    if padding == "valid":
        return a, (0,) * n
    if padding != "same" or any(s != 1 for s in _tup(stride, n)):
        return None
    left, config = [], [(0, 0, 0)] * a.ndim
    for i, (d, k) in enumerate(zip(_tup(dilation, n), weight.shape[2:])):
        total = d * (k - 1)
        left.append(total // 2)
        config[a.ndim - n + i] = (0, total - 2 * (total // 2), 0)
    if any(hi for _, hi, _ in config):
        a = prims.pad(a, 0, tuple(config))
    return a, tuple(left)


def _conv(n):
    def decomposition(a, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        if isinstance(padding, str):
            padded = _string_padding(a, weight, padding, stride, dilation, n)
            if padded is None:
                return NotImplemented  # eager's own error names what it accepts
            a, padding = padded
        if a.ndim == n + 1:  # unbatched: convolve a batch of one
            out = decomposition(prims.reshape(a, (1,) + a.shape), weight, bias, stride, padding, dilation, groups)
            return prims.reshape(out, out.shape[1:])
        return prims.convolution(a, weight, bias, _tup(stride, n), _tup(padding, n), _tup(dilation, n),
                                 False, (0,) * n, groups)

    return decomposition


conv1d = torchsymbol(F.conv1d, torch.conv1d, name="conv1d", tags={Tag.DONT_RECOMPUTE})(_conv(1))
conv2d = torchsymbol(F.conv2d, torch.conv2d, name="conv2d", tags={Tag.DONT_RECOMPUTE})(_conv(2))
conv3d = torchsymbol(F.conv3d, torch.conv3d, name="conv3d", tags={Tag.DONT_RECOMPUTE})(_conv(3))


@torchsymbol(F.pad, _nn.pad)
def pad(a, pad, mode="constant", value=None):
    if mode != "constant":
        return NotImplemented
    config = [(0, 0, 0)] * a.ndim
    for i in range(len(pad) // 2):
        config[a.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    return prims.pad(a, 0 if value is None else value, tuple(config))


# -- pooling: kept whole, but for one window over the whole map (its mean) ----------------------------------
def _max_pool_params(a, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False): ...
def _avg_pool_params(a, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                     divisor_override=None): ...


max_pool2d = opaque_symbol("max_pool2d", F.max_pool2d, torch.max_pool2d, signature=_max_pool_params)
max_pool1d = opaque_symbol("max_pool1d", F.max_pool1d, torch.max_pool1d, signature=_max_pool_params)
def _one_window(n: int, k: int, s: int, p: int, ceil_mode: bool) -> bool:
    """Whether pooling a dimension of size ``n`` (window ``k``, stride ``s``, padding ``p``) makes one window that
    covers every position and nothing beside them: eager's output size (``pooling_output_shape``) is 1, there is
    no padding and the window is at least the dimension."""
    out = (n + 2 * p - (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out == 1 and p == 0 and k >= n


@torchsymbol(F.avg_pool2d, _nn.avg_pool2d, name="avg_pool2d", signature=_avg_pool_params, tags={Tag.DECOMPOSE})
def avg_pool2d(a, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Kept whole (Inductor lowers it, torch's kernels differentiate it), except for a window over the whole map
    (EfficientNet's head: ``AvgPool2d(1280, ceil_mode=True)`` on a 7x7 map), which is the spatial mean, eager's
    divisor being the window's part inside the input: Inductor's lowering of such a window visits every one of its
    positions (1280 x 1280 per output, most of them masked off) and took most of EfficientNet's step."""
    if divisor_override is not None or a.ndim not in (3, 4) or not a.dtype.is_floating_point:
        return NotImplemented
    k, st, pd = _pair(kernel_size, None), _pair(stride, kernel_size), _pair(padding, 0)
    if not all(_one_window(n, *w, bool(ceil_mode)) for n, w in zip(a.shape[-2:], zip(k, st, pd))):
        return NotImplemented
    return mean(a, (-2, -1), keepdim=True)


avg_pool1d = opaque_symbol("avg_pool1d", F.avg_pool1d, torch.avg_pool1d, signature=_avg_pool_params)


@torchsymbol(F.adaptive_avg_pool2d, _nn.adaptive_avg_pool2d, name="adaptive_avg_pool2d", tags={Tag.DECOMPOSE})
def adaptive_avg_pool2d(a, output_size):
    """Kept whole (Inductor lowers it, torch's kernel differentiates it), except for a 1x1 output (the head of most
    convolution networks: ``AdaptiveAvgPool2d(1)`` or ``((1, 1))``), which is the spatial mean: its backward is
    then a broadcast Inductor fuses with its neighbours, where ``_adaptive_avg_pool2d_backward`` was a call of its
    own. ``output_size`` is an int or a pair, ``None`` keeping the input's size (PyTorch's documentation)."""
    if a.ndim not in (3, 4) or not a.dtype.is_floating_point:
        return NotImplemented
    size = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size, output_size]
    if len(size) != 2 or any((n if o is None else o) != 1 for o, n in zip(size, a.shape[-2:])):
        return NotImplemented
    return mean(a, (-2, -1), keepdim=True)


def _like(t, *inputs):
    return new_proxy(t.shape, t.dtype, t.device, inputs)


def _pair(v, default):
    v = default if v is None or v == [] else v
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def _max_pool2d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode):
    return tuple(aten.max_pool2d_with_indices(a, kernel_size, stride, padding, dilation, ceil_mode))


def _max_pool2d_backward(g, a, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return aten.max_pool2d_with_indices_backward(g, a, kernel_size, stride, padding, dilation, ceil_mode, indices)


max_pool2d_with_indices = backward_symbol("max_pool2d_with_indices", _max_pool2d_with_indices)
max_pool2d_backward = backward_symbol("max_pool2d_backward", _max_pool2d_backward, lambda g, a, *rest: _like(a, g))


@residuals(max_pool2d)
def _(b):
    p = b.params
    if p.return_indices or p.a.ndim != 4:
        return NotImplemented
    return max_pool2d_with_indices(p.a, _pair(p.kernel_size, None), _pair(p.stride, p.kernel_size),
                                   _pair(p.padding, 0), _pair(p.dilation, 1), bool(p.ceil_mode))


@derivative(max_pool2d_with_indices)
def _(b, g):
    g_out, _g_idx = g
    a, *params = b.args
    return [(a, max_pool2d_backward(g_out, a, *params, b.output[1]))]


def _adaptive_avg_pool2d_backward(g, a):
    return aten._adaptive_avg_pool2d_backward(g, a)


adaptive_avg_pool2d_backward = backward_symbol("adaptive_avg_pool2d_backward", _adaptive_avg_pool2d_backward,
                                               lambda g, a: _like(a, g))


@derivative(adaptive_avg_pool2d)
def _(b, g):
    a = b.params.a
    if a.ndim != 4:
        return NotImplemented
    return [(a, adaptive_avg_pool2d_backward(g, a))]


def _avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return aten.avg_pool2d_backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


avg_pool2d_backward = backward_symbol("avg_pool2d_backward", _avg_pool2d_backward, lambda g, a, *rest: _like(a, g))


@derivative(avg_pool2d)
def _(b, g):
    p = b.params
    a, k = p.a, p.kernel_size
    if a.ndim != 4:
        return NotImplemented
    return [(a, avg_pool2d_backward(g, a, _pair(k, None), _pair(p.stride, k), _pair(p.padding, 0), bool(p.ceil_mode),
                                    bool(p.count_include_pad), p.divisor_override))]
