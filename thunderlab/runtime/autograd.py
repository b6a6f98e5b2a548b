"""Connecting a forward/backward program to PyTorch autograd."""
from __future__ import annotations

from dataclasses import replace

import torch

from thunderlab.core import fastpaths
from thunderlab.core.amp import without_autocast
from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import tree_flatten
from thunderlab.executors.base import RunOptions, bind
from thunderlab.executors.region import PENDING, start_pending

_functorch_active = torch._C._are_functorch_transforms_active


def _rebuild(structure, values):
    """``structure`` with each proxy replaced by the next value (other leaves kept)."""
    it = iter(values)

    def walk(s):
        if isinstance(s, tuple):
            return tuple(walk(e) for e in s)
        if isinstance(s, list):
            return [walk(e) for e in s]
        if isinstance(s, TensorProxy):
            return next(it)
        return s

    return walk(structure)


class _Plan:
    """What one compiled training program's calls need (see ``training_callable``): the bound forward and
    backward, and where outputs, gradients and inputs go."""

    __slots__ = ("fw", "bw", "flat", "non_diff", "grad_slots", "tensor_slots", "n_inputs", "dense", "single",
                 "rewritten")

    def __init__(self, fw, bw, flat, non_diff, grad_slots, tensor_slots, n_inputs, dense, single, rewritten):
        self.fw, self.bw, self.flat, self.non_diff = fw, bw, flat, non_diff
        self.grad_slots, self.tensor_slots, self.n_inputs, self.dense = grad_slots, tensor_slots, n_inputs, dense
        self.single, self.rewritten = single, rewritten


class ProgramFunction(torch.autograd.Function):
    """A training program under autograd: forward runs the plan's forward trace, backward its backward trace.

    One class serves every compiled program (each call passes its ``_Plan`` first): a class per program
    would cost each compiled function a type object, its autograd node class and their caches.
    """

    @staticmethod
    def forward(ctx, plan, *args):
        ctx.plan = plan
        out, saved = plan.fw(*args)
        if plan.rewritten:
            before = [args[i] for i in plan.rewritten]
            saved = [s.clone() if any(torch._C._is_alias_of(s, b) for b in before) else s for s in saved]
        ctx.save_for_backward(*saved)
        values = out if plan.flat else tuple(v for v in tree_flatten(out) if isinstance(v, torch.Tensor))
        if plan.non_diff:
            ctx.mark_non_differentiable(*[values[i] for i in plan.non_diff])
        return values

    @staticmethod
    def backward(ctx, *grads):
        plan = ctx.plan
        if plan.single is not None:  # one gradient, from an output returned once: the common case, kept short
            inputs = [*ctx.saved_tensors, grads[plan.single].contiguous()]
        else:
            gs = []
            for idx in plan.grad_slots:  # an output returned more than once gets the sum of its gradients
                g = grads[idx[0]]
                for j in idx[1:]:
                    g = g + grads[j]
                gs.append(g.contiguous())
            inputs = [*ctx.saved_tensors, *gs]
            del gs
        del grads
        ctx.maybe_clear_saved_tensors()  # drops ctx's references; a no-op under retain_graph=True
        result = plan.bw(inputs)
        if PENDING:  # the backward's regions that ran for the first time: their kernels compile from now on, not
            start_pending()  # at the next call of the function (a notebook's next cell, or never)
        if plan.dense:
            return (None, *result)  # None: the plan's own gradient
        out = [None] * (1 + plan.n_inputs)
        for slot, g in zip(plan.tensor_slots, result):
            out[1 + slot] = g
        return tuple(out)


# autograd.Function.apply's Python layer only adds functorch's checks; outside a functorch
# transform the C++ apply under it does the same work, a few microseconds sooner
_fast_apply = super(torch.autograd.Function, ProgramFunction).apply


def training_callable(program: Program, *, regions: dict | None = None, options: RunOptions | None = None,
                      autocast_off=(), recorded_writes: tuple[int, ...] = (), communication=None):
    """A function running ``program``'s forward under autograd, with its backward as the gradient.

    ``autocast_off``: device types whose autocast is turned off while either program runs (the backward
    too: ``loss.backward()`` may be called inside the autocast block). ``recorded_writes``: the inputs the
    caller writes after the call (``Boundary.recorded_writes``).
    """
    fw_trace, bw_trace = program.forward, program.traces["backward"]
    # inside autograd.Function.forward nothing records a graph whatever the grad mode; the
    # program's own grad-mode regions are already honoured by its backward trace
    options = replace(options or RunOptions(), in_autograd_function=True)
    fw = bind(fw_trace, regions=regions, options=options, communication=communication)
    # the backward takes its inputs as one list it empties, so that each saved tensor is freed after
    # its last use, as eager autograd frees a node's saved tensors once the node has run
    bw = bind(bw_trace, regions=regions, options=options, packed=True, communication=communication)
    if autocast_off:
        bw = without_autocast(bw, autocast_off)
    structure = fw_trace.output[0]
    leaves = [p for p in tree_flatten(structure) if isinstance(p, TensorProxy)]
    position = {}
    for i, p in enumerate(leaves):
        position.setdefault(p.name, []).append(i)
    # everything below is decided here, once, from the traces' metadata: a call only moves tensors
    flat = isinstance(structure, tuple) and all(isinstance(e, TensorProxy) for e in structure)  # a tuple of tensors
    # outputs backward takes no gradient for do not require grad, as in eager: integers, values made under
    # no_grad or detached, and values that depend on no input that requires grad (a fresh random draw)
    differentiated = set(program.training.grad_of)
    non_diff = [i for i, p in enumerate(leaves)
                if not (p.dtype.is_floating_point or p.dtype.is_complex) or p.name not in differentiated]
    grad_slots = [position[name] for name in program.training.grad_of]
    tensor_slots = [i for i, p in enumerate(fw_trace.inputs) if isinstance(p, TensorProxy)]
    n_inputs = len(fw_trace.inputs)
    dense = tensor_slots == list(range(n_inputs))  # every input is a tensor: gradients need no placing
    single = grad_slots[0][0] if len(grad_slots) == 1 and len(grad_slots[0]) == 1 else None
    # inputs the caller writes after the call (see Functionalizer.finish): backward keeps their values as they were
    rewritten = recorded_writes

    plan = _Plan(fw, bw, flat, non_diff, grad_slots, tensor_slots, n_inputs, dense, single, rewritten)

    def apply(*args):
        if _functorch_active() or not fastpaths.enabled():
            return ProgramFunction.apply(plan, *args)
        return _fast_apply(plan, *args)

    if flat:
        return apply

    def run(*args):
        return _rebuild(structure, apply(*args))

    return run
