"""Loss functions: negative log-likelihood, cross entropy, mean squared error."""
from __future__ import annotations

import torch.nn.functional as F

from thunderlab.core.trace import TraceError

from . import prims
from .activations import log_softmax, softmax
from .common import convert
from .conversion import to
from .declare import torchsymbol
from .elementwise import div, eq, mul, ne, neg, sub, where
from .reductions import mean, sum_
from .rules import derivative


def _reduce(loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum_(loss)
    if reduction == "none":
        return loss
    raise TraceError(f"loss reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


@torchsymbol(F.nll_loss)
def nll_loss(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    if weight is not None or size_average is not None or reduce is not None or a.ndim not in (1, 2):
        return NotImplemented
    unbatched = a.ndim == 1
    if unbatched:
        a, target = prims.reshape(a, (1,) + a.shape), prims.reshape(target, (1,))
    valid = ne(target, ignore_index)
    safe = where(valid, target, 0)
    picked = prims.reshape(prims.gather(a, 1, prims.reshape(safe, (safe.shape[0], 1))), (safe.shape[0],))
    loss = where(valid, neg(picked), 0.0)
    if reduction == "none" and unbatched:
        return prims.reshape(loss, ())  # an unbatched input gives an unbatched loss
    if reduction == "mean":
        return div(sum_(loss), sum_(convert(valid, a.dtype)))
    return _reduce(loss, reduction)


@torchsymbol(F.cross_entropy)
def cross_entropy(a, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    if label_smoothing or target.dtype.is_floating_point or a.ndim not in (1, 2):
        return NotImplemented
    return nll_loss(log_softmax(a, -1 if a.ndim == 1 else 1), target, weight, size_average, ignore_index, reduce,
                    reduction)


@derivative(cross_entropy)
def _(b, g):
    p = b.params
    a, target = p.a, p.target
    if (p.weight is not None or p.label_smoothing or target.dtype.is_floating_point
            or a.ndim != 2 or p.size_average is not None or p.reduce is not None):
        return NotImplemented
    probs = softmax(a, 1)
    n, c = a.shape
    classes = prims.broadcast_in_dim(prims.iota(c, start=0, step=1, dtype=target.dtype, device=a.device), (n, c), (1,))
    onehot = eq(classes, prims.broadcast_in_dim(target, (n, c), (0,)))
    valid = ne(target, p.ignore_index)
    grad = where(onehot, sub(probs, 1.0), probs)
    grad = where(prims.broadcast_in_dim(valid, (n, c), (0,)), grad, 0.0)
    if p.reduction == "mean":
        gs = div(g, sum_(to(valid, a.dtype)))
    elif p.reduction == "sum":
        gs = g
    else:
        return [(a, mul(grad, prims.broadcast_in_dim(g, (n, c), (0,))))]
    return [(a, mul(grad, prims.broadcast_in_dim(gs, (n, c), ())))]


@torchsymbol(F.mse_loss)
def mse_loss(a, target, size_average=None, reduce=None, reduction="mean", weight=None):
    if size_average is not None or reduce is not None or weight is not None:
        return NotImplemented
    d = sub(a, target)
    return _reduce(mul(d, d), reduction)
