"""claim: give each call to the first executor that takes it, decomposing what none takes whole."""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from thunderlab.core.notes import Decline, Notes
from thunderlab.core.program import Program
from thunderlab.core.symbols import BoundSymbol, Tag
from thunderlab.core.trace import Trace
from thunderlab.executors import default_order
from thunderlab.executors.base import EXECUTORS, get_executor

from .base import Pass, PipelineError, register_pass


class ClaimError(RuntimeError):
    """No executor in the priority list can run a call that has no decomposition."""


def claim_symbols(bsyms, executors, decompose) -> list[BoundSymbol]:
    out: list[BoundSymbol] = []
    for b in bsyms:
        out.extend(_claim(b, executors, decompose))
    return out


def _claim(b: BoundSymbol, executors, decompose) -> list[BoundSymbol]:
    if b.sym.bookkeeping:
        return [b]
    forced = bool(b.subsymbols) and ("all" in decompose or b.sym.name in decompose or Tag.DECOMPOSE in b.sym.tags)
    if b.sym.is_region and not forced:
        # a region from an earlier fuse stays with the executor that fused it if that one is still
        # given; otherwise its members are claimed afresh (claim{executors=torch} means torch runs them)
        if any(ex.name == b.executor and ex.available()[0] for ex in executors):
            return [b]
        return claim_symbols(b.subsymbols, executors, decompose)
    declined: list[tuple[str, str]] = []
    if not forced:
        for ex in executors:
            ok, why = ex.available()
            if ok:
                ok, why = ex.can_execute(b)
            if ok:
                if not ex.fusion and _draws_apart(b, declined):
                    return claim_symbols(b.subsymbols, executors, decompose)
                return [b.replace(executor=ex.name, declined=tuple(declined))]
            declined.append((ex.name, why or "declined"))
    if b.subsymbols:
        return claim_symbols(b.subsymbols, executors, decompose)
    reasons = "; ".join(f"{n}: {w}" for n, w in declined) or "no executors given"
    raise ClaimError(f"no executor can run {b.sym.qualname} (id {b.id}) and it has no decomposition ({reasons}); "
                     f"add 'torch' to the executors")


# Draws that read one tensor argument only for its layout (shape, dtype, device, memory order): qualname -> that
# argument's position. Torch runs them, so they draw what eager draws, and ``fuse`` can run them before a region
# (see fuse._free_draws) rather than cut it.
LAYOUT_ONLY_DRAWS = {"prims.bernoulli": 0}


def _draws_apart(b: BoundSymbol, declined) -> bool:
    """Whether ``b``, which a fusion executor declined because it draws random numbers, is better decomposed:
    its decomposition draws only through layout-only draws (torch runs them; the fusion executor can take the
    rest), where kept whole torch would run all of it, and a region would end there."""
    if not (b.subsymbols and b.random and any(getattr(EXECUTORS.get(n), "fusion", False) for n, _ in declined)):
        return False
    todo = list(b.subsymbols)
    while todo:
        s = todo.pop()
        if s.random and not s.subsymbols and s.sym.qualname not in LAYOUT_ONLY_DRAWS:
            return False
        if s.random:
            todo.extend(s.subsymbols)
    return True


@register_pass
@dataclass(frozen=True)
class Claim(Pass):
    """Assign every call to an executor in priority order; decompose calls none takes whole."""

    name = "claim"
    executors: tuple[str, ...] = ()  # priority order; empty: the default (nvfuser, inductor, torch where available)
    decompose: tuple[str, ...] = ()  # torch-level symbols to always replace by their prims ("all" for every one)

    def __post_init__(self):
        for n in self.executors:
            if n not in EXECUTORS:
                raise PipelineError(f"claim: unknown executor {n!r}; valid executors: {', '.join(sorted(EXECUTORS))}")
        from thunderlab.ops.torch_ops import TORCH_SYMBOLS

        unknown = [n for n in self.decompose if n != "all" and n not in TORCH_SYMBOLS]
        if unknown:
            names = sorted(n for n, (sym, _, _) in TORCH_SYMBOLS.items() if sym.decomposition is not None)
            close = sorted({c for u in unknown for c in difflib.get_close_matches(u, names, n=3, cutoff=0.6)})
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise PipelineError(
                f"claim: decompose names {', '.join(map(repr, unknown))}, which "
                f"{'is not a torch-level symbol' if len(unknown) == 1 else 'are not torch-level symbols'}"
                f"{hint} (valid: 'all' or any of the {len(names)} symbols with a decomposition, e.g. "
                f"{', '.join(names[:6])}; thunderlab.ops.torch_ops.TORCH_SYMBOLS lists them)"
            )

    def __call__(self, program: Program) -> Program:
        exs = [get_executor(n) for n in (self.executors or default_order())]

        def one(t: Trace) -> Trace:
            return t.derive(bound_symbols=claim_symbols(t.bound_symbols, exs, self.decompose))

        return program.map(one)

    def describe(self, before: Program, after: Program) -> Notes:
        kept = {b.id for t in after for b in t.bound_symbols}
        whole = [b for t in before for b in t.bound_symbols if b.id in kept]
        decomposed = [b for t in before for b in t.bound_symbols if b.id not in kept]
        by_executor: dict[str, int] = {}
        for t in after:
            for b in t.bound_symbols:
                if b.executor:
                    by_executor[b.executor] = by_executor.get(b.executor, 0) + 1
        return Notes(
            f"{len(decomposed)} decomposed, {len(whole)} kept whole",
            {"kept_whole": len(whole), "decomposed": len(decomposed),
             "decomposed_symbols": sorted({b.sym.qualname for b in decomposed}), "by_executor": by_executor},
            tuple(Decline(b.id, ex, why) for t in after for b in t.bound_symbols for ex, why in b.declined),
        )
