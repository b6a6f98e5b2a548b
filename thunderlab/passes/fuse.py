"""fuse: group the calls a fusion executor claimed into regions, by dataflow, without cycles."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from thunderlab.core.notes import Decline, Notes
from thunderlab.core.program import Program
from thunderlab.core.symbols import BoundSymbol, Symbol
from thunderlab.core.trace import Trace
from thunderlab.executors.base import EXECUTORS
from thunderlab.executors.fusion import make_region
from thunderlab.ops import activations, elementwise, prims

from .base import Pass, register_pass
from .claim import LAYOUT_ONLY_DRAWS


@dataclass
class _Group:
    gid: int
    executor: str
    members: list[BoundSymbol]


# A layout-only draw (claim.LAYOUT_ONLY_DRAWS: it fills a new tensor laid out like one argument, in memory order) of a
# value a region computes would cut the region in two: torch draws, to keep eager's random stream, between the value
# and its use. Given a fresh row-major tensor of the value's shape instead, it runs before the region and draws the
# same numbers, where eager lays the value out row-major (which the rules below tell).

# Where eager's CPU kernels lay a call's outputs out row-major (contiguous): calls that always make fresh contiguous
# tensors, whatever their inputs' layout (softmax and log_softmax included: their kernels write a contiguous result)...
_FRESH = frozenset({"ltorch.linear", "prims.linear", "ltorch.matmul", "prims.matmul", "ltorch.bmm", "ltorch.mm",
                    "ltorch.contiguous", "ltorch.embedding", "ltorch.native_layer_norm", "ltorch.layer_norm",
                    "ltorch.softmax", "ltorch.log_softmax", "prims.full", "prims.iota"})
# ...views that keep a row-major tensor row-major (a new shape over the same memory order)...
_KEEP = frozenset({"ltorch.view", "ltorch.reshape", "prims.reshape", "ltorch.flatten", "ltorch.unflatten",
                   "ltorch.view_as", "ltorch.unsqueeze", "ltorch.squeeze", "prims.squeeze"})
# ...and views that broadcast one (stride 0 along new dimensions: not row-major, but no vote on an elementwise
# result's layout, which TensorIterator takes from its other operands)
_BROADCAST = frozenset({"prims.broadcast_in_dim", "ltorch.expand", "ltorch.expand_as", "ltorch.broadcast_to"})


@functools.cache
def _elementwise() -> frozenset:
    """Calls whose output is laid out like their operands (eager's TensorIterator; tril): row-major in, row-major
    out."""
    names = {s.qualname for s in vars(elementwise).values() if isinstance(s, Symbol)}
    names |= {f"prims.{n}" for table in (prims.UNARY, prims.PREDICATES, prims.BINARY, prims.COMPARISONS)
              for n in table}
    names |= {"prims.where", "prims.convert_element_type", "ltorch.tril", "ltorch.triu"}
    names |= {s.qualname for s in (activations.gelu, activations.relu, activations.silu, activations.softplus,
                                   activations.leaky_relu, activations.elu, activations.hardtanh,
                                   activations.relu6)}
    return frozenset(names)


def _row_major(trace: Trace) -> tuple[set[str], set[str]]:
    """(values eager lays out row-major, values that broadcast a row-major one), as far as the rules above tell;
    a trace's inputs and whatever no rule covers count as unknown."""
    row: set[str] = set()
    spread: set[str] = set()
    pointwise = _elementwise()
    for b in trace.bound_symbols:
        q = b.sym.qualname
        ins = b.inputs
        if q in _FRESH:
            ok = True
        elif q in _KEEP:
            ok = bool(ins) and ins[0].name in row
        elif q in _BROADCAST:
            if ins and ins[0].name in row:
                spread.update(p.name for p in b.outputs)
            continue
        elif q in pointwise:
            # TensorIterator orders the output's dimensions as the first operand whose strides tell them apart
            # does: row-major if that is the first full-shape operand not broadcast, it is row-major, and every
            # operand before it is row-major or broadcasts a row-major value (then it agrees where it votes)
            shape = b.outputs[0].shape if b.outputs else None
            ok = False
            for p in ins:
                if p.shape == shape and p.name not in spread:
                    ok = p.name in row
                    break
                if p.name not in row and p.name not in spread:
                    break
        else:
            ok = False
        if ok:
            row.update(p.name for p in b.outputs)
    return row, spread


def _free_draws(trace: Trace) -> tuple[Trace, dict[int, str]]:
    """The trace with each layout-only draw of a row-major value a fusion executor computes given a fresh tensor of
    its shape instead (so it no longer waits for the region, and the region is not cut); and, for each draw left
    reading a region's value, why. The draws keep their order, so they draw what they drew before.
    """
    row = None
    made_by: dict[str, BoundSymbol] = {p.name: b for b in trace.bound_symbols for p in b.outputs}
    out: list[BoundSymbol] = []
    why: dict[int, str] = {}
    scratch = None
    for b in trace.bound_symbols:
        pos = LAYOUT_ONLY_DRAWS.get(b.sym.qualname)
        a = b.args[pos] if pos is not None and len(b.args) > pos else None
        maker = made_by.get(getattr(a, "name", None))
        if maker is None or not _fuses(maker) or a.device.type != "cpu":  # the layout rules are eager's on CPU
            out.append(b)
            continue
        if row is None:
            row = _row_major(trace)[0]
        if a.name not in row:
            why[b.id] = (f"{b.sym.qualname} draws in the memory order of {a.name} ({maker.sym.qualname}), "
                         f"which eager may not lay out row-major, so torch draws it from the region's value")
            out.append(b)
            continue
        if scratch is None:
            scratch = trace.derive(bound_symbols=[])
        with scratch.active():
            fresh = prims.full(a.shape, 0, dtype=a.dtype, device=a.device)
        out.extend(c.replace(executor="torch") for c in scratch.bound_symbols)
        scratch.bound_symbols.clear()
        moved = (f"drawn by torch before the region (eager's random stream), laid out as {a.name}: a fresh "
                 f"row-major tensor of its shape, as {maker.sym.qualname} makes it")
        out.append(b.replace(args=b.args[:pos] + (fresh,) + b.args[pos + 1:],
                             declined=b.declined + ((b.declined[-1][0] if b.declined else "fuse", moved),)))
    if scratch is None:
        return trace, why
    return trace.derive(bound_symbols=out, _counter=scratch._counter, _names=scratch._names), why


def _fuses(b: BoundSymbol) -> bool:
    ex = EXECUTORS.get(b.executor or "torch")
    return ex is not None and ex.fusion and not b.sym.is_region


def _plan(trace: Trace, max_size: int):
    """Assign each call to a group (or none) and say why each call was left out.

    A group runs as one unit, so what one member depends on, the whole group does. ``anc`` holds,
    for each unit (a group, or a call in none), the groups it depends on, directly or through
    other units; a call may join group ``g`` only if no input of its comes from a unit that
    depends on ``g`` (that path would leave ``g`` and come back: a cycle). When a call joins a
    group, the group's new dependencies reach every unit that already depends on the group.
    """
    producer: dict[str, int] = {}  # value name -> index of the call that makes it
    group_of: dict[int, int] = {}  # call index -> group id
    anc: dict[tuple, set[int]] = {}  # ("g", group) or ("c", call index) -> groups it depends on
    dependents: dict[int, set[tuple]] = {}  # group -> the units whose anc holds it
    groups: dict[int, _Group] = {}
    open_groups: list[int] = []
    why: dict[int, str] = {}

    def unit(j: int) -> tuple:
        g = group_of.get(j)
        return ("g", g) if g is not None else ("c", j)

    def depends(u: tuple, new: set[int]) -> None:
        """``u`` depends on the groups ``new`` too; so does every unit that depends on ``u``."""
        todo = [(u, new)]
        while todo:
            u, new = todo.pop()
            new = new - anc.setdefault(u, set())
            if not new:
                continue
            anc[u] |= new
            for g in new:
                dependents.setdefault(g, set()).add(u)
            if u[0] == "g":
                todo.extend((d, new) for d in dependents.get(u[1], ()))

    readers: dict[str, set[int]] = {}  # value name -> the calls that read it
    for i, b in enumerate(trace.bound_symbols):
        for p in b.inputs:
            readers.setdefault(p.name, set()).add(i)

    def written_in_place(i: int, b: BoundSymbol, ro: set[int]) -> int | None:
        """The open group whose region can end with ``b``, a ``prims.copy_(src, dst)``, or None. ``src`` is that
        group's value and ``dst`` a trace input no call reads but the group's members and this one, so the write
        may move to the region's end (after every read of the old value) and nothing outside sees it move; the
        group's executor must make such writes itself (a training forward's running statistics)."""
        if b.sym.qualname != "prims.copy_" or len(b.args) != 2:
            return None
        src, dst = b.args
        j = producer.get(getattr(src, "name", None))
        g = group_of.get(j) if j is not None else None
        if g is None or g not in open_groups or g in ro or getattr(dst, "name", None) in producer:
            return None
        if not EXECUTORS[groups[g].executor].writes_in_place(b):
            return None
        if any(k != i and group_of.get(k) != g for k in readers.get(dst.name, ())):
            return None
        return g

    for i, b in enumerate(trace.bound_symbols):
        r, ro = set(), set()  # groups the call depends on; those of them reached through another unit
        for p in b.inputs:
            j = producer.get(p.name)
            if j is None:
                continue
            u = unit(j)
            ro |= anc.get(u, set())
            r |= anc.get(u, set())
            if u[0] == "g":
                r.add(u[1])
        for o in b.outputs:
            producer[o.name] = i
        ex = EXECUTORS.get(b.executor or "torch")
        g = None
        if b.sym.is_region:
            # a region from an earlier fuse is one unit its executor owns: a second fuse leaves it whole
            why[b.id] = f"already region {b.sym.name}, run by {b.executor}"
        elif b.sym.communicates:
            open_groups.clear()  # collectives keep their place and order: no region spans one
            why[b.id] = "communicates with other processes (torch.distributed), so it stays in place"
        elif b.side_effect and (g := written_in_place(i, b, ro)) is not None:
            groups[g].members.append(b.replace(executor=groups[g].executor))
            group_of[i] = g  # Fuse.describe lists each region's writes (writes_in_place)
        elif b.side_effect and not (ex is not None and ex.fusion):
            # a write orders everything around it: no region spans it (a fusion executor that claimed a call whose
            # symbol may write found that this one does not: batch_norm outside training)
            open_groups.clear()
            why[b.id] = "writes to an argument, so it stays in place"
        elif ex is None or not ex.fusion:
            why[b.id] = f"claimed by {b.executor or 'torch'}, which does not fuse"
        else:
            blocked = [g for g in open_groups if groups[g].executor == ex.name and g in ro]
            fits = [g for g in open_groups if groups[g].executor == ex.name and g not in ro
                    and len(groups[g].members) < max_size]
            if fits:
                g = fits[-1]
            else:
                g = len(groups)
                groups[g] = _Group(g, ex.name, [])
                open_groups.append(g)
                if blocked:
                    why[b.id] = f"joining region {blocked[-1]} would create a cycle"
            groups[g].members.append(b)
            group_of[i] = g
        depends(unit(i), r - ({g} if g is not None else set()))
    return groups, group_of, why


def _order(units: list, deps: dict[int, set[int]], key: dict[int, int]) -> list:
    """A topological order of units, as close to the original order as dependencies allow."""
    done: set[int] = set()
    out: list = []

    def visit(u):
        if u in done:
            return
        done.add(u)
        for d in sorted(deps[u], key=key.get):
            visit(d)
        out.append(units[u])

    for u in sorted(range(len(units)), key=key.get):
        visit(u)
    return out


def fuse_trace(trace: Trace, counter: list[int], max_size: int) -> Trace:
    trace, kept_draws = _free_draws(trace)
    if kept_draws:  # the reason a draw still cuts a region is the fusion executor's, beside its own decline
        trace = trace.derive(bound_symbols=[
            b.replace(declined=b.declined + (((b.declined[-1][0] if b.declined else "fuse"), kept_draws[b.id]),))
            if b.id in kept_draws else b for b in trace.bound_symbols])
    groups, group_of, why = _plan(trace, max_size)
    joined = {m.id: m for g in groups.values() for m in g.members}  # writes that joined a region, as its members
    bsyms = [joined.get(b.id, b) for b in trace.bound_symbols]
    out_names = {p.name for p in trace.output_proxies()}
    # units: one per region with two or more members, one per other call
    unit_of_call: dict[int, int] = {}
    units: list = []
    key: dict[int, int] = {}
    region_for_group: dict[int, int] = {}
    for i, b in enumerate(bsyms):
        g = group_of.get(i)
        if g is not None and len(groups[g].members) > 1:
            if g not in region_for_group:
                region_for_group[g] = len(units)
                units.append(None)  # filled below
            u = region_for_group[g]
        else:
            if g is not None:
                why[b.id] = "alone in its region: a single call gains nothing from fusion, so torch runs it"
                b = b.replace(executor="torch", declined=b.declined + ((groups[g].executor, why[b.id]),))
            u = len(units)
            units.append(b)
        unit_of_call[i] = u
        key[u] = i  # a unit sorts by its last member
    for g, u in region_for_group.items():
        units[u] = _region(groups[g], counter, out_names, trace)
    deps: dict[int, set[int]] = {u: set() for u in range(len(units))}
    producer_unit: dict[str, int] = {}
    last_barrier = None
    for i, b in enumerate(bsyms):
        u = unit_of_call[i]
        for p in b.inputs:
            d = producer_unit.get(p.name)
            if d is not None and d != u:
                deps[u].add(d)
        if last_barrier is not None and last_barrier != u:
            deps[u].add(last_barrier)
        if (b.side_effect and not _fuses(b)) or b.sym.communicates:  # as in _plan: a claimed call does not write
            deps[u] |= {unit_of_call[j] for j in range(i)} - {u}
            last_barrier = u
        for o in b.outputs:
            producer_unit[o.name] = u
    return trace.derive(bound_symbols=_order(units, deps, key))


def _region(group: _Group, counter, out_names, trace) -> BoundSymbol:
    members = group.members
    member_ids = {b.id for b in members}
    consumers = {p.name for b in trace.bound_symbols if b.id not in member_ids for p in b.inputs}
    outputs = tuple(p for b in members for p in b.outputs if p.name in out_names or p.name in consumers)
    name = f"{group.executor}{counter[0]}"
    counter[0] += 1
    return make_region(name, group.executor, members, outputs)


def nvfuser_view(region: BoundSymbol) -> str:
    """What nvFuser would be given for any region (its members as prims), or why it cannot be (for teaching)."""
    from thunderlab.executors.nvfuser import definition_view

    return definition_view(region)


@register_pass
@dataclass(frozen=True)
class Fuse(Pass):
    """Group the calls each fusion executor claimed into regions that run as one kernel.

    Regions follow dataflow and never make a cycle; each is printed as a function of its own
    and owned by its executor, which also describes it (see ``describe``). With every call
    claimed by inductor (``claim{executors=inductor+torch}``), for example::

        def forward(x, w):                  # fusion region inductor0: 3 calls, run by inductor
            t0 = ltorch.mul(x, 2.0)         def inductor0(x, w):
            t1 = ltorch.tanh(t0)                t0 = ltorch.mul(x, 2.0)
            t2 = ltorch.matmul(t1, w)  ->       t1 = ltorch.tanh(t0)
            return t2                           t2 = ltorch.matmul(t1, w)
                                                return (t2,)

                                            def forward(x, w):
                                                t2, = inductor0(x, w)
                                                return t2
    """

    name = "fuse"
    requires = ("claim",)
    max_size: int = 1024  # most calls in one region

    def __call__(self, program: Program) -> Program:
        counter = [0]
        return program.map(lambda t: fuse_trace(t, counter, self.max_size))

    def describe(self, before: Program, after: Program) -> Notes:
        regions = {}
        left_out = []
        for t in after:
            for b in t.bound_symbols:
                if b.sym.is_region:
                    owner = EXECUTORS.get(b.executor)  # the region's own executor says what it makes of it
                    regions[b.sym.name] = {"executor": b.executor, "members": len(b.subsymbols),
                                           "member_ids": [s.id for s in b.subsymbols],
                                           "description": owner.describe(b) if owner is not None else None,
                                           # inputs the region's kernel writes in place (written_in_place in _plan)
                                           "writes_in_place": [s.args[1].name for s in b.subsymbols
                                                               if s.sym.qualname == "prims.copy_"]}
                elif b.declined and b.executor == "torch":
                    left_out.append(Decline(b.id, "fuse", b.declined[-1][1]))
        members = sum(r["members"] for r in regions.values())
        summary = (f"{len(regions)} region{'s' if len(regions) != 1 else ''} from {members} calls" if regions
                   else "no region")
        if left_out:
            summary += f"; {len(left_out)} calls left to torch"
        cuts = [c for t in after for c in _boundaries(t)]
        if cuts:
            summary += f"; {len(cuts)} between regions"
        per_trace = {t.name: sum(1 for b in t.bound_symbols if b.sym.is_region) for t in after}
        return Notes(summary, {"regions": regions, "regions_per_trace": per_trace, "boundaries": cuts},
                     tuple(left_out))


def _boundaries(trace: Trace) -> list[dict]:
    """The calls outside regions that read a region's value and make one a later region reads: what keeps those
    regions apart, with the executor that declined each and why."""
    made_in_region: set[str] = set()
    read_by_region: set[str] = set()
    for b in trace.bound_symbols:
        if b.sym.is_region:
            made_in_region.update(p.name for p in b.outputs)
            read_by_region.update(p.name for p in b.inputs)
    out = []
    for b in trace.bound_symbols:
        if b.sym.is_region or not any(p.name in made_in_region for p in b.inputs):
            continue
        if any(p.name in read_by_region for p in b.outputs):
            executor, reason = b.declined[-1] if b.declined else (b.executor or "torch", "not claimed")
            out.append({"trace": trace.name, "call": b.id, "symbol": b.sym.qualname, "declined_by": executor,
                        "reason": reason})
    return out
