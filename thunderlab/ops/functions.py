"""``torch.autograd.Function`` subclasses: one call whose gradient is the backward the class defines.

TorchDynamo captures ``MyFunction.apply(x)`` as ``higher_order.autograd_function_apply(fwd, bwd, x,
...)``, where ``fwd`` and ``bwd`` are graph modules of the class's forward and backward (forward
returns its outputs and the values it saved; backward takes the output gradients, then the saved
values). PyTorch's own implementation of that call runs both graphs node by node through
``torch.fx.Interpreter`` inside a fresh ``autograd.Function``, and differentiating it as an opaque
call would run the forward a second time in backward, under autograd, to reach the class's backward.

Here the call is ``ltorch.autograd_function``, whose decomposition is one ``autograd_function_forward``
returning the outputs and the saved values; its derivative rule calls the backward graph on the
output gradients and those saved values, as ``autograd.Function`` does: the forward runs once and
both graphs run as the Python code they were generated as. The class's backward is used as
written, never the derivative of its forward (they may differ on purpose: straight-through
estimators, clipped or rescaled gradients).

A function that writes into its inputs (``ctx.mark_dirty``), marks outputs non-differentiable, or
returns or saves values that are not tensors is kept whole and differentiated by PyTorch's
autograd, as any opaque call is.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Tag

from . import creation, prims
from .declare import backward_symbol, torchsymbol
from .rules import derivative

_APPLY = torch.ops.higher_order.autograd_function_apply


def _run(graph, *args):
    """A captured forward or backward graph called as ``autograd.Function`` calls them: with grad off, and the
    caller's grad mode back afterwards (the graphs switch it off and on themselves)."""
    with torch.no_grad():
        return graph(*args)


def _meta(v):
    return v.meta_tensor().requires_grad_(False) if isinstance(v, TensorProxy) else v


def _apply_impl(fwd, bwd, *args, **kwargs):
    """The whole call on tensors: PyTorch's own where a gradient must flow through its autograd, else the forward."""
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return _APPLY(fwd, bwd, *args, **kwargs)
    return _run(fwd, *args)[0]


def _forward_impl(fwd, bwd, args):
    out, saved = _run(fwd, *args)
    return out, tuple(saved)


def _forward_meta(fwd, bwd, args):
    out, saved = _run(fwd, *[_meta(a) for a in args])
    tensors = [a for a in args if isinstance(a, TensorProxy)]

    def proxy(t):
        return prims.new_proxy(t.shape, t.dtype, tensors[0].device, tensors)

    return tree_map(proxy, out), tuple(proxy(t) for t in saved)


# kept for backward, never computed again there: the class saved what its backward reads, and its forward's cost
# is unknown here (it may even draw random numbers)
autograd_function_forward = backward_symbol("autograd_function_forward", _forward_impl, _forward_meta,
                                            tags={Tag.DONT_RECOMPUTE})


def _backward_impl(bwd, grads, saved):
    return tuple(_run(bwd, *grads, *saved))


def _backward_meta(bwd, grads, saved):
    tensors = [t for t in (*grads, *saved) if isinstance(t, TensorProxy)]
    got = _run(bwd, *[_meta(t) for t in (*grads, *saved)])
    return tuple(prims.new_proxy(t.shape, t.dtype, tensors[0].device) if isinstance(t, torch.Tensor) else None
                 for t in got)


autograd_function_backward = backward_symbol("autograd_function_backward", _backward_impl, _backward_meta)


def _only_tensors(values) -> bool:
    leaves, _ = tree_flatten(values)
    return bool(leaves) and all(isinstance(v, torch.Tensor) for v in leaves)


@torchsymbol(_APPLY, impl=_apply_impl)
def autograd_function(fwd, bwd, *args, non_differentiable_idx=(), saved_for_backward_idx=(), dirty_idx=()):
    if dirty_idx or non_differentiable_idx or not any(isinstance(a, TensorProxy) for a in args):
        return NotImplemented  # outputs that alias inputs or take no gradient: PyTorch's autograd tracks them
    out, saved = _run(fwd, *[_meta(a) for a in args])
    if not _only_tensors(out) or not all(isinstance(t, torch.Tensor) for t in saved):
        return NotImplemented
    out, _saved = autograd_function_forward(fwd, bwd, args)
    return out


@derivative(autograd_function_forward)
def _(b, g):
    _fwd, bwd, args = b.args
    outs, _ = tree_flatten(b.output[0])
    saved = b.output[1]
    gs = tuple(g)[:len(outs)] if isinstance(g, tuple) else (g,)
    # autograd.Function hands its backward zeros for the outputs that got no gradient (it materializes them)
    gs = tuple(creation.zeros_like(o) if gr is None else gr for o, gr in zip(outs, gs))
    got = autograd_function_backward(bwd, gs, saved)
    return [(a, gr) for a, gr in zip(args, got) if isinstance(a, TensorProxy) and gr is not None]
