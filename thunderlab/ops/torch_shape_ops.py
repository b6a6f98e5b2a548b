"""Torch-level shape ops and views (part of ``ltorch``)."""
from __future__ import annotations

import math
import operator

import torch

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError

from . import prims
from .torch_ops import _convert, _dim, _is_t, shape_arg, broadcast_to_shape, opaque_symbol, torchsymbol

__all__ = []  # everything registers itself in TORCH_SYMBOLS and torch_ops' namespace


def _infer(a, shape):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise TraceError(f"view/reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or a.numel() % known:
            raise TraceError(f"view/reshape: shape {shape} is invalid for {list(a.shape)} ({a.numel()} elements)")
        shape[shape.index(-1)] = a.numel() // known
    if math.prod(shape) != a.numel():
        raise TraceError(f"view/reshape: shape {shape} is invalid for {list(a.shape)} ({a.numel()} elements)")
    return tuple(shape)


def _register(name, decomposition, *fns, methods=(), impl=None, tags=()):
    sym = torchsymbol(*fns, name=name, methods=methods, impl=impl, tags=tags)(decomposition)
    globals()[name] = sym
    return sym


def _view(a, *shape):
    return prims.reshape(a, _infer(a, shape_arg(shape)))


view = _register("view", _view, torch.Tensor.view, methods=("view",), tags={Tag.VIEW})
reshape = _register("reshape", _view, torch.reshape, methods=("reshape",), impl=torch.Tensor.reshape, tags={Tag.VIEW})


def _view_as(a, other):
    return prims.reshape(a, other.shape)


_register("view_as", _view_as, torch.Tensor.view_as, methods=("view_as", "reshape_as"), tags={Tag.VIEW})


def _transpose(a, dim0, dim1):
    if a.ndim == 0:  # dims 0 and -1 name the tensor itself
        for d in (dim0, dim1):
            _dim(d, 0)
        return prims.transpose(a, ())
    perm = list(range(a.ndim))
    d0, d1 = _dim(dim0, a.ndim), _dim(dim1, a.ndim)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.transpose(a, tuple(perm))


transpose = _register("transpose", _transpose, torch.transpose, torch.swapaxes,
                      methods=("transpose", "swapaxes", "swapdims"), tags={Tag.VIEW})


def _t(a):
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


_register("t", _t, torch.t, methods=("t",), tags={Tag.VIEW})


def _permute(a, *dims):
    return prims.transpose(a, tuple(_dim(d, a.ndim) for d in shape_arg(dims)))


permute = _register("permute", _permute, torch.permute, methods=("permute",), impl=torch.Tensor.permute, tags={Tag.VIEW})


def _unsqueeze(a, dim):
    d = _dim(dim, a.ndim + 1)
    shape = list(a.shape)
    shape.insert(d, 1)
    return prims.reshape(a, tuple(shape))


unsqueeze = _register("unsqueeze", _unsqueeze, torch.unsqueeze, methods=("unsqueeze",), tags={Tag.VIEW})


def _squeeze(a, dim=None):
    if dim is None:
        dims = tuple(i for i, s in enumerate(a.shape) if s == 1)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(sorted({_dim(d, a.ndim) for d in dims if a.ndim and a.shape[_dim(d, a.ndim)] == 1}))
    return prims.squeeze(a, dims)


_register("squeeze", _squeeze, torch.squeeze, methods=("squeeze",), tags={Tag.VIEW})


def _flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return prims.reshape(a, (1,))
    s, e = _dim(start_dim, a.ndim), _dim(end_dim, a.ndim)
    shape = a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:]
    return prims.reshape(a, shape)


_register("flatten", _flatten, torch.flatten, methods=("flatten",), tags={Tag.VIEW})


def _unflatten(a, dim, sizes):
    d = _dim(dim, a.ndim)
    inner = _infer(prims_like(a.shape[d]), sizes)
    return prims.reshape(a, a.shape[:d] + inner + a.shape[d + 1:])


class prims_like:  # a stand-in with numel() for _infer
    def __init__(self, n):
        self.n, self.shape = n, (n,)

    def numel(self):
        return self.n


_register("unflatten", _unflatten, torch.unflatten, methods=("unflatten",), tags={Tag.VIEW})


