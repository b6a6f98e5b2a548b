"""channels-last: run a program's 2-D convolutions on CPU in the channels-last memory layout.

oneDNN's CPU convolutions, forward and backward, are faster on channels-last (NHWC) tensors than on
PyTorch's default NCHW. TorchInductor converts the inside of one compiled graph; a thunderlab program is
several regions and, in training, a forward and a backward, so the layout is chosen here, in the program,
before autodiff: every executor (torch included) then runs the same layout, and the activations the
forward saves for the backward are channels-last already, with no conversion between the two.

The pass converts each convolution's input that is not channels-last yet with
``ltorch.contiguous(x, memory_format=torch.channels_last)`` (eager keeps the layout through pointwise
ops, batch norm, pooling and further convolutions, so one conversion at the network's input is the usual
result), turns ``view`` calls on tensors computed from converted ones into ``reshape`` (a view of an NHWC
tensor as NCHW-ordered sizes may be impossible; reshape copies where it must), and returns every 4-D tensor
computed from converted ones in the layout of the tensor the caller passed (``ltorch.layout_like``): contiguous
for a contiguous input, channels-last for a channels-last one, as eager returns them.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, tree_map
from thunderlab.core.trace import Trace
from thunderlab.ops import conversion, prims, views

from .base import Pass, PipelineError, register_pass

def _convolved(b: BoundSymbol) -> TensorProxy | None:
    """The input of a top-level call that a 2-D CPU convolution (not transposed) reads directly, else None."""
    inputs = {p.name for p in b.inputs}
    stack = [b]
    while stack:
        s = stack.pop()
        if s.sym is prims.convolution:
            a, transposed = s.args[0], s.params.transposed
            if (isinstance(a, TensorProxy) and a.name in inputs and a.ndim == 4 and not transposed
                    and torch.device(a.device).type == "cpu" and a.dtype.is_floating_point):
                return next(p for p in b.inputs if p.name == a.name)
            return None
        stack.extend(s.subsymbols)
    return None


def channels_last_trace(trace: Trace) -> Trace:
    if not any(_convolved(b) is not None for b in trace.bound_symbols):
        return trace
    work = trace.derive(bound_symbols=[])
    nhwc: set[str] = set()  # values computed from channels-last ones (eager keeps most of them channels-last)
    converted: dict[str, TensorProxy] = {}
    out: list[BoundSymbol] = []
    for b in trace.bound_symbols:
        a = _convolved(b)
        if a is not None and a.name not in nhwc:
            if a.name not in converted:
                with work.active(), work.source(b.source):
                    converted[a.name] = conversion.contiguous(a, memory_format=torch.channels_last)
                out.append(work.bound_symbols.pop())
                nhwc.add(converted[a.name].name)
            b = b.swap({a.name: converted[a.name]})
        if b.sym is views.view and any(p.name in nhwc for p in b.inputs):
            b = b.replace(sym=views.reshape)
        if any(p.name in nhwc for p in b.inputs):
            nhwc.update(p.name for p in b.outputs)
        out.append(b)
    back: dict[str, TensorProxy] = {}
    given = next(iter(converted))  # the layout the caller's tensor has is the layout eager returns
    given = next(p for p in trace.tensor_inputs() if p.name == given) if any(
        p.name == given for p in trace.tensor_inputs()) else None
    for p in trace.output_proxies():
        if p.name in nhwc and p.ndim == 4 and p.name not in back:
            with work.active():
                back[p.name] = conversion.layout_like(p, given) if given is not None else conversion.contiguous(p)
            out.append(work.bound_symbols.pop())
    output = tree_map(lambda v: back.get(v.name, v) if isinstance(v, TensorProxy) else v, trace.output)
    return work.derive(bound_symbols=out, output=output)  # work knows the names made here


@register_pass
@dataclass(frozen=True)
class ChannelsLast(Pass):
    """Run 2-D CPU convolutions in the channels-last memory layout, forward and backward.

    Before autodiff, each convolution input not channels-last yet is converted once; values computed from
    it stay channels-last in eager, so the saved activations and the backward's convolutions are too.
    Returned 4-D tensors come back in the layout of the caller's input, as eager returns them. For example::

        def forward(x, w1, w2):                    def forward(x, w1, w2):
            t0 = ltorch.conv2d(x, w1)       ->         t3 = ltorch.contiguous(x, memory_format=torch.channels_last)
            t1 = ltorch.relu(t0)                       t0 = ltorch.conv2d(t3, w1)
            t2 = ltorch.conv2d(t1, w2)                 t1 = ltorch.relu(t0)
            return t2                                  t2 = ltorch.conv2d(t1, w2)
                                                       t4 = ltorch.layout_like(t2, x)
                                                       return t4
    """

    name = "channels-last"

    def __call__(self, program: Program) -> Program:
        if program.backward is not None:
            raise PipelineError("channels-last changes the forward before autodiff splits it; put 'channels-last' "
                                "before 'autodiff' in the pipeline")
        return program.map(channels_last_trace)

    def describe(self, before: Program, after: Program) -> Notes:
        made = [b for b in after.forward.bound_symbols if b.origin == self.name]  # the runner marks what a pass made
        to_nhwc = sum(1 for b in made if b.sym is conversion.contiguous and b.kwargs.get("memory_format") is not None)
        back = sum(1 for b in made if b.sym in (conversion.contiguous, conversion.layout_like)) - to_nhwc
        reshapes = sum(1 for b in made if b.sym is views.reshape)
        convs = sum(1 for b in after.forward.bound_symbols if _convolved(b) is not None)
        if not convs:
            return Notes("no 2-D CPU convolution: nothing changed", {"convolutions": 0, "converted": 0})
        return Notes(f"{convs} convolution{'s' if convs != 1 else ''} run channels-last: {to_nhwc} input"
                     f"{'s' if to_nhwc != 1 else ''} converted, {back} output{'s' if back != 1 else ''} made contiguous"
                     + (f", {reshapes} view{'s' if reshapes != 1 else ''} turned into reshape" if reshapes else ""),
                     {"convolutions": convs, "converted": to_nhwc, "outputs_made_contiguous": back,
                      "views_to_reshape": reshapes})
