"""Running a pipeline: each pass in order, the program's structure checked after each, one observer hook between.

What else happens between passes hangs off the hook: the record keeps each step, ``NumericCheck``
(``thunderlab.passes.verification``) checks it against eager PyTorch, the widget shows progress.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from thunderlab.core import fastpaths
from thunderlab.core.notes import Notes
from thunderlab.core.program import Program
from thunderlab.core.symbols import tree_flatten
from thunderlab.core.verify import VerificationError, check_program, check_trace
from thunderlab.inspect.record import Step, Verification

from .base import Pipeline

Observer = Callable[[Step], None]


def observers(*each: Observer | None) -> Observer:
    """One observer that hands each step to ``each`` in turn (None ones left out)."""
    chain = [o for o in each if o is not None]

    def observe(step: Step) -> None:
        for o in chain:
            o(step)

    return observe


class PassMutatedInput(RuntimeError):
    """A pass changed the program it was given instead of returning a new one."""


def _mark_origins(before: Program | None, after: Program, origin: str) -> None:
    """Name the pass in every bound symbol it created or rewrote (the runner's job, not the pass's)."""
    old = {id(b) for t in before for b in t.bound_symbols} if before is not None else set()
    for t in after:
        for i, b in enumerate(t.bound_symbols):
            if id(b) not in old and b.origin is None:
                t.bound_symbols[i] = b.replace(origin=origin)


class _Snapshot:
    """What a pass may not change in the program it is given: the traces and each one's calls, inputs, output; the
    training contract and the boundary.

    Taken before a pass runs, compared by identity after it returns (cheap: no copies of calls),
    and used to put back an input the pass changed, so earlier steps of a record stay as they were.
    """

    def __init__(self, program: Program):
        self.program = program
        self.traces = dict(program.traces)
        self.contracts = (program.training, program.boundary)
        self.parts = {n: (list(t.bound_symbols), list(t.inputs), t.output, tree_flatten(t.output))
                      for n, t in program.traces.items()}

    def changes(self) -> list[str]:
        """What differs now, in words; empty when the program is as it was."""
        found = []
        if self.program.traces.keys() != self.traces.keys() or any(
                self.program.traces[n] is not t for n, t in self.traces.items()):
            found.append(f"its traces ({', '.join(self.traces)} became {', '.join(self.program.traces)})")
        for n, t in self.traces.items():
            calls, inputs, output, leaves = self.parts[n]
            if len(t.bound_symbols) != len(calls) or any(a is not b for a, b in zip(t.bound_symbols, calls)):
                found.append(f"trace {n!r}'s calls ({len(calls)} became {len(t.bound_symbols)}, or were replaced)")
            if len(t.inputs) != len(inputs) or any(a is not b for a, b in zip(t.inputs, inputs)):
                found.append(f"trace {n!r}'s inputs")
            now = tree_flatten(t.output)
            if t.output is not output or len(now) != len(leaves) or any(a is not b for a, b in zip(now, leaves)):
                found.append(f"trace {n!r}'s output")
        if self.program.training is not self.contracts[0]:
            found.append("its training contract")
        if self.program.boundary is not self.contracts[1]:
            found.append("its boundary")
        return found

    def restore(self) -> None:
        self.program.traces.clear()
        self.program.traces.update(self.traces)
        for n, t in self.traces.items():
            calls, inputs, output, _ = self.parts[n]
            t.bound_symbols[:] = calls
            t.inputs[:] = inputs
            t.output = output
        self.program.training, self.program.boundary = self.contracts


def as_notes(notes, name: str) -> Notes:
    """A pass's ``describe`` result as ``Notes``. A dict (a pass written before notes were typed) is its facts, its
    ``"summary"`` entry, if any, the summary."""
    if isinstance(notes, Notes):
        return notes
    if isinstance(notes, dict):
        facts = dict(notes)
        summary = facts.pop("summary", "")
        return Notes(summary if isinstance(summary, str) else str(summary), facts)
    raise TypeError(f"describe returned {type(notes).__name__}; return thunderlab.passes.Notes(summary, facts) "
                    f"(pass {name!r})")


_PLAIN = (int, float, complex, str, bool, type(None))


def _same_value(a, b) -> bool:
    """``a`` and ``b`` hold the same objects (containers compared element by element, plain constants by value)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return isinstance(a, _PLAIN) and a == b


def _share_unchanged(before: Program, after: Program) -> Program:
    """``after`` with the previous step's trace wherever the pass returned one with the same calls, inputs
    and output, or ``before`` itself when every trace is so: a record keeps every step's program, and
    most passes leave most traces as they were."""
    for name, t in after.traces.items():
        old = before.traces.get(name)
        if old is None or old is t or old.name != t.name or old.grad_enabled != t.grad_enabled:
            continue
        if (_same_value(old.bound_symbols, t.bound_symbols) and _same_value(old.inputs, t.inputs)
                and _same_value(old.output, t.output)):
            after.traces[name] = old
    if (after.traces.keys() == before.traces.keys() and after.training == before.training
            and after.boundary == before.boundary and all(after.traces[n] is t for n, t in before.traces.items())):
        return before
    return after