def _expand(a, *shape):
    shape = list(shape_arg(shape))
    offset = len(shape) - a.ndim
    if offset < 0:
        raise TraceError(f"expand: cannot expand {list(a.shape)} to fewer dimensions {shape}")
    for i, s in enumerate(shape):
        if s == -1:
            if i < offset:
                raise TraceError(f"expand: -1 is not allowed for new leading dimension {i}")
            shape[i] = a.shape[i - offset]
    return prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, len(shape))))


expand = _register("expand", _expand, torch.Tensor.expand, methods=("expand",), tags={Tag.VIEW})


def _expand_as(a, other):
    return _expand(a, other.shape)


_register("expand_as", _expand_as, torch.Tensor.expand_as, methods=("expand_as",), tags={Tag.VIEW})


def _broadcast_to(a, shape):
    return _expand(a, tuple(shape))


_register("broadcast_to", _broadcast_to, torch.broadcast_to, methods=("broadcast_to",), tags={Tag.VIEW})


def _slice_dim(a, dim, start, stop, step=1):
    starts, ends, steps = [0] * a.ndim, list(a.shape), [1] * a.ndim
    starts[dim], ends[dim], steps[dim] = start, stop, step
    return prims.slice(a, tuple(starts), tuple(ends), tuple(steps))


def _split(a, split_size_or_sections, dim=0):
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        sizes = [min(size, n - i) for i in range(0, n, size)] if size else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise TraceError(f"split: sections {sizes} do not add up to {n}, the size of dimension {d}")
    outs, start = [], 0
    for s in sizes:
        outs.append(_slice_dim(a, d, start, start + s))
        start += s
    return tuple(outs)


split = _register("split", _split, torch.split, methods=("split",), tags={Tag.VIEW})


def _split_with_sizes(a, split_sizes, dim=0):
    return _split(a, list(split_sizes), dim)


_register("split_with_sizes", _split_with_sizes, torch.Tensor.split_with_sizes, methods=("split_with_sizes",), tags={Tag.VIEW})


def _chunk(a, chunks, dim=0):
    d = _dim(dim, a.ndim)
    size = math.ceil(a.shape[d] / chunks) if a.shape[d] else 1
    return _split(a, size, d)


_register("chunk", _chunk, torch.chunk, methods=("chunk",), tags={Tag.VIEW})


def _unbind(a, dim=0):
    d = _dim(dim, a.ndim)
    return tuple(prims.squeeze(_slice_dim(a, d, i, i + 1), (d,)) for i in range(a.shape[d]))


_register("unbind", _unbind, torch.unbind, methods=("unbind",), tags={Tag.VIEW})


def _narrow(a, dim, start, length):
    d = _dim(dim, a.ndim)
    if _is_t(start):  # a 0-d index tensor: gather the positions start, ..., start + length - 1
        from .torch_ops import add, lt, where

        start = where(lt(start, 0), add(start, a.shape[d]), start)
        positions = add(prims.iota(length, start=0, step=1, dtype=start.dtype, device=a.device), start)
        return prims.take(a, positions, d)
    start = start % a.shape[d] if start < 0 else start
    return _slice_dim(a, d, start, start + length)


_register("narrow", _narrow, torch.narrow, methods=("narrow",), tags={Tag.VIEW})


def _select(a, dim, index):
    d = _dim(dim, a.ndim)
    i = index % a.shape[d] if index < 0 else index
    if not 0 <= i < a.shape[d]:
        raise TraceError(f"select: index {index} is out of range for dimension {d} of size {a.shape[d]}")
    return prims.squeeze(_slice_dim(a, d, i, i + 1), (d,))


_register("select", _select, torch.select, methods=("select",), tags={Tag.VIEW})


