"""Views: ops that only re-describe their input's memory (shape, strides, a slice of it).

Each is declared with ``Tag.VIEW``, which is all the passes need to know: ``remat`` recomputes
views freely, the frontend follows writes through them, and executors see them as such. Their
derivatives sit beside them.
"""
from __future__ import annotations

import math
import operator

import torch

from thunderlab.core.symbols import Tag
from thunderlab.core.trace import TraceError

from . import prims
from .common import canonical_dim, is_tensor, shape_arg, sum_to
from .creation import zeros_like
from .declare import backward_symbol, opaque_symbol, torchsymbol
from .elementwise import add, lt, where
from .rules import derivative
from .shape import cat, slice_dim

VIEW = {Tag.VIEW}


def _infer(numel: int, sizes, what=None):
    """``sizes`` with its -1 (if any) worked out for ``numel`` elements."""
    shape = list(sizes)
    if shape.count(-1) > 1:
        raise TraceError(f"view/reshape: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise TraceError(f"view/reshape: shape {shape} is invalid for {what or [numel]} ({numel} elements)")
        shape[shape.index(-1)] = numel // known
    if math.prod(shape) != numel:
        raise TraceError(f"view/reshape: shape {shape} is invalid for {what or [numel]} ({numel} elements)")
    return tuple(shape)


def _reshape(a, *shape):
    return prims.reshape(a, _infer(a.numel(), shape_arg(shape), list(a.shape)))


view = torchsymbol(torch.Tensor.view, name="view", methods=("view",), tags=VIEW)(_reshape)
reshape = torchsymbol(torch.reshape, name="reshape", methods=("reshape",), impl=torch.Tensor.reshape, tags=VIEW)(
    _reshape
)


@torchsymbol(torch.Tensor.view_as, methods=("view_as", "reshape_as"), tags=VIEW)
def view_as(a, other):
    return prims.reshape(a, other.shape)


@torchsymbol(torch.unsqueeze, methods=("unsqueeze",), tags=VIEW)
def unsqueeze(a, dim):
    d = canonical_dim(dim, a.ndim + 1)
    shape = list(a.shape)
    shape.insert(d, 1)
    return prims.reshape(a, tuple(shape))


@torchsymbol(torch.squeeze, methods=("squeeze",), tags=VIEW)
def squeeze(a, dim=None):
    if dim is None:
        dims = tuple(i for i, s in enumerate(a.shape) if s == 1)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(
            sorted({canonical_dim(d, a.ndim) for d in dims if a.ndim and a.shape[canonical_dim(d, a.ndim)] == 1})
        )
    return prims.squeeze(a, dims)


@torchsymbol(torch.flatten, methods=("flatten",), tags=VIEW)
def flatten(a, start_dim=0, end_dim=-1):
    if a.ndim == 0:
        return prims.reshape(a, (1,))
    s, e = canonical_dim(start_dim, a.ndim), canonical_dim(end_dim, a.ndim)
    shape = a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:]
    return prims.reshape(a, shape)


@torchsymbol(torch.unflatten, methods=("unflatten",), tags=VIEW)
def unflatten(a, dim, sizes):
    d = canonical_dim(dim, a.ndim)
    inner = _infer(a.shape[d], sizes, [a.shape[d]])
    return prims.reshape(a, a.shape[:d] + inner + a.shape[d + 1:])


@derivative(view, reshape, flatten, unsqueeze, squeeze, view_as, unflatten)
def _(b, g):
    a = b.params.a
    return [(a, reshape(g, a.shape))]


# -- permutations ----------------------------------------------------------------------------
@torchsymbol(torch.transpose, torch.swapaxes, methods=("transpose", "swapaxes", "swapdims"), tags=VIEW)
def transpose(a, dim0, dim1):
    if a.ndim == 0:  # dims 0 and -1 name the tensor itself
        for d in (dim0, dim1):
            canonical_dim(d, 0)
        return prims.transpose(a, ())
    perm = list(range(a.ndim))
    d0, d1 = canonical_dim(dim0, a.ndim), canonical_dim(dim1, a.ndim)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.transpose(a, tuple(perm))


@derivative(transpose)
def _(b, g):
    return [(b.params.a, transpose(g, b.params.dim0, b.params.dim1))]


@torchsymbol(torch.t, methods=("t",), tags=VIEW)
def t(a):
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


# ``x.T`` and friends are properties: TorchDynamo captures them as ``getattr(x, "T")``, which the frontend
# records as this call (a real tensor's conjugate is the tensor itself, so ``H`` and ``mH`` are transposes too)
TRANSPOSING_ATTRIBUTES = ("T", "mT", "H", "mH")


@torchsymbol(name="tensor_attribute", impl=getattr, tags=VIEW)
def tensor_attribute(a, name):
    if name in ("H", "mH") and a.dtype.is_complex:
        return NotImplemented  # a conjugate view: kept whole
    if name in ("T", "H"):
        return prims.transpose(a, tuple(reversed(range(a.ndim))))
    if name in ("mT", "mH") and a.ndim >= 2:
        return transpose(a, -2, -1)
    return NotImplemented  # PyTorch's own error, from the call kept whole


@torchsymbol(torch.permute, methods=("permute",), impl=torch.Tensor.permute, tags=VIEW)
def permute(a, *dims):
    return prims.transpose(a, tuple(canonical_dim(d, a.ndim) for d in shape_arg(dims)))


@derivative(permute)
def _(b, g):
    a = b.params.a
    dims = [d % a.ndim for d in shape_arg(b.params.dims)]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return [(a, permute(g, tuple(inv)))]


