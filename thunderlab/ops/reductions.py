"""Reductions: sum, mean, extrema, variance, logsumexp, cumulative sums, top-k and sorting."""
from __future__ import annotations

import builtins
import math

import torch

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError

from . import prims
from .common import canonical_dim, convert, dims_of, is_tensor, keep_dims, scatter_back
from .declare import opaque_symbol, torchsymbol
from .elementwise import add, div, eq, exp, isinf, log, logical_not, maximum, minimum, ne, sub, where
from .rules import derivative
from .views import expand, reshape

__all__ = ["sum_", "prod", "mean", "amax", "amin", "max_", "min_", "argmax", "argmin", "var", "std", "var_mean",
           "logsumexp", "cumsum", "all_", "any_", "topk", "sort", "argsort"]


def _acc_dtype(a, dtype):
    if dtype is not None:
        return dtype
    return torch.int64 if (a.dtype == torch.bool or not (a.dtype.is_floating_point or a.dtype.is_complex)) else a.dtype


def _reduction(prim, a, dim, keepdim, dtype=None):
    dims = dims_of(a, dim)
    out = prim(convert(a, dtype) if dtype else a, dims)
    return keep_dims(out, a, dims) if keepdim else out


def _grad_over(a, dim, keepdim, g):
    """``g`` (the gradient of a reduction of ``a`` over ``dim``) spread back over ``a``'s shape."""
    dims = dims_of(a, dim)
    if not keepdim:
        g = reshape(g, tuple(1 if i in dims else s for i, s in enumerate(a.shape)))
    return expand(g, a.shape)


@torchsymbol(torch.sum, methods=("sum",))
def sum_(a, dim=None, keepdim=False, *, dtype=None):
    return _reduction(prims.sum, a, dim, keepdim, _acc_dtype(a, dtype))


@derivative(sum_)
def _(b, g):
    p = b.params
    if p.dtype is not None and p.dtype != p.a.dtype:
        return NotImplemented
    return [(p.a, _grad_over(p.a, p.dim, p.keepdim, g))]


@torchsymbol(torch.prod, methods=("prod",))
def prod(a, dim=None, keepdim=False, *, dtype=None):
    return _reduction(prims.prod, a, dim, keepdim, _acc_dtype(a, dtype))


@torchsymbol(torch.mean, methods=("mean",))
def mean(a, dim=None, keepdim=False, *, dtype=None):
    if not (a.dtype.is_floating_point or a.dtype.is_complex or dtype is not None):
        raise TraceError(f"mean: {a.name} has dtype {a.dtype}; mean needs a floating point or complex input")
    dims = dims_of(a, dim)
    n = math.prod(a.shape[d] for d in dims) if a.ndim else 1
    comp = dtype or a.dtype
    comp_up = torch.float32 if comp in (torch.float16, torch.bfloat16) else comp
    s = prims.sum(convert(a, comp_up), dims)
    out = convert(prims.div(s, n), comp)
    return keep_dims(out, a, dims) if keepdim else out


@derivative(mean)
def _(b, g):
    p = b.params
    dims = dims_of(p.a, p.dim)
    n = math.prod(p.a.shape[d] for d in dims) if p.a.ndim else 1
    return [(p.a, div(_grad_over(p.a, p.dim, p.keepdim, g), n))]


@torchsymbol(torch.amax, methods=("amax",))
def amax(a, dim=(), keepdim=False):
    return _reduction(prims.amax, a, dim, keepdim)


@torchsymbol(torch.amin, methods=("amin",))
def amin(a, dim=(), keepdim=False):
    return _reduction(prims.amin, a, dim, keepdim)


def _arg_extremum(prim, a, dim, keepdim):
    if dim is None:
        out = prim(prims.reshape(a, (a.numel(),)) if a.ndim != 1 else a, 0)
        return prims.reshape(out, (1,) * a.ndim) if keepdim else out
    d = canonical_dim(dim, a.ndim)
    out = prim(a, d) if a.ndim else prim(prims.reshape(a, (1,)), 0)
    return keep_dims(out, a, (d,)) if keepdim and a.ndim else out


@torchsymbol(torch.argmax, methods=("argmax",))
def argmax(a, dim=None, keepdim=False):
    return _arg_extremum(prims.argmax, a, dim, keepdim)


@torchsymbol(torch.argmin, methods=("argmin",))
def argmin(a, dim=None, keepdim=False):
    return _arg_extremum(prims.argmin, a, dim, keepdim)


