"""remat: choose what forward saves for backward and what backward recomputes (a min-cut)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import networkx as nx
from networkx.algorithms.flow import boykov_kolmogorov

from thunderlab.core.notes import Notes, byte_text
from thunderlab.core.program import Program, Training
from thunderlab.core.proxies import TensorProxy
from thunderlab.core.symbols import BoundSymbol, Kind, Tag, next_id

from .autodiff import saved_bytes
from .base import Pass, PipelineError, register_pass
from .dce import dce_trace

# a random draw recomputed is a different draw; the rest would repeat real work or are not computations
_NEVER = frozenset({Tag.RANDOM, Tag.SIDE_EFFECT, Tag.DONT_RECOMPUTE, Tag.BOOKKEEPING, Tag.COMMUNICATION})
POLICIES = ("auto", "all", "views")


def recomputable(b: BoundSymbol, policy: str = "all") -> bool:
    s = b.sym
    if b.tags & _NEVER or s.kind is Kind.OPAQUE:
        return False
    return policy == "all" or Tag.VIEW in s.tags


def auto_policy(following) -> tuple[str, str]:
    """("all" or "views", why) for the passes after remat in a pipeline.

    Recomputing a pointwise op costs nothing extra when a fusion executor folds it into the
    kernel that needs it; run alone (the torch executor) it is one more kernel per op. So
    everything cheap is recomputed only when a ``fuse`` pass follows with a fusion executor
    available to its ``claim``; otherwise only views are.
    """
    from thunderlab.executors import default_order
    from thunderlab.executors.base import EXECUTORS

    names = [s.name for s in following]
    if "fuse" not in names:
        return "views", "no fuse pass follows: recomputed ops would run one kernel each"
    claim = next((s for s in following if s.name == "claim"), None)
    given = dict(claim.options).get("executors") if claim is not None else None
    executors = [n for n in given.split("+") if n] if given else list(default_order())
    fusing = [n for n in executors if n in EXECUTORS and EXECUTORS[n].fusion and EXECUTORS[n].available()[0]]
    if fusing:
        return "all", f"fuse follows and {fusing[0]} can fuse what is recomputed"
    return "views", f"fuse follows but no fusion executor is available among {'+'.join(executors) or 'none'}"


def _bytes(p: TensorProxy) -> int:
    return p.numel() * p.dtype.itemsize


def plan(forward, saved: list[TensorProxy], policy: str = "all") -> tuple[list[TensorProxy], list[BoundSymbol]]:
    """(values to save, forward calls to recompute in backward, in forward order)."""
    if not saved:  # backward needs only the incoming gradients
        return [], []
    g = nx.DiGraph()
    producer: dict[str, BoundSymbol] = {}
    for p in forward.tensor_inputs():
        g.add_edge("source", f"{p.name}:in")
        g.add_edge(f"{p.name}:in", f"{p.name}:out", capacity=_bytes(p))
    for b in forward.bound_symbols:
        for o in b.outputs:
            producer[o.name] = b
            g.add_edge(f"{o.name}:in", f"{o.name}:out", capacity=_bytes(o))
            if not recomputable(b, policy):
                g.add_edge("source", f"{o.name}:in")
            for i in b.inputs:
                g.add_edge(f"{i.name}:out", f"{o.name}:in")
    for p in saved:
        g.add_edge(f"{p.name}:out", "sink")
    # Boykov-Kolmogorov is the quickest of networkx's flow algorithms on these layered graphs
    _, (reach, _) = nx.minimum_cut(g, "source", "sink", flow_func=boykov_kolmogorov)
    new_saved = [p for p in _values(forward) if f"{p.name}:in" in reach and f"{p.name}:out" not in reach
                 and g.has_edge(f"{p.name}:in", f"{p.name}:out")]
    recompute_names = {n[:-3] for n in g.nodes if n.endswith(":in") and n not in reach}
    recompute, seen = [], set()
    for b in forward.bound_symbols:
        if any(o.name in recompute_names for o in b.outputs) and b.id not in seen:
            seen.add(b.id)
            recompute.append(b)
    return _needed(new_saved, recompute, saved)


def _values(trace) -> list[TensorProxy]:
    return trace.tensor_inputs() + [o for b in trace.bound_symbols for o in b.outputs]


def _needed(new_saved, recompute, saved):
    """Drop recomputations and saved values that backward does not reach."""
    want = {p.name for p in saved}
    keep = []
    for b in reversed(recompute):
        if any(o.name in want for o in b.outputs):
            keep.append(b)
            want.update(i.name for i in b.inputs)
    return [p for p in new_saved if p.name in want], keep[::-1]


@register_pass
@dataclass(frozen=True)
class Remat(Pass):
    """Rematerialize: save a min-cut of values for backward and recompute cheap ops from them.

    With ``recompute=all``, a forward that saved both ``t0 = exp(x)`` and ``t1 = tanh(t0)``
    saves ``t0`` alone, and the backward makes ``t1`` again::

        return (t2, (w, t1, t0))      ->    return (t2, (w, t0))

        def backward(w, t1, t0, grad_t2):   def backward(w, t0, grad_t2):
            t3 = prims.transpose(w, ...)        t1 = ltorch.tanh(t0)
            ...                                 t3 = prims.transpose(w, ...)
                                                ...
    """

    name = "remat"
    requires = ("autodiff",)
    # what backward may recompute: "all" cheap ops, only "views", or "auto": all when a fusion
    # executor will fuse them (a fuse pass follows), else views
    recompute: str = "auto"

    def __post_init__(self):
        if self.recompute not in POLICIES:
            raise PipelineError(f"remat: recompute={self.recompute!r}; valid: {', '.join(POLICIES)}")

    def in_pipeline(self, following) -> Remat:
        if self.recompute != "auto":
            return self
        policy, why = auto_policy(following)
        resolved = replace(self, recompute=policy)
        object.__setattr__(resolved, "_why", f"auto: {why}")  # for the record; not an option
        return resolved

    @property
    def policy(self) -> str:
        """What may be recomputed; "auto" unresolved (the pass called outside a pipeline) means all."""
        return "all" if self.recompute == "auto" else self.recompute

    def __call__(self, program: Program) -> Program:
        if "backward" not in program.traces:
            return program
        policy = self.policy
        fw, bw = program.forward, program.traces["backward"]
        out, saved = fw.output
        saved = list(saved)
        n_saved = len(saved)
        new_saved, recompute = plan(fw, saved, policy)
        grads = bw.inputs[n_saved:]
        moved = [b.replace(id=next_id(), derived_from=b.id, origin=None) for b in recompute]
        new_bw = bw.derive(inputs=list(new_saved) + list(grads), bound_symbols=moved + list(bw.bound_symbols))
        new_fw = dce_trace(fw.derive(output=(out, tuple(new_saved))))
        training = Training(saved=[p.name for p in new_saved], grad_of=program.training.grad_of)
        return program.with_traces({"forward": new_fw, "backward": new_bw}, training)

    def describe(self, before: Program, after: Program) -> Notes:
        if "backward" not in after.traces:
            return Notes()
        b0, b1 = before.saved, after.saved
        recomputed = sum(1 for b in after.traces["backward"].bound_symbols if b.origin == "remat")
        why = getattr(self, "_why", "") or f"recompute={self.recompute}"
        return Notes(f"recompute={self.policy} ({why}): saved {len(b0)} values ({byte_text(saved_bytes(b0))}) -> "
                     f"{len(b1)} ({byte_text(saved_bytes(b1))}), {recomputed} calls recomputed in backward",
                     {"saved_bytes_before": saved_bytes(b0), "saved_bytes_after": saved_bytes(b1),
                      "saved_before": len(b0), "saved_after": len(b1), "recomputed": recomputed,
                      "recompute": self.policy, "why": why})
