"""del: free each intermediate value right after its last use."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.program import Program
from thunderlab.core.symbols import BoundSymbol
from thunderlab.core.trace import Trace
from thunderlab.ops import prims

from .base import Pass, register_pass


def del_trace(trace: Trace) -> Trace:
    keep = {p.name for p in trace.output_proxies()}
    seen: set[str] = set(keep)
    out: list[BoundSymbol] = []
    for b in reversed([b for b in trace.bound_symbols if not b.sym.bookkeeping]):
        dead = []
        for p in b.inputs + b.outputs:
            if p.name not in seen:
                seen.add(p.name)
                dead.append(p)
        if dead:
            out.append(BoundSymbol(prims.python_del, tuple(dead), {}, None))
        out.append(b)
    return trace.derive(bound_symbols=out[::-1])


@register_pass
@dataclass(frozen=True)
class Del(Pass):
    """Insert `del` after each value's last use so memory is freed early."""

    name = "del"
    last = True

    def __call__(self, program: Program) -> Program:
        return program.map(del_trace)