def _cat(tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    from .torch_ops import _promote

    _, dtype = _promote(*tensors)
    d = _dim(dim, tensors[0].ndim)
    return prims.cat([_convert(t, dtype) for t in tensors], d)


cat = _register("cat", _cat, torch.cat, torch.concat, torch.concatenate)


def _stack(tensors, dim=0):
    d = _dim(dim, tensors[0].ndim + 1)
    return _cat([_unsqueeze(t, d) for t in tensors], d)


_register("stack", _stack, torch.stack)


def _flip(a, dims):
    dims = (dims,) if isinstance(dims, int) else dims
    return prims.flip(a, tuple(_dim(d, a.ndim) for d in dims))


_register("flip", _flip, torch.flip, methods=("flip",))


def _roll(a, shifts, dims=None):
    if dims is None:
        return prims.reshape(_roll(prims.reshape(a, (a.numel(),)), shifts, 0), a.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = a
    for s, d in zip(shifts, dims):
        d = _dim(d, a.ndim)
        n = a.shape[d]
        s = s % n if n else 0
        if s == 0:
            out = prims.convert_element_type(out, out.dtype) if out is a else out
            continue
        out = prims.cat([_slice_dim(out, d, n - s, n), _slice_dim(out, d, 0, n - s)], d)
    return out


_register("roll", _roll, torch.roll, methods=("roll",))


def _repeat(a, *sizes):
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


_register("repeat", _repeat, torch.Tensor.repeat, methods=("repeat",))


def _index_select(a, dim, index):
    d = _dim(dim, a.ndim)
    return prims.take(a, index, d) if a.ndim else prims.reshape(prims.take(prims.reshape(a, (1,)), index, 0), ())


_register("index_select", _index_select, torch.index_select, methods=("index_select",))


def _gather(a, dim, index, *, sparse_grad=False):
    return prims.gather(a, _dim(dim, a.ndim), index)


_register("gather", _gather, torch.gather, methods=("gather",))


def _tri(a, diagonal, upper):
    rows, cols = a.shape[-2], a.shape[-1]
    r = prims.iota(rows, start=0, step=1, dtype=torch.int64, device=a.device)
    c = prims.iota(cols, start=0, step=1, dtype=torch.int64, device=a.device)
    r = prims.broadcast_in_dim(r, (rows, cols), (0,))
    c = prims.broadcast_in_dim(c, (rows, cols), (1,))
    diff = prims.sub(c, r)
    keep = prims.ge(diff, prims.full((rows, cols), diagonal, dtype=torch.int64, device=a.device)) if upper else \
        prims.le(diff, prims.full((rows, cols), diagonal, dtype=torch.int64, device=a.device))
    keep = broadcast_to_shape(keep, a.shape)
    zero = prims.full(a.shape, 0, dtype=a.dtype, device=a.device)
    return prims.where(keep, a, zero)


def _tril(a, diagonal=0):
    return _tri(a, diagonal, False)


def _triu(a, diagonal=0):
    return _tri(a, diagonal, True)


_register("tril", _tril, torch.tril, methods=("tril",))
_register("triu", _triu, torch.triu, methods=("triu",))


# -- indexing ------------------------------------------------------------------------------
index = opaque_symbol("index", impl=operator.getitem)
globals()["index"] = index


def _getitem(a, key):
    if not isinstance(key, tuple):
        key = (key,)
    if any(_is_t(k) or isinstance(k, (list, bool)) for k in key):
        return _advanced(a, key)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > a.ndim:
        raise TraceError(f"getitem: too many indices ({n_real}) for a tensor with {a.ndim} dimensions")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (a.ndim - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (a.ndim - n_real)
    starts, ends, steps = [], [], []
    dim = 0
    for k in key:
        if k is None:
            continue
        n = a.shape[dim]
        if isinstance(k, int):
            i = k + n if k < 0 else k
            if not 0 <= i < n:
                raise TraceError(f"getitem: index {k} is out of range for dimension {dim} of size {n}")
            starts.append(i), ends.append(i + 1), steps.append(1)
        elif isinstance(k, slice):
            s, e, st = k.indices(n)
            if st <= 0:
                raise TraceError(f"getitem: slice step must be positive, got {k.step}")
            e = max(e, s)
            starts.append(s), ends.append(e), steps.append(st)
        else:
            raise TraceError(f"getitem: unsupported index {k!r}; valid: int, slice, None, ..., tensor")
        dim += 1
    out = prims.slice(a, tuple(starts), tuple(ends), tuple(steps))
    # final shape: drop integer-indexed dims, insert None dims
    shape, dim = [], 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        if not isinstance(k, int):
            shape.append(out.shape[dim])
        dim += 1
    return prims.reshape(out, tuple(shape))


def _advanced(a, key):
    tensors = [k for k in key if _is_t(k)]
    if len(key) == 1 and len(tensors) == 1 and not tensors[0].dtype.is_floating_point and tensors[0].dtype != torch.bool:
        return prims.take(a, tensors[0], 0)
    return index(a, key)


getitem = _register("getitem", _getitem, operator.getitem, methods=("__getitem__",), impl=operator.getitem, tags={Tag.VIEW})
