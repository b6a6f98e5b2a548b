"""Regions of a captured graph run as one opaque call: ``torch.autocast`` blocks and ``torch.vmap`` calls.

Inside ``torch.autocast`` every op picks its own dtype by rules PyTorch keeps per device and
version (ops on the lower-precision list cast their inputs, some run in float32, others
promote). Rather than restate those rules, the region between TorchDynamo's
``_enter_autocast`` and ``_exit_autocast`` becomes one call that runs the region's own graph
inside the same autocast context: its dtypes and values are eager's by construction, its
output metadata comes from running it on fake tensors (which autocast treats as the device
they stand for), and its gradient comes from PyTorch's autograd, as for any opaque call.

A ``torch.vmap`` (or ``torch.func.grad``) call reaches thunderlab as TorchDynamo's flattening of
it: the graph raises functorch's level (``_vmap_increment_nesting``), marks the batched (or
differentiated) inputs, runs the body on them, unmarks the outputs and lowers the level. Those
steps change functorch's global state and only mean something together, so the nodes from the
raise to the matching lowering become one call, which runs them as they were captured (batching
and differentiation are PyTorch's own).

A region that writes to a tensor from outside it, or returns a view of one, cannot be made
functional as a whole and is refused by name.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import Symbol, tree_flatten
from thunderlab.core.trace import TraceError, current_trace
from thunderlab.ops import mapping

from .functionalize import writes

ENTER = torch.amp.autocast_mode._enter_autocast
EXIT = torch.amp.autocast_mode._exit_autocast
# functorch's transforms as TorchDynamo captures them: each raises its level, and lowers it at the end.
# The raise -> (what the user called, the name its region prints as)
TRANSFORM_ENTER = {torch._functorch.predispatch._vmap_increment_nesting: ("torch.vmap", "vmap_region"),
                   torch._C._functorch._grad_increment_nesting: ("torch.func.grad (or vjp, jacrev)", "grad_region")}
TRANSFORM_EXIT = {torch._functorch.predispatch._vmap_decrement_nesting, torch._C._functorch._grad_decrement_nesting}


@dataclass
class GraphRegion:
    """Nodes of a captured graph that run as one call: an autocast block's, or one functorch transform's call."""

    enter: torch.fx.Node
    nodes: list[torch.fx.Node]
    end: int  # index of the exit node (autocast's, or the transform level's lowering) in the graph's node list
    inputs: list[torch.fx.Node]  # values from outside the region it reads
    outputs: list[torch.fx.Node]  # its values read after it

    @classmethod
    def autocast(cls, nodes: list[torch.fx.Node], start: int) -> GraphRegion:
        """The nodes strictly between an ``_enter_autocast`` and its ``_exit_autocast``."""
        enter = nodes[start]
        end = next((i for i in range(start + 1, len(nodes))
                    if nodes[i].target is EXIT and nodes[i].args and nodes[i].args[0] is enter), None)
        if end is None:
            raise TraceError("a torch.autocast region has no end in this graph; keep the whole `with` block in one "
                             "compiled function")
        return cls._of(enter, nodes[start + 1:end], end, "a torch.autocast region", inside={enter})

    @classmethod
    def _of(cls, enter, body: list[torch.fx.Node], end: int, what: str, inside=()) -> GraphRegion:
        """The region of ``body``: the outside values it reads, its values read after it; a write is refused."""
        for n in body:
            if writes(n):
                name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
                raise TraceError(f"in-place {name} inside {what} is not supported; "
                                 "write outside it (or use the out-of-place op)")
        inside = set(body) | set(inside)
        inputs = [a for a in dict.fromkeys(a for n in body for a in n.all_input_nodes) if a not in inside]
        outputs = [n for n in body if n.op != "get_attr" and any(u not in inside for u in n.users)]
        return cls(enter, body, end, inputs, outputs)

    def symbol(self, gm: torch.fx.GraphModule) -> Symbol:
        sub = self._graph(gm, "AutocastRegion")
        context = tuple(self.enter.args)

        def autocast_region(*args):
            with torch.amp.autocast(*context):
                return sub(*args)

        return mapping.derived(("autocast", sub), "autocast_region", autocast_region,
                               meta=_fake_meta(autocast_region, "a torch.autocast region"))

    def _graph(self, gm: torch.fx.GraphModule, name: str) -> torch.fx.GraphModule:
        """The region's nodes as a graph of their own: the outside values it reads in, those read after it out."""
        graph = torch.fx.Graph()
        env = {n: graph.placeholder(f"in_{i}") for i, n in enumerate(self.inputs)}
        for n in self.nodes:
            env[n] = graph.node_copy(n, lambda a: env[a])
        graph.output(tuple(env[n] for n in self.outputs))
        return torch.fx.GraphModule(gm, graph, class_name=name)

    @classmethod
    def transform(cls, nodes: list[torch.fx.Node], start: int) -> GraphRegion:
        """The nodes of one functorch transform's call, from the raise of its level to the matching lowering."""
        depth = 0
        for end in range(start, len(nodes)):
            target = nodes[end].target
            depth += (target in TRANSFORM_ENTER) - (target in TRANSFORM_EXIT)
            if depth == 0:
                break
        else:
            raise TraceError(f"a {TRANSFORM_ENTER[nodes[start].target][0]} call has no end in this graph; keep the "
                             "whole call in one compiled function")
        return cls._of(nodes[start], nodes[start:end + 1], end, f"a {TRANSFORM_ENTER[nodes[start].target][0]} call")

    def transform_symbol(self, gm: torch.fx.GraphModule) -> Symbol:
        sub = self._graph(gm, "TransformRegion")
        what, name = TRANSFORM_ENTER[self.enter.target]
        return mapping.derived(("transform", sub), name, sub, meta=_fake_meta(sub, f"a {what} call"))


def _fake_meta(fn, what: str):
    """Output proxies of ``fn`` from a run on fake tensors of the proxies' devices (autocast applies to them)."""
    def meta(*args):
        ins = [a for a in tree_flatten(args) if isinstance(a, TensorProxy)]
        with FakeTensorMode():
            fakes = {p.name: torch.empty(p.shape, dtype=p.dtype, device=p.device) for p in ins}
            out = fn(*[fakes[a.name] if isinstance(a, TensorProxy) else a for a in args])
            for o in out:
                if isinstance(o, torch.Tensor) and any(torch._C._is_alias_of(o, f) for f in fakes.values()):
                    raise TraceError(f"{what} returns a view of a tensor from outside it; "
                                     "return a copy (.clone()) or take the view after it")
        tr = current_trace()
        rg = any(p.requires_grad for p in ins)
        return tuple(tr.proxy(o.shape, o.dtype, o.device, rg and (o.dtype.is_floating_point or o.dtype.is_complex))
                     if isinstance(o, torch.Tensor) else o for o in out)

    return meta
