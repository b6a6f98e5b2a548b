"""The verbs that act on a compile record: re-run its pipeline, bisect it, compare it with another.

A record is data (``thunderlab.inspect.record``); these need the passes and, to run code, the record's live
session (``thunderlab.runtime.session``). A record without a session (loaded from a file, or its function
dropped) does what its data allows: it re-runs from its captured program, compares by program text, and
bisects on inputs it is given; what it cannot do raises ``NotLive`` naming what would make it work.
"""
from __future__ import annotations

from dataclasses import dataclass

from thunderlab.inspect.record import CompileRecord, Step
from thunderlab.passes import Pipeline, run_pipeline
from thunderlab.passes.base import REGISTRY
from thunderlab.passes.runner import Observer, observers
from thunderlab.passes.verification import NumericCheck, current_reference
from thunderlab.runtime.compare import RecordComparison, compare_records
from thunderlab.runtime.compiled import keep
from thunderlab.runtime.loaded import compare_saved, live_record
from thunderlab.runtime.session import GONE, live, open_session, session_of


def reusable_prefix(record: CompileRecord, pipeline: Pipeline) -> int:
    """How many of ``record``'s passes ``pipeline`` would run unchanged: same spec, same registered class."""
    specs, old = pipeline.enabled(), record.steps[1:]
    k = 0
    while (k < len(specs) and k < len(old) and old[k].error is None and old[k].program is not None
           and str(specs[k]) == old[k].spec and old[k].pass_type is REGISTRY.get(specs[k].name)
           and _resolves_alike(specs, k, old[k])):
        k += 1
    return k


def _resolves_alike(specs, k: int, step: Step) -> bool:
    """Whether pass ``k`` would run as it did, given the passes now after it (see ``Pass.in_pipeline``)."""
    if step.resolved is None:
        return True
    try:
        return repr(specs[k].instantiate().in_pipeline(tuple(specs[k + 1:]))) == step.resolved
    except Exception:  # a spec that no longer instantiates is re-run, and reports its error there
        return False


def rerun(record: CompileRecord, pipeline: str | None = None, *, observer: Observer | None = None) -> CompileRecord:
    """Run ``pipeline`` (default: the record's own) again on the record's captured program; a new record.

    Steps before the first pass that changed (by spec, or because its name now means a newly registered class)
    are taken from ``record`` as they are; the rest run anew, each handed to ``observer`` as it finishes. A record
    compiled with ``verify=True`` checks every new step against eager on its inputs as they are now. A record
    loaded from a file is re-run on its captured program rebuilt from the saved text, checked at every step on
    fresh inputs of the recorded shapes and dtypes (step 0's notes say so).
    """
    if record.loaded:
        record = live_record(record)
    if record.captured is None:
        raise ValueError(f"record {record.name!r} has no captured program to re-run"
                         + (f" (capture failed: {record.error.splitlines()[0]})" if record.error else ""))
    parsed = Pipeline.parse(pipeline if pipeline is not None else record.pipeline)
    k = reusable_prefix(record, parsed)
    new = CompileRecord(record.name, record.inputs, str(parsed), graph_index=record.graph_index, reused=k)
    new.steps.extend(record.steps[:1 + k])
    old = session_of(record)
    check = None
    if old is not None:
        session = open_session(new, family=old.family, held=old.held, eager=old.eager, reference=old.reference)
        if old.reference is not None:  # the function verifies: so does its re-run
            inputs = session.example_inputs
            if inputs is None:
                raise ValueError(GONE)
            # checked against eager on the inputs as they are now, as bisect checks: the saved outputs belong to
            # the inputs as they were when the record was made (a training step has updated the parameters since)
            reference = current_reference(record.captured, inputs, old.eager, len(record.inputs))
            check = NumericCheck(inputs, reference, record.captured.boundary.input_views)
    rest = Pipeline(parsed.enabled()[k:])
    steps, _final, error = run_pipeline(new.steps[-1].program, rest, observer=observers(check, observer),
                                        first_index=k + 1)
    new.steps.extend(steps)
    new.error = error
    keep(new)
    return new


@dataclass
class Bisection:
    """Where the program first left eager's meaning (values, mutated inputs, returned aliases): the step, its pass,
    the first difference, and the steps run to find it."""

    step: int
    spec: str
    detail: str
    checked: list[int]

    def __str__(self) -> str:
        return (f"pass {self.spec!r} (step {self.step}) is the first to differ from eager: {self.detail} "
                f"(checked steps {', '.join(map(str, self.checked))})")


def bisect(record: CompileRecord, inputs=None, reference=None, *,
           observer: Observer | None = None) -> Bisection | None:
    """The first of a record's steps whose program disagrees with eager (values, mutated inputs, aliases).

    ``inputs`` are the captured graph's inputs, in ``record.inputs`` order; they default to the inputs the record
    was compiled for (its session's); ``reference`` (eager's outputs) defaults to running the captured graph with
    PyTorch, else the captured program with torch (both on copies of the inputs as they are now, under the
    autocast of the capture). The record's steps are handed in order to a ``NumericCheck`` and then to
    ``observer``, up to the first that fails. Returns None when every step agrees.
    """
    if record.loaded:
        live(record, "bisect", "the record's programs and the inputs it was compiled for",
             "re-run this one: thunderlab.rerun(record) checks every step against its captured program on fresh "
             "inputs")
    session = session_of(record)
    if inputs is None:
        session = live(record, "bisect", "the inputs the record was compiled for",
                       "pass the inputs to check on: thunderlab.bisect(record, inputs)")
        inputs = session.example_inputs
        if inputs is None:
            raise ValueError("this record's inputs are gone (records hold tensors weakly, so that they never keep "
                             "data or parameters alive): pass the inputs to check on, e.g. "
                             "thunderlab.bisect(record, (x,)), or compile with thunderlab.jit(..., keep_inputs=True)")
    inputs = tuple(inputs)
    if len(inputs) != len(record.inputs):
        raise ValueError(f"the captured graph takes {len(record.inputs)} inputs ({', '.join(record.inputs)}), "
                         f"got {len(inputs)}; sizes TorchDynamo made symbolic and a module's parameters count "
                         f"too: thunderlab.session(record).example_inputs has them in order")
    steps = [s for s in record.steps if s.program is not None]
    if not steps:
        return None
    if reference is None:
        eager = session.eager if session is not None else None
        reference = current_reference(steps[0].program, inputs, eager, len(record.inputs))
    # every step in order, not a binary search: a pass can break a program that a later pass repairs (dce
    # dropping what was wrong), and the answer must be the step a re-run's verification would blame first
    check = NumericCheck(inputs, reference, steps[0].program.boundary.input_views, annotate=False)
    observe = observers(check, observer)
    for s in steps:
        observe(s)
        if check.failed is not None:
            v = check.verdicts[s.index]
            return Bisection(s.index, s.spec, v.detail or v.structural, check.checked)
    return None


def compare(record: CompileRecord, other: CompileRecord, *, time: bool = True) -> RecordComparison:
    """How the pipeline, the program and (with ``time``) the run time changed from ``record`` to ``other``.

    A record loaded from a file is compared by its saved program text; it has nothing to time, nor has a record
    whose function was dropped (the comparison says why).
    """
    if record.loaded or other.loaded:
        return compare_saved(record, other, time=time)
    return compare_records(record, other, time=time)
