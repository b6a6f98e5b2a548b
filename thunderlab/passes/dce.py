"""dce: remove bound symbols whose outputs are never used."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.program import Program
from thunderlab.core.symbols import Tag
from thunderlab.core.trace import Trace

from .base import Pass, register_pass

# a write must happen; an unused draw still advances the generator, which later draws read; every process
# must make the same collectives, used or not
_EFFECTS = frozenset({Tag.SIDE_EFFECT, Tag.RANDOM, Tag.COMMUNICATION})


def dce_trace(trace: Trace) -> Trace:
    live = {p.name for p in trace.output_proxies()}
    kept = []
    for b in reversed(trace.bound_symbols):
        if b.tags & _EFFECTS or any(p.name in live for p in b.outputs):
            kept.append(b)
            live.update(p.name for p in b.inputs)
    return trace.derive(bound_symbols=kept[::-1])


@register_pass
@dataclass(frozen=True)
class DCE(Pass):
    """Dead-code elimination: drop calls whose results nothing uses.

    Calls with an effect (a random draw, a write to an argument) stay even when unused.
    For example::

        def forward(x):                    def forward(x):
            t0 = ltorch.cos(x)      ->         t1 = ltorch.sin(x)
            t1 = ltorch.sin(x)                 return t1
            return t1
    """

    name = "dce"

    def __call__(self, program: Program) -> Program:
        return program.map(dce_trace)
