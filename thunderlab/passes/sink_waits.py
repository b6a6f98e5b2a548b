"""sink-waits: each wait on a collective moved down to the first call that uses what it waited for."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.program import Program
from thunderlab.core.trace import Trace

from .base import Pass, PipelineError, register_pass

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def _kinds(text: str) -> frozenset[str]:
    names = frozenset(KINDS) if text == "all" else frozenset(text.split("+"))
    bad = sorted(names - set(KINDS))
    if bad:
        raise PipelineError(f"sink-waits: kinds={text!r}: {', '.join(bad)} is not a collective; give 'all' or some of "
                            f"{'+'.join(KINDS)}")
    return names


def sink(trace: Trace, kinds: frozenset[str]) -> tuple[Trace, list[dict]]:
    """``trace`` with each wait on a collective of ``kinds`` just before its first use; what moved, and past what."""
    calls = list(trace.bound_symbols)
    producer = {o.name: b for b in calls for o in b.outputs}
    moving, stay = [], []
    for b in calls:
        started = producer.get(b.args[0].name) if b.sym.name == "wait" and b.args else None
        (moving if started is not None and started.sym.name in kinds else stay).append(b)
    pending = {b.outputs[0].name: b for b in moving}
    out, moved = [], []
    position = {id(b): i for i, b in enumerate(calls)}
    for b in stay:
        for x in b.inputs:
            w = pending.pop(x.name, None)
            if w is not None:
                out.append(w)
                moved.append((w, position[id(b)]))
        out.append(b)
    tail = list(pending.values())  # waited on by nothing: they stay waited before the program returns
    out.extend(tail)
    moved.extend((w, len(calls)) for w in tail)
    report = []
    for w, to in moved:
        start = position[id(w)]
        past = [c for c in calls[start + 1:to] if not c.sym.communicates and not c.sym.bookkeeping]
        report.append({"waits_for": producer[w.args[0].name].sym.name, "bytes": w.outputs[0].numel()
                       * w.outputs[0].dtype.itemsize, "calls_overlapped": len(past)})
    return trace.derive(bound_symbols=out), report


@register_pass
@dataclass(frozen=True)
class SinkWaits(Pass):
    """Move each wait on a collective down to the first call that needs its result, so communication overlaps compute.

    ``ddp`` and ``fsdp`` issue each collective where its data is ready and wait at once; this pass
    moves every wait (of the collectives named in ``kinds``, '+'-separated, or ``all``) past the
    calls that do not need its result, so the exchange runs while they compute. Collectives
    themselves never move: every process issues them in the same order.
    """

    name = "sink-waits"
    kinds: str = "all"

    def __post_init__(self):
        _kinds(self.kinds)

    def __call__(self, program: Program) -> Program:
        kinds = _kinds(self.kinds)
        return program.map(lambda t: sink(t, kinds)[0])

    def describe(self, before: Program, after: Program) -> dict:
        kinds = _kinds(self.kinds)
        waits = {name: sink(t, kinds)[1] for name, t in before.traces.items()}
        n = sum(len(v) for v in waits.values())
        overlapped = sum(w["calls_overlapped"] for v in waits.values() for w in v)
        return {"waits": waits, "summary": f"{n} wait(s) moved; together they now let {overlapped} call(s) run "
                                           f"while communication is in flight"}
