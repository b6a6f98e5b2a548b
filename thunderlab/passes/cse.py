"""cse: merge calls that compute the same thing from the same inputs."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.program import Program
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import tree_map
from thunderlab.core.trace import Trace

from .base import Pass, register_pass


def cse_trace(trace: Trace) -> Trace:
    seen: dict = {}
    rename: dict[str, TensorProxy] = {}
    kept = []
    returned = {p.name for p in trace.output_proxies()}
    # values a call may write into (buffers of out=, targets of in-place calls): two equal ones are two buffers
    written = {p.name for b in trace.bound_symbols if b.side_effect for p in b.inputs}
    for b in trace.bound_symbols:
        b = b.swap(rename)
        if b.side_effect:
            seen.clear()  # a write may change what any later read sees
            kept.append(b)
            continue
        if b.sym.communicates:  # two collectives are two exchanges between processes, never one
            kept.append(b)
            continue
        if b.random or not b.outputs or written & {p.name for p in b.outputs}:
            kept.append(b)  # two draws are two values; a buffer written later is its own
            continue
        key = b.call_key()
        prior = seen.get(key)
        if prior is not None and returned & {p.name for p in b.outputs} and returned & {p.name for p in prior.outputs}:
            prior = None  # eager returns two tensors here, not one tensor twice (a caller may write to one)
        if prior is None:
            seen[key] = b
            kept.append(b)
            continue
        for new, old in zip(b.outputs, prior.outputs):
            rename[new.name] = old
    out = tree_map(lambda v: rename.get(v.name, v) if isinstance(v, TensorProxy) else v, trace.output)
    return trace.derive(bound_symbols=kept, output=out)


@register_pass
@dataclass(frozen=True)
class CSE(Pass):
    """Common-subexpression elimination: compute each distinct call once.

    Two calls merge when they call the same symbol on the same values and exactly equal
    constants; random draws, writes and calls after a write to their inputs never merge.
    For example::

        def forward(x):                    def forward(x):
            t0 = ltorch.sin(x)      ->         t0 = ltorch.sin(x)
            t1 = ltorch.sin(x)                 t2 = ltorch.mul(t0, t0)
            t2 = ltorch.mul(t0, t1)            return t2
            return t2
    """

    name = "cse"

    def __call__(self, program: Program) -> Program:
        return program.map(cse_trace)
