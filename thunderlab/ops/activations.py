"""Activation functions and softmax, with the fused backward kernels eager autograd calls.

A differentiated model keeps these whole in forward (one call each, as eager runs them) and
calls one backward kernel each (``ltorch.gelu_backward``, ...), claimed and timed like any call.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunderlab.core.trace import TraceError

from . import prims
from .common import convert, dims_of, keep_dims, upcast
from .declare import backward_symbol, torchsymbol
from .elementwise import add, clamp, div, erf, exp, expm1, gt, le, log1p, mul, sigmoid, sub, tanh, where
from .prims import new_proxy
from .reductions import logsumexp
from .rules import derivative

aten = torch.ops.aten
_nn = torch._C._nn


def pointwise_backward_meta(name: str, dtype_arg: int | None = None):
    """The meta of a backward kernel whose gradient is shaped like the gradient it is given.

    Direct metas (rather than the kernel's decomposition on meta tensors, which ``torch_meta``
    runs) keep differentiating a model cheap: a transformer asks for hundreds of these.
    """
    def meta(g, a, *rest, **kwargs):
        if tuple(g.shape) != tuple(a.shape):
            raise TraceError(f"ltorch.{name}: gradient {tuple(g.shape)} does not match {tuple(a.shape)}")
        dtype = rest[dtype_arg] if dtype_arg is not None else g.dtype
        return new_proxy(g.shape, dtype, g.device, [g, a])
    return meta


def _pointwise_backward(name: str, kernel, dtype_arg: int | None = None):
    return backward_symbol(name, kernel, pointwise_backward_meta(name, dtype_arg))


gelu_backward = _pointwise_backward("gelu_backward", aten.gelu_backward.default)
silu_backward = _pointwise_backward("silu_backward", aten.silu_backward.default)
threshold_backward = _pointwise_backward("threshold_backward", aten.threshold_backward.default)
# (grad, output, dim, input dtype): the gradient has the input's dtype
softmax_backward = _pointwise_backward("softmax_backward", torch._softmax_backward_data, dtype_arg=1)
log_softmax_backward = _pointwise_backward("log_softmax_backward", torch._log_softmax_backward_data, dtype_arg=1)


@torchsymbol(torch.relu, F.relu, methods=("relu",), impl=F.relu)
def relu(a, inplace=False):
    return where(le(a, 0), 0, a)


@derivative(relu)
def _(b, g):
    return [(b.params.a, threshold_backward(g, b.output, 0))]


@torchsymbol(F.gelu, _nn.gelu, methods=())
def gelu(a, approximate="none"):
    if approximate == "tanh":
        inner = mul(math.sqrt(2 / math.pi), add(a, mul(0.044715, mul(a, mul(a, a)))))
        return mul(mul(0.5, a), add(1, tanh(inner)))
    if approximate != "none":
        raise TraceError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return mul(mul(0.5, a), add(1, erf(mul(a, 1 / math.sqrt(2)))))


@derivative(gelu)
def _(b, g):
    return [(b.params.a, gelu_backward(g, b.params.a, approximate=b.params.approximate))]


@torchsymbol(F.silu, _nn.silu)
def silu(a, inplace=False):
    return mul(a, sigmoid(a))


@derivative(silu)
def _(b, g):
    return [(b.params.a, silu_backward(g, b.params.a))]


@torchsymbol(F.softplus, _nn.softplus)
def softplus(a, beta=1.0, threshold=20.0):
    scaled = mul(a, beta)
    soft = div(log1p(exp(scaled)), beta)
    return where(gt(scaled, threshold), a, soft)


@torchsymbol(F.leaky_relu, _nn.leaky_relu)
def leaky_relu(a, negative_slope=0.01, inplace=False):
    return where(gt(a, 0), a, mul(a, negative_slope))


@torchsymbol(F.elu, _nn.elu)
def elu(a, alpha=1.0, scale=1.0, input_scale=1.0, inplace=False):
    neg = mul(mul(expm1(mul(a, input_scale)), alpha), scale)
    return where(gt(a, 0), mul(a, scale), neg)


@torchsymbol(F.hardtanh, _nn.hardtanh)
def hardtanh(a, min_val=-1.0, max_val=1.0, inplace=False):
    if not a.dtype.is_floating_point:  # the result keeps a's dtype: torch truncates the bounds
        min_val, max_val = int(min_val), int(max_val)
    return clamp(a, min_val, max_val)


@torchsymbol(F.relu6, _nn.relu6 if hasattr(_nn, "relu6") else F.relu6)
def relu6(a, inplace=False):
    return clamp(a, 0, 6)


def _hardtanh_backward(g, a, min_val, max_val):
    return aten.hardtanh_backward(g, a, min_val, max_val)


hardtanh_backward = backward_symbol("hardtanh_backward", _hardtanh_backward,
                                    lambda g, a, *rest: new_proxy(a.shape, a.dtype, a.device, [g]))


@derivative(hardtanh, relu6)
def _(b, g):  # MobileNet's ReLU6: eager's hardtanh_backward kernel
    a = b.params.a
    if not a.dtype.is_floating_point:
        return NotImplemented
    low, high = (0.0, 6.0) if b.sym is relu6 else (b.params.min_val, b.params.max_val)
    return [(a, hardtanh_backward(g, a, low, high))]


# -- softmax family ------------------------------------------------------------------------
@torchsymbol(torch.softmax, methods=("softmax",))
def softmax(a, dim, dtype=None):
    x = upcast(convert(a, dtype) if dtype else a)
    d = dims_of(a, dim)
    if a.numel():  # shift by the maximum for stability (an empty tensor has none)
        x = sub(x, keep_dims(prims.amax(x, d), a, d))
    e = exp(x)
    out = div(e, keep_dims(prims.sum(e, d), a, d))
    return convert(out, dtype or a.dtype)


@torchsymbol(torch.log_softmax, methods=("log_softmax",))
def log_softmax(a, dim, dtype=None):
    x = upcast(convert(a, dtype) if dtype else a)
    out = sub(x, logsumexp(x, dim, keepdim=True))
    return convert(out, dtype or a.dtype)


@derivative(softmax, log_softmax)
def _(b, g):
    a, dim = b.params.a, b.params.dim
    if b.params.dtype is not None:
        return NotImplemented
    back = softmax_backward if b.sym is softmax else log_softmax_backward
    return [(a, back(g, b.output, dim % max(a.ndim, 1), a.dtype))]
