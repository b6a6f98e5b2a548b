"""The torch.compile backend "thunderlab": each FX graph from TorchDynamo becomes a CompiledGraph.

Graph breaks, guards and recompiles are Dynamo's; each captured graph gets its own
CompiledGraph and its own records. Symbolic sizes are specialized per call: the graph is
lowered for the concrete sizes it is called with and cached by them.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Callable

import torch

from thunderlab.runtime.compiled import CompiledGraph, Options

from .fx import lower, value_inputs

_graph_ids = itertools.count()


class Backend:
    """A torch.compile backend with thunderlab options; it remembers the graphs it compiled."""

    def __init__(self, options: Options | None = None, name: str | None = None):
        self.options = options or Options()
        self.name = name
        self.graphs: list[CompiledGraph] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        index = next(_graph_ids)
        name = self.name or getattr(gm, "_thunderlab_name", None) or f"graph{index}"
        if self.graphs:
            name = f"{name}[{len(self.graphs)}]"
        values = value_inputs(gm)
        graph = CompiledGraph(lambda args: lower(gm, args), self.options, name=name, graph_index=index, eager=gm.forward,
                              static=not values and _static(gm), value_inputs=values)
        self.graphs.append(graph)
        return graph


class BackendLink:
    """What ``torch.compile`` is given for a Backend: a small callable that refers to it weakly.

    TorchDynamo keeps every backend it is given until ``torch._dynamo.reset()``; given the
    Backend itself, it would keep every graph and record of every function ever compiled.
    """

    __slots__ = ("_ref", "__weakref__")

    def __init__(self, backend: Backend):
        self._ref = weakref.ref(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs) -> Callable:
        backend = self._ref()
        if backend is None:
            raise RuntimeError("the thunderlab.jit function this graph belongs to was freed; compile again with thunderlab.jit")
        return backend(gm, example_inputs)

    @property
    def graphs(self) -> list[CompiledGraph]:
        backend = self._ref()
        return backend.graphs if backend is not None else []


def _static(gm: torch.fx.GraphModule) -> bool:
    """Whether Dynamo captured ``gm`` with static shapes: only tensor inputs, none with a symbolic size."""
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            v = node.meta.get("example_value")
            if not isinstance(v, torch.Tensor) or any(not isinstance(s, int) for s in v.shape):
                return False
    return True


_default_backend = Backend()


def thunderlab_backend(gm: torch.fx.GraphModule, example_inputs):
    """``torch.compile(model, backend="thunderlab")``: compile with the default pipeline."""
    return _default_backend(gm, example_inputs)


def register() -> None:
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "thunderlab" not in _BACKENDS:
        register_backend(thunderlab_backend, name="thunderlab")
