"""Linear algebra: matmul and its variants, linear, einsum. All are ``DONT_RECOMPUTE``: real work."""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F

from thunderlab.core.symbols import Tag

from . import prims
from .common import is_tensor
from .declare import backward_symbol, opaque_symbol, torchsymbol
from .elementwise import add, mul
from .rules import derivative
from .vjp import linear_by_prims, matmul_by_prims

EXPENSIVE = {Tag.DONT_RECOMPUTE}


@torchsymbol(F.linear, torch._C._nn.linear, tags=EXPENSIVE)
def linear(a, weight, bias=None):
    return prims.linear(a, weight, bias)


def _linear_backward(g, a, w, need_input, need_bias):
    # the kernels eager's AddmmBackward calls; leading batch dimensions are flattened into rows
    rows = g.dim() == 2
    g2 = g if rows else g.reshape(-1, g.shape[-1])
    ga = (g.mm(w) if rows else g.matmul(w)) if need_input else None
    gw = g2.t().mm(a if a.dim() == 2 else a.reshape(-1, a.shape[-1]))
    gb = g2.sum(0) if need_bias else None
    return ga, gw, gb


linear_backward = backward_symbol("linear_backward", _linear_backward)


@derivative(linear)
def _(b, g):
    a, w, bias = b.params.a, b.params.weight, b.params.bias
    if a.ndim < 2 or g.ndim < 2:
        return linear_by_prims(b, g)  # vectors: the general rule
    # the weight is read only for the input's gradient: without one it is not saved for backward
    ga, gw, gb = linear_backward(g, a, w if a.requires_grad else None, a.requires_grad, is_tensor(bias))
    return [(a, ga), (w, gw), (bias, gb)]


@torchsymbol(torch.matmul, operator.matmul, methods=("matmul", "__matmul__"), tags=EXPENSIVE)
def matmul(a, b):
    return prims.matmul(a, b)


@torchsymbol(torch.mm, methods=("mm",), tags=EXPENSIVE)
def mm(a, b):
    return prims.matmul(a, b)


@torchsymbol(torch.bmm, methods=("bmm",), tags=EXPENSIVE)
def bmm(a, b):
    return prims.matmul(a, b)


derivative(matmul, mm, bmm)(matmul_by_prims)


def _scaled_sum(a, m1, m2, beta, alpha):
    """beta * a + alpha * (m1 @ m2): addmm and baddbmm, which differ only in their checks."""
    if not m1.dtype.is_floating_point and not (isinstance(alpha, int) and isinstance(beta, int)):
        return NotImplemented  # torch truncates float scalars for integer tensors
    prod = prims.matmul(m1, m2)
    prod = mul(prod, alpha) if alpha != 1 else prod
    if beta == 0:  # a is ignored: its nan and inf do not propagate
        return prod
    return add(mul(a, beta) if beta != 1 else a, prod)


@torchsymbol(torch.addmm, methods=("addmm",), tags=EXPENSIVE)
def addmm(a, mat1, mat2, *, beta=1, alpha=1):  # torch's keyword names: addmm(x, mat1=..., mat2=...)
    return _scaled_sum(a, mat1, mat2, beta, alpha)


@torchsymbol(torch.baddbmm, methods=("baddbmm",), tags=EXPENSIVE)
def baddbmm(a, batch1, batch2, *, beta=1, alpha=1):  # BLOOM calls x.baddbmm(batch1=..., batch2=...)
    return _scaled_sum(a, batch1, batch2, beta, alpha)


einsum = opaque_symbol("einsum", torch.functional.einsum, torch.einsum, tags=EXPENSIVE,
                       signature=lambda equation, *operands: None)
