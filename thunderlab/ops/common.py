"""What torch-level decompositions and derivative rules share: dimensions, promotion, broadcasting.

These write prims into the current trace; every op family (``elementwise``, ``views``, ...)
builds on them.
"""
from __future__ import annotations

import builtins

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as Promotion
from torch._prims_common import elementwise_dtypes

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.trace import TraceError

from . import prims

__all__ = ["Promotion", "is_tensor", "canonical_dim", "dims_of", "shape_arg", "promote", "broadcast_to_shape",
           "broadcast", "convert", "elementwise", "keep_dims", "upcast", "sum_to", "expand_reduced",
           "matrix_transpose", "scatter_back"]


def is_tensor(x) -> bool:
    return isinstance(x, TensorProxy)


def canonical_dim(d: int, ndim: int) -> int:
    """``d`` in ``0..ndim-1`` (a 0-d tensor has dimensions -1 and 0, as in torch)."""
    n = builtins.max(ndim, 1)
    if not -n <= d < n:
        raise TraceError(f"dimension {d} is out of range for a tensor with {ndim} dimensions (valid: {-n}..{n - 1})")
    return d % n


def dims_of(a, dim) -> tuple[int, ...]:
    """The dimensions a reduction over ``dim`` covers (None or () meaning all), sorted."""
    if dim is None or dim == [] or dim == ():
        return tuple(range(a.ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted({canonical_dim(d, a.ndim) for d in dim}))


def shape_arg(size) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` alike: the sizes as one tuple."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        return tuple(size[0])
    return tuple(size)


# -- promotion and broadcasting ------------------------------------------------------------
def _stand_in(x):
    if is_tensor(x):
        return torch.empty(() if x.ndim == 0 else (1,), dtype=x.dtype, device="meta")
    return x


def promote(*args, kind=Promotion.DEFAULT):
    """(computation dtype, result dtype) of an elementwise op on ``args``, as torch promotes them."""
    vals = [_stand_in(a) for a in args if a is not None]
    return elementwise_dtypes(*vals, type_promotion_kind=kind)


def broadcast_to_shape(a, shape):
    shape = tuple(shape)
    if not is_tensor(a) or a.shape == shape:
        return a
    offset = len(shape) - a.ndim
    return prims.broadcast_in_dim(a, shape, tuple(range(offset, len(shape))))


def broadcast(*args):
    shapes = [a.shape for a in args if is_tensor(a)]
    try:
        shape = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        raise TraceError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from None
    return [broadcast_to_shape(a, shape) for a in args]


def convert(a, dtype):
    if is_tensor(a) and a.dtype != dtype:
        return prims.convert_element_type(a, dtype)
    return a


def elementwise(prim, *args, kind=Promotion.DEFAULT):
    """``prim`` on ``args`` promoted and broadcast as torch does, the result in torch's dtype."""
    comp, res = promote(*args, kind=kind)
    if not builtins.any(is_tensor(a) for a in args):  # numbers only (torch.add(2.0, 3.0)): a 0-d tensor results
        args = (prims.full((), args[0], dtype=comp, device=torch.device("cpu")),) + args[1:]
    args = broadcast(*args)
    out = prim(*[convert(a, comp) for a in args])
    return convert(out, res) if out.dtype != res and res != torch.bool else out


def keep_dims(out, a, dims):
    """A reduction of ``a`` over ``dims`` reshaped as with ``keepdim=True``."""
    shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape))
    return prims.reshape(out, shape)


def upcast(a):
    """Compute in float32 for half-precision inputs, as torch does."""
    return convert(a, torch.float32) if a.dtype in (torch.float16, torch.bfloat16) else a


# -- for derivative rules --------------------------------------------------------------------
def sum_to(g, shape):
    """Undo broadcasting: sum ``g`` down to ``shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
    out = prims.sum(g, dims) if dims else g
    return prims.reshape(out, shape)


def expand_reduced(v, shape, dims):
    """Broadcast a reduced value back over the reduced ``dims`` of ``shape``."""
    kept = tuple(i for i in range(len(shape)) if i not in dims)
    return prims.broadcast_in_dim(v, tuple(shape), kept)


def matrix_transpose(x):
    """``x.mT``: the last two dimensions swapped."""
    perm = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return prims.transpose(x, perm)


def scatter_back(a, dim, indices, g):
    """The gradient of picking ``indices`` along ``dim`` of ``a`` (topk, sort): ``g`` put back where it came from."""
    if a.ndim == 0:
        return g
    zero = prims.full(a.shape, 0.0, dtype=g.dtype, device=g.device)
    return prims.scatter_add(zero, dim, indices, g)