def _extremum(red, arg, pairwise, a, dim, keepdim):
    if is_tensor(dim):  # torch.max(a, b) is maximum
        return pairwise(a, dim)
    if dim is None:
        return red(a)
    # argmax and argmin take no bool tensors; the positions are those of the same values as bytes
    return red(a, dim, keepdim), arg(convert(a, torch.uint8) if a.dtype == torch.bool else a, dim, keepdim)


@torchsymbol(torch.max, name="max", methods=("max",))
def max_(a, dim=None, keepdim=False):
    return _extremum(amax, argmax, maximum, a, dim, keepdim)


@torchsymbol(torch.min, name="min", methods=("min",))
def min_(a, dim=None, keepdim=False):
    return _extremum(amin, argmin, minimum, a, dim, keepdim)


# -- variance ------------------------------------------------------------------------------
def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def _with_correction(fn):
    """``fn`` (torch.var, std, var_mean) called with the bool ``unbiased`` or ``correction`` as given."""
    def impl(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
        if isinstance(dim, bool):
            return fn(a, unbiased=dim)
        return fn(a, dim, correction=_correction(unbiased, correction), keepdim=keepdim)

    impl.__name__ = impl.__qualname__ = f"{fn.__name__}_impl"
    return impl


@torchsymbol(torch.var, methods=("var",), impl=_with_correction(torch.var))
def var(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    dims = dims_of(a, dim)
    out = prims.var(a, dims, correction=_correction(unbiased, correction))
    return keep_dims(out, a, dims) if keepdim else out


@torchsymbol(torch.std, methods=("std",), impl=_with_correction(torch.std))
def std(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return prims.sqrt(var(a, dim, unbiased, keepdim, correction=correction))


@torchsymbol(torch.var_mean, impl=_with_correction(torch.var_mean))
def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    dims = dims_of(a, dim)
    v, m = prims.var_mean(a, dims, correction=_correction(unbiased, correction))
    if keepdim:
        v, m = keep_dims(v, a, dims), keep_dims(m, a, dims)
    return v, m


# -- the rest --------------------------------------------------------------------------------
@torchsymbol(torch.logsumexp, methods=("logsumexp",))
def logsumexp(a, dim, keepdim=False):
    dims = dims_of(a, dim)
    if a.ndim and builtins.any(a.shape[d] == 0 for d in dims):  # no maximum to shift by; the sum is 0, its log -inf
        out = log(prims.sum(exp(a), dims))
        return keep_dims(out, a, dims) if keepdim else out
    m = prims.amax(a, dims)
    m = where(isinf(m), 0, m)
    shifted = sub(a, keep_dims(m, a, dims))
    out = add(log(prims.sum(exp(shifted), dims)), m)
    return keep_dims(out, a, dims) if keepdim else out


@torchsymbol(torch.cumsum, methods=("cumsum",))
def cumsum(a, dim, *, dtype=None):
    return prims.cumsum(convert(a, _acc_dtype(a, dtype)), canonical_dim(dim, a.ndim))


@torchsymbol(torch.all, methods=("all",))
def all_(a, dim=None, keepdim=False):
    return eq(_reduction(prims.sum, logical_not(a), dim, keepdim, torch.int64), 0)


@torchsymbol(torch.any, methods=("any",))
def any_(a, dim=None, keepdim=False):
    return ne(_reduction(prims.sum, ne(a, 0), dim, keepdim, torch.int64), 0)


@torchsymbol(torch.topk, methods=("topk",))
def topk(a, k, dim=-1, largest=True, sorted=True):
    if a.ndim == 0:  # a 0-d tensor is its own top 1
        v, i = prims.topk(prims.reshape(a, (1,)), k, 0, largest, sorted)
        return prims.reshape(v, ()), prims.reshape(i, ())
    return prims.topk(a, k, canonical_dim(dim, a.ndim), largest, sorted)


def _sort_params(a, dim=-1, descending=False, *, stable=False): ...


sort = opaque_symbol("sort", torch.sort, methods=("sort",), signature=_sort_params, tags={Tag.DONT_RECOMPUTE})
argsort = opaque_symbol("argsort", torch.argsort, methods=("argsort",), signature=_sort_params,
                        tags={Tag.DONT_RECOMPUTE})


@derivative(sort)
def _(b, g):
    a, gv = b.params.a, g[0]
    if gv is None:
        return []
    return [(a, scatter_back(a, b.params.dim % max(a.ndim, 1), b.output[1], gv))]

