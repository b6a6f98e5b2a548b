"""Connecting a forward/backward program to PyTorch autograd."""
from __future__ import annotations

import torch

from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import tree_flatten
from thunderlab.executors.base import bind


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


def training_callable(program: Program, *, regions: dict | None = None, options: dict | None = None):
    """A function running ``program``'s forward under autograd, with its backward as the gradient."""
    fw_trace, bw_trace = program.forward, program.traces["backward"]
    fw = bind(fw_trace, regions=regions, options=options)
    bw = bind(bw_trace, regions=regions, options=options)
    structure = fw_trace.output[0]
    leaves = [p for p in tree_flatten(structure) if isinstance(p, TensorProxy)]
    position = {}
    for i, p in enumerate(leaves):
        position.setdefault(p.name, []).append(i)
    grad_of = bw_trace.meta["grad_of"]
    tensor_slots = [i for i, p in enumerate(fw_trace.inputs) if isinstance(p, TensorProxy)]
    n_inputs = len(fw_trace.inputs)

    class ThunderlabFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            out, saved = fw(*args)
            ctx.save_for_backward(*saved)
            flat = [v for v in tree_flatten(out) if isinstance(v, torch.Tensor)]
            ctx.mark_non_differentiable(*[v for v in flat if not (v.dtype.is_floating_point or v.dtype.is_complex)])
            return tuple(flat)

        @staticmethod
        def backward(ctx, *grads):
            gs = []
            for name in grad_of:
                idx = position[name]
                g = grads[idx[0]]
                for j in idx[1:]:
                    g = g + grads[j]
                gs.append(g.contiguous())
            result = bw(*ctx.saved_tensors, *gs)
            out = [None] * n_inputs
            for slot, g in zip(tensor_slots, result):
                out[slot] = g
            return tuple(out)

    def run(*args):
        return _rebuild(structure, ThunderlabFunction.apply(*args))

    return run
