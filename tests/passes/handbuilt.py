"""Traces built by hand, for testing one pass without TorchDynamo or the runtime."""
from __future__ import annotations

import torch

from thunderlab.core.program import Program
from thunderlab.core.trace import Trace


def build(fn, *inputs: tuple, name: str = "forward") -> Trace:
    """The trace of ``fn`` called on proxies; each input is (name, shape) or (name, shape, requires_grad)."""
    t = Trace(name)
    t.inputs = [t.proxy(spec[1], torch.float32, "cpu", requires_grad=spec[2] if len(spec) > 2 else False, name=spec[0])
                for spec in inputs]
    with t.active():
        t.output = fn(*t.inputs)
    return t


def program(fn, *inputs) -> Program:
    return Program({"forward": build(fn, *inputs)})


def names(trace: Trace) -> list[str]:
    """The symbols a trace calls, in order (bookkeeping left out)."""
    return [b.sym.name for b in trace.bound_symbols if not b.sym.bookkeeping]


def tensors(trace: Trace, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g) for p in trace.inputs]
