"""sink-waits: each wait on a collective moved down to the first call that uses what it waited for."""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.core.notes import Notes
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


def sink(trace: Trace, kinds: frozenset[str], in_flight: int = 0) -> tuple[Trace, list[dict]]:
    """``trace`` with each wait on a collective of ``kinds`` just before its first use (or, with ``in_flight``,
    before the collective that would put more than that many in flight); what moved, and past how many calls."""
    calls = list(trace.bound_symbols)
    producer = {o.name: b for b in calls for o in b.outputs}
    moving = {id(b) for b in calls
              if b.sym.name == "wait" and b.args and getattr(producer.get(b.args[0].name), "sym", None) is not None
              and producer[b.args[0].name].sym.name in kinds}
    waiter = {b.args[0].name: b for b in calls if id(b) in moving}  # collective's result -> its wait
    position = {id(b): i for i, b in enumerate(calls)}
    out, moved = [], []
    pending: dict[str, object] = {}  # waits whose collective is issued, by the name of what they give, oldest first

    def place(name, at):
        w = pending.pop(name)
        out.append(w)
        moved.append((w, at))

    for b in calls:
        if id(b) in moving:
            continue
        for x in b.inputs:
            if x.name in pending:
                place(x.name, position[id(b)])
        if b.sym.communicates and in_flight:  # this collective may start only once fewer are in flight
            while len(pending) >= in_flight:
                place(next(iter(pending)), position[id(b)])
        out.append(b)
        for o in b.outputs:
            if o.name in waiter:
                pending[waiter[o.name].outputs[0].name] = waiter[o.name]
    for name in list(pending):  # waited on by nothing: still waited before the program returns
        place(name, len(calls))
    report = []
    for w, to in moved:
        past = [c for c in calls[position[id(w)] + 1:to] if not c.sym.communicates and not c.sym.bookkeeping]
        report.append({"waits_for": producer[w.args[0].name].sym.name,
                       "bytes": w.outputs[0].numel() * w.outputs[0].dtype.itemsize, "calls_overlapped": len(past)})
    return trace.derive(bound_symbols=out), report


@register_pass
@dataclass(frozen=True)
class SinkWaits(Pass):
    """Move each wait on a collective down to the first call that needs its result, so communication overlaps compute.

    ``ddp`` and ``fsdp`` issue each collective where its data is ready and wait at once; this pass
    moves every wait (of the collectives named in ``kinds``, '+'-separated, or ``all``) past the
    calls that do not need its result, so the exchange runs while they compute. ``in_flight=N``
    keeps at most N collectives in flight: a wait stops before the collective that would be one
    too many, so the buffers of a finished exchange are freed early (as FSDP2 waits for one
    reduce-scatter before the next). Collectives themselves never move: every process issues
    them in the same order.
    """

    name = "sink-waits"
    kinds: str = "all"
    in_flight: int = 0  # at most this many collectives in flight at once (0: no limit)

    def __post_init__(self):
        _kinds(self.kinds)
        if not isinstance(self.in_flight, int) or self.in_flight < 0:
            raise PipelineError(f"sink-waits: in_flight must be a whole number (0: no limit), got {self.in_flight!r}")

    def __call__(self, program: Program) -> Program:
        kinds = _kinds(self.kinds)
        return program.map(lambda t: sink(t, kinds, self.in_flight)[0])

    def describe(self, before: Program, after: Program) -> Notes:
        kinds = _kinds(self.kinds)
        waits = {name: sink(t, kinds, self.in_flight)[1] for name, t in before.traces.items()}
        n = sum(len(v) for v in waits.values())
        overlapped = sum(w["calls_overlapped"] for v in waits.values() for w in v)
        return Notes(f"{n} wait(s) moved; together they now let {overlapped} call(s) run while communication is "
                     f"in flight", {"waits": waits})