# -- broadcasting ----------------------------------------------------------------------------
def _expand(a, shape):
    shape = list(shape)
    offset = len(shape) - a.ndim
    if offset < 0:
        raise TraceError(f"expand: cannot expand {list(a.shape)} to fewer dimensions {shape}")
    for i, s in enumerate(shape):
        if s == -1:
            if i < offset:
                raise TraceError(f"expand: -1 is not allowed for new leading dimension {i}")
            shape[i] = a.shape[i - offset]
    return prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, len(shape))))


@torchsymbol(torch.Tensor.expand, methods=("expand",), tags=VIEW)
def expand(a, *shape):
    return _expand(a, shape_arg(shape))


@torchsymbol(torch.Tensor.expand_as, methods=("expand_as",), tags=VIEW)
def expand_as(a, other):
    return _expand(a, other.shape)


@torchsymbol(torch.broadcast_to, methods=("broadcast_to",), tags=VIEW)
def broadcast_to(a, shape):
    return _expand(a, tuple(shape))


@derivative(expand, expand_as, broadcast_to)
def _(b, g):
    a = b.params.a
    return [(a, sum_to(g, a.shape))]


# -- pieces ----------------------------------------------------------------------------------
def _split(a, split_size_or_sections, dim):
    d = canonical_dim(dim, a.ndim)
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
        outs.append(slice_dim(a, d, start, start + s))
        start += s
    return tuple(outs)


@torchsymbol(torch.split, methods=("split",), tags=VIEW)
def split(a, split_size_or_sections, dim=0):
    return _split(a, split_size_or_sections, dim)


@torchsymbol(torch.Tensor.split_with_sizes, methods=("split_with_sizes",), tags=VIEW)
def split_with_sizes(a, split_sizes, dim=0):
    return _split(a, list(split_sizes), dim)


@torchsymbol(torch.chunk, methods=("chunk",), tags=VIEW)
def chunk(a, chunks, dim=0):
    d = canonical_dim(dim, a.ndim)
    size = math.ceil(a.shape[d] / chunks) if a.shape[d] else 1
    return _split(a, size, d)


@derivative(split, chunk, split_with_sizes)
def _(b, g):
    parts = [x if x is not None else zeros_like(o) for x, o in zip(g, b.output)]
    return [(b.params.a, cat(parts, b.params.dim))]


@torchsymbol(torch.unbind, methods=("unbind",), tags=VIEW)
def unbind(a, dim=0):
    d = canonical_dim(dim, a.ndim)
    return tuple(prims.squeeze(slice_dim(a, d, i, i + 1), (d,)) for i in range(a.shape[d]))


@torchsymbol(torch.narrow, methods=("narrow",), tags=VIEW)
def narrow(a, dim, start, length):
    d = canonical_dim(dim, a.ndim)
    if is_tensor(start):  # a 0-d index tensor: gather the positions start, ..., start + length - 1
        start = where(lt(start, 0), add(start, a.shape[d]), start)
        positions = add(prims.iota(length, start=0, step=1, dtype=start.dtype, device=a.device), start)
        return prims.take(a, positions, d)
    start = start % a.shape[d] if start < 0 else start
    return slice_dim(a, d, start, start + length)


@torchsymbol(torch.select, methods=("select",), tags=VIEW)
def select(a, dim, index):
    d = canonical_dim(dim, a.ndim)
    i = index % a.shape[d] if index < 0 else index
    if not 0 <= i < a.shape[d]:
        raise TraceError(f"select: index {index} is out of range for dimension {d} of size {a.shape[d]}")
    return prims.squeeze(slice_dim(a, d, i, i + 1), (d,))


# -- indexing ------------------------------------------------------------------------------
index = opaque_symbol("index", impl=operator.getitem, signature=lambda a, key: None)


def _advanced(a, key):
    tensors = [k for k in key if is_tensor(k)]
    if (
        len(key) == 1
        and len(tensors) == 1
        and not tensors[0].dtype.is_floating_point
        and tensors[0].dtype != torch.bool
    ):
        return prims.take(a, tensors[0], 0)
    return index(a, key)


def basic_index(key: tuple, shape) -> tuple[tuple, list[int], list[int], list[int]]:
    """A key of ints, slices, None and ``...`` on a tensor of ``shape``: the key with ``...`` and the trailing
    dimensions written out as full slices, and per dimension the start, end and step it takes."""
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > len(shape):
        raise TraceError(f"getitem: too many indices ({n_real}) for a tensor with {len(shape)} dimensions")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - n_real) + key[i + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - n_real)
    starts, ends, steps = [], [], []
    dim = 0
    for k in key:
        if k is None:
            continue
        n = shape[dim]
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
    return key, starts, ends, steps


@torchsymbol(operator.getitem, methods=("__getitem__",), impl=operator.getitem, tags=VIEW)
def getitem(a, key):
    if not isinstance(key, tuple):
        key = (key,)
    if any(is_tensor(k) or isinstance(k, (list, bool)) for k in key):
        return _advanced(a, key)
    key, starts, ends, steps = basic_index(key, a.shape)
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


def _getitem_backward(g, shape, key):
    out = torch.zeros(shape, dtype=g.dtype, device=g.device)
    out[key] = g
    return out


getitem_backward = backward_symbol("getitem_backward", _getitem_backward)


@derivative(getitem)
def _(b, g):
    a, key = b.params.a, b.params.key
    if any(is_tensor(k) or isinstance(k, list) for k in (key if isinstance(key, tuple) else (key,))):
        return NotImplemented  # advanced indexing can pick an element twice: the decomposition sums
    return [(a, getitem_backward(g, a.shape, key))]