def signature(program: Program) -> tuple[list, list]:
    """The program's interface to its caller: each input's name and type, and each user-visible output's type."""
    fw = program.forward
    out = program.outputs
    inputs = [(getattr(i, "name", None), i.type_string()) for i in fw.inputs]
    outputs = [v.type_string() if hasattr(v, "type_string") else type(v).__name__ for v in tree_flatten(out)]
    return inputs, outputs


def signature_change(before: tuple[list, list], after: tuple[list, list]) -> str:
    """How a pass changed the program's interface, in words; "" when it did not."""
    (ins_a, outs_a), (ins_b, outs_b) = before, after
    if ins_a != ins_b:
        gone = [n for n, _ in ins_a if n not in {m for m, _ in ins_b}]
        if gone:
            return f"the program's inputs changed: {', '.join(gone)} dropped (a pass must keep every input)"
        return f"the program's inputs changed from {ins_a} to {ins_b}"
    if len(outs_a) != len(outs_b):
        return f"the program returns {len(outs_b)} values, the captured program {len(outs_a)}"
    for i, (a, b) in enumerate(zip(outs_a, outs_b)):
        if a != b:
            return f"output {i} is {b}, the captured program's is {a}"
    return ""


def structure(program: Program, checked: dict | None = None) -> Verification:
    """Every trace well formed (SSA, each value defined before use, metas consistent) and the program's
    training contract kept; ``checked`` carries the calls whose metadata earlier steps re-derived."""
    try:
        for t in program:
            check_trace(t, checked=checked)
        check_program(program)
    except VerificationError as e:
        return Verification(False, str(e), detail=str(e))
    return Verification(True)


def run_pipeline(program: Program, pipeline: str | Pipeline, *, observer: Observer | None = None,
                 first_index: int = 1) -> tuple[list[Step], Program, str | None]:
    """Run each enabled pass in order; returns (steps, final program, error or None).

    A pass that raises ends the run: its step records the error (naming the pass), and
    every earlier step is kept. Each step's program is checked for structure; ``observer`` sees
    each step as its pass finishes (``NumericCheck`` checks numerics there). Python's cyclic garbage
    collector waits meanwhile (see ``fastpaths.collector_paused``).
    """
    pipeline = Pipeline.parse(pipeline)
    with fastpaths.collector_paused():
        return _run(program, pipeline, observer, first_index)


def _run(program, pipeline, observer, first_index):
    steps: list[Step] = []
    current = program
    checked = {b.meta_key(): b for t in program for b in t.bound_symbols}  # verified at its own step
    specs = pipeline.enabled()
    interface = signature(program)
    for offset, spec in enumerate(specs):
        index = first_index + offset
        before = current.count()
        t0 = time.perf_counter()
        p, doing = None, "setting up"
        snapshot = _Snapshot(current)
        try:  # the pass's own code runs in each of these: a user pass that raises anywhere is named
            p = spec.instantiate().in_pipeline(tuple(specs[offset + 1:]))
            doing = "running"
            nxt = p(current)
            changed = snapshot.changes()
            if changed:
                snapshot.restore()  # earlier steps share these objects: they must read as they did
                raise PassMutatedInput(f"it changed the program it was given ({'; '.join(changed)}); a pass must "
                                       f"return a new Program and leave its input as it was (use trace.derive(...) "
                                       f"or program.map(...))")
            if not isinstance(nxt, Program):
                raise TypeError(f"returned {type(nxt).__name__}, not a Program")
            seconds = time.perf_counter() - t0
            _mark_origins(current, nxt, spec.name)
            nxt = _share_unchanged(current, nxt)
            doing = "describing its result"
            notes = as_notes(p.describe(current, nxt), spec.name)
            resolved = repr(p)
        except KeyboardInterrupt:  # the user stopped it: say so in the record, then let it stop the caller
            if snapshot.changes():
                snapshot.restore()
            step = Step(index, str(spec), time.perf_counter() - t0, None, before, before,
                        error=f"pass {spec.name!r} (step {index}) was interrupted (KeyboardInterrupt) while {doing}")
            steps.append(step)
            if observer:
                observer(step)
            raise
        except Exception as e:
            seconds = time.perf_counter() - t0
            msg = f"pass {spec.name!r} (step {index}) raised {type(e).__name__} while {doing}: {e}"
            step = Step(index, str(spec), seconds, None, before, before, error=msg,
                        notes=Notes(facts={"traceback": traceback.format_exc()}),
                        pass_type=type(p) if p is not None else None)
            steps.append(step)
            if observer:
                observer(step)
            return steps, current, msg
        try:  # the interface is read through the training contract: check that first
            check_program(nxt)
            moved = signature_change(interface, signature(nxt))
            if moved and p.changes_inputs:  # the caller passes the new inputs (a numeric check stops here too)
                interface, moved = signature(nxt), ""
        except VerificationError as e:
            moved = str(e)
        ver = Verification(False, moved, detail=moved) if moved else structure(nxt, checked)
        step = Step(index, str(spec), seconds, nxt, before, nxt.count(), ver, notes=notes,
                    pass_type=type(p), resolved=resolved)
        steps.append(step)
        if observer:
            observer(step)
        current = nxt
    return steps, current, None


