"""Ops that rearrange data into new tensors: cat, stack, flip, roll, repeat, gathers, triangles."""
from __future__ import annotations

import torch

from . import prims
from .common import broadcast_to_shape, canonical_dim, convert, promote, shape_arg
from .declare import torchsymbol


def slice_dim(a, dim, start, stop, step=1):
    """``a`` sliced along one dimension (prims.slice takes every dimension's range)."""
    starts, ends, steps = [0] * a.ndim, list(a.shape), [1] * a.ndim
    starts[dim], ends[dim], steps[dim] = start, stop, step
    return prims.slice(a, tuple(starts), tuple(ends), tuple(steps))


def _cat(tensors, dim):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    _, dtype = promote(*tensors)
    d = canonical_dim(dim, tensors[0].ndim)
    return prims.cat([convert(t, dtype) for t in tensors], d)


@torchsymbol(torch.cat, torch.concat, torch.concatenate)
def cat(tensors, dim=0):
    return _cat(tensors, dim)


@torchsymbol(torch.stack)
def stack(tensors, dim=0):
    d = canonical_dim(dim, tensors[0].ndim + 1)
    return _cat([prims.reshape(t, t.shape[:d] + (1,) + t.shape[d:]) for t in tensors], d)


@torchsymbol(torch.flip, methods=("flip",), impl=torch.Tensor.flip)
def flip(a, *numbers, dims=None):  # torch.flip(x, (0, 1)), torch.flip(x, dims=(0, 1)), x.flip(0, 1), x.flip(0)
    dims = shape_arg(numbers) if dims is None else (dims,) if isinstance(dims, int) else tuple(dims)
    return prims.flip(a, tuple(canonical_dim(d, a.ndim) for d in dims))


def _roll(a, shifts, dims):
    if dims is None:
        return prims.reshape(_roll(prims.reshape(a, (a.numel(),)), shifts, 0), a.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = a
    for s, d in zip(shifts, dims):
        d = canonical_dim(d, a.ndim)
        n = a.shape[d]
        s = s % n if n else 0
        if s == 0:
            out = prims.convert_element_type(out, out.dtype) if out is a else out
            continue
        out = prims.cat([slice_dim(out, d, n - s, n), slice_dim(out, d, 0, n - s)], d)
    return out


@torchsymbol(torch.roll, methods=("roll",))
def roll(a, shifts, dims=None):
    return _roll(a, shifts, dims)


@torchsymbol(torch.Tensor.repeat, methods=("repeat",))
def repeat(a, *sizes):
    sizes = shape_arg(sizes)
    shape = (1,) * (len(sizes) - a.ndim) + a.shape
    a = prims.reshape(a, shape)
    # broadcast each dimension into a new leading axis, then merge the two
    inter = []
    dims = []
    for i, (r, s) in enumerate(zip(sizes, shape)):
        inter += [r, s]
        dims.append(2 * i + 1)
    b = prims.broadcast_in_dim(a, tuple(inter), tuple(dims))
    return prims.reshape(b, tuple(r * s for r, s in zip(sizes, shape)))


@torchsymbol(torch.index_select, methods=("index_select",))
def index_select(a, dim, index):
    d = canonical_dim(dim, a.ndim)
    return prims.take(a, index, d) if a.ndim else prims.reshape(prims.take(prims.reshape(a, (1,)), index, 0), ())


@torchsymbol(torch.gather, methods=("gather",))
def gather(a, dim, index, *, sparse_grad=False):
    return prims.gather(a, canonical_dim(dim, a.ndim), index)


def _tri(a, diagonal, upper):
    rows, cols = a.shape[-2], a.shape[-1]
    r = prims.iota(rows, start=0, step=1, dtype=torch.int64, device=a.device)
    c = prims.iota(cols, start=0, step=1, dtype=torch.int64, device=a.device)
    r = prims.broadcast_in_dim(r, (rows, cols), (0,))
    c = prims.broadcast_in_dim(c, (rows, cols), (1,))
    diff = prims.sub(c, r)
    bound = prims.full((rows, cols), diagonal, dtype=torch.int64, device=a.device)
    keep = broadcast_to_shape(prims.ge(diff, bound) if upper else prims.le(diff, bound), a.shape)
    zero = prims.full(a.shape, 0, dtype=a.dtype, device=a.device)
    return prims.where(keep, a, zero)


@torchsymbol(torch.tril, methods=("tril",))
def tril(a, diagonal=0):
    return _tri(a, diagonal, False)


@torchsymbol(torch.triu, methods=("triu",))
def triu(a, diagonal=0):
    return _tri(a, diagonal, True)


