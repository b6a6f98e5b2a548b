"""Autocast regions of a captured graph, run as one opaque call under the same ``torch.autocast``.

Inside ``torch.autocast`` every op picks its own dtype by rules PyTorch keeps per device and
version (ops on the lower-precision list cast their inputs, some run in float32, others
promote). Rather than restate those rules, the region between TorchDynamo's
``_enter_autocast`` and ``_exit_autocast`` becomes one call that runs the region's own graph
inside the same autocast context: its dtypes and values are eager's by construction, its
output metadata comes from running it on fake tensors (which autocast treats as the device
they stand for), and its gradient comes from PyTorch's autograd, as for any opaque call.

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


@dataclass
class AutocastRegion:
    """The nodes strictly between an ``_enter_autocast`` and its ``_exit_autocast``."""

    enter: torch.fx.Node
    nodes: list[torch.fx.Node]
    end: int  # index of the exit node in the graph's node list
    inputs: list[torch.fx.Node]  # values from outside the region it reads
    outputs: list[torch.fx.Node]  # its values read after it

    @classmethod
    def collect(cls, nodes: list[torch.fx.Node], start: int) -> AutocastRegion:
        enter = nodes[start]
        end = next((i for i in range(start + 1, len(nodes))
                    if nodes[i].target is EXIT and nodes[i].args and nodes[i].args[0] is enter), None)
        if end is None:
            raise TraceError("a torch.autocast region has no end in this graph; keep the whole `with` block in one "
                             "compiled function")
        body = nodes[start + 1:end]
        inside = set(body) | {enter}
        for n in body:
            if writes(n):
                name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
                raise TraceError(f"in-place {name} inside a torch.autocast region is not supported; "
                                 "write outside the region (or use the out-of-place op)")
        inputs: list[torch.fx.Node] = []
        for n in body:
            for a in n.all_input_nodes:
                if a not in inside and a not in inputs:
                    inputs.append(a)
        outputs = [n for n in body if n.op != "get_attr" and any(u not in inside for u in n.users)]
        return cls(enter, body, end, inputs, outputs)

    def symbol(self, gm: torch.fx.GraphModule) -> Symbol:
        graph = torch.fx.Graph()
        env = {n: graph.placeholder(f"in_{i}") for i, n in enumerate(self.inputs)}
        for n in self.nodes:
            env[n] = graph.node_copy(n, lambda a: env[a])
        graph.output(tuple(env[n] for n in self.outputs))
        sub = torch.fx.GraphModule(gm, graph, class_name="AutocastRegion")
        context = tuple(self.enter.args)

        def autocast_region(*args):
            with torch.amp.autocast(*context):
                return sub(*args)

        return mapping.derived(("autocast", sub), "autocast_region", autocast_region, meta=_fake_meta(autocast_region))


def _fake_meta(fn):
    """Output proxies of ``fn`` from a run on fake tensors of the proxies' devices (autocast applies to them)."""
    def meta(*args):
        ins = [a for a in tree_flatten(args) if isinstance(a, TensorProxy)]
        with FakeTensorMode():
            fakes = {p.name: torch.empty(p.shape, dtype=p.dtype, device=p.device) for p in ins}
            out = fn(*[fakes[a.name] if isinstance(a, TensorProxy) else a for a in args])
            for o in out:
                if isinstance(o, torch.Tensor) and any(torch._C._is_alias_of(o, f) for f in fakes.values()):
                    raise TraceError("a torch.autocast region returns a view of a tensor from outside it; "
                                     "return a copy (.clone()) or take the view after the region")
        tr = current_trace()
        rg = any(p.requires_grad for p in ins)
        return tuple(tr.proxy(o.shape, o.dtype, o.device, rg and (o.dtype.is_floating_point or o.dtype.is_complex))
                     if isinstance(o, torch.Tensor) else o for o in out)

    return meta
